package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
)

// A StreamInfo is the typed snapshot of one stream: what Inspect returns as
// an RTFS map (Value) and what the CLI and the MCP server render. Its JSON
// form has the same kebab-case keys as the RTFS map (docs/streams.md lists
// them; a test keeps the three in step), so a client of a running serve
// decodes it back into a StreamInfo. It is a copy: the caller owns it.
type StreamInfo struct {
	StreamID           string        `json:"stream-id"`
	Processor          string        `json:"processor"`
	Endpoint           string        `json:"endpoint"`
	Status             StatusInfo    `json:"status"`
	QueueCapacity      int           `json:"queue-capacity"`
	Stats              StatsInfo     `json:"stats"`
	Transport          TransportInfo `json:"transport"`
	ObservedAtEpochMs  int64         `json:"observed-at-epoch-ms"`
	StartedAtEpochMs   int64         `json:"started-at-epoch-ms"`
	PersistenceEnabled bool          `json:"persistence-enabled"`
	LastOutput         JSONValue     `json:"last-output"`
	Result             JSONValue     `json:"result"`
	Cursor             *string       `json:"cursor"` // shortened (DisplayCursor); nil before the first chunk
	DroppedChunks      int64         `json:"dropped-chunks"`
	Reconnects         int64         `json:"reconnects"`
	// CurrentState, InitialState and Queue are nil when InspectOptions
	// left them out.
	CurrentState *JSONValue    `json:"current-state,omitempty"`
	InitialState *JSONValue    `json:"initial-state,omitempty"`
	Queue        *[]QueuedInfo `json:"queue,omitempty"`
}

// StatusInfo is a stream's :status.
type StatusInfo struct {
	State     State  `json:"state"`
	Message   string `json:"message,omitempty"`
	EndReason string `json:"end-reason,omitempty"`
}

// StatsInfo is a stream's :stats. LastLatencyMs and LastEventEpochMs are -1
// before the first chunk (nil in the RTFS map, null in JSON).
type StatsInfo struct {
	ProcessedChunks  int64   `json:"processed-chunks"`
	QueuedChunks     int64   `json:"queued-chunks"`
	DroppedChunks    int64   `json:"dropped-chunks"`
	LastLatencyMs    *int64  `json:"last-latency-ms"`
	LastEventEpochMs *int64  `json:"last-event-epoch-ms"`
	ChunksPerSecond  float64 `json:"chunks-per-second"`
	Reconnects       int64   `json:"reconnects"`
	BytesReceived    int64   `json:"bytes-received"`
	Outputs          int64   `json:"outputs"`
}

// TransportInfo is a stream's :transport.
type TransportInfo struct {
	Kind          string `json:"kind"`
	AutoConnect   bool   `json:"auto-connect"`
	TaskPresent   bool   `json:"task-present"`
	TaskActive    bool   `json:"task-active"`
	TimeoutMs     int64  `json:"timeout-ms"`
	RetryAttempts int    `json:"retry-attempts"`
	ServerURL     string `json:"server-url"` // without credentials or query
}

// QueuedInfo is one entry of a stream's :queue.
type QueuedInfo struct {
	Chunk     JSONValue `json:"chunk"`
	Metadata  JSONValue `json:"metadata"`
	WaitingMs int64     `json:"waiting-ms"`
}

// A JSONValue is an RTFS value inside a StreamInfo: it marshals with
// rtfs.OutputJSON and unmarshals with rtfs.FromJSON (object keys become
// keywords), so a StreamInfo survives a trip through JSON up to the
// one-way mapping of DESIGN §7. A nil V is nil.
type JSONValue struct {
	V rtfs.Value
	// Max bounds V's JSON (0: none); the provider sets it to its output
	// limit. A value past it marshals as a string that says so.
	Max int64
}

// MarshalJSON implements json.Marshaler.
func (j JSONValue) MarshalJSON() ([]byte, error) {
	if j.V == nil {
		return []byte("null"), nil
	}
	b, err := rtfs.OutputJSON(j.V, j.Max)
	if err != nil {
		return json.Marshal("not shown: " + err.Error())
	}
	return b, nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (j *JSONValue) UnmarshalJSON(b []byte) error {
	v, err := rtfs.FromJSON(b)
	if err != nil {
		return fmt.Errorf("provider: decode a value of a stream snapshot: %w", err)
	}
	j.V = v
	return nil
}

func (j JSONValue) value() rtfs.Value { return orNil(j.V) }

// Info returns the typed snapshot of stream id (Inspect is its Value). It
// holds the stream's lock for a copy of its fields only and costs O(queue
// length).
func (p *Provider) Info(id string, opts InspectOptions) (StreamInfo, error) {
	s, err := p.lookup(id)
	if err != nil {
		if p.opts.Cluster == nil {
			return StreamInfo{}, err
		}
		ctx, cancel := context.WithTimeout(p.ctx, forwardTimeout)
		defer cancel()
		a, s, err := p.remote(ctx, Request{Verb: "inspect", StreamID: id, Inspect: opts})
		switch {
		case err != nil:
			return StreamInfo{}, err
		case s == nil && a.Info == nil:
			return StreamInfo{}, fmt.Errorf("stream %q: its host sent no snapshot", id)
		case s == nil:
			return *a.Info, nil
		}
		return s.info(opts, time.Now()), nil
	}
	return s.info(opts, time.Now()), nil
}

// Infos returns the snapshot of every stream, in start order.
func (p *Provider) Infos(opts InspectOptions) []StreamInfo {
	p.mu.Lock()
	order := append([]*stream(nil), p.order...)
	p.mu.Unlock()
	now := time.Now()
	out := make([]StreamInfo, len(order))
	for i, s := range order {
		out[i] = s.info(opts, now)
	}
	return out
}

func (s *stream) info(opts InspectOptions, now time.Time) StreamInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.statusLocked()
	bound := s.p.opts.Limits.OutputLimit() // each value shown is bounded
	in := StreamInfo{
		StreamID: s.id, Processor: s.def.procName, Endpoint: s.def.endpoint,
		Status:        StatusInfo{State: st.State, Message: st.Message, EndReason: st.EndReason},
		QueueCapacity: s.def.capacity,
		Stats:         s.statsInfoLocked(),
		Transport: TransportInfo{
			Kind: s.def.transport, AutoConnect: s.p.cfg.autoConnect,
			TaskPresent: s.taskPresent, TaskActive: s.taskActive,
			TimeoutMs: defaultTimeoutMillis, RetryAttempts: s.p.opts.RetryAttempts,
			ServerURL: redactURL(s.def.serverURL),
		},
		ObservedAtEpochMs: now.UnixMilli(), StartedAtEpochMs: s.started.UnixMilli(),
		PersistenceEnabled: s.p.ps != nil,
		LastOutput:         JSONValue{s.lastOut, bound}, Result: JSONValue{s.result, bound},
		DroppedChunks: s.stats.dropped, Reconnects: s.stats.reconnects,
	}
	if s.cursor != "" {
		c := DisplayCursor(s.cursor)
		in.Cursor = &c
	}
	if !opts.OmitState {
		in.CurrentState = &JSONValue{s.state, bound}
	}
	if !opts.OmitInitialState {
		in.InitialState = &JSONValue{s.def.initial, bound}
	}
	if !opts.OmitQueue {
		q := make([]QueuedInfo, 0, len(s.ctrl)+s.queue.len())
		mb := newMetaBuilder(s.idVal, s.epVal)
		add := func(it *item) {
			q = append(q, QueuedInfo{JSONValue{it.chunk, bound}, JSONValue{mb.build(it), bound}, now.Sub(it.received).Milliseconds()})
		}
		for i := range s.ctrl {
			add(&s.ctrl[i])
		}
		for i := 0; i < s.queue.len(); i++ {
			add(s.queue.at(i))
		}
		in.Queue = &q
	}
	return in
}

func (s *stream) statsInfoLocked() StatsInfo {
	si := StatsInfo{
		ProcessedChunks: s.stats.processed, QueuedChunks: int64(s.queue.len() + len(s.ctrl)),
		DroppedChunks: s.stats.dropped, Reconnects: s.stats.reconnects,
		BytesReceived: s.stats.bytes, Outputs: s.stats.outputs,
	}
	if s.stats.hasLatency {
		ms := s.stats.latency.Milliseconds()
		si.LastLatencyMs = &ms
	}
	if !s.stats.lastEvent.IsZero() {
		ms := s.stats.lastEvent.UnixMilli()
		si.LastEventEpochMs = &ms
	}
	if span := s.stats.lastDone.Sub(s.stats.firstDone).Seconds(); s.stats.timed > s.stats.firstAt && span > 0 {
		si.ChunksPerSecond = float64(s.stats.timed-s.stats.firstAt) / span
	}
	return si
}

// Value is the snapshot as the RTFS inspect map (:mcp.stream.inspect).
func (in StreamInfo) Value() rtfs.Value {
	var cursor rtfs.Value = rtfs.Nil
	if in.Cursor != nil {
		cursor = rtfs.String(*in.Cursor)
	}
	m := rtfs.MapOf(
		rtfs.Keyword("stream-id"), rtfs.String(in.StreamID),
		rtfs.Keyword("processor"), rtfs.String(in.Processor),
		rtfs.Keyword("endpoint"), rtfs.String(in.Endpoint),
		rtfs.Keyword("status"), statusValue(Status{State: in.Status.State, Message: in.Status.Message, EndReason: in.Status.EndReason}),
		rtfs.Keyword("queue-capacity"), rtfs.Int(in.QueueCapacity),
		rtfs.Keyword("stats"), in.Stats.value(),
		rtfs.Keyword("transport"), in.Transport.value(),
		rtfs.Keyword("observed-at-epoch-ms"), rtfs.Int(in.ObservedAtEpochMs),
		rtfs.Keyword("started-at-epoch-ms"), rtfs.Int(in.StartedAtEpochMs),
		rtfs.Keyword("persistence-enabled"), rtfs.Bool(in.PersistenceEnabled),
		rtfs.Keyword("last-output"), in.LastOutput.value(),
		rtfs.Keyword("result"), in.Result.value(),
		rtfs.Keyword("cursor"), cursor,
		rtfs.Keyword("dropped-chunks"), rtfs.Int(in.DroppedChunks),
		rtfs.Keyword("reconnects"), rtfs.Int(in.Reconnects),
	)
	if in.CurrentState != nil {
		m = m.Assoc(rtfs.Keyword("current-state"), in.CurrentState.value())
	}
	if in.InitialState != nil {
		m = m.Assoc(rtfs.Keyword("initial-state"), in.InitialState.value())
	}
	if in.Queue != nil {
		items := make([]rtfs.Value, len(*in.Queue))
		for i, q := range *in.Queue {
			items[i] = rtfs.MapOf(rtfs.Keyword("chunk"), q.Chunk.value(), rtfs.Keyword("metadata"), q.Metadata.value(),
				rtfs.Keyword("waiting-ms"), rtfs.Int(q.WaitingMs))
		}
		m = m.Assoc(rtfs.Keyword("queue"), rtfs.NewVector(items...))
	}
	return m
}

func optInt(p *int64) rtfs.Value {
	if p == nil {
		return rtfs.Nil
	}
	return rtfs.Int(*p)
}

func (si StatsInfo) value() rtfs.Value {
	return rtfs.MapOf(
		rtfs.Keyword("processed-chunks"), rtfs.Int(si.ProcessedChunks),
		rtfs.Keyword("queued-chunks"), rtfs.Int(si.QueuedChunks),
		rtfs.Keyword("dropped-chunks"), rtfs.Int(si.DroppedChunks),
		rtfs.Keyword("last-latency-ms"), optInt(si.LastLatencyMs),
		rtfs.Keyword("last-event-epoch-ms"), optInt(si.LastEventEpochMs),
		rtfs.Keyword("chunks-per-second"), rtfs.Float(si.ChunksPerSecond),
		rtfs.Keyword("reconnects"), rtfs.Int(si.Reconnects),
		rtfs.Keyword("bytes-received"), rtfs.Int(si.BytesReceived),
		rtfs.Keyword("outputs"), rtfs.Int(si.Outputs),
	)
}

func (ti TransportInfo) value() rtfs.Value {
	return rtfs.MapOf(
		rtfs.Keyword("kind"), rtfs.Keyword(ti.Kind),
		rtfs.Keyword("auto-connect"), rtfs.Bool(ti.AutoConnect),
		rtfs.Keyword("task-present"), rtfs.Bool(ti.TaskPresent),
		rtfs.Keyword("task-active"), rtfs.Bool(ti.TaskActive),
		rtfs.Keyword("timeout-ms"), rtfs.Int(ti.TimeoutMs),
		rtfs.Keyword("retry-attempts"), rtfs.Int(ti.RetryAttempts),
		rtfs.Keyword("server-url"), rtfs.String(ti.ServerURL),
	)
}

// JSON returns the snapshot's JSON form.
func (in StreamInfo) JSON() []byte {
	b, err := json.Marshal(in)
	if err != nil { // only JSONValue marshals by hand, and it never fails
		return []byte("null")
	}
	return b
}
