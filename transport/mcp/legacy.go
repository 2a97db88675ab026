package mcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
	"github.com/rtfshost/rtfshost/transport/internal/sseread"
)

// legacyVersion is the oldest version a legacy HTTP+SSE server may choose.
const legacyVersion = "2024-11-05"

// LegacySSE is the MCP HTTP+SSE transport of protocol version 2024-11-05:
// Run GETs Spec.ServerURL (the SSE URL), reads the endpoint event, POSTs
// initialize, notifications/initialized and tools/call to that endpoint and
// reads every answer as a message event on the GET stream.
//
// The session lives as long as the GET connection, so a call cannot be
// resumed: connection failures before tools/call is sent are retried with
// backoff (waiting at least the stream's retry field), a stream that breaks
// after it is a permanent error, and Run with a cursor other than the
// result's is a permanent error too.
//
// The zero value is ready to use; a LegacySSE is safe for concurrent use.
type LegacySSE struct {
	policy retry.Policy // zero: 250 ms doubling to 5 s
}

var _ transport.StreamTransport = LegacySSE{}

// LegacyConfig is the configuration of the :mcp-sse transport, made by
// LegacyKind's Configure from the start keys (Spec.Config). A nil Config
// means the zero value. It is a value, read-only once built.
type LegacyConfig struct {
	// Roots (:roots) are what the client lists to the server's
	// roots/list; none by default.
	Roots []Root
}

// legacyRun is the state of one LegacySSE.Run.
type legacyRun struct {
	*conn
	tr       tracker
	retry    *retry.Retrier
	tool     string
	args     json.RawMessage
	endpoint *url.URL
	body     io.ReadCloser
	events   *sseread.Reader
	callSent bool
	// serverRetry is the last retry field the GET stream sent: the least
	// wait before the next connection attempt.
	serverRetry time.Duration
}

// Run implements transport.StreamTransport. Spec.ServerURL is the SSE URL,
// Spec.Endpoint the tool name and Spec.Arguments its arguments. A cursor is
// accepted only if it is the result's (Run then returns nil at once).
func (l LegacySSE) Run(ctx context.Context, spec transport.Spec, cursor string, sink transport.Sink) error {
	c, err := newConn(&spec, spec.HTTP.ServerURL)
	if err != nil {
		return err
	}
	args, err := toolArguments(&spec)
	if err != nil {
		return err
	}
	var roots []Root
	switch cfg := spec.Config.(type) {
	case nil:
	case LegacyConfig:
		roots = cfg.Roots
	case *LegacyConfig:
		if cfg != nil {
			roots = cfg.Roots
		}
	default:
		return c.fail("config", 0, true, fmt.Errorf("the spec's Config is %T, want *mcp.LegacyConfig", spec.Config))
	}
	c.answers = &answerer{roots: roots, streamID: spec.StreamID, log: spec.Logger}
	if cursor != "" {
		st, err := decodeCursor(cursor, kindLegacy)
		if err != nil {
			return c.fail("cursor", 0, true, err)
		}
		if st.Done {
			return nil
		}
		return c.fail("resume", 0, true, errors.New(
			"a legacy HTTP+SSE call cannot be resumed: its session ended with its connection (the tool is not re-run)"))
	}
	r := &legacyRun{conn: c, tool: spec.Endpoint, args: args, retry: l.policy.Start("mcp-sse", &spec, sink),
		tr: tracker{sink: sink, streamID: spec.StreamID, log: spec.Logger, noTasks: "mcp-sse"}}
	defer r.closeStream()
	return r.finish(ctx, r.run(ctx))
}

func (r *legacyRun) run(ctx context.Context) error {
	for {
		err := r.connect(ctx)
		if err == nil {
			break
		}
		r.closeStream()
		if !resumable(err) {
			return err
		}
		if werr := r.retry.Wait(ctx, err, r.serverRetry); werr != nil {
			return werr
		}
	}
	r.tr.st = callState{Kind: kindLegacy, Req: callID, Token: "rtfs-" + rand.Text()}
	if err := r.send(ctx, callID, methodToolsCall, addMeta(ctx, callParams(r.tool, r.args, r.tr.st.Token, false), "")); err != nil {
		return notRetried(err)
	}
	r.callSent = true
	for {
		msgs, err := r.nextMessages(ctx, "read")
		if err != nil {
			var te *transport.Error
			if resumable(err) && errors.As(err, &te) {
				err = r.fail(te.Op, te.Status, true, fmt.Errorf("%w; a legacy HTTP+SSE call cannot be resumed", te.Err))
			}
			return err
		}
		if done, err := r.tr.handle(ctx, msgs, "", false); done || err != nil {
			return err
		}
	}
}

// connect opens the GET stream, reads the endpoint event and runs the
// initialize handshake.
func (r *legacyRun) connect(ctx context.Context) error {
	req, err := r.request(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return err
	}
	resp, err := r.do(req, "connect")
	if err != nil {
		return err
	}
	r.body = resp.Body
	if mt := mediaType(resp); mt != contentSSE {
		return r.fail("connect", resp.StatusCode, true, fmt.Errorf("GET answered with Content-Type %q, want %s", mt, contentSSE))
	}
	r.events = newEventReader(resp.Body, r.maxEvent)
	if err := r.readEndpoint(ctx); err != nil {
		return err
	}
	if err := r.send(ctx, initializeID, methodInitialize, initializeParams(newestSessionVersion)); err != nil {
		return err
	}
	if err := r.awaitInitialize(ctx); err != nil {
		return err
	}
	return r.send(ctx, 0, methodInitialized, nil)
}

// nextEvent returns the GET stream's next event, recording its retry field.
func (r *legacyRun) nextEvent(ctx context.Context, op string) (*sseread.Event, error) {
	ev, err := r.events.Next()
	if d, ok := r.events.Retry(); ok {
		r.serverRetry = d
	}
	if err != nil {
		return nil, r.readError(ctx, op, err)
	}
	return ev, nil
}

// readEndpoint reads the first event that carries data or a name, which must
// be the endpoint event (blocks of only retry or id fields before it are
// skipped), and resolves its URI against the SSE URL. The endpoint must have
// the SSE URL's origin, since requests to it carry Spec.Header.
func (r *legacyRun) readEndpoint(ctx context.Context) error {
	ev, err := r.nextEvent(ctx, "connect")
	for err == nil && !ev.HasData && string(ev.Name) == "" {
		ev, err = r.nextEvent(ctx, "connect")
	}
	if err != nil {
		return err
	}
	if string(ev.Name) != "endpoint" {
		return r.fail("connect", 0, true, fmt.Errorf("first SSE event is %q, want \"endpoint\"", string(ev.Name)))
	}
	ref, err := r.url.Parse(strings.TrimSpace(string(ev.Data)))
	if err != nil {
		return r.fail("connect", 0, true, fmt.Errorf("endpoint event: %w", err))
	}
	u, err := egress.FromURL(ref)
	if err != nil {
		return r.fail("connect", 0, true, fmt.Errorf("endpoint event: %w", err))
	}
	if u.Origin() != r.target.Origin() {
		return r.fail("connect", 0, true, fmt.Errorf("endpoint %s is not on the SSE URL's origin %s", u.Redacted(), r.target.Origin()))
	}
	r.endpoint = u.URL()
	r.answerURL = r.endpoint
	return nil
}

func (r *legacyRun) awaitInitialize(ctx context.Context) error {
	for {
		msgs, err := r.nextMessages(ctx, "initialize")
		if err != nil {
			return err
		}
		for i := range msgs {
			if !msgs[i].isResponseTo(initializeID) {
				continue
			}
			m, err := checkRPC(r.conn, &msgs[i], "initialize")
			if err != nil {
				return err
			}
			var res struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if err := json.Unmarshal(m.Result, &res); err != nil {
				return r.fail("initialize", 0, true, fmt.Errorf("malformed initialize result: %w", err))
			}
			if res.ProtocolVersion != legacyVersion && !supportedVersion(res.ProtocolVersion) {
				return r.fail("initialize", 0, true, fmt.Errorf("server chose unsupported protocol version %q", res.ProtocolVersion))
			}
			return nil
		}
	}
}

// nextMessages returns the JSON-RPC messages of the next message event.
func (r *legacyRun) nextMessages(ctx context.Context, op string) ([]rpcMessage, error) {
	for {
		ev, err := r.nextEvent(ctx, op)
		if err != nil {
			return nil, err
		}
		if len(ev.Data) == 0 || (string(ev.Name) != "" && string(ev.Name) != "message") {
			continue
		}
		msgs, err := decodeMessages(ev.Data)
		if err != nil {
			return nil, r.fail(op, 0, true, err)
		}
		r.answerRequests(ctx, msgs)
		return msgs, nil
	}
}

// send POSTs one JSON-RPC message to the session endpoint.
func (r *legacyRun) send(ctx context.Context, id int, method string, p params) error {
	body, err := encodeRequest(id, method, p)
	if err != nil {
		return r.fail(method, 0, true, err)
	}
	return r.postMessage(ctx, r.endpoint, body, method)
}

// finish sends notifications/cancelled when the host stopped the call.
func (r *legacyRun) finish(ctx context.Context, err error) error {
	var se *sinkError
	switch {
	case err == nil || isToolOutcome(err):
		return err
	case ctx.Err() != nil:
		r.cancel(ctx)
		return ctx.Err()
	case errors.As(err, &se):
		r.cancel(ctx)
		return se.err
	}
	return err
}

func (r *legacyRun) cancel(ctx context.Context) {
	if !r.callSent || r.tr.st.Done {
		return
	}
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer stop()
	if err := r.send(cctx, 0, methodCancelled, cancelledParams(callID, "cancelled by the host")); err != nil {
		r.tr.debug("notifications/cancelled failed", "err", err)
	}
}

func (r *legacyRun) closeStream() {
	if r.body != nil {
		r.body.Close()
		r.body = nil
	}
}
