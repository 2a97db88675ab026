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

// Protocol versions spoken by Streamable: the session era, negotiated by
// initialize, and 2026-07-28, found by server/discover, which has no
// session and no resumable streams.
const (
	version20250326 = "2025-03-26"
	version20250618 = "2025-06-18"
	version20251125 = "2025-11-25"
	version20260728 = "2026-07-28"
	// newestSessionVersion is what initialize offers.
	newestSessionVersion = version20251125
)

// supportedVersion reports whether v is a session-era version this client
// speaks (an initialize answer).
func supportedVersion(v string) bool {
	switch v {
	case version20250326, version20250618, version20251125:
		return true
	}
	return false
}

// cleanupTimeout bounds notifications/cancelled (or tasks/cancel) plus
// DELETE after the stream ends.
const cleanupTimeout = 2 * time.Second

// Streamable is the MCP Streamable HTTP transport: it asks the server for
// revision 2026-07-28 with server/discover and, when the server does not
// speak it, initializes a 2025-era session; then it makes one tools/call
// whose progress notifications and result become chunks.
//
// Under the session era (2025-03-26, 2025-06-18, 2025-11-25) a connection
// lost before the result is resumed by GET with Last-Event-ID on the same
// session, from memory or from a cursor after a host restart; the call
// itself is sent again only when the server says it did not take it (a
// 404, 429 or 503 answer to the tools/call POST). A 404 on the resume GET
// means the session is gone: Run re-initializes once (bounded by 2 s),
// DELETEs that fresh session and returns a permanent error saying the call
// cannot be resumed. Before tools/call, Run opens the session's standalone
// GET stream and reads it in a second goroutine while the call is in
// flight: servers in JSON-response mode send the call's progress there, and
// a 202 answer puts the result there. Progress from it is delivered before
// the result (Run waits at most 2 s for progress trailing a JSON result);
// the goroutine is cancelled and joined before Run returns. A server
// answering that GET with 405 gets no out-of-band progress.
//
// Under 2026-07-28 every request carries the protocol version, client info
// and capabilities in its _meta and the Mcp-Protocol-Version, Mcp-Method
// (and for tools/call Mcp-Name) headers; there is no session, no standalone
// stream and no DELETE. A response stream that breaks before the result
// loses the call: Run sends tools/call again (a new request, after the
// retry policy's wait) only when the tool is annotated idempotentHint true
// in tools/list or the stream's :restart is :on-failure (StreamableConfig);
// otherwise it returns a permanent error saying so. It never repeats a call
// silently.
//
// Either era, a tools/call answered with a task (a 2025-11-25
// CreateTaskResult, or a 2026-07-28 result with resultType "task") is
// polled with tasks/get at the server's pollInterval (bounded to 100 ms ..
// 30 s): status changes become chunks with Event "task", and the task's
// result the last chunk. The task id is in the cursor, so a Run from it
// polls the same task rather than calling the tool again.
//
// The zero value is ready to use. A Streamable is safe for concurrent use:
// every Run keeps its own state. Each Run opens its own session (session
// era) and ends it with DELETE when the tool's result arrived, the tool
// failed, the call was never accepted, or ctx was cancelled or the sink
// refused a chunk (then after notifications/cancelled, or tasks/cancel for
// a task); on other failures the session is left open so that a later Run
// from the cursor can resume.
type Streamable struct {
	policy retry.Policy // zero: 250 ms doubling to 5 s
}

var _ transport.StreamTransport = Streamable{}

// StreamableConfig is the configuration of the :mcp transport, made by
// StreamableKind's Configure from the start keys (Spec.Config). A nil
// Config means the zero value. It is a value, read-only once built.
type StreamableConfig struct {
	// Restart (:restart :on-failure) allows a 2026-07-28 tools/call whose
	// response stream was lost (broken, or the host restarted) to be sent
	// again even when the tool is not annotated idempotentHint true.
	Restart bool
	// Roots (:roots) are what the client lists to a session-era server's
	// roots/list; none by default.
	Roots []Root
}

// streamRun is the state of one Streamable.Run.
type streamRun struct {
	*conn
	tr          tracker
	retry       *retry.Retrier
	tool        string
	args        json.RawMessage
	serverRetry time.Duration
	callSent    bool
	listen      *listener    // the standalone GET stream while tools/call is in flight
	held        []listenItem // events of listen that doListening took but did not handle
	restart     bool         // StreamableConfig.Restart
	resumed     bool         // Spec.Resumed
	nextID      int          // the next auxiliary request id
	serverTasks bool         // a 2025-11-25 server declared tasks for tools/call
	toolInfo    *toolInfo    // from tools/list, once looked up
	toolLooked  bool
	askTask     bool // send params.task (2025-11-25, taskSupport "required")
}

// Run implements transport.StreamTransport. Spec.ServerURL is the MCP
// endpoint, Spec.Endpoint the tool name and Spec.Arguments its arguments;
// Spec.Config may be a StreamableConfig or a pointer to one. With an empty cursor it starts a
// new call; with a cursor from a previous chunk it resumes that call (a GET
// on its session, or polling its task) or, for a 2026-07-28 call, sends it
// again under the re-issue rule; it returns nil at once if the cursor is
// the result's. Cost: one session (five or six requests) or, under
// 2026-07-28, two requests per call, then a JSON-RPC decode and a cursor
// encode (a few µs) per event.
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
		tr: tracker{sink: sink, streamID: spec.StreamID, log: spec.Logger}, resumed: spec.Resumed, nextID: firstAuxID}
	var roots []Root
	switch cfg := spec.Config.(type) {
	case nil:
	case StreamableConfig:
		r.restart, roots = cfg.Restart, cfg.Roots
	case *StreamableConfig:
		if cfg != nil {
			r.restart, roots = cfg.Restart, cfg.Roots
		}
	default:
		return c.fail("config", 0, true, fmt.Errorf("the spec's Config is %T, want *mcp.StreamableConfig", spec.Config))
	}
	c.answers = &answerer{roots: roots, streamID: spec.StreamID, log: spec.Logger}
	c.answerURL = c.url
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
		r.nextID = max(r.nextID, st.Req+1) // a re-issued call's id is not reused
		switch {
		case st.Task != "":
			err = r.pollTask(ctx, 0)
		case r.modern():
			err = r.resumeLost(ctx)
		default:
			err = r.resumeNow(ctx)
		}
	}
	return r.finish(ctx, err)
}

// modern reports whether the run speaks 2026-07-28.
func (r *streamRun) modern() bool { return r.proto == version20260728 }

// newID returns a fresh request id.
func (r *streamRun) newID() int {
	id := r.nextID
	r.nextID++
	return id
}

func (r *streamRun) start(ctx context.Context) error {
	if err := r.negotiate(ctx); err != nil {
		return err
	}
	r.tr.st = callState{Kind: kindStreamable, Req: callID, Token: "rtfs-" + rand.Text()}
	if r.serverTasks {
		// A 2025-11-25 server with tasks: a tool whose taskSupport is
		// "required" must be called as a task.
		info, err := r.lookupTool(ctx)
		if err != nil {
			return err
		}
		r.askTask = info.taskSupport() == "required"
	}
	return r.callLoop(ctx)
}

// callLoop makes the call and follows it to its end: resuming its stream
// (session era), sending it again under the re-issue rule (2026-07-28), or
// polling the task it was answered with.
func (r *streamRun) callLoop(ctx context.Context) error {
	for {
		chunks := r.tr.st.Chunks
		done, err := r.call(ctx)
		if done {
			if err == nil && r.tr.st.Task != "" && !r.tr.st.Done {
				return r.pollTask(ctx, r.tr.pollEvery)
			}
			return err
		}
		if !r.modern() {
			if !resumable(err) || !r.callSent {
				return err
			}
			return r.resumeLoop(ctx, err)
		}
		if !resumable(err) || !r.callSent {
			return err
		}
		if r.tr.st.Chunks > chunks {
			r.retry.Reset() // the call made progress before it broke
		}
		if err := r.mayCallAgain(ctx, err, false); err != nil {
			return err
		}
		if werr := r.retry.Wait(ctx, err, 0); werr != nil {
			return werr
		}
		r.debug("calling the tool again after its response stream broke", "cause", err)
		r.tr.st.Req, r.callSent = r.newID(), false
	}
}

// negotiate picks the protocol: 2026-07-28 when server/discover says the
// server speaks it, else a session by initialize. Transient failures of
// either are retried.
func (r *streamRun) negotiate(ctx context.Context) error {
	for {
		ok, err := r.discover(ctx)
		if err == nil {
			r.retry.Reset()
			if ok {
				return nil
			}
			return r.handshake(ctx)
		}
		if !resumable(err) {
			return err
		}
		if werr := r.retry.Wait(ctx, err, 0); werr != nil {
			return werr
		}
	}
}

// handshake runs initialize and notifications/initialized, retrying
// transient failures.
func (r *streamRun) handshake(ctx context.Context) error {
	for {
		err := r.initialize(ctx)
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
	resp, err := r.post(ctx, initializeID, methodInitialize, initializeParams(newestSessionVersion))
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
		Capabilities    struct {
			Tasks *struct {
				Requests *struct {
					Tools *struct {
						Call json.RawMessage `json:"call"`
					} `json:"tools"`
				} `json:"requests"`
			} `json:"tasks"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(msg.Result, &res); err != nil {
		return r.fail("initialize", 0, true, fmt.Errorf("malformed initialize result: %w", err))
	}
	if !supportedVersion(res.ProtocolVersion) {
		return r.fail("initialize", 0, true, fmt.Errorf(
			"server chose protocol version %q; this client speaks %s, %s, %s and %s",
			res.ProtocolVersion, version20250326, version20250618, version20251125, version20260728))
	}
	sid := resp.Header.Get(headerSession)
	if !validSessionID(sid) {
		return r.fail("initialize", 0, true, fmt.Errorf("server sent an invalid %s header", headerSession))
	}
	r.session, r.proto = sid, res.ProtocolVersion
	t := res.Capabilities.Tasks
	r.serverTasks = res.ProtocolVersion == version20251125 && t != nil && t.Requests != nil &&
		t.Requests.Tools != nil && t.Requests.Tools.Call != nil
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
// A request's _meta gets the trace context and, under 2026-07-28, the
// per-request protocol fields; a 2026-07-28 message also gets the
// Mcp-Method header (and Mcp-Name for tools/call).
func (r *streamRun) post(ctx context.Context, id int, method string, p params) (*http.Response, error) {
	if id != 0 {
		modern := ""
		if r.modern() {
			modern = r.proto
		}
		p = addMeta(ctx, p, modern)
	}
	body, err := encodeRequest(id, method, p)
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
	if method == methodToolsCall && r.listen != nil {
		return r.doListening(req, method)
	}
	return r.do(req, method)
}

// rpc sends one request and reads its answer (JSON or SSE), retrying
// transient failures with the run's retry policy; a success resets the
// failure streak. A JSON-RPC error is a permanent error wrapping *rpcError.
func (r *streamRun) rpc(ctx context.Context, method string, p params) (*rpcMessage, error) {
	for {
		msg, err := r.rpcOnce(ctx, method, p)
		if err == nil {
			r.retry.Reset()
			return msg, nil
		}
		if !resumable(err) {
			return nil, err
		}
		if werr := r.retry.Wait(ctx, err, 0); werr != nil {
			return nil, werr
		}
	}
}

// rpcOnce sends one request and reads its answer.
func (r *streamRun) rpcOnce(ctx context.Context, method string, p params) (*rpcMessage, error) {
	id := r.newID()
	resp, err := r.post(ctx, id, method, p)
	if err != nil {
		return nil, err
	}
	defer drain(resp)
	return r.readResponse(ctx, resp, id, method)
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
		r.answerRequests(ctx, msgs)
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
		r.answerRequests(ctx, msgs)
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
