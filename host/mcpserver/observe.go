package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/host/observe"
)

// metaRequestID is the _meta key under which tagRequestID passes a
// tools/call's JSON-RPC id to the tool handler (go-sdk does not expose it),
// for the jsonrpc.request.id attribute of the call's span.
const metaRequestID = "rtfshost/jsonrpc-request-id"

// tagRequestID copies the JSON-RPC id of a tools/call request into its
// params._meta under metaRequestID. Other requests, batches and bodies that
// are not JSON-RPC pass unchanged.
func tagRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !isJSON(r.Header.Get("Content-Type")) {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := requestBody(w, r)
		if !ok {
			return
		}
		setBody(r, withRequestID(body))
		next.ServeHTTP(w, r)
	})
}

// withRequestID returns body with the id of a tools/call copied into
// params._meta, or body itself.
func withRequestID(body []byte) []byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return body
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil || string(msg["method"]) != `"tools/call"` || msg["id"] == nil {
		return body
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil || params == nil {
		return body
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := params["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return body
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	id, err := json.Marshal(string(msg["id"]))
	if err != nil {
		return body
	}
	meta[metaRequestID] = id
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return body
	}
	if msg["params"], err = json.Marshal(params); err != nil {
		return body
	}
	out, err := json.Marshal(msg)
	if err != nil {
		return body
	}
	return out
}

// startCall starts observing a tool call (a nil Observer gives a nil
// *observe.Call, which does nothing).
func (s *Server) startCall(ctx context.Context, tool string, req *mcp.CallToolRequest) (context.Context, *observe.Call) {
	if s.opts.Observer == nil {
		return ctx, nil
	}
	info := observe.CallInfo{Method: "tools/call", Tool: tool}
	if req.Session != nil {
		info.SessionID = req.Session.ID()
	}
	if req.Params != nil {
		info.Meta = req.Params.GetMeta()
		if id, ok := info.Meta[metaRequestID].(string); ok {
			info.RequestID = id
		}
	}
	return s.opts.Observer.StartCall(ctx, info)
}

// outcomeOf classifies a tool call's end for its metric and span.
func outcomeOf(ctx context.Context, res *mcp.CallToolResult, err error) (string, string) {
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || ctx.Err() != nil):
		return observe.OutcomeCancelled, err.Error()
	case err != nil:
		return observe.OutcomeInvalid, err.Error()
	case res != nil && res.IsError:
		return observe.OutcomeError, resultText(res)
	}
	return observe.OutcomeOK, ""
}

// resultText is the first text block of res, cut to 200 bytes.
func resultText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if len(t.Text) > 200 {
				return t.Text[:200]
			}
			return t.Text
		}
	}
	return ""
}
