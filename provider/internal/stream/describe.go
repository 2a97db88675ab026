package stream

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
)

// A StreamInfo is the typed snapshot of one stream: what Inspect returns as
// an RTFS map (Value) and what the CLI and the MCP server render. The
// struct is the one definition of the inspect shape: its json tags are the
// keys of both the JSON form and the RTFS map, which Value makes from it
// (a test checks docs/streams.md and the dashboard against it), so a
// client of a running serve decodes the JSON back into a StreamInfo. It is
// a copy: the caller owns it.
type StreamInfo struct {
	StreamID          string        `json:"stream-id"`
	Processor         string        `json:"processor"`
	Endpoint          string        `json:"endpoint"`
	Status            StatusInfo    `json:"status"`
	QueueCapacity     int           `json:"queue-capacity"`
	Stats             StatsInfo     `json:"stats"`
	Transport         TransportInfo `json:"transport"`
	ObservedAtEpochMs int64         `json:"observed-at-epoch-ms"`
	StartedAtEpochMs  int64         `json:"started-at-epoch-ms"`
	// EndedAtEpochMs is when the stream ended, while the provider that ran
	// it lives; nil before its end, and for a stream loaded from the store.
	EndedAtEpochMs     *int64    `json:"ended-at-epoch-ms"`
	PersistenceEnabled bool      `json:"persistence-enabled"`
	LastOutput         JSONValue `json:"last-output"`
	Result             JSONValue `json:"result"`
	Cursor             *string   `json:"cursor"` // shortened (DisplayCursor); nil before the first chunk
	DroppedChunks      int64     `json:"dropped-chunks"`
	Reconnects         int64     `json:"reconnects"`
	// Progress is the stream's :progress (progress.go); nil when no result
	// reported any and the stream has no milestones.
	Progress *ProgressInfo `json:"progress"`
	// Failure says why a failed stream is held (StateFailed): the held
	// chunk's :seq, the error with the failing form's position, the
	// attempts; nil in any other state.
	Failure *Failure `json:"failure"`
	// DeadLetters counts the chunks the stream set aside, with the last
	// few (Provider.DeadLetters lists them all).
	DeadLetters DeadLettersInfo `json:"dead-letters"`
	// Programs lists the programs the processor came from, oldest first:
	// the one the stream started with, then each swapped in by an upgrade.
	Programs []ProgramVersion `json:"programs"`
	// CurrentState, InitialState and Queue are nil when InspectOptions
	// left them out.
	CurrentState *JSONValue    `json:"current-state,omitempty"`
	InitialState *JSONValue    `json:"initial-state,omitempty"`
	Queue        *[]QueuedInfo `json:"queue,omitempty"`
	// Stale is set on a snapshot read from the stream's stored records
	// because its owner did not answer (Status.Stale).
	Stale *Stale `json:"stale,omitempty"`
}

// StatusInfo is a stream's :status.
type StatusInfo struct {
	State     State  `json:"state" rtfs:"keyword"`
	Message   string `json:"message,omitempty"`
	EndReason string `json:"end-reason,omitempty" rtfs:"keyword"`
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
	// DroppedOutputs counts the outputs that subscribers which fell behind
	// did not get, by priority (outbox.go).
	DroppedOutputs DroppedOutputsInfo `json:"dropped-outputs"`
}

// DroppedOutputsInfo counts a stream's dropped outputs by priority. Low
// outputs are dropped first, by subscribers that fall behind; immediate and
// normal ones only with a subscriber that was cut off.
type DroppedOutputsInfo struct {
	Immediate int64 `json:"immediate"`
	Normal    int64 `json:"normal"`
	Low       int64 `json:"low"`
}

// TransportInfo is a stream's :transport.
type TransportInfo struct {
	Kind          string `json:"kind" rtfs:"keyword"`
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

func (s *Stream) Info(opts InspectOptions, now time.Time) StreamInfo {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	st := s.statusLocked()
	bound := s.Env.OutputLimit // each value shown is bounded
	in := StreamInfo{
		StreamID: s.ID, Processor: s.Def.ProcName, Endpoint: s.Def.Endpoint,
		Status:        StatusInfo{State: st.State, Message: st.Message, EndReason: st.EndReason},
		QueueCapacity: s.Def.Capacity,
		Stats:         s.statsInfoLocked(),
		Transport: TransportInfo{
			Kind: s.Def.Transport, AutoConnect: s.Env.AutoConnect,
			TaskPresent: s.taskPresent, TaskActive: s.taskActive,
			TimeoutMs: defaultTimeoutMillis, RetryAttempts: s.Env.RetryAttempts,
			ServerURL: RedactURL(s.Def.ServerURL),
		},
		ObservedAtEpochMs: now.UnixMilli(), StartedAtEpochMs: s.Started.UnixMilli(),
		PersistenceEnabled: s.Env.Persistent,
		LastOutput:         JSONValue{s.LastOut, bound}, Result: JSONValue{s.Result, bound},
		DroppedChunks: s.Stats.Dropped, Reconnects: s.Stats.Reconnects,
		Progress:    s.ProgressInfoLocked(now),
		Failure:     st.Failure,
		DeadLetters: s.Dead.Info(),
		Programs:    append([]ProgramVersion(nil), s.History...),
	}
	if s.Cursor != "" {
		c := DisplayCursor(s.Cursor)
		in.Cursor = &c
	}
	if !s.tl.endedAt.IsZero() {
		ms := s.tl.endedAt.UnixMilli()
		in.EndedAtEpochMs = &ms
	}
	if !opts.OmitState {
		in.CurrentState = &JSONValue{s.State, bound}
	}
	if !opts.OmitInitialState {
		in.InitialState = &JSONValue{s.Def.Initial, bound}
	}
	if !opts.OmitQueue {
		q := make([]QueuedInfo, 0, len(s.ctrl)+s.Queue.Len())
		mb := NewMetaBuilder(s.idVal, s.epVal)
		add := func(it *Item) {
			it.shown = true // the caller may read it after the worker is done with it
			q = append(q, QueuedInfo{JSONValue{it.Chunk, bound}, JSONValue{mb.Build(it), bound}, now.Sub(it.Received).Milliseconds()})
		}
		for i := range s.ctrl {
			add(&s.ctrl[i])
		}
		for i := 0; i < s.Queue.Len(); i++ {
			add(s.Queue.At(i))
		}
		in.Queue = &q
	}
	return in
}

func (s *Stream) statsInfoLocked() StatsInfo {
	si := StatsInfo{
		ProcessedChunks: s.Stats.Processed, QueuedChunks: int64(s.Queue.Len() + len(s.ctrl)),
		DroppedChunks: s.Stats.Dropped, Reconnects: s.Stats.Reconnects,
		BytesReceived: s.Stats.Bytes, Outputs: s.Stats.Outputs,
		DroppedOutputs: DroppedOutputsInfo{
			Immediate: s.Out.dropped[PriorityImmediate].Load(),
			Normal:    s.Out.dropped[PriorityNormal].Load(),
			Low:       s.Out.dropped[PriorityLow].Load(),
		},
	}
	if s.Stats.hasLatency {
		ms := s.Stats.latency.Milliseconds()
		si.LastLatencyMs = &ms
	}
	if !s.Stats.lastEvent.IsZero() {
		ms := s.Stats.lastEvent.UnixMilli()
		si.LastEventEpochMs = &ms
	}
	if span := s.Stats.lastDone.Sub(s.Stats.firstDone).Seconds(); s.Stats.timed > s.Stats.firstAt && span > 0 {
		si.ChunksPerSecond = float64(s.Stats.timed-s.Stats.firstAt) / span
	}
	return si
}

// Value is the snapshot as the RTFS inspect map (:mcp.stream.inspect),
// made from the struct by ShapeValue.
func (in StreamInfo) Value() rtfs.Value { return ShapeValue(reflect.ValueOf(in)) }

// ShapeValue is the RTFS form of a value of the inspect shape: a struct is
// a map whose keys are its fields' json names as keywords, in field order
// (an omitempty field left out when empty); a field tagged rtfs:"keyword"
// is a keyword; a JSONValue is its value; a nil pointer is nil; a slice is
// a vector; strings, integers, floats and booleans are themselves.
func ShapeValue(v reflect.Value) rtfs.Value {
	if j, ok := v.Interface().(JSONValue); ok {
		return j.value()
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return rtfs.Nil
		}
		return ShapeValue(v.Elem())
	case reflect.Struct:
		t := v.Type()
		kvs := make([]rtfs.Value, 0, 2*t.NumField())
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || opts == "omitempty" && v.Field(i).IsZero() {
				continue
			}
			val := ShapeValue(v.Field(i))
			if f.Tag.Get("rtfs") == "keyword" {
				val = rtfs.Keyword(v.Field(i).String())
			}
			kvs = append(kvs, rtfs.Keyword(name), val)
		}
		return rtfs.MapOf(kvs...)
	case reflect.Slice:
		items := make([]rtfs.Value, v.Len())
		for i := range items {
			items[i] = ShapeValue(v.Index(i))
		}
		return rtfs.NewVector(items...)
	case reflect.String:
		return rtfs.String(v.String())
	case reflect.Int, reflect.Int64:
		return rtfs.Int(v.Int())
	case reflect.Float64:
		return rtfs.Float(v.Float())
	case reflect.Bool:
		return rtfs.Bool(v.Bool())
	}
	return rtfs.String(fmt.Sprint(v.Interface())) // not in the shape: a test keeps it out
}

// InspectKeys returns the keys of the inspect shape, from StreamInfo's json
// tags: the top-level ones, and those of the maps in it after their
// parent's and a dot ("stats.outputs", "queue.chunk"), in field order.
// Tests hold docs/streams.md and the dashboard to them.
func InspectKeys() []string {
	var keys []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			keys = append(keys, prefix+name)
			ft := f.Type
			for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[JSONValue]() {
				walk(prefix+name+".", ft)
			}
		}
	}
	walk("", reflect.TypeFor[StreamInfo]())
	return keys
}

// JSON returns the snapshot's JSON form.
func (in StreamInfo) JSON() []byte {
	b, err := json.Marshal(in)
	if err != nil { // only JSONValue marshals by hand, and it never fails
		return []byte("null")
	}
	return b
}

// InspectOptions leave keys out of inspect maps. The zero value includes
// everything, as the :include-* flags of :mcp.stream.inspect default to true.
type InspectOptions struct {
	OmitState        bool // leave out :current-state
	OmitInitialState bool // leave out :initial-state
	OmitQueue        bool // leave out :queue
}

func (s *Stream) Inspect(opts InspectOptions, now time.Time) rtfs.Value {
	return s.Info(opts, now).Value()
}

const defaultTimeoutMillis = 30000

// RedactURL removes user info and the query string from a URL, which may
// carry credentials, so that it can appear in inspect output and errors.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<invalid url>"
	}
	if u.User == nil && u.RawQuery == "" {
		return raw
	}
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "redacted"
	}
	return u.String()
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
