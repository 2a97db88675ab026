package stream

import (
	"fmt"
	"time"
)

// A TimelineEvent is something that happened to a stream besides its
// chunks: its start, a directive applied (other than continue), a
// milestone reached (its id in Message), a reconnect of its source, its
// end. The dashboard shows a stream's
// timeline (Provider.Timeline).
type TimelineEvent struct {
	AtEpochMs int64  `json:"at-epoch-ms"`
	Kind      string `json:"kind"`             // start, pause, resume, cancel, complete, milestone, reconnect, end
	Source    string `json:"source,omitempty"` // of a directive: processor, control-chunk, request, timer
	Chunk     int64  `json:"chunk,omitempty"`  // the chunk whose result (or own action) named the directive
	Message   string `json:"message,omitempty"`
}

// timelineCap bounds a stream's timeline: the oldest events leave first.
const timelineCap = 200

// timeline is a stream's recent events, guarded by the stream's mu.
type timeline struct {
	events  []TimelineEvent // ring: the oldest at start when full
	start   int
	dropped int64 // events that left the ring
	endedAt time.Time
}

// noteLocked records ev, now. s.mu is held.
func (s *Stream) noteLocked(ev TimelineEvent) {
	ev.AtEpochMs = time.Now().UnixMilli()
	t := &s.tl
	if len(t.events) < timelineCap {
		t.events = append(t.events, ev)
		return
	}
	t.events[t.start] = ev
	t.start = (t.start + 1) % timelineCap
	t.dropped++
}

// Timeline returns the stream's events, oldest first, and how many older
// ones were left out (Provider.Timeline).
func (s *Stream) Timeline() ([]TimelineEvent, int64) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	t := &s.tl
	out := make([]TimelineEvent, 0, len(t.events))
	out = append(out, t.events[t.start:]...)
	out = append(out, t.events[:t.start]...)
	return out, t.dropped
}

// noteEndLocked records the end of the stream. s.mu is held.
func (s *Stream) noteEndLocked() {
	s.tl.endedAt = time.Now()
	msg := string(s.St)
	if s.reason != "" {
		msg += " (" + s.reason + ")"
	}
	if s.Msg != "" {
		msg += ": " + s.Msg
	}
	s.noteLocked(TimelineEvent{Kind: "end", Message: msg})
}

// noteReconnect records a reconnect of the stream's source.
func (s *Stream) noteReconnect(attempt int, cause error) {
	msg := fmt.Sprintf("attempt %d", attempt)
	if cause != nil {
		msg += ": " + cause.Error()
	}
	s.Mu.Lock()
	s.noteLocked(TimelineEvent{Kind: "reconnect", Message: msg})
	s.Mu.Unlock()
}
