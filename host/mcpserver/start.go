package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// streamResult is the text of an mcp.stream.start result, as JSON.
type streamResult struct {
	StreamID      string            `json:"stream-id"`
	State         provider.State    `json:"state"`
	EndReason     string            `json:"end-reason,omitempty"`
	Message       string            `json:"message,omitempty"`
	Error         string            `json:"error,omitempty"`
	Result        json.RawMessage   `json:"result"`
	Outputs       []json.RawMessage `json:"outputs"`
	OutputCount   int64             `json:"output-count"`
	Truncated     int64             `json:"outputs-truncated,omitempty"`
	Notifications int64             `json:"progress-notifications"`
	Coalesced     int64             `json:"coalesced"`
	// Lost counts the outputs of a task's stream missing from Outputs
	// after a crash (taskout.go).
	Lost int64 `json:"outputs-lost,omitempty"`
	// Dropped counts the low outputs left out of the notifications (they
	// are in Outputs); DeliveryCut says why the notifications stopped.
	Dropped     int64  `json:"dropped-outputs,omitempty"`
	DeliveryCut string `json:"delivery-cut,omitempty"`
}

// start serves mcp.stream.start: it runs the program's top level, starts the
// stream with the named processor and the program's globals, reports its
// outputs and returns its buffered result when it ends.
func (c *call) start(a args) (*mcp.CallToolResult, error) {
	ctx, cancel := withTimeout(c.ctx, a)
	defer cancel()
	req, err := c.startRequest(ctx, a)
	if err != nil {
		return textResult(err.Error(), true), nil
	}
	if err := c.watchStream(req.StreamID); err != nil {
		return textResult(fmt.Sprintf("%s: %v", ToolStart, err), true), nil
	}
	if _, err := c.s.prov.Start(req); err != nil {
		c.unwatchStream(req.StreamID)
		return textResult(fmt.Sprintf("%s: %v", ToolStart, err), true), nil
	}
	if a.bool("detach", false) {
		return jsonResult(startHandle{StreamID: req.StreamID, Endpoint: req.Endpoint, Status: provider.StateActive}, false), nil
	}
	id := req.StreamID
	ends, err := c.pump(ctx, nil, func(ends map[string]provider.Status) bool {
		_, ok := ends[id]
		return ok
	})
	if err != nil {
		c.cancelStreams()
		if c.ctx.Err() != nil {
			return nil, c.ctx.Err() // the client cancelled: no result is sent
		}
		st, _ := c.s.prov.Status(c.ctx, id)
		res := c.streamResult(st)
		res.Error = timeoutMessage(a)
		return jsonResult(res, true), nil
	}
	st := ends[id]
	return jsonResult(c.streamResult(st), st.State != provider.StateCompleted), nil
}

// startRequest compiles and runs the program and builds the start request.
func (c *call) startRequest(ctx context.Context, a args) (provider.StartRequest, error) {
	name := a.str("filename")
	if name == "" {
		name = "mcp-stream.rtfs"
	}
	prog, err := compile(name, a.str("program"))
	if err != nil {
		return provider.StartRequest{}, err
	}
	// The stream keeps the run's journal: its processor is looked up in
	// the run's final globals, which a later compiler comes back to by
	// replaying the whole run (docs/upgrading.md).
	journal := &capabilities.Journal{}
	_, globals, err := c.run(ctx, prog, journal)
	if err != nil {
		return provider.StartRequest{}, fmt.Errorf("%s: running the program: %w", ToolStart, err)
	}
	req := provider.StartRequest{
		Journal:       journal,
		Endpoint:      a.str("endpoint"),
		Processor:     rtfs.Symbol(a.str("processor")),
		Globals:       globals,
		Transport:     a.str("transport"),
		ServerURL:     a.str("server-url"),
		StreamID:      a.str("stream-id"),
		QueueCapacity: int(a.int("queue-capacity")),
		Context:       ctx,
		Local:         !a.bool("detach", false), // this call follows its outputs here
	}
	if raw, ok := a["idle-timeout-ms"]; ok && capabilities.JSONKind(raw) == "number" {
		req.IdleTimeout = -1 // 0: no idle timeout
		if n := a.int("idle-timeout-ms"); n > 0 {
			req.IdleTimeout = time.Duration(n) * time.Millisecond
		}
	}
	if raw, ok := a["initial-state"]; ok {
		if req.InitialState, err = rtfs.FromJSON(raw); err != nil {
			return req, fmt.Errorf("%s: argument \"initial-state\": %w", ToolStart, err)
		}
	}
	if raw, ok := a["config"]; ok {
		v, err := rtfs.FromJSON(raw)
		if err != nil {
			return req, fmt.Errorf("%s: argument \"config\": %w", ToolStart, err)
		}
		req.Config, _ = v.(*rtfs.Map)
	}
	if err := provider.ParseStartDelivery(a["delivery"], a["milestones"], &req); err != nil {
		return req, fmt.Errorf("%s: %w", ToolStart, err)
	}
	if raw, ok := a["on-error"]; ok {
		v, err := rtfs.FromJSON(raw)
		if err == nil {
			var pol provider.ErrorPolicy
			if pol, err = provider.ParseErrorPolicy(v); err == nil {
				req.OnError = &pol
			}
		}
		if err != nil {
			return req, fmt.Errorf("%s: argument \"on-error\": %w", ToolStart, err)
		}
	}
	for _, u := range c.s.prov.Transports().Keys() {
		if raw, ok := a[u.Name]; ok {
			if req.TransportKeys == nil {
				req.TransportKeys = make(map[string]json.RawMessage)
			}
			req.TransportKeys[u.Name] = raw
		}
	}
	if req.StreamID == "" {
		base := req.Endpoint
		if base == "" {
			base = strings.TrimPrefix(req.Transport, ":")
		}
		req.StreamID = c.s.prov.NewStreamID(base)
	}
	return req, nil
}

// streamResult builds the result of stream st from the call's outputs.
func (c *call) streamResult(st provider.Status) streamResult {
	r := c.rep
	res := streamResult{
		StreamID: st.StreamID, State: st.State, EndReason: st.EndReason, Message: st.Message,
		Result: shownJSON(st.Result, c.s.opts.Limits.OutputLimit(), "the stream's result"), Outputs: []json.RawMessage{},
		OutputCount: r.count, Truncated: r.truncated, Notifications: r.sent, Coalesced: r.coalesced,
		Dropped: r.dropped, DeliveryCut: r.cut,
	}
	for _, o := range r.outputs {
		if o.StreamID == st.StreamID {
			res.Outputs = append(res.Outputs, o.Output)
		}
	}
	return res
}

// withTimeout applies the timeout-ms argument to ctx.
func withTimeout(ctx context.Context, a args) (context.Context, context.CancelFunc) {
	if ms := a.int("timeout-ms"); ms > 0 {
		return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
	}
	return context.WithCancel(ctx)
}

func timeoutMessage(a args) string {
	return fmt.Sprintf("timed out after %d ms (timeout-ms); the call's streams were cancelled", a.int("timeout-ms"))
}
