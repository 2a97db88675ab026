package stream

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
// acknowledgement to give); Provider.Deliver does (DeliverAck).
func (s *Stream) Deliver(ctx context.Context, c transport.Chunk) error {
	return s.deliver(ctx, c)
}

// DeliverAck is Deliver for a producer that takes the return as an
// acknowledgement (Provider.Deliver): in journal mode it also waits until
// the chunk's journal entry is committed.
func (s *Stream) DeliverAck(ctx context.Context, c transport.Chunk) error {
	if err := s.deliver(ctx, c); err != nil {
		return err
	}
	if s.Ps != nil && s.Ps.journaling() && len(c.Data) > 0 {
		return s.Ps.awaitJournal(ctx)
	}
	return nil
}

func (s *Stream) deliver(ctx context.Context, c transport.Chunk) error {
	if len(c.Data) == 0 {
		return nil
	}
	s.decMu.Lock()
	chunk := DecodeChunkInto(&s.dec, c.Data, c.Event, s.takeSpare())
	s.decMu.Unlock()
	ctrl := ControlAction(chunk)
	if c.ReceivedAt.IsZero() {
		c.ReceivedAt = time.Now()
	}
	journal := s.Ps != nil && s.Ps.journaling()
	s.Mu.Lock()
	if !s.connected {
		s.connectedLocked() // the origin works: its circuit closes
	}
	s.Stats.Bytes += int64(len(c.Data))
	if err := s.waitRoomLocked(ctx, ctrl); err != nil {
		s.Mu.Unlock()
		return err
	}
	seq := s.seq
	if journal {
		if err := s.Ps.journalLocked(ctx, seq, c); err != nil {
			s.Mu.Unlock()
			return err
		}
	}
	s.seq++
	if s.Rec != nil {
		if err := s.Rec.record(seq+1, c); err != nil {
			s.Env.Log.Warn("recording stopped", "stream", s.ID, "error", err)
		}
	}
	if s.observed {
		s.obs.ChunkReceived(len(c.Data))
	}
	if ctrl != ActNone {
		s.sentCtrl = true
	}
	s.enqueueLocked(c, chunk, ctrl, seq, journal)
	s.spareLocked()
	wake := s.wakeLocked()
	s.Mu.Unlock()
	if wake {
		s.signal()
	}
	return nil
}

// waitRoomLocked waits, releasing mu meanwhile, until the queue has room for
// a chunk whose directive is ctrl, the stream ends or ctx ends.
func (s *Stream) waitRoomLocked(ctx context.Context, ctrl Action) error {
	for {
		if s.St.Terminal() || s.ctx.Err() != nil {
			return fmt.Errorf("stream %q (%s): %w", s.ID, s.St, ErrDeliverEnded)
		}
		full := s.Queue.Len() >= s.Def.Capacity
		if !full || (ctrl != ActNone && s.St == StatePaused && len(s.ctrl) < s.Def.Capacity) {
			return nil
		}
		if s.Space == nil {
			s.Space = make(chan struct{})
		}
		space := s.Space
		s.Mu.Unlock()
		select {
		case <-space:
		case <-s.ctx.Done():
		case <-ctx.Done():
			s.Mu.Lock()
			return ctx.Err()
		}
		s.Mu.Lock()
	}
}

// enqueueLocked appends c, decoded as chunk and numbered seq, to the queue,
// or, for a control chunk that jumps a full queue, to the control list.
// journaled says that the chunk is in the stream's journal.
func (s *Stream) enqueueLocked(c transport.Chunk, chunk rtfs.Value, ctrl Action, seq int64, journaled bool) {
	it := Item{Chunk: chunk, Event: c.Event, ID: c.ID, Fd: c.FD, Received: c.ReceivedAt, Seq: seq, Ctrl: ctrl, journaled: journaled}
	s.Stats.lastEvent = c.ReceivedAt
	if s.Queue.Len() >= s.Def.Capacity {
		s.ctrl = append(s.ctrl, it)
		return
	}
	s.Queue.Push(it, s.Def.Capacity)
}

// requeueLocked puts a journaled chunk back at recovery (c decoded as chunk,
// numbered seq): at the back of the queue, whatever its length. Recovery
// requeues the whole journal, in seq order, before the transport starts, so
// the journal is processed in order and before anything newer; it may hold
// more than the capacity (the chunk in the processor, a full queue and the
// control chunks that jumped it), and a Deliver then waits until the queue is
// short again.
func (s *Stream) requeueLocked(c transport.Chunk, chunk rtfs.Value, seq int64) {
	s.Stats.lastEvent = c.ReceivedAt
	s.Queue.Push(Item{Chunk: chunk, Event: c.Event, ID: c.ID, Fd: c.FD, Received: c.ReceivedAt, Seq: seq,
		Ctrl: ControlAction(chunk), journaled: true}, s.Def.Capacity)
}

// Reconnecting implements transport.ReconnectObserver.
func (s *Stream) Reconnecting(attempt int, _ time.Duration, cause error) {
	s.Mu.Lock()
	s.Stats.Reconnects++
	obs := s.obs
	s.Mu.Unlock()
	s.noteReconnect(attempt, cause)
	obs.Reconnecting(attempt, cause)
}

// wakeLocked reports whether a chunk just queued must wake the worker: only
// when the worker found nothing to do, so that a busy worker costs its
// producer no channel operation per chunk. The worker sets idle under mu
// before it parks, and its wake channel holds one token, so no chunk is
// missed: either the worker sees the chunk when it looks for work, or the
// token is waiting when it parks.
func (s *Stream) wakeLocked() bool {
	wake := s.idle
	s.idle = false
	return wake
}

// signal wakes the worker without blocking.
func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// roomMade releases a Deliver waiting for room. Called with mu held.
func (s *Stream) roomMade() {
	if s.Space != nil {
		close(s.Space)
		s.Space = nil
	}
}

// ChildStarted implements transport.ChildObserver: the group's record is
// submitted to the store (not waited for: a crash before it commits leaves
// the group to its keeper alone). A stream that has ended records no more.
func (s *Stream) ChildStarted(c transport.ChildProcess) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.Ps == nil || s.Exited || s.St.Terminal() {
		return
	}
	s.Ps.childLocked(c, true)
}

// ChildExited implements transport.ChildObserver: the group's record is
// deleted.
func (s *Stream) ChildExited(c transport.ChildProcess) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.Ps != nil {
		s.Ps.childLocked(c, false)
	}
}

// AttemptFailed implements transport.AttemptGate: it counts a failed attempt
// of the stream's transport and says whether another may follow.
func (s *Stream) AttemptFailed(cause error) error {
	s.Mu.Lock()
	s.connected, s.failCounted = false, true
	s.Mu.Unlock()
	s.Env.Breakers.Failure(s.Def.Origin, cause)
	return s.Env.Breakers.Allow(s.Def.Origin)
}

// AllowAttempt implements transport.AttemptGate.
func (s *Stream) AllowAttempt() error { return s.Env.Breakers.Allow(s.Def.Origin) }
