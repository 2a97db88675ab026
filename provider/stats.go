package provider

import "time"

// stats are a stream's counters (DESIGN §4.3), guarded by the stream's mu.
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
	reconnects int64
	bytes      int64
	outputs    int64
}

// countLocked counts a processed chunk. It reads the monotonic clock only
// (time.Since on the stream's epoch), which costs half a time.Now.
func (s *stream) countLocked(it *item) {
	now := s.epoch.Add(time.Since(s.epoch))
	s.stats.processed++
	s.stats.latency, s.stats.hasLatency = now.Sub(it.received), true
	if s.stats.firstDone.IsZero() {
		s.stats.firstDone = now
	}
	s.stats.lastDone = now
}
