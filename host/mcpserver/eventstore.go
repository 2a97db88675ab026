package mcpserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/persistence"
)

// The event store of the stateful era: the response streams of the
// sessions, kept in the host's data directory so that a client resumes a
// broken response with Last-Event-ID, also after the server restarted
// (resume.go).

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
	if len(data) == 0 {
		return
	}
	m := decodeMessage(data)
	if p, ok := m.progress(); ok {
		if p.Token != nil {
			l.token = compactJSON(p.Token)
		}
		if id := p.Meta.Stream; id != "" {
			l.streamID = id
		}
		if seq := p.Meta.Seq; seq != nil {
			l.seq = max(l.seq, int64(*seq))
		}
		l.progress = max(l.progress, p.Progress)
		switch {
		case len(p.Meta.Outputs) > 0: // a batch: its message is the last output, or the progress's
			for _, o := range p.Meta.Outputs {
				l.outputs = append(l.outputs, o.Output)
			}
		case p.Meta.Seq != nil && *p.Meta.Seq >= 0 && p.Message != "" && json.Valid([]byte(p.Message)):
			l.outputs = append(l.outputs, json.RawMessage(p.Message))
		}
		return
	}
	if m.isResponse() {
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
// before it is written to the client; a task status carrier is stored as
// the status notification the client gets (taskStatusMessage).
func (d *durableEvents) Append(ctx context.Context, sessionID, streamID string, data []byte) error {
	data, _ = taskStatusMessage(data)
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
