package provider

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// A step is what the worker does next.
type step struct {
	kind     stepKind
	it       item
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
)

// work is the stream's worker goroutine: it takes chunks from the queue in
// order, calls the processor and applies each result, until the stream ends
// or the provider closes.
func (s *stream) work() {
	defer s.p.wg.Done()
	defer s.exit()
	var w waiter
	defer w.stop()
	yields := 0
	for {
		st := s.next()
		switch st.kind {
		case stepStop:
			return
		case stepWait:
			if yields < maxYields && st.deadline.IsZero() {
				// A busy stream's next chunk is usually a moment away:
				// yielding to the transport's goroutine is much cheaper than
				// parking and being woken.
				yields++
				runtime.Gosched()
				continue
			}
			w.wait(s, st.deadline)
		case stepRun:
			yields = 0
			var t0 time.Time
			if s.observed {
				t0 = time.Now()
			}
			res, err := callGuarded(s.ctx, s.proc, st.state, st.it)
			if s.observed {
				s.obs.ProcessorCalled(st.it.seq, t0, time.Since(t0), err)
			}
			out, subs := s.apply(st.it, res, err)
			if s.ps != nil {
				s.save(false)
			}
			if out != nil && s.hasSubscribers(subs) {
				s.publish(s.p.ctx, subs, Event{Kind: EventOutput, StreamID: s.id, Seq: st.it.seq, Output: out})
			}
		}
	}
}

// A waiter parks the worker until it is woken, a deadline passes or the
// stream's context ends. It reuses one timer.
type waiter struct{ timer *time.Timer }

func (w *waiter) wait(s *stream, deadline time.Time) {
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

func (w *waiter) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// callGuarded calls the processor, turning a panic into an error.
func callGuarded(ctx context.Context, p processor, state rtfs.Value, it item) (v rtfs.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("processor panicked: %v", r)
		}
	}()
	return p.call(ctx, state, it.chunk, it.meta)
}

// next decides the worker's next step.
func (s *stream) next() step {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.Terminal() || s.ctx.Err() != nil {
		return step{kind: stepStop}
	}
	if err := s.storeErr(); err != nil {
		s.fail("persistence failed, the stream stopped (its last committed state and cursor are kept): %v", err)
		return step{kind: stepStop}
	}
	if s.st == StatePaused && !s.resumeAt.IsZero() && !time.Now().Before(s.resumeAt) {
		s.st, s.resumeAt = StateActive, time.Time{}
	}
	if it, ok := s.takeLocked(); ok {
		s.idle = false
		return step{kind: stepRun, it: it, state: s.state}
	}
	if s.srcDone && s.queue.len() == 0 && len(s.ctrl) == 0 {
		s.endOfSourceLocked()
		return step{kind: stepStop}
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
func (s *stream) takeLocked() (item, bool) {
	if len(s.ctrl) > 0 {
		it := s.ctrl[0]
		s.ctrl[0] = item{}
		s.ctrl = s.ctrl[1:]
		return it, true
	}
	if s.st == StatePaused {
		for i := 0; i < s.queue.len(); i++ {
			if s.queue.at(i).ctrl != actNone {
				it := s.queue.removeAt(i)
				s.roomMade()
				return it, true
			}
		}
		return item{}, false
	}
	if s.queue.len() == 0 {
		return item{}, false
	}
	it := s.queue.pop()
	if s.queue.len() <= s.lowWater {
		s.roomMade()
	}
	return it, true
}

// endOfSourceLocked ends a stream whose source ended and whose queue is
// empty: :completed with the last output as :result after a clean end,
// :error with the transport's message after a failure.
func (s *stream) endOfSourceLocked() {
	if s.srcErr != nil {
		reason := "error"
		if errors.Is(s.srcErr, transport.ErrSourceLost) {
			reason = "source-lost" // docs/durability.md: a source that cannot resume
		}
		s.finishLocked(StateError, reason, "transport: "+s.srcErr.Error())
		return
	}
	s.result = s.lastOut
	if s.result == nil {
		s.result = rtfs.Nil
	}
	s.finishLocked(StateCompleted, "source-ended", "")
}

// apply applies the processor's result for it (DESIGN §4.2) and returns the
// output to publish, if any, with the stream's subscribers. A result that
// cannot be applied puts the stream in :error and leaves the state as it was.
func (s *stream) apply(it item, res rtfs.Value, err error) (rtfs.Value, []*Subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.Terminal() || (err != nil && s.ctx.Err() != nil) {
		return nil, nil // cancelled or closed while the processor ran
	}
	if err != nil {
		s.fail("processor %s failed on chunk %d: %v", s.proc.name(), it.seq, err)
		return nil, nil
	}
	m, ok := res.(*rtfs.Map)
	if !ok {
		s.fail("processor %s returned an invalid shape on chunk %d: expected a map {:state :action :output}, got %s", s.proc.name(), it.seq, kindOf(res))
		return nil, nil
	}
	act, reason, err := resultAction(m, it.ctrl)
	var after time.Duration
	var timed bool
	if err == nil && act == actPause {
		after, timed, err = resumeAfter(m)
	}
	if err != nil {
		s.fail("processor %s on chunk %d: %v", s.proc.name(), it.seq, err)
		return nil, nil
	}
	s.countLocked(it)
	if v, ok := m.GetKeyword("state"); ok {
		s.state = v
	}
	var out rtfs.Value
	if v, ok := m.GetKeyword("output"); ok && v != rtfs.Nil {
		s.lastOut, out = v, v
		s.stats.outputs++
	}
	s.obs.Directive(actionNames[act], reason)
	s.directLocked(act, out, after, timed, reason)
	return out, s.subs
}

// resultAction returns the directive of a result: its :action, else the
// chunk's own action. An unknown :action is an error naming the valid ones.
func resultAction(m *rtfs.Map, chunkAct action) (action, string, error) {
	v, ok := m.GetKeyword("action")
	if !ok || v == rtfs.Nil {
		return chunkAct, "control-chunk", nil
	}
	act, ok := parseAction(v)
	if !ok {
		return actNone, "", fmt.Errorf("unknown action %s; valid actions are %s", kindOf(v), validActions)
	}
	return act, "processor", nil
}

// countLocked updates the stats for a processed chunk. It reads the
// monotonic clock only (time.Since on the stream's epoch), which costs half
// a time.Now.
func (s *stream) countLocked(it item) {
	now := s.epoch.Add(time.Since(s.epoch))
	s.stats.processed++
	s.stats.latency, s.stats.hasLatency = now.Sub(it.enqueued), true
	if s.stats.firstDone.IsZero() {
		s.stats.firstDone = now
	}
	s.stats.lastDone = now
	s.cursor = it.cursor
	if it.seq >= s.procNext {
		s.procNext = it.seq + 1
	}
	if it.journaled {
		s.ps.markProcessedLocked(it.seq)
	}
}

// directLocked applies a directive. out is the output of the result that
// named it (nil if none).
func (s *stream) directLocked(act action, out rtfs.Value, after time.Duration, timed bool, reason string) {
	switch act {
	case actPause:
		s.st, s.resumeAt = StatePaused, time.Time{}
		if timed {
			s.resumeAt = time.Now().Add(after)
		}
	case actResume:
		s.st, s.resumeAt = StateActive, time.Time{}
	case actCancel:
		s.cancelLocked(reason)
	case actComplete:
		s.result = out
		if s.result == nil {
			s.result = s.lastOut
		}
		if s.result == nil {
			s.result = rtfs.Nil
		}
		s.finishLocked(StateCompleted, reason, "")
	}
}

// fail puts the stream in :error with a formatted message.
func (s *stream) fail(format string, args ...any) {
	// Like a cancel, an error drops and counts the chunks still queued: no
	// one will process them (the final save deletes their journal entries).
	s.dropQueueLocked()
	s.ctrl = nil
	s.finishLocked(StateError, "error", fmt.Sprintf(format, args...))
}

// exit runs when the worker stops: it stops the transport, publishes the end
// of a terminal stream to its subscribers, closes the stream's own
// subscriptions and releases the waiters of Await.
func (s *stream) exit() {
	s.mu.Lock()
	s.cancel()
	final := s.ps != nil && s.st.Terminal()
	s.mu.Unlock()
	if final {
		s.saveFinal()
	}
	s.mu.Lock()
	st := s.statusLocked()
	subs := s.subs
	s.subs, s.exited = nil, true
	s.mu.Unlock()
	s.obs.Ended(st)
	if st.State.Terminal() {
		s.publish(s.p.ctx, subs, Event{Kind: EventEnd, StreamID: s.id, Seq: -1, Status: st})
	}
	for _, sub := range subs {
		sub.Close()
	}
	close(s.done)
}

// saveFinal commits the final progress of a terminal stream and waits for
// it, so that Await and WaitAll see an end that survives a crash. If the
// commit fails, a completed or cancelled stream becomes :error with the
// cause.
func (s *stream) saveFinal() {
	s.save(true)
	err := s.storeErr()
	if err == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st != StateError {
		s.st, s.reason = StateError, "error"
		s.msg = "persistence failed, the stream's end is not stored: " + err.Error()
	}
}
