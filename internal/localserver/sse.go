package localserver

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// flushThreshold is how many buffered bytes make the SSE writer flush when
// the next event is immediately available (interval 0).
const flushThreshold = 32 << 10

// serveSSE answers GET /sse/<endpoint>.
func (s *Server) serveSSE(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/sse/")
	d, ok := s.lookup(w, name)
	if !ok {
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		httpError(w, http.StatusMethodNotAllowed, "method %s not allowed on %s; use GET", r.Method, r.URL.Path)
		return
	}
	q := r.URL.Query()
	p, err := parseParams(d, s.opts.Faults, queryLookup(q))
	if err != nil {
		httpError(w, http.StatusBadRequest, "%s: %v", r.URL.Path, err)
		return
	}
	after, err := parseLastEventID(r.Header.Get("Last-Event-ID"), p.limit)
	if err != nil {
		httpError(w, http.StatusBadRequest, "%s: %v", r.URL.Path, err)
		return
	}
	key := name + "?" + q.Encode()
	if s.budget.failFires(p.faults, key) {
		s.injectFailure(w, p.faults.Fail, r.URL.Path)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s.stats.sseStreams.Add(1)
	st := &sseStream{w: w, rc: http.NewResponseController(w), enc: newEncoder(d, p.size, s.now),
		stats: &s.stats, budget: &s.budget, key: key, f: p.faults}
	st.run(r.Context(), p, after)
}

// injectFailure answers a request with the Fail fault's status.
func (s *Server) injectFailure(w http.ResponseWriter, code int, where string) {
	s.stats.injectedFailures.Add(1)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="localserver"`)
	}
	httpError(w, code, "injected failure fail=%d on %s", code, where)
}

// parseLastEventID returns the seq after which to resume (0: from the
// start). Ids are the chunks' seq numbers, 1..limit.
func parseLastEventID(raw string, limit int) (int, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("Last-Event-ID %q: want a chunk seq, a non-negative integer", raw)
	}
	if n > limit {
		return 0, fmt.Errorf("Last-Event-ID %d: beyond the stream's last id %d (limit=%d)", n, limit, limit)
	}
	return n, nil
}

// sseStream writes one SSE response. Events are built into buf and written
// when the next event is not immediately available or buf is large, so a
// fast stream costs one write per flushThreshold bytes, not per event. The
// events of one write carry one generated_at, read when the first of them
// is built.
type sseStream struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	enc   *encoder
	stats *serverStats
	// budget and key decide whether a limited fault fires; it is checked when
	// the fault is due, so a request that ends before does not use it up.
	budget *faultBudget
	key    string
	f      Faults
	buf    []byte
	timer  *time.Timer
	sent   int
	// flushed records a flush since the last stamp: the next chunk starts
	// a new batch.
	flushed bool
}

// run streams chunks after+1..limit, then the terminal status event. It
// returns when the stream is done, the client is gone or ctx ends.
func (st *sseStream) run(ctx context.Context, p streamParams, after int) {
	defer st.stopTimer()
	st.buf = make([]byte, 0, flushThreshold+4096)
	if p.retry > 0 {
		st.buf = append(st.buf, "retry: "...)
		st.buf = strconv.AppendInt(st.buf, p.retry.Milliseconds(), 10)
		st.buf = append(st.buf, "\n\n"...)
	}
	if st.dropDue() {
		st.drop()
		return
	}
	for seq := after + 1; seq <= p.limit; seq++ {
		if !st.pause(ctx, seq > after+1, p.interval) {
			return
		}
		if seq == after+1 || st.flushed {
			st.enc.stamp()
			st.flushed = false
		}
		st.appendChunk(seq, st.f.Oversized)
		if st.dropDue() {
			st.drop()
			return
		}
		if (p.interval > 0 || len(st.buf) >= flushThreshold) && !st.flush(ctx) {
			return
		}
	}
	st.buf = append(st.buf, "event: status\ndata: "...)
	st.buf = appendSummary(st.buf, st.enc.d.name, p.limit, after)
	st.buf = append(st.buf, "\n\n"...)
	st.flush(ctx)
}

// pause waits before the next chunk: for a Stall fault due now, and for the
// interval between chunks. It reports false if the stream must end.
func (st *sseStream) pause(ctx context.Context, between bool, interval time.Duration) bool {
	if st.f.Stall > 0 && st.sent == st.f.StallAfter && st.budget.take("stall", st.key, st.f.StallTimes) {
		if !st.flush(ctx) || !st.wait(ctx, st.f.Stall) {
			return false
		}
	}
	if between && interval > 0 {
		return st.wait(ctx, interval)
	}
	return true
}

// appendChunk adds the event for seq; the response's first chunk carries the
// Oversized padding if asked.
func (st *sseStream) appendChunk(seq, oversized int) {
	target := 0
	if st.sent == 0 {
		target = oversized
	}
	st.buf = append(st.buf, "id: "...)
	st.buf = append(st.buf, st.enc.decimal(seq)...)
	st.buf = append(st.buf, "\nevent: chunk\ndata: "...)
	st.buf = st.enc.appendData(st.buf, seq, target)
	st.buf = append(st.buf, "\n\n"...)
	st.sent++
	st.stats.sseChunks.Add(1)
}

// flush writes the buffered events and flushes them to the client. It
// reports false if the client is gone or ctx ended.
func (st *sseStream) flush(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	if len(st.buf) > 0 {
		if _, err := st.w.Write(st.buf); err != nil {
			return false
		}
		st.buf = st.buf[:0]
	}
	st.flushed = true
	return st.rc.Flush() == nil
}

// wait sleeps for d unless ctx ends first.
func (st *sseStream) wait(ctx context.Context, d time.Duration) bool {
	if st.timer == nil {
		st.timer = time.NewTimer(d)
	} else {
		st.timer.Reset(d)
	}
	select {
	case <-st.timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (st *sseStream) stopTimer() {
	if st.timer != nil {
		st.timer.Stop()
	}
}

// dropDue reports whether the Drop fault fires now, using up its budget.
func (st *sseStream) dropDue() bool {
	return st.f.Drop && st.sent == st.f.DropAfter && st.budget.take("drop", st.key, st.f.DropTimes)
}

// drop sends what is buffered and closes the connection without ending the
// response, as a crashed server or a broken network would.
func (st *sseStream) drop() {
	st.stats.drops.Add(1)
	if len(st.buf) > 0 {
		if _, err := st.w.Write(st.buf); err != nil {
			return
		}
	}
	// Hijack does not flush the response's own buffer.
	if err := st.rc.Flush(); err != nil {
		return
	}
	conn, _, err := st.rc.Hijack()
	if err != nil {
		// Not hijackable (e.g. HTTP/2): ending the handler without the
		// terminal event is the closest we can get.
		return
	}
	conn.Close()
}
