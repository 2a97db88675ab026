package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// call opens the session's standalone GET stream, POSTs tools/call and
// reads its response. done reports that the result arrived; a resumable
// error means the stream broke before it. The standalone stream is closed
// before call returns.
func (r *streamRun) call(ctx context.Context) (done bool, err error) {
	defer r.stopListener()
	if !r.modern() { // 2026-07-28 has no standalone stream
		r.startListener(ctx)
	}
	resp, err := r.postCall(ctx)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch mt := mediaType(resp); {
	case resp.StatusCode == http.StatusAccepted:
		// The server answers elsewhere: on the session's GET stream.
		resp.Body.Close()
		return r.awaitAccepted(ctx)
	case mt == contentJSON:
		msgs, err := r.readJSONBody(resp, "tools/call")
		if err != nil {
			return false, err
		}
		r.answerRequests(ctx, msgs)
		return r.jsonAnswer(ctx, msgs)
	case mt == contentSSE:
		return r.readSSE(ctx, resp.Body, "tools/call")
	default:
		return false, r.fail("tools/call", resp.StatusCode, true,
			fmt.Errorf("unexpected Content-Type %q", resp.Header.Get("Content-Type")))
	}
}

// jsonAnswer handles a JSON answer to tools/call: the progress it carries,
// then the progress still arriving on the standalone stream, then the
// result, so that the result is the last chunk.
func (r *streamRun) jsonAnswer(ctx context.Context, msgs []rpcMessage) (done bool, err error) {
	var result []rpcMessage
	rest := msgs[:0:0]
	for _, m := range msgs {
		if m.isResponseTo(r.tr.st.Req) {
			result = append(result[:0], m)
		} else {
			rest = append(rest, m)
		}
	}
	if _, err := r.tr.handle(ctx, rest, "", false); err != nil {
		return false, err
	}
	if result == nil {
		return false, r.fail("tools/call", 0, true, errors.New("JSON response carries no tools/call result"))
	}
	if done, err := r.drainListener(ctx); done || err != nil {
		return done, err
	}
	if !isTask(result[0].Result) { // a task's progress is read while it is polled
		if err := r.awaitTrailing(ctx); err != nil {
			return false, err
		}
	}
	return r.tr.handle(ctx, result, "", false)
}

// postCall sends tools/call. It is sent again only when the server certainly
// did not run it: after a 404 (session unknown: re-initialize first), and
// after a 429 or 503 (the server refused the request). Under 2026-07-28 any
// other transient failure counts as a lost call, for the re-issue rule.
func (r *streamRun) postCall(ctx context.Context) (*http.Response, error) {
	reinitialized := false
	for {
		r.tr.st.Session, r.tr.st.Proto = r.session, r.proto
		resp, err := r.post(ctx, r.tr.st.Req, methodToolsCall, callParams(r.tool, r.args, r.tr.st.Token, r.askTask))
		if err == nil {
			r.callSent = true
			return resp, nil
		}
		var se *sinkError
		switch status := statusOf(err); {
		case ctx.Err() != nil:
			r.callSent = true // it may have reached the server: cancel it
			return nil, ctx.Err()
		case errors.As(err, &se): // the host refused progress delivered while waiting
			r.callSent = true
			return nil, err
		case status == http.StatusNotFound && r.session != "" && !reinitialized:
			reinitialized = true
			r.debug("session not found; re-initializing before the call")
			r.stopListener()
			if herr := r.handshake(ctx); herr != nil {
				return nil, herr
			}
			r.startListener(ctx)
		case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
			if werr := r.retry.Wait(ctx, err, 0); werr != nil {
				return nil, werr
			}
		case r.modern() && resumable(err):
			r.callSent = true // it may have reached the server
			return nil, err
		default:
			return nil, notRetried(err)
		}
	}
}

// readSSE reads a call's SSE stream until the result. It returns a
// resumable error when the stream ends or breaks before the result.
func (r *streamRun) readSSE(ctx context.Context, body io.Reader, op string) (done bool, err error) {
	er := newEventReader(body, r.maxEvent)
	for {
		ev, err := er.Next()
		if d, ok := er.Retry(); ok {
			r.serverRetry = d
		}
		if err != nil {
			return false, r.readError(ctx, op, err)
		}
		if ev.HasID && string(ev.ID) != r.tr.st.Event {
			r.retry.Reset()
		}
		if len(ev.Data) == 0 || (string(ev.Name) != "" && string(ev.Name) != "message") {
			if ev.HasID {
				r.tr.st.Event = string(ev.ID) // a priming event: a resume point
			}
			continue
		}
		msgs, err := decodeMessages(ev.Data)
		if err != nil {
			return false, r.fail(op, 0, true, err)
		}
		r.answerRequests(ctx, msgs)
		if done, err := r.tr.handle(ctx, msgs, string(ev.ID), ev.HasID); done || err != nil {
			return done, err
		}
		if done, err := r.drainListener(ctx); done || err != nil {
			return done, err
		}
	}
}

// get opens the session's GET stream, from the call's last event id when
// there is one, and reads it like readSSE.
func (r *streamRun) get(ctx context.Context) (done bool, err error) {
	req, err := r.request(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return false, err
	}
	if r.tr.st.Event != "" {
		req.Header.Set(headerLastEventID, r.tr.st.Event)
	}
	resp, err := r.do(req, "resume")
	if err != nil {
		switch statusOf(err) {
		case http.StatusNotFound:
			return false, r.sessionGone(ctx)
		case http.StatusConflict: // the server has not yet released the broken stream
			return false, r.fail("resume", http.StatusConflict, false, err)
		}
		return false, err
	}
	defer resp.Body.Close()
	if mt := mediaType(resp); mt != contentSSE {
		return false, r.fail("resume", resp.StatusCode, true, fmt.Errorf("GET answered with Content-Type %q, want %s", mt, contentSSE))
	}
	return r.readSSE(ctx, resp.Body, "resume")
}

// sessionGone handles a 404 on a resume GET: the server forgot the session,
// and with it the call's stream. It re-initializes once, within
// cleanupTimeout, to learn whether the server is reachable and to leave the
// run with a valid session, then DELETEs that fresh session (no call will use
// it) and returns the permanent error that the call cannot be resumed. The
// tool is never called again: it may have run.
func (r *streamRun) sessionGone(ctx context.Context) error {
	gone := errors.New("the MCP session no longer exists on the server, so the tool call cannot be resumed (it is not re-run)")
	r.debug("session not found on resume; re-initializing")
	ictx, stop := context.WithTimeout(ctx, cleanupTimeout)
	err := r.initialize(ictx)
	stop()
	if r.session != "" {
		r.cleanup(ctx, false) // DELETE the fresh session; 404 and 405 are fine
	}
	r.session, r.proto = "", ""
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		gone = fmt.Errorf("%w; re-initializing failed too: %v", gone, err)
	}
	return r.fail("resume", http.StatusNotFound, true, gone)
}

// resumeNow resumes a call from a cursor: at once, then with backoff.
func (r *streamRun) resumeNow(ctx context.Context) error {
	if r.tr.st.Event == "" {
		return r.fail("resume", 0, true, errors.New(
			"the cursor records no SSE event id (JSON response or no event ids from the server), so the call cannot be resumed"))
	}
	done, err := r.get(ctx)
	if done || !resumable(err) {
		return err
	}
	return r.resumeLoop(ctx, err)
}

// resumeLoop reconnects by GET with Last-Event-ID until the result arrives,
// a permanent error occurs or the failure streak runs out of retries.
func (r *streamRun) resumeLoop(ctx context.Context, cause error) error {
	for {
		if r.tr.st.Event == "" {
			return r.fail("resume", 0, true, fmt.Errorf(
				"the stream broke before the result and carried no SSE event id, so the call cannot be resumed without running the tool again: %w", cause))
		}
		r.debug("resuming call stream", "cause", cause)
		if err := r.retry.Wait(ctx, cause, r.serverRetry); err != nil {
			return err
		}
		done, err := r.get(ctx)
		if done || !resumable(err) {
			return err
		}
		cause = err
	}
}

// finish ends the session when the call is over and returns Run's result.
func (r *streamRun) finish(ctx context.Context, err error) error {
	var se *sinkError
	switch {
	case err == nil || isToolOutcome(err):
		r.cleanup(ctx, false)
		return err
	case ctx.Err() != nil:
		r.cleanup(ctx, true)
		return ctx.Err()
	case errors.As(err, &se):
		r.cleanup(ctx, true)
		return se.err
	case !r.callSent:
		r.cleanup(ctx, false) // no call to resume
		return err
	}
	return err // the session stays open so that the call can be resumed later
}

// cleanup sends notifications/cancelled (when cancel is set and the call is
// in flight), or tasks/cancel when the call became a task, and then DELETEs
// the session, if any, within cleanupTimeout. Failures are logged only: the
// stream is over either way.
func (r *streamRun) cleanup(ctx context.Context, cancel bool) {
	if r.session == "" && !r.modern() {
		return
	}
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer stop()
	if cancel && r.callSent && !r.tr.st.Done {
		r.cancelCall(cctx)
	}
	if r.session == "" {
		return
	}
	req, err := r.request(cctx, http.MethodDelete, r.url, nil)
	if err != nil {
		return
	}
	resp, err := r.do(req, "delete session")
	if err != nil {
		if s := statusOf(err); s != http.StatusMethodNotAllowed && s != http.StatusNotFound {
			r.debug("DELETE of the session failed", "err", err)
		}
		return
	}
	drain(resp)
}

func (r *streamRun) debug(msg string, args ...any) {
	r.tr.debug(msg, args...)
}
