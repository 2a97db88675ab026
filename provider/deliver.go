package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// Deliver implements transport.Sink: it decodes c (on the transport's
// goroutine, so that decoding runs beside the processor rather than before
// it on the worker's) and appends it to the queue, blocking while the queue
// is full. A chunk without data is no chunk and is ignored. While the
// stream is paused a control chunk is accepted even when the queue is full
// (up to the queue's capacity again), so that the source can resume a
// stream it paused.
//
// In journal mode (a store, and a source that cannot replay) the journal
// hook submits the chunk's journal entry before the chunk is queued, so the
// entry commits no later than the snapshot of the chunk's effect (in the
// same group commit, where that snapshot's delete replaces it). A
// transport's Deliver does not wait for that commit (its source has no
// acknowledgement to give); Provider.Deliver does (deliverAck).
func (s *stream) Deliver(ctx context.Context, c transport.Chunk) error {
	return s.deliver(ctx, c)
}

// deliverAck is Deliver for a producer that takes the return as an
// acknowledgement (Provider.Deliver): in journal mode it also waits until
// the chunk's journal entry is committed.
func (s *stream) deliverAck(ctx context.Context, c transport.Chunk) error {
	if err := s.deliver(ctx, c); err != nil {
		return err
	}
	if s.ps != nil && s.ps.journaling() && len(c.Data) > 0 {
		return s.ps.awaitJournal(ctx)
	}
	return nil
}

func (s *stream) deliver(ctx context.Context, c transport.Chunk) error {
	if len(c.Data) == 0 {
		return nil
	}
	s.decMu.Lock()
	chunk := decodeChunk(&s.dec, c.Data, c.Event, s.takeSpare())
	s.decMu.Unlock()
	ctrl := controlAction(chunk)
	if c.ReceivedAt.IsZero() {
		c.ReceivedAt = time.Now()
	}
	journal := s.ps != nil && s.ps.journaling()
	s.mu.Lock()
	if !s.connected {
		s.connectedLocked() // the origin works: its circuit closes
	}
	s.stats.bytes += int64(len(c.Data))
	if err := s.waitRoomLocked(ctx, ctrl); err != nil {
		s.mu.Unlock()
		return err
	}
	seq := s.seq
	if journal {
		if err := s.ps.journalLocked(ctx, seq, c); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	s.seq++
	if s.rec != nil {
		if err := s.rec.record(seq+1, c); err != nil {
			s.env.log.Warn("recording stopped", "stream", s.id, "error", err)
		}
	}
	if s.observed {
		s.obs.ChunkReceived(len(c.Data))
	}
	if ctrl != actNone {
		s.sentCtrl = true
	}
	s.enqueueLocked(c, chunk, ctrl, seq, journal)
	s.spareLocked()
	wake := s.wakeLocked()
	s.mu.Unlock()
	if wake {
		s.signal()
	}
	return nil
}

// waitRoomLocked waits, releasing mu meanwhile, until the queue has room for
// a chunk whose directive is ctrl, the stream ends or ctx ends.
func (s *stream) waitRoomLocked(ctx context.Context, ctrl action) error {
	for {
		if s.st.Terminal() || s.ctx.Err() != nil {
			return fmt.Errorf("stream %q (%s): %w", s.id, s.st, errEnded)
		}
		full := s.queue.len() >= s.def.capacity
		if !full || (ctrl != actNone && s.st == StatePaused && len(s.ctrl) < s.def.capacity) {
			return nil
		}
		if s.space == nil {
			s.space = make(chan struct{})
		}
		space := s.space
		s.mu.Unlock()
		select {
		case <-space:
		case <-s.ctx.Done():
		case <-ctx.Done():
			s.mu.Lock()
			return ctx.Err()
		}
		s.mu.Lock()
	}
}

// enqueueLocked appends c, decoded as chunk and numbered seq, to the queue,
// or, for a control chunk that jumps a full queue, to the control list.
// journaled says that the chunk is in the stream's journal.
func (s *stream) enqueueLocked(c transport.Chunk, chunk rtfs.Value, ctrl action, seq int64, journaled bool) {
	it := item{chunk: chunk, event: c.Event, id: c.ID, fd: c.FD, received: c.ReceivedAt, seq: seq, ctrl: ctrl, journaled: journaled}
	s.stats.lastEvent = c.ReceivedAt
	if s.queue.len() >= s.def.capacity {
		s.ctrl = append(s.ctrl, it)
		return
	}
	s.queue.push(it, s.def.capacity)
}

// requeueLocked puts a journaled chunk back at recovery (c decoded as chunk,
// numbered seq): at the back of the queue, whatever its length. Recovery
// requeues the whole journal, in seq order, before the transport starts, so
// the journal is processed in order and before anything newer; it may hold
// more than the capacity (the chunk in the processor, a full queue and the
// control chunks that jumped it), and a Deliver then waits until the queue is
// short again.
func (s *stream) requeueLocked(c transport.Chunk, chunk rtfs.Value, seq int64) {
	s.stats.lastEvent = c.ReceivedAt
	s.queue.push(item{chunk: chunk, event: c.Event, id: c.ID, fd: c.FD, received: c.ReceivedAt, seq: seq,
		ctrl: controlAction(chunk), journaled: true}, s.def.capacity)
}

// Reconnecting implements transport.ReconnectObserver.
func (s *stream) Reconnecting(attempt int, _ time.Duration, cause error) {
	s.mu.Lock()
	s.stats.reconnects++
	obs := s.obs
	s.mu.Unlock()
	s.noteReconnect(attempt, cause)
	obs.Reconnecting(attempt, cause)
}

// wakeLocked reports whether a chunk just queued must wake the worker: only
// when the worker found nothing to do, so that a busy worker costs its
// producer no channel operation per chunk. The worker sets idle under mu
// before it parks, and its wake channel holds one token, so no chunk is
// missed: either the worker sees the chunk when it looks for work, or the
// token is waiting when it parks.
func (s *stream) wakeLocked() bool {
	wake := s.idle
	s.idle = false
	return wake
}

// signal wakes the worker without blocking.
func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// roomMade releases a Deliver waiting for room. Called with mu held.
func (s *stream) roomMade() {
	if s.space != nil {
		close(s.space)
		s.space = nil
	}
}

// ChildStarted implements transport.ChildObserver: the group's record is
// submitted to the store (not waited for: a crash before it commits leaves
// the group to its keeper alone). A stream that has ended records no more.
func (s *stream) ChildStarted(c transport.ChildProcess) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ps == nil || s.exited || s.st.Terminal() {
		return
	}
	s.ps.childLocked(c, true)
}

// ChildExited implements transport.ChildObserver: the group's record is
// deleted.
func (s *stream) ChildExited(c transport.ChildProcess) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ps != nil {
		s.ps.childLocked(c, false)
	}
}

// AttemptFailed implements transport.AttemptGate: it counts a failed attempt
// of the stream's transport and says whether another may follow.
func (s *stream) AttemptFailed(cause error) error {
	s.mu.Lock()
	s.connected, s.failCounted = false, true
	s.mu.Unlock()
	s.env.breakers.Failure(s.def.origin, cause)
	return s.env.breakers.Allow(s.def.origin)
}

// AllowAttempt implements transport.AttemptGate.
func (s *stream) AllowAttempt() error { return s.env.breakers.Allow(s.def.origin) }
