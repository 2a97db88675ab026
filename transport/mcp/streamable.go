package mcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
)

// Protocol versions spoken by Streamable: 2026-07-28 when server/discover
// says the server speaks it (modern.go), else the newest of the session
// revisions that initialize agrees on.
const (
	version20250326 = "2025-03-26"
	version20250618 = "2025-06-18"
	version20251125 = "2025-11-25"
	version20260728 = "2026-07-28"
	newestVersion   = version20251125 // of the revisions with initialize
)

func supportedVersion(v string) bool {
	switch v {
	case version20250326, version20250618, version20251125:
		return true
	}
	return false
}

// cleanupTimeout bounds notifications/cancelled plus DELETE after the stream
// ends.
const cleanupTimeout = 2 * time.Second

// Streamable is the MCP Streamable HTTP transport: initialize, then one
// tools/call whose progress notifications and result become chunks. A
// connection lost before the result is resumed by GET with Last-Event-ID on
// the same session, from memory or from a cursor after a host restart; the
// call itself is sent again only when the server says it did not take it (a
// 404, 429 or 503 answer to the tools/call POST). A 404 on the resume GET
// means the session is gone: Run re-initializes once (bounded by 2 s),
// DELETEs that fresh session and returns a permanent error saying the call
// cannot be resumed.
//
// Before tools/call, Run opens the session's standalone GET stream and reads
// it in a second goroutine while the call is in flight: servers in
// JSON-response mode send the call's progress there, and a 202 answer puts
// the result there. Progress from it is delivered before the result (Run
// waits at most 2 s for progress trailing a JSON result); the goroutine is
// cancelled and joined before Run returns. A server answering that GET with
// 405 gets no out-of-band progress.
//
// The zero value is ready to use. A Streamable is safe for concurrent use:
// every Run keeps its own state. Each Run opens its own session and ends it
// with DELETE when the tool's result arrived, the tool failed, the call was
// never accepted, or ctx was cancelled or the sink refused a chunk (then after
// notifications/cancelled); on other failures the session is left open so
// that a later Run from the cursor can resume.
type Streamable struct {
	policy retry.Policy // zero: 250 ms doubling to 5 s
}

var _ transport.StreamTransport = Streamable{}

// streamRun is the state of one Streamable.Run.
type streamRun struct {
	*conn
	tr          tracker
	retry       *retry.Retrier
	tool        string
	args        json.RawMessage
	serverRetry time.Duration
	callSent    bool
	listen      *listener // the standalone GET stream while tools/call is in flight
	restart     bool      // :restart :on-failure: the tool may be called again
	discovered  bool      // server/discover has been answered (modern.go)
	idempotent  *bool     // the tool's idempotentHint, once tools/list said
}

// Run implements transport.StreamTransport. Spec.ServerURL is the MCP
// endpoint, Spec.Endpoint the tool name and Spec.Arguments its arguments.
// With an empty cursor it starts a new call; with a cursor from a previous
// chunk it resumes that call on its session, or returns nil at once if the
// cursor is the result's. Cost: one session (four or five requests) per call,
// then a JSON-RPC decode and a cursor encode (a few µs) per event.
func (s Streamable) Run(ctx context.Context, spec transport.Spec, cursor string, sink transport.Sink) error {
	c, err := newConn(&spec, spec.HTTP.ServerURL)
	if err != nil {
		return err
	}
	args, err := toolArguments(&spec)
	if err != nil {
		return err
	}
	r := &streamRun{conn: c, tool: spec.Endpoint, args: args, retry: s.policy.Start("mcp", &spec, sink),
		tr: tracker{sink: sink, streamID: spec.StreamID, log: spec.Logger}}
	if cfg, ok := spec.Config.(StreamableConfig); ok {
		r.restart = cfg.Restart
	}
	if cursor == "" {
		err = r.start(ctx)
	} else {
		st, derr := decodeCursor(cursor, kindStreamable)
		if derr != nil {
			return c.fail("cursor", 0, true, derr)
		}
		if st.Done {
			return nil
		}
		r.tr.st, r.session, r.proto, r.callSent = st, st.Session, st.Proto, true
		switch {
		case st.Task != "":
			err = r.pollTask(ctx)
		case r.modern():
			err = r.reissue(ctx, errors.New("the host stopped while the call was in flight"))
		default:
			err = r.resumeNow(ctx)
		}
	}
	if errors.Is(err, errTaskCreated) {
		err = r.pollTask(ctx)
	}
	return r.finish(ctx, err)
}

func (r *streamRun) start(ctx context.Context) error {
	if err := r.handshake(ctx); err != nil {
		return err
	}
	r.tr.st = callState{Kind: kindStreamable, Req: callID, Token: "rtfs-" + rand.Text()}
	done, err := r.call(ctx)
	if done || !resumable(err) || !r.callSent {
		return err
	}
	if r.modern() {
		return r.reissue(ctx, err)
	}
	return r.resumeLoop(ctx, err)
}

// handshake asks server/discover once whether the server speaks
// 2026-07-28; if not, it runs initialize and notifications/initialized.
// Transient failures are retried.
func (r *streamRun) handshake(ctx context.Context) error {
	for {
		var err error
		if !r.discovered {
			var modern bool
			if modern, err = r.discover(ctx); err == nil && modern {
				r.retry.Reset()
				return nil
			}
		}
		if err == nil {
			err = r.initialize(ctx)
		}
		if err == nil {
			r.retry.Reset()
			return nil
		}
		if !resumable(err) {
			return err
		}
		if werr := r.retry.Wait(ctx, err, 0); werr != nil {
			return werr
		}
	}
}

func (r *streamRun) initialize(ctx context.Context) error {
	r.session, r.proto = "", ""
	resp, err := r.post(ctx, initializeID, methodInitialize, initializeParams(newestVersion))
	if err != nil {
		return err
	}
	defer drain(resp)
	msg, err := r.readResponse(ctx, resp, initializeID, "initialize")
	if err != nil {
		return err
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(msg.Result, &res); err != nil {
		return r.fail("initialize", 0, true, fmt.Errorf("malformed initialize result: %w", err))
	}
	if !supportedVersion(res.ProtocolVersion) {
		return r.fail("initialize", 0, true, fmt.Errorf(
			"server chose protocol version %q; this client speaks %s, %s and %s",
			res.ProtocolVersion, version20250326, version20250618, version20251125))
	}
	sid := resp.Header.Get(headerSession)
	if !validSessionID(sid) {
		return r.fail("initialize", 0, true, fmt.Errorf("server sent an invalid %s header", headerSession))
	}
	r.session, r.proto = sid, res.ProtocolVersion
	ack, err := r.post(ctx, 0, methodInitialized, nil)
	if err != nil {
		return err
	}
	drain(ack)
	return nil
}

// validSessionID reports whether id is empty or visible ASCII, as the spec
// requires.
func validSessionID(id string) bool {
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// post sends one JSON-RPC message (id 0: a notification) to the endpoint.
func (r *streamRun) post(ctx context.Context, id int, method string, params any) (*http.Response, error) {
	body, err := encodeRequest(id, method, params)
	if err != nil {
		return nil, r.fail(method, 0, true, err)
	}
	req, err := r.request(ctx, http.MethodPost, r.url, body)
	if err != nil {
		return nil, err
	}
	if r.modern() {
		req.Header.Set(headerMethod, method)
		if method == methodToolsCall {
			req.Header.Set(headerName, r.tool)
		}
	}
	return r.do(req, method)
}

// readResponse reads the response to request id from a JSON or SSE body.
func (r *streamRun) readResponse(ctx context.Context, resp *http.Response, id int, op string) (*rpcMessage, error) {
	var msgs []rpcMessage
	switch mediaType(resp) {
	case contentJSON:
		var err error
		if msgs, err = r.readJSONBody(resp, op); err != nil {
			return nil, err
		}
	case contentSSE:
		return r.awaitSSE(ctx, resp.Body, id, op)
	default:
		return nil, r.fail(op, resp.StatusCode, true, fmt.Errorf("unexpected Content-Type %q", resp.Header.Get("Content-Type")))
	}
	for i := range msgs {
		if msgs[i].isResponseTo(id) {
			return checkRPC(r.conn, &msgs[i], op)
		}
	}
	return nil, r.fail(op, 0, true, fmt.Errorf("response carries no answer to request %d", id))
}

// awaitSSE reads SSE events until the response to request id.
func (r *streamRun) awaitSSE(ctx context.Context, body io.Reader, id int, op string) (*rpcMessage, error) {
	er := newEventReader(body, r.maxEvent)
	for {
		ev, err := er.Next()
		if err != nil {
			return nil, r.readError(ctx, op, err)
		}
		if len(ev.Data) == 0 || (string(ev.Name) != "" && string(ev.Name) != "message") {
			continue
		}
		msgs, err := decodeMessages(ev.Data)
		if err != nil {
			return nil, r.fail(op, 0, true, err)
		}
		for i := range msgs {
			if msgs[i].isResponseTo(id) {
				return checkRPC(r.conn, &msgs[i], op)
			}
		}
	}
}

func checkRPC(c *conn, m *rpcMessage, op string) (*rpcMessage, error) {
	if m.Error != nil {
		return nil, c.fail(op, 0, true, m.Error)
	}
	return m, nil
}

// readError classifies an error from reading an SSE body.
func (c *conn) readError(ctx context.Context, op string, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, transport.ErrEventTooLarge):
		return c.fail(op, 0, true, err)
	case errors.Is(err, io.EOF):
		return c.fail(op, 0, false, errors.New("stream ended before the tool's result"))
	}
	return c.fail(op, 0, false, err)
}

// resumable reports whether err is a transient transport failure, after
// which the call's stream may be resumed.
func resumable(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && !te.Permanent
}
