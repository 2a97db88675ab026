package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
)

// InspectOptions leave keys out of inspect maps. The zero value includes
// everything, as the :include-* flags of :mcp.stream.inspect default to true.
type InspectOptions struct {
	OmitState        bool // leave out :current-state
	OmitInitialState bool // leave out :initial-state
	OmitQueue        bool // leave out :queue
}

// Inspect returns the inspect map of stream id (docs/streams.md lists the
// keys). It holds the stream's lock for the time of a copy of its fields
// only; the map costs O(queue length) to build.
func (p *Provider) Inspect(id string, opts InspectOptions) (rtfs.Value, error) {
	s, err := p.lookup(id)
	if err != nil {
		return nil, err
	}
	return s.inspect(opts, time.Now()), nil
}

// statusValue is the :status map: {:state kw} plus :message and :end-reason
// when set.
func statusValue(st Status) *rtfs.Map {
	m := rtfs.MapOf(rtfs.Keyword("state"), rtfs.Keyword(st.State))
	if st.Message != "" {
		m = m.Assoc(rtfs.Keyword("message"), rtfs.String(st.Message))
	}
	if st.EndReason != "" {
		m = m.Assoc(rtfs.Keyword("end-reason"), rtfs.Keyword(st.EndReason))
	}
	return m
}

// StatusValue returns st as the map :mcp.stream.status answers: {:stream-id
// :state :message :end-reason :result}.
func StatusValue(st Status) rtfs.Value {
	m := statusValue(st).Assoc(rtfs.Keyword("stream-id"), rtfs.String(st.StreamID))
	result := st.Result
	if result == nil {
		result = rtfs.Nil
	}
	return m.Assoc(rtfs.Keyword("result"), result)
}

func orNil(v rtfs.Value) rtfs.Value {
	if v == nil {
		return rtfs.Nil
	}
	return v
}

// maxCursorDisplay is the longest cursor inspect shows whole.
const maxCursorDisplay = 40

// DisplayCursor is the form of a stream's cursor that inspect shows (from
// RTFS, the CLI and MCP). Cursors are opaque and some carry secrets: an MCP
// cursor holds the server's session id, which lets its holder read the
// session's stream. A cursor of up to 40 bytes (an SSE event id, a journal
// position) is shown whole; a longer one as its first 12 bytes, "…" and 12
// hex digits of its SHA-256, enough to tell two cursors apart and to see it
// move, and nothing of what it carries past its first bytes. The store
// keeps the whole cursor for recovery.
func DisplayCursor(c string) string {
	if len(c) <= maxCursorDisplay {
		return c
	}
	sum := sha256.Sum256([]byte(c))
	return c[:12] + "…" + hex.EncodeToString(sum[:6])
}

func (s *stream) inspect(opts InspectOptions, now time.Time) rtfs.Value {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cursor rtfs.Value = rtfs.Nil
	if s.cursor != "" {
		cursor = rtfs.String(DisplayCursor(s.cursor))
	}
	m := rtfs.MapOf(
		rtfs.Keyword("stream-id"), s.idVal,
		rtfs.Keyword("processor"), rtfs.String(s.def.procName),
		rtfs.Keyword("endpoint"), s.epVal,
		rtfs.Keyword("status"), statusValue(s.statusLocked()),
		rtfs.Keyword("queue-capacity"), rtfs.Int(s.def.capacity),
		rtfs.Keyword("stats"), s.statsLocked(now),
		rtfs.Keyword("transport"), s.transportLocked(),
		rtfs.Keyword("observed-at-epoch-ms"), rtfs.Int(now.UnixMilli()),
		rtfs.Keyword("started-at-epoch-ms"), rtfs.Int(s.started.UnixMilli()),
		rtfs.Keyword("persistence-enabled"), rtfs.Bool(s.p.ps != nil),
		rtfs.Keyword("last-output"), orNil(s.lastOut),
		rtfs.Keyword("result"), orNil(s.result),
		rtfs.Keyword("cursor"), cursor,
		rtfs.Keyword("dropped-chunks"), rtfs.Int(s.stats.dropped),
		rtfs.Keyword("reconnects"), rtfs.Int(s.stats.reconnects),
	)
	if !opts.OmitState {
		m = m.Assoc(rtfs.Keyword("current-state"), s.state)
	}
	if !opts.OmitInitialState {
		m = m.Assoc(rtfs.Keyword("initial-state"), s.def.initial)
	}
	if !opts.OmitQueue {
		m = m.Assoc(rtfs.Keyword("queue"), s.queueLocked(now))
	}
	return m
}

func (s *stream) statsLocked(now time.Time) rtfs.Value {
	var latency, last rtfs.Value = rtfs.Nil, rtfs.Nil
	if s.stats.hasLatency {
		latency = rtfs.Int(s.stats.latency.Milliseconds())
	}
	if !s.stats.lastEvent.IsZero() {
		last = rtfs.Int(s.stats.lastEvent.UnixMilli())
	}
	rate := 0.0
	if span := s.stats.lastDone.Sub(s.stats.firstDone).Seconds(); s.stats.processed > 1 && span > 0 {
		rate = float64(s.stats.processed-1) / span
	}
	return rtfs.MapOf(
		rtfs.Keyword("processed-chunks"), rtfs.Int(s.stats.processed),
		rtfs.Keyword("queued-chunks"), rtfs.Int(s.queue.len()+len(s.ctrl)),
		rtfs.Keyword("dropped-chunks"), rtfs.Int(s.stats.dropped),
		rtfs.Keyword("last-latency-ms"), latency,
		rtfs.Keyword("last-event-epoch-ms"), last,
		rtfs.Keyword("chunks-per-second"), rtfs.Float(rate),
		rtfs.Keyword("reconnects"), rtfs.Int(s.stats.reconnects),
		rtfs.Keyword("bytes-received"), rtfs.Int(s.stats.bytes),
		rtfs.Keyword("outputs"), rtfs.Int(s.stats.outputs),
	)
}

func (s *stream) transportLocked() rtfs.Value {
	return rtfs.MapOf(
		rtfs.Keyword("kind"), rtfs.Keyword(s.def.transport),
		rtfs.Keyword("auto-connect"), rtfs.Bool(s.p.cfg.autoConnect),
		rtfs.Keyword("task-present"), rtfs.Bool(s.taskPresent),
		rtfs.Keyword("task-active"), rtfs.Bool(s.taskActive),
		rtfs.Keyword("timeout-ms"), rtfs.Int(defaultTimeoutMillis),
		rtfs.Keyword("retry-attempts"), rtfs.Int(s.p.opts.RetryAttempts),
		rtfs.Keyword("server-url"), rtfs.String(redactURL(s.def.serverURL)),
	)
}

// queueLocked lists the queued chunks in the order they will be processed
// when the stream is active.
func (s *stream) queueLocked(now time.Time) rtfs.Value {
	items := make([]rtfs.Value, 0, len(s.ctrl)+s.queue.len())
	add := func(it *item) {
		items = append(items, rtfs.MapOf(
			rtfs.Keyword("chunk"), it.chunk,
			rtfs.Keyword("metadata"), it.meta,
			rtfs.Keyword("waiting-ms"), rtfs.Int(now.Sub(it.enqueued).Milliseconds()),
		))
	}
	for i := range s.ctrl {
		add(&s.ctrl[i])
	}
	for i := 0; i < s.queue.len(); i++ {
		add(s.queue.at(i))
	}
	return rtfs.NewVector(items...)
}
