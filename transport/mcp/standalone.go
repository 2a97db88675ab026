package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// How long Run waits on the session's standalone GET stream.
const (
	// listenConnectWait bounds the wait for the standalone stream's response
	// headers before tools/call is sent, so that a server without an event
	// store does not drop the call's first notifications. A server that
	// holds back the headers only delays the call by this much.
	listenConnectWait = 500 * time.Millisecond
	// trailingQuiet is how long, after a JSON result, Run waits for one more
	// progress notification on the standalone stream before it delivers the
	// result; each notification that arrives restarts it.
	trailingQuiet = 200 * time.Millisecond
	// trailingMax bounds the whole wait for trailing progress.
	trailingMax = 2 * time.Second
)

// listenItem is one event of the standalone stream: the progress
// notifications and responses it carries (already decoded, so they own their
// bytes) and its SSE id.
type listenItem struct {
	msgs  []rpcMessage
	id    string
	hasID bool
}

// listener reads the session's standalone GET stream in one goroutine while
// tools/call is in flight. Servers in JSON-response mode (go-sdk's among
// them) send a call's notifications there, and a 202 answer puts the result
// there. It is owned by one streamRun, which must call stop before Run
// returns; stop joins the goroutine.
type listener struct {
	items  chan listenItem // closed when the goroutine ends
	ready  chan struct{}   // closed once the stream's headers arrived
	done   chan struct{}   // closed as the goroutine's last action
	cancel context.CancelFunc
	err    error // why the stream ended; read only after done is closed
}

// startListener opens the standalone GET stream for the current session,
// replacing any previous listener, and waits (at most listenConnectWait)
// until the server has answered it, so that no notification of the call is
// sent before the stream is connected.
func (r *streamRun) startListener(ctx context.Context) {
	r.stopListener()
	lctx, cancel := context.WithCancel(ctx)
	req, err := r.request(lctx, http.MethodGet, r.url, nil)
	if err != nil {
		cancel()
		return
	}
	l := &listener{items: make(chan listenItem, 16), ready: make(chan struct{}),
		done: make(chan struct{}), cancel: cancel}
	c := *r.conn // the goroutine's own copy: the handshake may change r.conn
	go l.run(lctx, &c, req, r.tr.st.Req)
	r.listen = l
	t := time.NewTimer(listenConnectWait)
	defer t.Stop()
	select {
	case <-l.ready:
	case <-l.done:
	case <-t.C:
		r.debug("standalone GET stream not answered yet; sending the call anyway")
	case <-ctx.Done():
	}
}

// stopListener ends the standalone stream, if any, and waits for its
// goroutine to return.
func (r *streamRun) stopListener() {
	l := r.listen
	if l == nil {
		return
	}
	r.listen, r.held = nil, nil
	l.cancel()
	<-l.done
	switch {
	case statusOf(l.err) == http.StatusMethodNotAllowed:
		r.debug("the server offers no standalone GET stream (405); out-of-band progress cannot arrive")
	case l.err != nil && !errors.Is(l.err, context.Canceled):
		r.debug("standalone GET stream ended", "err", l.err)
	}
}

// run is the listener's goroutine: it GETs the stream, answers the
// server's requests on it (KeepAlive pings come here) and forwards the
// progress notifications and the responses to request id until the stream
// ends or ctx is cancelled.
func (l *listener) run(ctx context.Context, c *conn, req *http.Request, id int) {
	defer close(l.done)
	defer close(l.items)
	resp, err := c.do(req, "standalone GET")
	if err != nil {
		l.err = err
		return
	}
	defer resp.Body.Close()
	if mt := mediaType(resp); mt != contentSSE {
		l.err = c.fail("standalone GET", resp.StatusCode, true,
			fmt.Errorf("GET answered with Content-Type %q, want %s", mt, contentSSE))
		return
	}
	close(l.ready)
	l.err = l.read(ctx, c, resp, id)
}

// read forwards the stream's relevant events; it returns why it stopped.
func (l *listener) read(ctx context.Context, c *conn, resp *http.Response, id int) error {
	er := newEventReader(resp.Body, c.maxEvent)
	for {
		ev, err := er.Next()
		if err != nil {
			return c.readError(ctx, "standalone GET", err)
		}
		item := listenItem{id: string(ev.ID), hasID: ev.HasID}
		if len(ev.Data) > 0 && (string(ev.Name) == "" || string(ev.Name) == "message") {
			msgs, err := decodeMessages(ev.Data)
			if err != nil {
				return c.fail("standalone GET", 0, true, err)
			}
			c.answerRequests(ctx, msgs) // here: a ping must not wait for the call's reader
			for _, m := range msgs {
				if m.Method == methodProgress || m.isResponseTo(id) {
					item.msgs = append(item.msgs, m)
				}
			}
		}
		if len(item.msgs) == 0 {
			if item.hasID {
				// An event with nothing for the call (a ping, a priming
				// event) only moves the resume point, which matters after
				// a 202; it never makes the reader wait, since the reader
				// must go on answering pings.
				select {
				case l.items <- item:
				default:
				}
			}
			continue
		}
		select {
		case l.items <- item:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// drainListener delivers what the standalone stream has already received,
// without waiting. Its events' ids are not the call stream's, so they do not
// move the resume point.
func (r *streamRun) drainListener(ctx context.Context) (done bool, err error) {
	if r.listen == nil {
		return false, nil
	}
	for _, it := range r.takeHeld() {
		if done, err := r.tr.handle(ctx, it.msgs, "", false); done || err != nil {
			return done, err
		}
	}
	for {
		select {
		case it, ok := <-r.listen.items:
			if !ok {
				return false, nil
			}
			if done, err := r.tr.handle(ctx, it.msgs, "", false); done || err != nil {
				return done, err
			}
		default:
			return false, nil
		}
	}
}

// awaitTrailing runs after a JSON result, before it is delivered: it
// delivers the progress that the standalone stream carries until progress
// reaches its total, the stream ends, no notification came for trailingQuiet,
// or trailingMax passed. Responses on the stream are ignored: the result is
// already known.
func (r *streamRun) awaitTrailing(ctx context.Context) error {
	if r.listen == nil {
		return nil
	}
	quiet, limit := time.NewTimer(trailingQuiet), time.NewTimer(trailingMax)
	defer quiet.Stop()
	defer limit.Stop()
	for !r.tr.progressComplete() {
		select {
		case it, ok := <-r.listen.items:
			if !ok {
				return nil
			}
			if _, err := r.tr.handle(ctx, progressOnly(it.msgs), "", false); err != nil {
				return err
			}
			quiet.Reset(trailingQuiet)
		case <-quiet.C:
			return nil
		case <-limit.C:
			r.debug("trailing progress still arriving; delivering the result")
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// awaitAccepted reads the call's progress and result from the standalone
// stream after the server answered tools/call with 202. When that stream has
// ended (or was never offered) it falls back to a new GET.
func (r *streamRun) awaitAccepted(ctx context.Context) (done bool, err error) {
	if r.listen != nil {
		held := r.takeHeld()
		for {
			var it listenItem
			var ok bool
			if len(held) > 0 {
				it, ok, held = held[0], true, held[1:]
			} else {
				select {
				case it, ok = <-r.listen.items:
				case <-ctx.Done():
					return false, ctx.Err()
				}
			}
			if !ok {
				break
			}
			// Here the standalone stream is the call's stream: its ids are
			// the resume point.
			if done, err := r.tr.handle(ctx, it.msgs, it.id, it.hasID); done || err != nil {
				return done, err
			}
		}
		r.stopListener()
	}
	return r.get(ctx)
}

// progressOnly returns the progress notifications among msgs.
func progressOnly(msgs []rpcMessage) []rpcMessage {
	out := msgs[:0:0]
	for _, m := range msgs {
		if m.Method == methodProgress {
			out = append(out, m)
		}
	}
	return out
}

// doListening sends the tools/call request like do while the standalone
// stream is open, taking meanwhile what that stream carries, so that its
// reader never waits for room: it answers the server's pings, and a server
// in JSON-response mode (go-sdk's) holds the POST's answer until the
// tool's result and sends the call's progress on that stream. Events are
// held, unhandled, for drainListener or awaitAccepted, which read them as
// the answer's shape says (after a 202 the standalone stream is the call's
// stream, and its ids the resume point); once maxHeld are held the oldest
// progress is delivered, and an event that carries a response is held
// until the answer came, the stream not read further. The request runs in
// a goroutine of its own, joined before doListening returns; its context
// ends when the returned body is closed.
func (r *streamRun) doListening(req *http.Request, op string) (*http.Response, error) {
	ctx := req.Context()
	rctx, cancel := context.WithCancel(ctx)
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := r.do(req.WithContext(rctx), op)
		got <- answer{resp, err}
	}()
	items := r.listen.items
	for {
		select {
		case a := <-got:
			if a.err != nil {
				cancel()
				return nil, a.err
			}
			a.resp.Body = &cancelBody{ReadCloser: a.resp.Body, cancel: cancel}
			return a.resp, nil
		case it, ok := <-items:
			if !ok {
				items = nil
				continue
			}
			r.held = append(r.held, it)
			if slices.ContainsFunc(it.msgs, func(m rpcMessage) bool { return m.Method == "" }) {
				items = nil
				continue
			}
			if len(r.held) <= maxHeld {
				continue
			}
			oldest := r.held[0]
			r.held = r.held[1:]
			if _, err := r.tr.handle(ctx, oldest.msgs, "", false); err != nil {
				cancel()
				if a := <-got; a.resp != nil {
					a.resp.Body.Close()
				}
				return nil, err
			}
		}
	}
}

// maxHeld bounds the events doListening holds (as many as the listener's
// channel).
const maxHeld = 16

// takeHeld returns the events doListening held, and forgets them.
func (r *streamRun) takeHeld() []listenItem {
	held := r.held
	r.held = nil
	return held
}

// cancelBody is a response body whose Close also ends its request's
// context.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
