package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
)

// JSON-RPC methods this client sends or reads.
const (
	methodInitialize  = "initialize"
	methodInitialized = "notifications/initialized"
	methodDiscover    = "server/discover"
	methodToolsList   = "tools/list"
	methodToolsCall   = "tools/call"
	methodProgress    = "notifications/progress"
	methodCancelled   = "notifications/cancelled"
	methodTasksGet    = "tasks/get"
	methodTasksResult = "tasks/result"
	methodTasksCancel = "tasks/cancel"
)

// Request ids: one session carries one initialize and one tools/call; a
// 2026-07-28 call starts with server/discover. Other requests (tools/list,
// the task methods, a re-issued 2026-07-28 tools/call) take ids from
// firstAuxID up, one Run's counter.
const (
	initializeID = 1
	callID       = 2
	discoverID   = 3
	firstAuxID   = 10
)

// clientName and clientVersion identify rtfshost in initialize.
const (
	clientName    = "rtfshost"
	clientVersion = "0.1.0"
)

// ErrToolFailed is wrapped by the error Run returns when the tool's result has
// isError true; the error's text carries the tool's text content.
var ErrToolFailed = errors.New("tool reported an error")

// rpcMessage is any JSON-RPC 2.0 message: a request or notification (Method
// set) or a response (Result or Error set).
type rpcMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message)
}

// isResponseTo reports whether m answers the request with the given id.
func (m *rpcMessage) isResponseTo(id int) bool {
	return m.Method == "" && string(bytes.TrimSpace(m.ID)) == strconv.Itoa(id)
}

// decodeMessages decodes one JSON-RPC message or a batch array of them.
func decodeMessages(data []byte) ([]rpcMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var batch []rpcMessage
		if err := json.Unmarshal(data, &batch); err != nil {
			return nil, fmt.Errorf("malformed JSON-RPC batch: %w", err)
		}
		return batch, nil
	}
	var m rpcMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("malformed JSON-RPC message: %w", err)
	}
	return []rpcMessage{m}, nil
}

// params are a request's or notification's params, built by the helpers
// below; post adds to their _meta.
type params = map[string]any

type outgoing struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int    `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  params `json:"params,omitempty"`
}

// encodeRequest encodes a request; id 0 makes it a notification.
func encodeRequest(id int, method string, p params) ([]byte, error) {
	b, err := json.Marshal(outgoing{JSONRPC: "2.0", ID: id, Method: method, Params: p})
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", method, err)
	}
	return b, nil
}

func initializeParams(version string) params {
	return params{
		"protocolVersion": version,
		"capabilities":    clientCapabilities,
		"clientInfo":      clientInfo,
	}
}

// clientInfo is the client's Implementation, in initialize and, under
// 2026-07-28, in every request's _meta.
var clientInfo = map[string]string{"name": clientName, "version": clientVersion}

// modernCaps are the client capabilities a 2026-07-28 request declares in
// its _meta: the tasks extension, so that a server may answer a tools/call
// with a task, which Run polls.
var modernCaps = map[string]any{"extensions": map[string]any{extensionTasks: map[string]any{}}}

// The _meta keys and the extension of the 2026-07-28 revision.
const (
	extensionTasks = "io.modelcontextprotocol/tasks"
)

// addMeta sets the _meta of a request's params p: the W3C trace context
// (traceparent, tracestate) of ctx when it holds a span (the stream's
// transport span), as the OpenTelemetry MCP conventions propagate it, and
// under the 2026-07-28 revision (modern names it) the protocol version,
// client info and client capabilities that replace the initialize
// handshake. Keys already in _meta are kept.
func addMeta(ctx context.Context, p params, modern string) params {
	if p == nil {
		p = params{}
	}
	meta, _ := p["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	tc := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, tc)
	for k, v := range tc {
		if _, ok := meta[k]; !ok {
			meta[k] = v
		}
	}
	if modern != "" {
		meta[sdk.MetaKeyProtocolVersion] = modern
		meta[sdk.MetaKeyClientInfo] = clientInfo
		meta[sdk.MetaKeyClientCapabilities] = modernCaps
	}
	if len(meta) > 0 {
		p["_meta"] = meta
	}
	return p
}

// callParams builds the params of a tools/call request; its _meta carries
// the progress token. task asks a 2025-11-25 server to run the call as a
// task (params.task).
func callParams(tool string, args json.RawMessage, token string, task bool) params {
	p := params{
		"name":      tool,
		"arguments": args,
		"_meta":     map[string]any{"progressToken": token},
	}
	if task {
		p["task"] = map[string]any{}
	}
	return p
}

func cancelledParams(id int, reason string) params {
	return params{"requestId": id, "reason": reason}
}

// progressParams is the part of notifications/progress the client checks.
type progressParams struct {
	ProgressToken json.RawMessage `json:"progressToken"`
	Progress      *float64        `json:"progress"`
	Total         *float64        `json:"total"`
}

// toolResult is the part of a CallToolResult the client checks, and the
// fields that make a tools/call answer a task instead: a 2025-11-25
// CreateTaskResult has task, a 2026-07-28 task result has resultType
// "task".
type toolResult struct {
	ResultType string          `json:"resultType"`
	Task       json.RawMessage `json:"task"`
	IsError    bool            `json:"isError"`
	Content    []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// The resultType values of 2026-07-28 that are not a complete result.
const (
	resultTypeTask          = "task"
	resultTypeInputRequired = "input_required"
)

// maxErrorText bounds the tool text copied into an error.
const maxErrorText = 4 << 10

// text joins the result's text content, truncated to maxErrorText.
func (r *toolResult) text() string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	s := strings.Join(parts, "\n")
	if len(s) > maxErrorText {
		s = s[:maxErrorText] + "…"
	}
	if s == "" {
		s = "(no text content)"
	}
	return s
}
