package stream

import "time"

// Stats are a stream's counters (inspect's :stats, docs/streams.md), guarded
// by the stream's mu.
// Deliver counts bytes and the last event; the worker counts processed
// chunks, outputs and latency; a cancel or an error counts dropped chunks.
type Stats struct {
	Processed  int64
	Dropped    int64
	latency    time.Duration
	hasLatency bool
	lastEvent  time.Time
	firstDone  time.Time
	lastDone   time.Time
	timed      int64 // processed when lastDone was read
	firstAt    int64 // processed when firstDone was read
	Reconnects int64
	Bytes      int64
	Outputs    int64
}

// countLocked counts a processed chunk. Under load it reads the clock for
// every clockEvery-th chunk only (the monotonic clock, time.Since on the
// stream's epoch, which costs half a time.Now): the last latency and the
// rate are then those of a chunk at most clockEvery back, and exact
// whenever the queue runs empty.
func (s *Stream) countLocked(it *Item) {
	s.Stats.Processed++
	if s.Stats.Processed%clockEvery != 0 && s.Queue.Len() > 0 && !s.Stats.firstDone.IsZero() {
		return
	}
	now := s.epoch.Add(time.Since(s.epoch))
	s.Stats.latency, s.Stats.hasLatency = now.Sub(it.Received), true
	if s.Stats.firstDone.IsZero() {
		s.Stats.firstDone, s.Stats.firstAt = now, s.Stats.Processed
	}
	s.Stats.lastDone, s.Stats.timed = now, s.Stats.Processed
}

// clockEvery is how often a busy stream reads the clock (see countLocked).
const clockEvery = 8
