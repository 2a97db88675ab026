package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// A call is one tool call in flight: the streams it watches and the reporter
// of their outputs. It is used by the goroutine of the tool handler.
type call struct {
	s   *Server
	ctx context.Context
	w   *watch
	rep *reporter
}

func (s *Server) newCall(ctx context.Context, req *mcp.CallToolRequest) *call {
	rep := &reporter{
		ctx:      ctx,
		max:      s.opts.MaxBufferedOutputs,
		maxBytes: s.opts.Limits.OutputLimit(),
		log:      s.log,
		obs:      s.opts.Observer,
	}
	if req.Session != nil {
		rep.session = req.Session
		if req.Params != nil && (req.Extra == nil || req.Extra.Header.Get(headerJSONOnly) == "") {
			rep.token = req.Params.GetProgressToken() // a JSON-only client gets no notification
		}
	}
	if p := taskPeerOf(ctx); p != nil { // the call of a task (taskrun.go)
		rep.session, rep.token = p, p.token
	}
	if rep.token != nil {
		rep.box = s.newOutbox()
		rep.note.maxBytes = rep.maxBytes
	}
	return &call{s: s, ctx: ctx, w: newWatch(), rep: rep}
}

// newOutbox returns the Outbox of a call that reports progress: the
// server's delivery policy, and its bound on the notifications a client
// lets pile up.
func (s *Server) newOutbox() *provider.Outbox {
	return provider.NewOutbox(provider.OutboxOptions{Delivery: s.delivery, MaxPending: s.opts.MaxPendingOutputs})
}

// watchStream subscribes the call to the events of stream id, from before
// the stream starts (a Pending subscription), so that it sees every one of
// its outputs; what the stream's processor prints reaches the call's client
// too. It fails only when the provider is closed.
func (c *call) watchStream(id string) error {
	sub, err := c.s.prov.Subscribe(id, provider.SubscribeOptions{Pending: true, Receive: c.w.push})
	if err != nil {
		return err
	}
	unroute := c.s.host.RouteLog(id, func(line string) { c.w.pushLog(id, line) })
	if !c.w.add(id, func() { sub.Close(); unroute() }) {
		sub.Close() // watched already
		unroute()
	}
	return nil
}

// unwatchStream stops the call's subscription to stream id.
func (c *call) unwatchStream(id string) { c.w.remove(id) }

// release stops the call's subscriptions to its streams.
func (c *call) release() {
	for _, id := range c.w.streams() {
		c.unwatchStream(id)
	}
}

// sendLogs sends the lines the call's program and streams printed, as
// notifications/message at level info, to the call's client; go-sdk sends
// them only at or above the level the client asked for (logging/setLevel,
// or the request's _meta under 2026-07-28) and none before it asked. Lines
// beyond the watch's bound are counted in one warning.
func (c *call) sendLogs() {
	lines, dropped := c.w.takeLogs()
	if c.rep.session == nil {
		return
	}
	for _, l := range lines {
		logger := "rtfs.eval"
		if l.stream != "" {
			logger = "stream " + l.stream
		}
		//lint:ignore SA1019 logging is deprecated from MCP 2026-07-28; we serve the revisions before it
		if err := c.rep.session.Log(c.rep.ctx, &mcp.LoggingMessageParams{Level: "info", Logger: logger, Data: l.text}); err != nil {
			c.s.log.Debug("log notification not sent", "err", err)
			return
		}
	}
	if dropped > 0 {
		//lint:ignore SA1019 logging is deprecated from MCP 2026-07-28; we serve the revisions before it
		_ = c.rep.session.Log(c.rep.ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "rtfshost",
			Data: fmt.Sprintf("%d printed lines were left out: the client read them more slowly than the program printed", dropped)})
	}
}

// cancelStreams cancels every stream of the call that has not ended. It
// runs once the call has ended, often because the client cancelled it, so
// it asks without the call's cancellation (each request to another host
// bounded by provider.DefaultForwardTimeout).
func (c *call) cancelStreams() {
	ctx := context.WithoutCancel(c.ctx)
	for _, id := range c.w.streams() {
		if st, err := c.s.prov.Status(ctx, id); err == nil && !st.State.Terminal() {
			_, _ = c.s.prov.Cancel(ctx, id)
		}
	}
}

// pump handles the call's events until stop returns true (it is asked after
// each batch of events and after wake is closed) or ctx ends. It reports
// outputs as the call's Outbox delivers them, and returns the EventEnd
// statuses it saw, by stream id; the error is ctx.Err() when ctx ended
// first.
func (c *call) pump(ctx context.Context, wake <-chan struct{}, stop func(ends map[string]provider.Status) bool) (map[string]provider.Status, error) {
	ends := make(map[string]provider.Status)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var evs []provider.Event
	for {
		c.sendLogs()
		evs = c.w.take(evs)
		c.rep.behind(evs)
		for i, ev := range evs {
			if ev.Kind == provider.EventEnd {
				ends[ev.StreamID] = ev.Status
			}
			c.rep.add(ev)
			if i%addChunk == addChunk-1 {
				// A burst goes through the Outbox in parts, so that it
				// holds a part at a time.
				c.rep.flush(time.Now(), false)
			}
		}
		if stop(ends) {
			c.sendLogs()
			c.rep.flush(time.Time{}, true)
			return ends, nil
		}
		c.rep.flush(time.Now(), false)
		timer.Stop()
		var tick <-chan time.Time
		if at, ok := c.rep.due(); ok {
			timer.Reset(time.Until(at))
			tick = timer.C
		}
		select {
		case <-c.w.wake:
		case <-tick:
		case <-wake:
			wake = nil
		case <-ctx.Done():
			return ends, ctx.Err()
		}
	}
}

// addChunk is how many events of a burst the pump adds to the call's
// Outbox before it sends what is due.
const addChunk = 256

// settled reports whether every stream of the call that has ended has had
// its EventEnd handled (they are in ends), so that none of its outputs is
// still on its way (a stream publishes its end after its last output).
func (c *call) settled(ends map[string]provider.Status) bool {
	for _, id := range c.w.streams() {
		if _, ok := ends[id]; ok {
			continue
		}
		st, err := c.s.prov.Status(c.ctx, id)
		if c.ctx.Err() != nil {
			return false // the pump ends with the call
		}
		if err == nil && st.State.Terminal() {
			return false
		}
	}
	return true
}

// valueResult is the result of a tool that answers with an RTFS value (a
// status, a summary): its JSON, or an error naming the output limit it
// passes.
func (c *call) valueResult(tool string, v rtfs.Value) *mcp.CallToolResult {
	b, err := valueJSON(v, c.s.opts.Limits.OutputLimit())
	if err != nil {
		return textResult(fmt.Sprintf("%s: the answer is too large to send: its JSON passes the output limit (%v)", tool, err), true)
	}
	return structured(b, false)
}

// textResult returns a CallToolResult with one text block.
func textResult(text string, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isError}
}

// jsonResult returns a CallToolResult whose one text block is v as JSON
// and, when v is an object, whose structuredContent is v too.
func jsonResult(v any, isError bool) *mcp.CallToolResult {
	b, err := json.Marshal(v)
	if err != nil {
		return textResult("encode the result: "+err.Error(), true)
	}
	return structured(b, isError)
}

// structured returns a CallToolResult of the JSON b: as the text block (for
// clients of before structured results) and, when b is an object, as
// structuredContent.
func structured(b json.RawMessage, isError bool) *mcp.CallToolResult {
	res := textResult(string(b), isError)
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		res.StructuredContent = json.RawMessage(t)
	}
	return res
}

// explicitSuccess is a receiving middleware that makes every successful
// tools/call result say "isError": false on the wire (docs/mcp-server.md,
// Structured results); go-sdk leaves the field out when it is false.
func explicitSuccess(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if r, ok := res.(*mcp.CallToolResult); ok && err == nil && r != nil && !r.IsError {
			return succeeded{r}, nil
		}
		return res, err
	}
}

// succeeded is a successful CallToolResult that marshals with an explicit
// "isError": false.
type succeeded struct{ *mcp.CallToolResult }

func (s succeeded) MarshalJSON() ([]byte, error) {
	b, err := s.CallToolResult.MarshalJSON()
	if err != nil || len(b) < 2 || b[0] != '{' {
		return b, err
	}
	if len(bytes.TrimSpace(b[1:len(b)-1])) == 0 {
		return []byte(`{"isError":false}`), nil
	}
	return append([]byte(`{"isError":false,`), b[1:]...), nil
}
