package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// The requests a stream takes from its provider's callers (Pause, Resume,
// Skip, Cancel): each is made under the stream's lock, once the caller's
// context is checked with the lock held, and what it changed is published,
// stored and applied by the worker.

// Control makes change (verb's) to the stream under its lock, once ctx is
// checked with the lock held, and publishes, stores and applies what
// changed.
func (s *Stream) Control(ctx context.Context, verb string, change func(*Stream) error) (Status, error) {
	s.Mu.Lock()
	if err := ctx.Err(); err != nil {
		s.Mu.Unlock()
		return Status{}, fmt.Errorf("%s stream %q: %w", verb, s.ID, err)
	}
	if s.Dormant || s.Upgrade != nil || s.Swapping {
		defer s.Mu.Unlock()
		return Status{}, errDormant(s, verb)
	}
	if s.St.Terminal() {
		st := s.St
		s.Mu.Unlock()
		return Status{}, &EndedError{StreamID: s.ID, Verb: verb, State: st}
	}
	if err := change(s); err != nil {
		s.Mu.Unlock()
		return Status{}, err
	}
	st := s.statusLocked()
	subs := s.Subs
	reconnect := s.reconnect
	s.reconnect = false
	s.Mu.Unlock()
	if reconnect {
		s.connectAgain()
	}
	s.changed(subs)
	if s.Ps != nil {
		s.Ps.changed()
	}
	s.signal()
	return st, nil
}

// PauseChange is Pause's change: a failed stream is not paused.
func PauseChange(s *Stream) error {
	if s.St == StateFailed {
		return fmt.Errorf("cannot pause stream %q: it is failed (%s); resume, skip or cancel it", s.ID, s.Msg)
	}
	if s.St != StatePaused {
		s.obs.Directive("pause", "request") // pausing a paused stream applies nothing
		s.noteLocked(TimelineEvent{Kind: "pause", Source: "request"})
	}
	s.St, s.resumeAt, s.pausedByRequest = StatePaused, time.Time{}, true
	return nil
}

// ResumeChange is Resume's change: a failed stream is repaired (its
// chunk retried, its source connected again).
func ResumeChange(s *Stream) error {
	if s.St == StateFailed {
		if s.resumeFailedLocked() && !s.taskActive {
			s.reconnect = true // its transport returned: it runs again
		}
		return nil
	}
	if s.St != StateActive {
		s.obs.Directive("resume", "request") // resuming an active stream applies nothing
		s.noteLocked(TimelineEvent{Kind: "resume", Source: "request"})
	}
	s.St, s.resumeAt = StateActive, time.Time{}
	return nil
}

// CancelRequest cancels the stream for Cancel: its transport stops, its
// queued chunks are dropped and counted, its status becomes :cancelled. An
// ended stream is left as it is.
func (s *Stream) CancelRequest(ctx context.Context) (Status, error) {
	s.Mu.Lock()
	if err := ctx.Err(); err != nil {
		s.Mu.Unlock()
		return Status{}, fmt.Errorf("cancel stream %q: %w", s.ID, err)
	}
	if s.Dormant || s.Upgrade != nil {
		defer s.Mu.Unlock()
		return Status{}, errDormant(s, "cancel")
	}
	if !s.St.Terminal() {
		s.obs.Directive("cancel", "request")
		s.noteLocked(TimelineEvent{Kind: "cancel", Source: "request"})
		s.cancelLocked("request")
	}
	st := s.statusLocked()
	s.Mu.Unlock()
	s.signal()
	return st, nil
}

// errDormant reports a request to a stream that was recovered without
// connecting (Options.ManualConnect), or could not be recovered, or is
// stopped for an upgrade: it can be inspected, not driven. s.mu is held.
func errDormant(s *Stream, verb string) error {
	switch {
	case s.St == StateUnrecoverable:
		return fmt.Errorf("cannot %s stream %q: it is unrecoverable (%s); give it a processor again (rtfshost upgrade) or remove it", verb, s.ID, s.Msg)
	case s.Upgrade != nil || s.Swapping:
		return fmt.Errorf("cannot %s stream %q: its processor is being swapped; try again in a moment", verb, s.ID)
	}
	return fmt.Errorf("cannot %s stream %q: it was loaded from the store without running (manual connect); inspect only", verb, s.ID)
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

// An UpgradePath says how a stream takes a new processor.
type UpgradePath int

// The ways a stream takes a new processor (PlanUpgrade).
const (
	// UpgradeRecords: the stream does not run (dormant): its records are
	// rewritten, and it is loaded again from them.
	UpgradeRecords UpgradePath = iota
	// UpgradeStop: the stream runs; cancelled, it stops between two chunks
	// with its progress flushed, then its records are rewritten and it is
	// loaded again from them (it is replaced: HandOver).
	UpgradeStop
	// UpgradeInPlace: the stream is failed and its source is a process,
	// which a stop would end; it takes the new processor where it stands
	// (BeginSwap, TakeProgram).
	UpgradeInPlace
)

// PlanUpgrade says how s takes a new processor, and refuses with an error
// wrapping ErrCannotUpgrade (and s's state) a stream that has ended, is
// being upgraded already, or runs a process and is not failed. check is
// called with the name of s's processor, under s's lock, before anything
// changes; its error refuses the upgrade too. For UpgradeStop, s is marked
// as upgrading: once the caller cancels s, stopped closes when its worker
// has stopped between two chunks with its progress flushed.
func (s *Stream) PlanUpgrade(check func(procName string) error) (path UpgradePath, stopped chan struct{}, st State, err error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	process := !s.Dormant && s.Def.Kind.Target == transport.TargetCommand
	switch {
	case s.Upgrade != nil:
		return 0, nil, "", fmt.Errorf("%w: another swap is under way", ErrCannotUpgrade)
	case s.St.Terminal():
		return 0, nil, s.St, fmt.Errorf("%w: it has ended (%s)", ErrCannotUpgrade, s.St)
	case process && s.St == StateFailed && s.Ps != nil:
		return UpgradeInPlace, nil, s.St, nil
	case process:
		return 0, nil, "", fmt.Errorf("%w: its source is a process (:%s), which stopping the stream would end; it can be swapped while it is failed", ErrCannotUpgrade, s.Def.Transport)
	}
	if err := check(s.Def.ProcName); err != nil {
		return 0, nil, "", err
	}
	if s.Dormant {
		return UpgradeRecords, nil, s.St, nil
	}
	s.Upgrade = make(chan struct{})
	return UpgradeStop, s.Upgrade, s.St, nil
}

// HandOver makes next, the stream loaded again after an upgrade, take
// over from s while nobody can reach it yet: s's subscriptions and Done
// channel become next's, and a Subscribe that holds s follows ReplacedBy
// to next. It returns the subscriptions.
func (s *Stream) HandOver(next *Stream) []*Subscription {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	subs := s.Subs
	next.Subs, next.Done = subs, s.Done
	s.Subs, s.Exited = nil, true
	s.ReplacedBy.Store(next)
	return subs
}

// BeginSwap marks s, a failed stream, as taking a new processor in place
// (UpgradeInPlace) and returns its processor's name. A stream no longer
// failed, or already swapping, is refused with an error wrapping
// ErrCannotUpgrade and its state. EndSwap ends the mark.
func (s *Stream) BeginSwap() (procName string, st State, err error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.St != StateFailed || s.Swapping {
		return "", s.St, fmt.Errorf("%w: it is %s, no longer failed, and its source is a process (:%s)", ErrCannotUpgrade, s.St, s.Def.Transport)
	}
	s.Swapping = true
	return s.Def.ProcName, s.St, nil
}

// EndSwap ends what BeginSwap began.
func (s *Stream) EndSwap() {
	s.Mu.Lock()
	s.Swapping = false
	s.Mu.Unlock()
}

// TakeProgram gives s, marked by BeginSwap, the processor proc of program
// version v, and the state, last output and result its rewritten records
// hold, which its store reads and writes with c from now on.
func (s *Stream) TakeProgram(proc Processor, v ProgramVersion, c Codec, state, lastOut, result rtfs.Value) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Proc, s.State, s.LastOut, s.Result = proc, state, lastOut, result
	s.Def.ProcName = proc.Name()
	s.History = append(s.History, v)
	s.Ps.(*StreamStore).Codec = c
}
