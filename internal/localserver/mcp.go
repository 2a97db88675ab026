package localserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpParts is the MCP side of a Server: one go-sdk server whose tools are the
// datasets, served over Streamable HTTP (with an in-memory event store, so
// broken response streams resume with Last-Event-ID) and over the legacy
// HTTP+SSE transport.
type mcpParts struct {
	s          *Server
	server     *mcp.Server
	streamable http.Handler
	legacy     http.Handler
}

func newMCPParts(s *Server) *mcpParts {
	m := &mcpParts{s: s}
	m.server = mcp.NewServer(&mcp.Implementation{Name: "rtfshost-localserver", Version: "1"},
		&mcp.ServerOptions{Logger: s.logger})
	for _, name := range catalogNames(s.catalog) {
		d := s.catalog[name]
		m.server.AddTool(&mcp.Tool{Name: d.name, Description: toolDescription(d), InputSchema: toolSchema()}, m.handler(d))
	}
	get := func(*http.Request) *mcp.Server { return m.server }
	streamable := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		EventStore: mcp.NewMemoryEventStore(nil),
		Logger:     s.logger,
	})
	m.streamable = s.mcpFaults(streamable, http.MethodPost)
	m.legacy = s.mcpFaults(mcp.NewSSEHandler(get, nil), http.MethodGet)
	return m
}

// ServeStdio serves the datasets as MCP tools over r and w (a child
// process's stdin and stdout: newline-delimited JSON-RPC) until the client
// closes r or ctx ends. It needs no Start; it may run while the server also
// listens.
func (s *Server) ServeStdio(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	err := s.mcp.server.Run(ctx, &mcp.IOTransport{Reader: r, Writer: w})
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("localserver: serving MCP over stdio: %w", err)
	}
	return nil
}

// close ends every MCP session, which stops the go-sdk goroutines serving it.
func (m *mcpParts) close() {
	var sessions []*mcp.ServerSession
	for ss := range m.server.Sessions() {
		sessions = append(sessions, ss)
	}
	for _, ss := range sessions {
		if err := ss.Close(); err != nil {
			m.s.logger.Debug("localserver: close MCP session", "session", ss.ID(), "err", err)
		}
	}
}

func toolDescription(d *dataset) string {
	return fmt.Sprintf("Streams %s (%s) as notifications/progress to the call's progress token; "+
		"the result is a JSON summary. Fields: %v.", d.name, d.description, d.fields)
}

// toolSchema is the input schema shared by every dataset tool.
func toolSchema() map[string]any {
	n := func(desc string) map[string]any {
		return map[string]any{"type": "integer", "minimum": 0, "description": desc}
	}
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"limit":       n("number of chunks"),
			"interval_ms": n("pause between chunks"),
			"size":        n("padding bytes per chunk"),
			"fail":        n("fault: answer isError as if this HTTP status happened"),
			"fail_times":  n("fault: fail only the first k calls"),
			"stall_ms":    n("fault: pause this long once"),
			"stall_after": n("fault: chunks before the stall"),
			"stall_times": n("fault: stall only the first k calls"),
			"oversized":   n("fault: first chunk's message is this many bytes"),
		},
	}
}

// handler returns the tool handler streaming dataset d.
func (m *mcpParts) handler(d *dataset) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		st := &m.s.stats
		st.toolCalls.Add(1)
		// The session outlives HTTP connections (a dropped stream resumes),
		// so Close must end running tools itself.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(m.s.ctx, cancel)
		defer stop()
		res, err := m.call(ctx, d, req)
		switch {
		case err != nil && ctx.Err() != nil:
			st.toolsCancelled.Add(1)
			err = ctx.Err()
		case err == nil:
			st.toolsCompleted.Add(1)
		}
		if m.s.opts.OnToolReturn != nil {
			m.s.opts.OnToolReturn(d.name, err)
		}
		return res, err
	}
}

// call runs one tool call: it sends the chunks as progress notifications and
// returns the summary.
func (m *mcpParts) call(ctx context.Context, d *dataset, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, err := toolArgs(req.Params.Arguments)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("localserver: tool %s: %v", d.name, err)}
	}
	p, err := parseParams(d, m.s.opts.Faults, func(k string) (string, bool) { v, ok := args[k]; return v, ok })
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("localserver: tool %s: arguments: %v", d.name, err)}
	}
	key := "tool " + canonicalKey(d.name, args)
	if m.s.budget.failFires(p.faults, key) {
		m.s.stats.injectedFailures.Add(1)
		return errorResult(fmt.Sprintf("localserver: injected failure fail=%d on tool %s", p.faults.Fail, d.name)), nil
	}
	ps := &progressStream{session: req.Session, token: req.Params.GetProgressToken(), enc: newEncoder(d, p.size, m.s.now)}
	if err := ps.run(ctx, p, m.s.stallFires(p.faults, key)); err != nil {
		return nil, err
	}
	summary := appendSummary(nil, d.name, p.limit, 0)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(summary)}}}, nil
}

// stallFires reports whether the Stall fault applies to this request.
func (s *Server) stallFires(f Faults, key string) bool {
	return f.Stall > 0 && s.budget.take("stall", key, f.StallTimes)
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// toolArgs flattens a tool's JSON arguments into strings, the form the
// query-string parser reads. Integers and numeric strings are accepted.
func toolArgs(raw json.RawMessage) (map[string]string, error) {
	out := map[string]string{}
	if len(raw) == 0 || string(raw) == "null" {
		return out, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("arguments must be a JSON object: %w", err)
	}
	for k, v := range obj {
		var num json.Number
		var str string
		switch {
		case json.Unmarshal(v, &num) == nil:
			out[k] = num.String()
		case json.Unmarshal(v, &str) == nil:
			out[k] = str
		default:
			out[k] = string(v) // non-scalar: only an error if the key is one we read
		}
	}
	return out, nil
}

// progressStream sends one tool call's chunks as progress notifications.
type progressStream struct {
	session *mcp.ServerSession
	token   any // nil: the caller asked for no progress; chunks are not sent
	enc     *encoder
	buf     []byte
}

func (ps *progressStream) run(ctx context.Context, p streamParams, stall bool) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for seq := 1; seq <= p.limit; seq++ {
		if stall && seq-1 == p.faults.StallAfter {
			if err := sleep(ctx, timer, p.faults.Stall); err != nil {
				return err
			}
		}
		if seq > 1 && p.interval > 0 {
			if err := sleep(ctx, timer, p.interval); err != nil {
				return err
			}
		}
		if err := ps.send(ctx, seq, p); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (ps *progressStream) send(ctx context.Context, seq int, p streamParams) error {
	if ps.token == nil {
		return ctx.Err()
	}
	target := 0
	if seq == 1 {
		target = p.faults.Oversized
	}
	ps.buf = ps.enc.appendData(ps.buf[:0], seq, target)
	err := ps.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: ps.token,
		Progress:      float64(seq),
		Total:         float64(p.limit),
		Message:       string(ps.buf),
	})
	if err != nil {
		return fmt.Errorf("localserver: tool %s: progress for seq %d: %w", ps.enc.d.name, seq, err)
	}
	return nil
}

// sleep waits d on timer (stopped) unless ctx ends first.
func sleep(ctx context.Context, timer *time.Timer, d time.Duration) error {
	timer.Reset(d)
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		timer.Stop()
		return ctx.Err()
	}
}
