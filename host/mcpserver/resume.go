package mcpserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// notification, then the call's result. A follower started at the first
// request after the restart writes those into the store as they happen, so
// a client that comes back later misses none of them.

// The store records of the event store.
const (
	kindEvent   persistence.RecordKind = 33
	kindCallID  persistence.RecordKind = 34
	eventPrefix                        = "mcp/ev/"
	callPrefix                         = "mcp/call/"
	eventsVer                          = 1
)

// Bounds: the bytes kept per session, and how long a session's events are
// kept after its last one.
const (
	maxSessionEventBytes = 8 << 20
	maxEventAge          = 24 * time.Hour
)

type streamKey struct{ session, stream string }

// streamLog is what durableEvents knows of one response stream.
type streamLog struct {
	next     int     // index of the next event
	lost     bool    // an event was not stored (the session's bound): After fails
	token    string  // the progress token of its tools/call (its JSON), from its notifications
	streamID string  // the rtfshost stream its notifications report
	progress float64 // the last progress value
	seq      int64   // the :seq of the last output notified (-1: none)
	outputs  []json.RawMessage
	done     bool          // its JSON-RPC response is stored
	changed  chan struct{} // closed and replaced at every append
	mem      [][]byte      // without a store: the events, by index
}

// durableEvents is the mcp.EventStore of the stateful era, in the host's
// store (or in memory without one). It is safe for concurrent use. Events
// are written behind, grouped by a Committer; the response writer waits
// for them (sync) before the client may see them, so a burst of events
// costs one group commit, and a client never holds an event id the store
// lacks. A restarted server numbers new events past restartGap all the
// same. Close it after the last Append.
type durableEvents struct {
	store   persistence.Store
	com     *persistence.Committer // nil without a store
	pending atomic.Int64           // events submitted and not yet committed
	log     func(msg string, args ...any)

	mu      sync.Mutex
	loaded  bool
	streams map[streamKey]*streamLog
	bytes   map[string]int // per session
}

func newDurableEvents(store persistence.Store, log func(string, ...any)) *durableEvents {
	d := &durableEvents{store: store, log: log, streams: make(map[streamKey]*streamLog),
		bytes: make(map[string]int)}
	if store != nil {
		d.com = persistence.NewCommitter(store, persistence.CommitterOptions{})
	}
	return d
}

// restartGap is how far past the last stored event a restarted server
// numbers a stream's next event: more than the events a crash can leave
// written but not stored.
const restartGap = 1 << 20

// sync waits until every event appended so far is stored; it returns at
// once when none waits. A response writer calls it before the client may
// see what it wrote (retryWriter).
func (d *durableEvents) sync(ctx context.Context) error {
	if d.com == nil || d.pending.Load() == 0 {
		return nil
	}
	return d.com.Flush(ctx)
}

// close commits the events still pending and stops the committer.
func (d *durableEvents) close() {
	if d.com != nil {
		_ = d.com.Close()
	}
}

var _ mcp.EventStore = (*durableEvents)(nil)

func eventKey(session, stream string, idx int) []byte {
	return fmt.Appendf(nil, "%s%s\x00%s\x00%08x", eventPrefix, session, stream, idx)
}

func eventPrefixOf(session, stream string) []byte {
	return fmt.Appendf(nil, "%s%s\x00%s\x00", eventPrefix, session, stream)
}

// load reads what the store holds once: the streams of earlier processes,
// their indexes and what their events say; sessions idle for longer than
// maxEventAge are deleted.
func (d *durableEvents) load(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.loaded || d.store == nil {
		d.loaded = true
		return
	}
	d.loaded = true
	newest := map[string]time.Time{}
	var keys [][]byte
	err := d.store.Scan(ctx, []byte(eventPrefix), func(k, v []byte) error {
		session, stream, idx, ok := parseEventKey(k)
		if !ok {
			return nil
		}
		at, data, err := decodeEvent(k, v)
		if err != nil {
			return err
		}
		keys = append(keys, bytes.Clone(k))
		if at.After(newest[session]) {
			newest[session] = at
		}
		l := d.logOfLocked(streamKey{session, stream})
		l.next = max(l.next, idx+1+restartGap)
		d.bytes[session] += len(data)
		l.note(data)
		return nil
	})
	if err != nil {
		d.log("mcp events: reading the stored events", "err", err)
	}
	var b persistence.Batch
	for _, k := range keys {
		if session, _, _, _ := parseEventKey(k); time.Since(newest[session]) > maxEventAge {
			b.Delete(k)
		}
	}
	for k := range d.streams {
		if time.Since(newest[k.session]) > maxEventAge {
			delete(d.streams, k)
			delete(d.bytes, k.session)
		}
	}
	if err := d.store.Commit(ctx, &b); err != nil {
		d.log("mcp events: deleting expired events", "err", err)
	}
}

func parseEventKey(k []byte) (session, stream string, idx int, ok bool) {
	rest, found := bytes.CutPrefix(k, []byte(eventPrefix))
	if !found {
		return "", "", 0, false
	}
	parts := bytes.Split(rest, []byte{0})
	if len(parts) != 3 {
		return "", "", 0, false
	}
	n, err := strconv.ParseInt(string(parts[2]), 16, 64)
	if err != nil {
		return "", "", 0, false
	}
	return string(parts[0]), string(parts[1]), int(n), true
}

func encodeEvent(data []byte) []byte {
	payload := binary.AppendVarint(nil, time.Now().UnixMilli())
	return persistence.EncodeRecord(kindEvent, eventsVer, append(payload, data...))
}

func decodeEvent(k, v []byte) (time.Time, []byte, error) {
	_, payload, err := persistence.DecodeRecord(k, v, kindEvent, eventsVer)
	if err != nil {
		return time.Time{}, nil, err
	}
	ms, n := binary.Varint(payload)
	if n <= 0 {
		return time.Time{}, nil, &persistence.CorruptRecordError{Key: bytes.Clone(k), Reason: "bad event time"}
	}
	return time.UnixMilli(ms), payload[n:], nil
}

func (d *durableEvents) logOfLocked(k streamKey) *streamLog {
	l := d.streams[k]
	if l == nil {
		l = &streamLog{changed: make(chan struct{}), seq: -1}
		d.streams[k] = l
	}
	return l
}

// note learns from one event of the stream: the progress token, stream id,
// progress value and output of a notification; the end of a response.
func (l *streamLog) note(data []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
		Params struct {
			Token    json.RawMessage `json:"progressToken"`
			Progress float64         `json:"progress"`
			Message  string          `json:"message"`
			Meta     struct {        // metaStream and metaSeq
				Stream string   `json:"rtfshost/stream-id"`
				Seq    *float64 `json:"rtfshost/seq"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if len(data) == 0 || json.Unmarshal(data, &m) != nil {
		return
	}
	switch {
	case m.Method == "notifications/progress":
		if m.Params.Token != nil {
			l.token = compactJSON(m.Params.Token)
		}
		if id := m.Params.Meta.Stream; id != "" {
			l.streamID = id
		}
		if seq := m.Params.Meta.Seq; seq != nil {
			l.seq = max(l.seq, int64(*seq))
		}
		l.progress = max(l.progress, m.Params.Progress)
		if m.Params.Message != "" && json.Valid([]byte(m.Params.Message)) {
			l.outputs = append(l.outputs, json.RawMessage(m.Params.Message))
		}
	case m.Method == "" && m.ID != nil && (m.Result != nil || m.Error != nil):
		l.done = true
	}
}

// Open implements mcp.EventStore.
func (d *durableEvents) Open(ctx context.Context, sessionID, streamID string) error {
	d.load(ctx)
	d.mu.Lock()
	d.logOfLocked(streamKey{sessionID, streamID})
	d.mu.Unlock()
	return nil
}

// Append implements mcp.EventStore: the event is stored (one commit)
// before it is written to the client.
func (d *durableEvents) Append(ctx context.Context, sessionID, streamID string, data []byte) error {
	d.load(ctx)
	k := streamKey{sessionID, streamID}
	d.mu.Lock()
	l := d.logOfLocked(k)
	idx := l.next
	l.next++
	if l.lost || d.bytes[sessionID]+len(data) > maxSessionEventBytes {
		l.lost = true
		d.mu.Unlock()
		return nil // the client can still read it live; a resume past it fails
	}
	d.bytes[sessionID] += len(data)
	if d.store == nil { // no restart to prepare for: the event is kept, nothing noted
		l.mem = append(l.mem, bytes.Clone(data))
		close(l.changed)
		l.changed = make(chan struct{})
		d.mu.Unlock()
		return nil
	}
	l.note(data)
	close(l.changed)
	l.changed = make(chan struct{})
	d.mu.Unlock()
	var b persistence.Batch
	b.Put(eventKey(sessionID, streamID, idx), encodeEvent(data))
	d.pending.Add(1)
	err := d.com.Submit(context.WithoutCancel(ctx), &b, func(err error) {
		d.pending.Add(-1)
		if err != nil {
			d.log("mcp events: storing an event", "session", sessionID, "err", err)
			d.mu.Lock()
			l.lost = true // a resume past it must fail, not skip it
			d.mu.Unlock()
		}
	})
	if err != nil {
		d.pending.Add(-1)
		return fmt.Errorf("storing an MCP event: %w", err)
	}
	return nil
}

// After implements mcp.EventStore.
func (d *durableEvents) After(ctx context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		d.load(ctx)
		d.mu.Lock()
		l, ok := d.streams[streamKey{sessionID, streamID}]
		lost := ok && l.lost
		d.mu.Unlock()
		if !ok {
			yield(nil, fmt.Errorf("no stream %q in session %q", streamID, sessionID))
			return
		}
		if lost {
			yield(nil, fmt.Errorf("stream %q of session %q: %w", streamID, sessionID, mcp.ErrEventsPurged))
			return
		}
		for _, ev := range d.events(ctx, sessionID, streamID, index) {
			if !yield(ev.data, nil) {
				return
			}
		}
	}
}

// A storedEvent is an event of a stream and its index, which is its id's
// number; indexes leave a gap where a server restarted (restartGap).
type storedEvent struct {
	idx  int
	data []byte
}

// events returns the stored events of a stream after index, in order.
func (d *durableEvents) events(ctx context.Context, session, stream string, index int) []storedEvent {
	var out []storedEvent
	if d.store == nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		if l := d.streams[streamKey{session, stream}]; l != nil {
			for i := max(index+1, 0); i < len(l.mem); i++ {
				out = append(out, storedEvent{i, l.mem[i]})
			}
		}
		return out
	}
	_ = d.com.Flush(ctx) // the events written behind, too
	_ = d.store.Scan(ctx, eventPrefixOf(session, stream), func(k, v []byte) error {
		if _, _, idx, ok := parseEventKey(k); ok && idx > index {
			if _, data, err := decodeEvent(k, v); err == nil {
				out = append(out, storedEvent{idx, bytes.Clone(data)})
			}
		}
		return nil
	})
	return out
}

// SessionClosed implements mcp.EventStore: the session's events go.
func (d *durableEvents) SessionClosed(ctx context.Context, sessionID string) error {
	d.mu.Lock()
	for k := range d.streams {
		if k.session == sessionID {
			delete(d.streams, k)
		}
	}
	delete(d.bytes, sessionID)
	d.mu.Unlock()
	if d.store == nil {
		return nil
	}
	var b persistence.Batch
	prefix := []byte(eventPrefix + sessionID + "\x00")
	err := d.com.Flush(ctx) // so that no event of the session is stored after the deletes
	if err == nil {
		err = d.store.Scan(ctx, prefix, func(k, _ []byte) error {
			b.Delete(bytes.Clone(k))
			return nil
		})
	}
	if err == nil {
		err = d.com.Commit(context.WithoutCancel(ctx), &b)
	}
	return err
}

// snapshot returns a copy of what is known of a stream, and whether it is.
func (d *durableEvents) snapshot(session, stream string) (streamLog, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.streams[streamKey{session, stream}]
	if !ok {
		return streamLog{}, false
	}
	c := *l
	c.outputs = append([]json.RawMessage(nil), l.outputs...)
	return c, true
}

// changed returns the channel closed at the stream's next append.
func (d *durableEvents) changedOf(session, stream string) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logOfLocked(streamKey{session, stream}).changed
}

// calls remembers the JSON-RPC request id of each tools/call with a
// progress token in a session, so that a call resumed after a restart can
// be answered with the right id.
func (s *Server) rememberCall(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get("Mcp-Session-Id")
		if r.Method != http.MethodPost || sid == "" || s.events.store == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := requestBody(w, r)
		if !ok {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" && m.ID != nil {
			if tok := compactJSON(m.Params.Meta["progressToken"]); tok != "" && tok != "null" {
				var b persistence.Batch
				b.Put([]byte(callPrefix+sid+"\x00"+tok), persistence.EncodeRecord(kindCallID, eventsVer, m.ID))
				if err := s.events.store.Commit(r.Context(), &b); err != nil {
					s.log.Error("mcp events: storing a call", "err", err)
				}
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
		s.followRestored(r.Context())
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

// followRestored starts, once, a follower for every stored response stream
// of an earlier process that was a progress-reporting tools/call whose
// stream the provider recovered and whose response is not stored.
func (s *Server) followRestored(ctx context.Context) {
	s.resumeOnce.Do(func() {
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
			s.calls.Add(1)
			go s.follow(k, l, id)
		}
	})
}

// follow appends to the event store, as progress notifications, the
// outputs of the recovered stream l reports, then the tools/call's result.
// An output of a chunk processed again after the restart (its effect was
// not committed when the server died) was notified before: it is skipped
// by its :seq, so the client sees each output once.
func (s *Server) follow(k streamKey, l streamLog, id json.RawMessage) {
	defer s.calls.Done()
	ctx := s.ctx
	c := s.newCall(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ToolStart}})
	defer c.release()
	st, err := s.prov.Status(l.streamID)
	if err != nil {
		s.appendEvent(k, rpcResponse(id, resultJSON(textResult(fmt.Sprintf("%s: the stream %s was not recovered after the server restarted", ToolStart, l.streamID), true))))
		return
	}
	outputs, progress := l.outputs, l.progress
	if !st.State.Terminal() {
		if err := c.watchStream(l.streamID); err != nil {
			return
		}
		var evs []provider.Event
		for {
			select {
			case <-c.w.wake:
			case <-ctx.Done():
				return
			}
			ended := false
			evs = c.w.take(evs)
			for _, ev := range evs {
				switch ev.Kind {
				case provider.EventOutput:
					if ev.Seq <= l.seq {
						continue // processed again after the restart: notified before it
					}
					l.seq = ev.Seq
					progress++
					out := outputJSON(ev, s.opts.Limits.OutputLimit())
					outputs = append(outputs, out)
					s.appendEvent(k, progressNote(l.token, progress, out, l.streamID, ev.Seq))
				case provider.EventEnd:
					st, ended = ev.Status, true
				}
			}
			if ended {
				break
			}
		}
	}
	res := streamResult{StreamID: st.StreamID, State: st.State, EndReason: st.EndReason, Message: st.Message,
		Result: shownJSON(st.Result, s.opts.Limits.OutputLimit(), "the stream's result"), Outputs: outputs, OutputCount: int64(len(outputs))}
	s.appendEvent(k, rpcResponse(id, resultJSON(jsonResult(res, st.State != provider.StateCompleted))))
}

func (s *Server) appendEvent(k streamKey, data []byte) {
	if err := s.events.Append(context.Background(), k.session, k.stream, data); err != nil {
		s.log.Error("mcp events: storing a resumed stream's event", "err", err)
	}
}

func progressNote(token string, progress float64, output json.RawMessage, streamID string, seq int64) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{
		"progressToken": json.RawMessage(token), "progress": progress, "message": string(output),
		"_meta": map[string]any{metaStream: streamID, metaSeq: seq}}})
	return b
}

func rpcResponse(id json.RawMessage, result json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	return b
}

// compactJSON is raw JSON without insignificant space, so that a token
// written two ways compares equal.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return ""
	}
	return b.String()
}
