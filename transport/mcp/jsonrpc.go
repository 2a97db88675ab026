package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/propagation"
)

// JSON-RPC methods this client sends or reads.
const (
	methodInitialize  = "initialize"
	methodInitialized = "notifications/initialized"
	methodToolsCall   = "tools/call"
	methodProgress    = "notifications/progress"
	methodCancelled   = "notifications/cancelled"
)

// Request ids: one session carries one initialize and one tools/call.
const (
	initializeID = 1
	callID       = 2
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

type outgoing struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int    `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// encodeRequest encodes a request; id 0 makes it a notification.
func encodeRequest(id int, method string, params any) ([]byte, error) {
	b, err := json.Marshal(outgoing{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", method, err)
	}
	return b, nil
}

func initializeParams(version string) any {
	return map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]string{"name": clientName, "version": clientVersion},
	}
}

// callParams builds the params of the tools/call request. Its _meta
// carries the progress token and, when ctx holds a span (the stream's
// transport span), its W3C trace context (traceparent, tracestate), as the
// OpenTelemetry MCP conventions propagate it.
func callParams(ctx context.Context, tool string, args json.RawMessage, token string) map[string]any {
	meta := map[string]any{"progressToken": token}
	tc := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, tc)
	for k, v := range tc {
		meta[k] = v
	}
	return map[string]any{
		"name":      tool,
		"arguments": args,
		"_meta":     meta,
	}
}

func cancelledParams(id int, reason string) any {
	return map[string]any{"requestId": id, "reason": reason}
}

// progressParams is the part of notifications/progress the client checks.
type progressParams struct {
	ProgressToken json.RawMessage `json:"progressToken"`
	Progress      *float64        `json:"progress"`
	Total         *float64        `json:"total"`
}

// toolResult is the part of a CallToolResult the client checks.
type toolResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

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
