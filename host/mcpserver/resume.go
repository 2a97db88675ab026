package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
)

// Resumability that survives a restart (revisions 2025-03-26 to 2025-11-25).
//
// go-sdk keeps a session's response streams in an mcp.EventStore, so that a
// client whose connection drops resumes with Last-Event-ID. Here that store
// is the host's data directory (durableEvents), bounded per session and
// expired after a day. go-sdk's sessions themselves live in memory: after
// serve restarts it answers 404 to the old session. So a GET that resumes a
// stream of a session this process does not have, but the store does, is
// served here (serveResume): the stored events after Last-Event-ID, then,
// when the stream was a tools/call of mcp.stream.start whose stream the
// provider recovered, the rest of it: each output as a progress
// notification, then the call's result. A follower, subscribed to the
// call's stream before the stream is recovered (Server.Recover), writes
// those into the store as they happen, so a client that comes back later
// misses none of them.

// rememberCall remembers the JSON-RPC request id of each tools/call with a
// progress token in a session, so that a call resumed after a restart can
// be answered with the right id.
func (s *Server) rememberCall(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env := envelopeOf(r)
		m, ok := env.isCall()
		if !ok || env.session == "" || s.events.store == nil {
			next.ServeHTTP(w, r)
			return
		}
		if tok := m.progressToken(); tok != "" {
			var b persistence.Batch
			b.Put([]byte(callPrefix+env.session+"\x00"+tok), persistence.EncodeRecord(kindCallID, eventsVer, m.ID))
			if err := s.events.store.Commit(r.Context(), &b); err != nil {
				s.log.Error("mcp events: storing a call", "err", err)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// callID returns the stored request id of the call with token in session.
func (s *Server) callID(ctx context.Context, session, token string) (json.RawMessage, bool) {
	if s.events.store == nil {
		return nil, false
	}
	k := []byte(callPrefix + session + "\x00" + token)
	v, err := s.events.store.Get(ctx, k)
	if err != nil {
		return nil, false
	}
	_, id, err := persistence.DecodeRecord(k, v, kindCallID, eventsVer)
	return id, err == nil
}

// resumeAfterRestart serves the GETs that resume a response stream of a
// session this process does not have but the event store does (the server
// restarted); everything else goes to next.
func (s *Server) resumeAfterRestart(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid, last := r.Header.Get("Mcp-Session-Id"), r.Header.Get("Last-Event-ID")
		if r.Method != http.MethodGet || sid == "" || last == "" || s.liveSession(sid) {
			next.ServeHTTP(w, r)
			return
		}
		stream, idx, ok := parseEventID(last)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		s.events.load(r.Context())
		if _, known := s.events.snapshot(sid, stream); !known {
			next.ServeHTTP(w, r)
			return
		}
		s.followRestored(r.Context(), recoveredAlready) // when the host was not recovered through Recover
		s.serveResume(w, r, sid, stream, idx)
	})
}

// liveSession reports whether go-sdk has the session.
func (s *Server) liveSession(id string) bool {
	for ss := range s.mcp.Sessions() {
		if ss.ID() == id {
			return true
		}
	}
	return false
}

func parseEventID(id string) (string, int, bool) {
	stream, n, ok := strings.Cut(id, "_")
	if !ok {
		return "", 0, false
	}
	idx, err := strconv.Atoi(n)
	if err != nil || idx < 0 {
		return "", 0, false
	}
	return stream, idx, true
}

// serveResume writes the stored events after idx, then the ones the
// follower stores, until the stream's response is out or the client goes.
func (s *Server) serveResume(w http.ResponseWriter, r *http.Request, session, stream string, idx int) {
	if _, ok := w.(http.Flusher); !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for {
		// What is known before the read is in the store by then: a response
		// stored after it is written by the next round.
		changed := s.events.changedOf(session, stream)
		l, _ := s.events.snapshot(session, stream)
		for _, ev := range s.events.events(r.Context(), session, stream, idx) {
			idx = ev.idx
			if len(ev.data) == 0 {
				continue // the priming event
			}
			if _, err := fmt.Fprintf(w, "event: message\nid: %s_%d\ndata: %s\n\n", stream, idx, ev.data); err != nil {
				return
			}
			_ = rc.Flush()
		}
		if l.done || l.lost {
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// Recover recovers the host's streams and the programs parked on them
// (host.Recover). First it follows what an earlier process left and whose
// streams are about to be recovered (followRestored): the calls whose
// response streams the event store holds, and the stream tasks that have
// not ended. Each follower subscribes to its stream before the stream runs
// again, so that every output it gives from its recovery on reaches the
// store (the call's events, the task's outputs), however late the client
// comes back. A call or task whose stream is not recovered ends with an
// error result. Call it once, before Serve.
func (s *Server) Recover(ctx context.Context) error {
	recovered := make(chan struct{})
	s.followRestored(ctx, recovered)
	err := s.host.Recover(ctx)
	close(recovered)
	return err
}

// recoveredAlready is the recovered channel of followers started after the
// host recovered its streams.
var recoveredAlready = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// followRestored starts, once, the followers of what an earlier process
// left: one for every stream task that has not ended (tasks.load), and one
// for every stored response stream that was a progress-reporting
// tools/call whose response is not stored. Each subscribes to its stream
// at once (or to the stream to come); it looks at the stream once
// recovered is closed. Recover calls it before the host recovers the
// streams; without Recover, the first look at the tasks or a resumed
// response stream calls it, with recoveredAlready.
func (s *Server) followRestored(ctx context.Context, recovered <-chan struct{}) {
	s.resumeOnce.Do(func() {
		s.tasks.load(ctx, recovered)
		s.events.load(ctx)
		s.events.mu.Lock()
		var todo []streamKey
		for k, l := range s.events.streams {
			if !l.done && l.streamID != "" && l.token != "" {
				todo = append(todo, k)
			}
		}
		s.events.mu.Unlock()
		for _, k := range todo {
			if s.liveSession(k.session) {
				continue
			}
			l, _ := s.events.snapshot(k.session, k.stream)
			id, ok := s.callID(ctx, k.session, l.token)
			if !ok {
				continue
			}
			c := s.newCall(s.ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ToolStart}})
			if err := c.watchStream(l.streamID); err != nil {
				c.release()
				continue // the provider is closed
			}
			s.calls.Add(1)
			go s.follow(k, l, id, c, recovered)
		}
	})
}

// follow appends to the event store, as progress notifications, the
// outputs of the recovered stream l reports, which c watches, then the
// tools/call's result. An output of a chunk processed again after the
// restart (its effect was not committed when the server died) was
// notified before: it is skipped by its :seq, so the client sees each
// output once.
func (s *Server) follow(k streamKey, l streamLog, id json.RawMessage, c *call, recovered <-chan struct{}) {
	defer s.calls.Done()
	defer c.release()
	ctx := s.ctx
	select {
	case <-recovered:
	case <-ctx.Done():
		return
	}
	if _, err := s.prov.Status(ctx, l.streamID); err != nil {
		s.appendEvent(k, rpcAnswer(id, resultJSON(textResult(fmt.Sprintf("%s: the stream %s was not recovered after the server restarted", ToolStart, l.streamID), true)), nil))
		return
	}
	// The outputs go out as the call's did: through an Outbox, one
	// notification per batch, the progress going on from the last.
	outputs := l.outputs
	limit := s.opts.Limits.OutputLimit()
	box := s.newOutbox()
	note := notifier{base: l.progress, last: l.progress, any: true, maxBytes: limit}
	var params mcp.ProgressNotificationParams
	var st provider.Status
	var evs []provider.Event
	var batches []provider.Batch
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ended := false; !ended; {
		timer.Stop()
		var tick <-chan time.Time
		if at, ok := box.Next(); ok {
			timer.Reset(time.Until(at))
			tick = timer.C
		}
		select {
		case <-c.w.wake:
		case <-tick:
		case <-ctx.Done():
			return
		}
		evs = c.w.take(evs)
		for _, ev := range evs {
			switch ev.Kind {
			case provider.EventOutput:
				if ev.Seq <= l.seq {
					continue // processed again after the restart: notified before it
				}
				l.seq = ev.Seq
				out := outputJSON(ev, limit)
				outputs = append(outputs, out)
				box.AddEncoded(ev, out)
			case provider.EventProgress:
				box.Add(ev)
			case provider.EventEnd:
				st, ended = ev.Status, true
			}
		}
		if ended {
			batches = box.Drain(batches[:0])
		} else {
			batches = box.Take(time.Now(), batches[:0])
		}
		for i := range batches {
			if batches[i].End != nil {
				continue // the call's result follows
			}
			note.fill(&params, &batches[i])
			s.appendEvent(k, progressNote(l.token, &params))
		}
	}
	res := streamResult{StreamID: st.StreamID, State: st.State, EndReason: st.EndReason, Message: st.Message,
		Result: shownJSON(st.Result, s.opts.Limits.OutputLimit(), "the stream's result"), Outputs: outputs, OutputCount: int64(len(outputs))}
	s.appendEvent(k, rpcAnswer(id, resultJSON(jsonResult(res, st.State != provider.StateCompleted)), nil))
}

func (s *Server) appendEvent(k streamKey, data []byte) {
	if err := s.events.Append(context.Background(), k.session, k.stream, data); err != nil {
		s.log.Error("mcp events: storing a resumed stream's event", "err", err)
	}
}

// progressNote is the notifications/progress message of params for the
// call whose progress token is token (its JSON).
func progressNote(token string, params *mcp.ProgressNotificationParams) []byte {
	params.ProgressToken = json.RawMessage(token)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
	return b
}
