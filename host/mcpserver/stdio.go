package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP over stdin and stdout, for desktop clients (Claude Desktop, Cursor,
// VS Code) that launch their servers as child processes
// (docs/mcp-server.md, "Launched by a desktop client").
//
// The connection is go-sdk's IOTransport (newline-delimited JSON-RPC),
// reading only the lines stdioLines let through (stdiolines.go: a bad
// line is answered and skipped, never the end of the session), behind
// stdioLayers, which does for a stdio session what the layers of
// /mcp do for HTTP and which a stdio session needs: the tasks layer (the
// task methods and task-augmented tools/call answered by taskCall, decided
// by isTaskRequest on the message as the envelope decodes it) and the
// announce-tasks layer (the tasks capability in initialize, taskSupport in
// tools/list). The tasks themselves, the tools, budgets and egress policy
// are the Server's, as over HTTP. Tasks stay in front of go-sdk rather
// than in a go-sdk middleware: go-sdk decodes a tools/call's params into
// CallToolParamsRaw, which drops params.task, so no middleware could see
// that a call asks for a task.
//
// The layers that concern HTTP alone have no stdio counterpart: the token
// and scopes (the launching client is trusted: it holds the process), the
// resumption of a response stream (a stdio session ends with the
// process), JSON-only clients and the priming event.

// ServeStdio serves the MCP tools on one session over r (the client's
// requests) and w (the server's messages, and nothing else) until r ends,
// the client closes the session or ctx ends; then it closes the Server.
// Its era is decided per message, as over HTTP: a message whose _meta
// names revision 2026-07-28 or later is of the sessionless era. It returns
// nil when r ended or ctx ended, else the session's failure.
func (s *Server) ServeStdio(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	defer s.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel) // Close ends the session
	defer stop()
	out := &syncWriter{w: w}
	in := newStdioLines(r, out, maxStdioLine)
	l := &stdioLayers{s: s, t: &mcp.IOTransport{Reader: in, Writer: out, MaxLineLength: maxStdioLine + 1},
		announced: map[string]string{}, connected: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(s.ctx)
	defer func() {
		l.cancel()
		l.answers.Wait()
	}()
	ss, err := s.mcp.Connect(ctx, l, nil)
	if err != nil {
		return fmt.Errorf("mcpserver: serving MCP over stdio: %w", err)
	}
	l.session = ss
	close(l.connected)
	stopSession := context.AfterFunc(ctx, func() { _ = ss.Close() })
	defer stopSession()
	err = ss.Wait()
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mcpserver: serving MCP over stdio: %w", err)
	}
	return nil
}

// stdioLayers is the transport of ServeStdio: go-sdk's IOTransport with
// the tasks and announce-tasks layers in front. It is one session's.
type stdioLayers struct {
	s    *Server
	t    mcp.Transport
	conn mcp.Connection

	// ctx ends the task requests in flight (a blocking tasks/result) when
	// the session ends; answers counts them.
	ctx     context.Context
	cancel  context.CancelFunc
	answers sync.WaitGroup
	// session is go-sdk's session of the connection, where the
	// notifications of the tasks it creates go; set before connected is
	// closed.
	session   *mcp.ServerSession
	connected chan struct{}

	mu sync.Mutex
	// announced holds the ids (as JSON) of the initialize and tools/list
	// requests in flight, with their method, whose results get what
	// announce adds.
	announced map[string]string
}

// Connect connects the IOTransport; go-sdk calls it once.
func (l *stdioLayers) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := l.t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	l.conn = conn
	return l, nil
}

// Read returns the next message for go-sdk; task requests are answered
// here, on a goroutine each (tasks/result blocks), and not returned.
func (l *stdioLayers) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := l.conn.Read(ctx)
		if err != nil {
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.IsCall() {
			return msg, nil
		}
		raw, err := jsonrpc.EncodeMessage(req)
		if err != nil {
			return msg, nil
		}
		m := decodeMessage(raw) // as the envelope reads an HTTP body
		modern := m.meta(mcp.MetaKeyProtocolVersion) >= sessionlessVersion
		switch {
		case l.s.isTaskRequest(&m, modern):
			l.answer(&m, modern)
			continue
		case !modern && (m.Method == "initialize" || m.Method == "tools/list"):
			l.mu.Lock()
			l.announced[compactJSON(m.ID)] = m.Method
			l.mu.Unlock()
		}
		return msg, nil
	}
}

// answer serves a task request on a goroutine and writes its response.
func (l *stdioLayers) answer(m *message, modern bool) {
	l.answers.Add(1)
	go func() {
		defer l.answers.Done()
		select {
		case <-l.connected:
		case <-l.ctx.Done():
			return
		}
		result, err := l.s.taskCall(l.ctx, m, modern, l.session)
		if l.ctx.Err() != nil {
			return // the session ended: nobody to answer
		}
		resp, derr := sdkMessage(rpcAnswer(m.echoID(), result, err))
		if derr != nil {
			l.s.log.Error("mcp stdio: encoding a task response", "method", m.Method, "err", derr)
			return
		}
		if err := l.conn.Write(l.ctx, resp); err != nil {
			l.s.log.Debug("mcp stdio: writing a task response", "method", m.Method, "err", err)
		}
	}()
}

// Write writes go-sdk's message, with what announce adds to the results
// of initialize and tools/list, and a task status carrier turned into its
// status notification (taskStatusMessage).
func (l *stdioLayers) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() && bytes.Contains(req.Params, []byte(metaTaskStatus)) {
		if data, err := jsonrpc.EncodeMessage(req); err == nil {
			if turned, ok := taskStatusMessage(data); ok {
				if m, err := sdkMessage(turned); err == nil {
					msg = m
				}
			}
		}
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		id, _ := json.Marshal(resp.ID.Raw())
		key := compactJSON(id)
		l.mu.Lock()
		method, ok := l.announced[key]
		delete(l.announced, key)
		l.mu.Unlock()
		if ok && resp.Error == nil {
			if res, ok := decodeObject(resp.Result); ok {
				l.s.announce(method, res)
				if b, err := json.Marshal(res); err == nil {
					patched := *resp
					patched.Result = b
					msg = &patched
				}
			}
		}
	}
	return l.conn.Write(ctx, msg)
}

// Close closes the connection and ends the task requests in flight.
func (l *stdioLayers) Close() error {
	l.cancel()
	return l.conn.Close()
}

// SessionID is the connection's (none over stdio).
func (l *stdioLayers) SessionID() string { return l.conn.SessionID() }
