package provider

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The requests a stream takes from its provider's callers (Pause, Resume,
// Skip, Cancel): each is made under the stream's lock, once the caller's
// context is checked with the lock held, and what it changed is published,
// stored and applied by the worker.

// control makes change (verb's) to the stream under its lock, once ctx is
// checked with the lock held, and publishes, stores and applies what
// changed.
func (s *stream) control(ctx context.Context, verb string, change func(*stream) error) (Status, error) {
	s.mu.Lock()
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return Status{}, fmt.Errorf("%s stream %q: %w", verb, s.id, err)
	}
	if s.dormant || s.upgrade != nil || s.swapping {
		defer s.mu.Unlock()
		return Status{}, errDormant(s, verb)
	}
	if s.st.Terminal() {
		st := s.st
		s.mu.Unlock()
		return Status{}, &EndedError{StreamID: s.id, Verb: verb, State: st}
	}
	if err := change(s); err != nil {
		s.mu.Unlock()
		return Status{}, err
	}
	st := s.statusLocked()
	subs := s.subs
	reconnect := s.reconnect
	s.reconnect = false
	s.mu.Unlock()
	if reconnect {
		s.connectAgain()
	}
	s.changed(subs)
	if s.ps != nil {
		s.ps.changed()
	}
	s.signal()
	return st, nil
}

// pauseChange is Pause's change: a failed stream is not paused.
func pauseChange(s *stream) error {
	if s.st == StateFailed {
		return fmt.Errorf("cannot pause stream %q: it is failed (%s); resume, skip or cancel it", s.id, s.msg)
	}
	if s.st != StatePaused {
		s.obs.Directive("pause", "request") // pausing a paused stream applies nothing
		s.noteLocked(TimelineEvent{Kind: "pause", Source: "request"})
	}
	s.st, s.resumeAt, s.pausedByRequest = StatePaused, time.Time{}, true
	return nil
}

// resumeChange is Resume's change: a failed stream is repaired (its
// chunk retried, its source connected again).
func resumeChange(s *stream) error {
	if s.st == StateFailed {
		if s.resumeFailedLocked() && !s.taskActive {
			s.reconnect = true // its transport returned: it runs again
		}
		return nil
	}
	if s.st != StateActive {
		s.obs.Directive("resume", "request") // resuming an active stream applies nothing
		s.noteLocked(TimelineEvent{Kind: "resume", Source: "request"})
	}
	s.st, s.resumeAt = StateActive, time.Time{}
	return nil
}

// cancelRequest cancels the stream for Cancel: its transport stops, its
// queued chunks are dropped and counted, its status becomes :cancelled. An
// ended stream is left as it is.
func (s *stream) cancelRequest(ctx context.Context) (Status, error) {
	s.mu.Lock()
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return Status{}, fmt.Errorf("cancel stream %q: %w", s.id, err)
	}
	if s.dormant || s.upgrade != nil {
		defer s.mu.Unlock()
		return Status{}, errDormant(s, "cancel")
	}
	if !s.st.Terminal() {
		s.obs.Directive("cancel", "request")
		s.noteLocked(TimelineEvent{Kind: "cancel", Source: "request"})
		s.cancelLocked("request")
	}
	st := s.statusLocked()
	s.mu.Unlock()
	s.signal()
	return st, nil
}

// errDormant reports a request to a stream that was recovered without
// connecting (Options.ManualConnect), or could not be recovered, or is
// stopped for an upgrade: it can be inspected, not driven. s.mu is held.
func errDormant(s *stream, verb string) error {
	switch {
	case s.st == StateUnrecoverable:
		return fmt.Errorf("cannot %s stream %q: it is unrecoverable (%s); give it a processor again (rtfshost upgrade) or remove it", verb, s.id, s.msg)
	case s.upgrade != nil || s.swapping:
		return fmt.Errorf("cannot %s stream %q: its processor is being swapped; try again in a moment", verb, s.id)
	}
	return fmt.Errorf("cannot %s stream %q: it was loaded from the store without running (manual connect); inspect only", verb, s.id)
}

// ErrEnded is matched (errors.Is) by the error of Pause, Resume or Skip
// of a stream that has ended (completed, cancelled or errored): nothing
// carries it on. The error is an *EndedError, which says the state.
var ErrEnded = errors.New("the stream has ended")

// An EndedError is the error of a request that needs a stream not ended,
// made of one that has: "cannot resume stream "s": it is cancelled". It
// matches ErrEnded. A request forwarded to another host of a cluster
// gives it too.
type EndedError struct {
	StreamID string
	Verb     string // the request: "pause", "resume" or "skip"
	State    State  // the stream's state, terminal
}

func (e *EndedError) Error() string {
	return fmt.Sprintf("cannot %s stream %q: it is %s", e.Verb, e.StreamID, e.State)
}

// Is reports whether target is ErrEnded.
func (e *EndedError) Is(target error) bool { return target == ErrEnded }
