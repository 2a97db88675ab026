package mcpserver

import (
	"context"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/host/observe"
)

// tagRequestID tells the tool handler the JSON-RPC id of a tools/call
// (go-sdk does not expose it), for the jsonrpc.request.id attribute of the
// call's span, in headerRequestID. Other requests and batches pass
// unchanged. Without an Observer it is not needed.
func (s *Server) tagRequestID(next http.Handler) http.Handler {
	if s.opts.Observer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m, ok := envelopeOf(r).isCall(); ok {
			r.Header.Set(headerRequestID, string(m.ID))
		}
		next.ServeHTTP(w, r)
	})
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
	}
	if req.Extra != nil {
		info.RequestID = req.Extra.Header.Get(headerRequestID)
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
