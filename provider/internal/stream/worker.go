package stream

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
)

// The worker: one goroutine per stream that takes chunks from the queue in
// order, calls the processor (invoke.go) with each, applies
// the result (directive.go), hands the stream's progress to persistence
// (persist.go) and publishes the output (subscribe.go).

// A step is what the worker does next.
type step struct {
	kind     stepKind
	it       Item
	state    rtfs.Value
	deadline time.Time // for stepWait: when a pause resumes by itself
}

type stepKind uint8

// maxYields bounds how often an idle worker yields before it parks.
const maxYields = 2

const (
	stepStop stepKind = iota
	stepWait
	stepRun
	stepSave // nothing to process, but progress to store
)

// A worker is the state of a stream's worker goroutine that no other
// goroutine touches: the metadata builder, and how it waits.
type worker struct {
	s      *Stream
	meta   metaBuilder
	wait   waiter
	yields int
}

// work is the stream's worker goroutine: it runs until the stream ends or
// the provider closes.
func (s *Stream) work() {
	defer s.Env.Wg.Done()
	defer s.exit()
	w := &worker{s: s, meta: NewMetaBuilder(s.idVal, s.epVal)}
	defer w.wait.stop()
	for w.step() {
	}
}

// step does one step and reports whether to go on.
func (w *worker) step() bool {
	s := w.s
	st := s.next()
	for st.kind == stepRun {
		w.yields = 0
		st = w.run(&st.it, st.state)
	}
	switch st.kind {
	case stepStop:
		return false
	case stepSave:
		s.Ps.save()
	case stepWait:
		if w.yields < maxYields && st.deadline.IsZero() {
			// A busy stream's next chunk is usually a moment away:
			// yielding to the transport's goroutine is much cheaper than
			// parking and being woken.
			w.yields++
			runtime.Gosched()
			return true
		}
		s.Mu.Lock()
		s.dropSparesLocked()
		s.Mu.Unlock()
		w.wait.wait(s, st.deadline)
	}
	return true
}

// run takes one chunk through the processor and returns the next step,
// decided in the same critical section as the result is applied. A chunk
// the processor fails on is tried again under the stream's :on-error
// policy, then held, set aside or ends the stream (failure.go).
func (w *worker) run(it *Item, state rtfs.Value) step {
	s := w.s
	var meta rtfs.Value = rtfs.Nil
	if s.Proc.WantsMeta() {
		meta = w.meta.Build(it)
	}
	for attempt := 1; ; attempt++ {
		var t0 time.Time
		if s.observed {
			t0 = time.Now()
		}
		res, err := CallGuarded(s.ctx, s.Proc, state, it, meta)
		if err == nil {
			err = CheckOutput(res, s.Env.OutputLimit)
		}
		if s.observed {
			s.obs.ProcessorCalled(it.Number(), t0, time.Since(t0), err)
		}
		s.Mu.Lock()
		ev, subs, ferr := s.applyLocked(it, res, err)
		if ferr != nil && attempt <= s.Def.OnError.Retry && s.ctx.Err() == nil {
			s.Mu.Unlock()
			if !w.wait.sleep(s, s.Def.OnError.retryDelay(attempt)) {
				return s.next() // cancelled or closed meanwhile
			}
			continue
		}
		if ferr != nil {
			s.failChunkLocked(it, ferr, attempt)
		} else if err == nil && s.Proc.letGo() {
			s.reclaimLocked(it)
		}
		next := s.nextLocked()
		s.Mu.Unlock()
		if s.Ps != nil {
			s.Ps.changed()
		}
		if ev.Kind != 0 && s.hasSubscribers(subs) {
			s.publish(s.Env.Ctx, subs, ev)
		}
		if ev.Kind != EventOutput {
			s.changed(subs) // processed without an output
		}
		return next
	}
}

// CheckOutput refuses a result whose :output would pass the output limit
// once encoded for a subscriber or a client: a value that shares structure
// is written in full there, however little memory it takes. The check
// counts at most the limit's worth, and runs before the result is applied,
// so the stream keeps its last state.
func CheckOutput(res rtfs.Value, limit int64) error {
	m, ok := res.(*rtfs.Map)
	if !ok {
		return nil // applyLocked reports the shape
	}
	out, ok := m.GetKeyword("output")
	if !ok {
		return nil
	}
	if err := rtfs.CheckOutputSize(out, limit); err != nil {
		return fmt.Errorf("its :output is too large to send (a value that shares structure is sent in full): %w", err)
	}
	return nil
}

// A waiter parks the worker until it is woken, a deadline passes or the
// stream's context ends. It reuses one timer.
type waiter struct{ timer *time.Timer }

func (w *waiter) wait(s *Stream, deadline time.Time) {
	var tick <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if w.timer == nil {
			w.timer = time.NewTimer(d)
		} else {
			w.timer.Reset(d)
		}
		tick = w.timer.C
	}
	select {
	case <-s.wake:
	case <-tick:
	case <-s.ctx.Done():
	}
}

// sleep waits d, or until the stream's context ends; it reports whether d
// passed.
func (w *waiter) sleep(s *Stream, d time.Duration) bool {
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	select {
	case <-w.timer.C:
		return true
	case <-s.ctx.Done():
		if !w.timer.Stop() {
			<-w.timer.C
		}
		return false
	}
}

func (w *waiter) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// CallGuarded calls the processor on chunk it, turning a panic into an
// error.
func CallGuarded(ctx context.Context, p Processor, state rtfs.Value, it *Item, meta rtfs.Value) (v rtfs.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("processor panicked: %v", r)
		}
	}()
	p.begin(it.Number(), it.ID)
	return p.Call(ctx, state, it.Chunk, meta)
}

// next decides the worker's next step.
func (s *Stream) next() step {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.nextLocked()
}

func (s *Stream) nextLocked() step {
	if s.St.Terminal() || s.ctx.Err() != nil {
		return step{kind: stepStop}
	}
	if err := s.storeErr(); err != nil {
		if movedErr(err) {
			s.Moved.Store(true)
			s.Msg = "another host took the stream over; it stopped here: " + err.Error()
			return step{kind: stepStop}
		}
		s.fail("persistence failed, the stream stopped (its last committed state and cursor are kept): %v", err)
		return step{kind: stepStop}
	}
	if s.St == StatePaused && !s.resumeAt.IsZero() && !time.Now().Before(s.resumeAt) {
		s.St, s.resumeAt = StateActive, time.Time{}
		s.obs.Directive("resume", "timer") // :resume-after-ms ran out
		s.noteLocked(TimelineEvent{Kind: "resume", Source: "timer"})
	}
	if s.St == StateActive && (s.held != nil || s.Queue.Len() > 0 || len(s.ctrl) > 0) {
		s.holdForSpaceLocked() // a disk about to refuse writes holds the stream (space.go)
	}
	if s.St != StateFailed {
		if it, ok := s.takeHeldLocked(); ok {
			s.idle = false
			return step{kind: stepRun, it: it, state: s.State}
		}
		for {
			it, ok := s.takeLocked()
			if !ok {
				break
			}
			if s.skipTakenLocked(&it) {
				continue // set aside by Skip
			}
			s.idle = false
			return step{kind: stepRun, it: it, state: s.State}
		}
		if s.srcDone && s.Queue.Len() == 0 && len(s.ctrl) == 0 && s.endOfSourceLocked() {
			return step{kind: stepStop}
		}
	}
	if s.Ps != nil && s.Ps.pendingLocked() {
		return step{kind: stepSave}
	}
	s.idle = true
	s.roomMade() // a worker that stops taking chunks leaves no Deliver waiting with room free
	return step{kind: stepWait, deadline: s.resumeAt}
}

// takeLocked takes the next chunk to process: first the control chunks that
// jumped a full queue, then, while paused, the first control chunk in the
// queue, else the queue's front when active. A Deliver waiting for room in
// the active queue is released once a quarter of the queue is free (lowWater)
// rather than on every chunk, so that a source the worker cannot keep up
// with wakes once per batch instead of once per chunk; next releases it at
// once when the worker stops taking chunks, so the queue never stays short
// of full while the source waits.
func (s *Stream) takeLocked() (Item, bool) {
	if len(s.ctrl) > 0 {
		it := s.ctrl[0]
		s.ctrl[0] = Item{}
		s.ctrl = s.ctrl[1:]
		return it, true
	}
	if s.St == StatePaused {
		for i := 0; i < s.Queue.Len(); i++ {
			if s.Queue.At(i).Ctrl != ActNone {
				it := s.Queue.RemoveAt(i)
				s.roomMade()
				return it, true
			}
		}
		return Item{}, false
	}
	if s.Queue.Len() == 0 {
		return Item{}, false
	}
	it := s.Queue.Pop()
	if s.Queue.Len() <= s.lowWater {
		s.roomMade()
	}
	return it, true
}

// exit runs when the worker stops: it stops the transport, stores the
// stream's last progress (and waits for it when the stream has ended),
// publishes the end of a terminal stream to its subscribers, closes the
// stream's own subscriptions and releases the waiters of Await.
func (s *Stream) exit() {
	if s.Rec != nil {
		defer s.Rec.Close()
	}
	s.Mu.Lock()
	s.Cancel()
	terminal := s.St.Terminal()
	s.Mu.Unlock()
	moved := s.Moved.Load()
	if s.Ps != nil && !moved {
		if terminal {
			s.saveFinal()
		} else {
			s.Ps.Flush()
		}
	}
	moved = s.Moved.Load() // saveFinal may have found it moved
	s.Mu.Lock()
	if s.Upgrade != nil && !terminal && !moved {
		// Stopped for an upgrade: the stream that replaces it takes
		// over its subscriptions and done (upgrade.go).
		close(s.Upgrade)
		s.Mu.Unlock()
		return
	}
	st := s.statusLocked()
	subs := s.Subs
	s.Subs, s.Exited = nil, true
	s.Mu.Unlock()
	s.obs.Ended(st)
	switch {
	case moved:
		st.Message = "the stream moved to another host of the cluster (this host lost it); ask any host for it"
		s.publish(s.Env.Ctx, subs, Event{Kind: EventEnd, StreamID: s.ID, Seq: -1, Status: st})
	case st.State.Terminal():
		s.publish(s.Env.Ctx, subs, Event{Kind: EventEnd, StreamID: s.ID, Seq: -1, Status: st})
	}
	for _, sub := range subs {
		sub.Close()
	}
	if moved || (terminal && s.storeErr() == nil) {
		s.release()
	}
	if moved {
		s.Env.Log.Warn("cluster: another host took the stream over; it stopped here without writing", "stream", s.ID, "err", s.storeErr())
		s.Env.Forget(s)
	}
	close(s.Done)
}

// release gives up an ended stream, or forgets one that moved.
func (s *Stream) release() {
	c := s.Env.Cluster
	if c == nil {
		return
	}
	if s.Moved.Load() {
		c.Forget(s.ID)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Release(ctx, s.ID, true); err != nil {
		s.Env.Log.Warn("cluster: an ended stream not released", "stream", s.ID, "err", err)
	}
}

// saveFinal commits the final progress of a terminal stream and waits for
// it, so that Await and WaitAll see an end that survives a crash. If the
// commit fails, a completed or cancelled stream becomes :error with the
// cause.
func (s *Stream) saveFinal() {
	s.Ps.saveFinal()
	err := s.storeErr()
	if err == nil {
		return
	}
	if movedErr(err) {
		s.Moved.Store(true) // its end is another host's to reach
		return
	}
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.St != StateError {
		s.St, s.reason = StateError, "error"
		s.Msg = "persistence failed, the stream's end is not stored: " + err.Error()
	}
}

// movedErr reports whether err says that another host took the stream over.
func movedErr(err error) bool { return errors.Is(err, persistence.ErrFenced) }

// storeErr returns the stream's store error, if any.
func (s *Stream) storeErr() error {
	if s.Ps == nil {
		return nil
	}
	return s.Ps.Err()
}

// holdForSpaceLocked holds the active stream s as failed when its store
// is about to refuse writes, and reports whether it did. s.mu is held.
func (s *Stream) holdForSpaceLocked() bool {
	if s.St != StateActive {
		return false
	}
	sc := s.Env.Space
	if sc == nil {
		return false
	}
	err := sc.CheckSpace()
	if err == nil {
		return false
	}
	s.obs.Held(FailureStore)
	s.holdLocked(&Failure{Kind: FailureStore, Error: err.Error(), Attempts: 1, AtEpochMs: time.Now().UnixMilli()})
	return true
}
