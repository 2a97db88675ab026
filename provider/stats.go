package provider

import "time"

// stats are a stream's counters (inspect's :stats, docs/streams.md), guarded
// by the stream's mu.
// Deliver counts bytes and the last event; the worker counts processed
// chunks, outputs and latency; a cancel or an error counts dropped chunks.
type stats struct {
	processed  int64
	dropped    int64
	latency    time.Duration
	hasLatency bool
	lastEvent  time.Time
	firstDone  time.Time
	lastDone   time.Time
	timed      int64 // processed when lastDone was read
	firstAt    int64 // processed when firstDone was read
	reconnects int64
	bytes      int64
	outputs    int64
}

// countLocked counts a processed chunk. Under load it reads the clock for
// every clockEvery-th chunk only (the monotonic clock, time.Since on the
// stream's epoch, which costs half a time.Now): the last latency and the
// rate are then those of a chunk at most clockEvery back, and exact
// whenever the queue runs empty.
func (s *stream) countLocked(it *item) {
	s.stats.processed++
	if s.stats.processed%clockEvery != 0 && s.queue.len() > 0 && !s.stats.firstDone.IsZero() {
		return
	}
	now := s.epoch.Add(time.Since(s.epoch))
	s.stats.latency, s.stats.hasLatency = now.Sub(it.received), true
	if s.stats.firstDone.IsZero() {
		s.stats.firstDone, s.stats.firstAt = now, s.stats.processed
	}
	s.stats.lastDone, s.stats.timed = now, s.stats.processed
}

// clockEvery is how often a busy stream reads the clock (see countLocked).
const clockEvery = 8
