package stream

import (
	"errors"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// A failure's way through a stream, in the order it travels:
//
//	the worker (worker.go) calls the processor; a call that throws, runs
//	past its budget or returns what is not a result changes nothing
//	(applyLocked), and comes here as the chunk's failure;
//	the stream's :on-error policy (ErrorPolicy) retries the chunk, with
//	backoff, up to :retry times (retryDelay);
//	then it holds the stream as StateFailed (holdLocked), sets the chunk
//	aside as a dead letter (deadletter.go) and goes on, or ends the stream
//	in :error as releases before it did;
//	a held stream is moved on by Resume (the chunk again, with the
//	processor it has then: an Upgrade may have swapped it), Skip (the chunk
//	to the dead letters), or Cancel.
//
// Held, the stream keeps the state after the chunk before; the failed chunk
// is kept in memory (hold.held) and stays where its source keeps it: the
// cursor is not moved past it (a source that replays sends it again after
// a restart), and its journal entry is not deleted (a source that cannot
// replay). The progress record stores the status and the Failure, so a
// stream recovered after a crash is held again, and its chunk comes back
// first, from its source or its journal.
//
// A source that gave up after its retries (failSource) is held the same
// way, kind "source", once the chunks it delivered are processed; Resume
// connects it again from the stream's cursor (resumeSource).

// The kinds of Failure.
const (
	// FailureProcessor: the processor failed on the chunk Failure.Seq.
	FailureProcessor = "processor"
	// FailureSource: the stream's source gave up after its retries.
	FailureSource = "source"
	// FailureStore: the store refused a commit (a full disk).
	FailureStore = "store"
)

// A Failure is why a stream is held as StateFailed: Status.Failure and
// inspect's :failure. It is a copy the caller owns.
type Failure struct {
	// Kind is FailureProcessor, FailureSource or FailureStore.
	Kind string `json:"kind" rtfs:"keyword"`
	// Seq is the :seq of the held chunk (from 1), which Resume processes
	// again and Skip sets aside; 0 when no chunk is held (a source that
	// gave up).
	Seq int64 `json:"seq"`
	// Error is what failed: for a processor, "processor NAME failed on
	// chunk N: " and the error with the failing form's position.
	Error string `json:"error"`
	// Attempts counts the calls that failed on the chunk: the first and
	// the :on-error retries (and the Resumes that failed again).
	Attempts int64 `json:"attempts"`
	// AtEpochMs is when the last attempt failed, in Unix milliseconds.
	AtEpochMs int64 `json:"at-epoch-ms"`
}

// What a stream does with a chunk whose retries are spent (ErrorPolicy.Then).
const (
	ThenHold = "hold" // the stream is held as StateFailed (the default)
	ThenSkip = "skip" // the chunk goes to the dead letters and the stream goes on
	ThenEnd  = "end"  // the stream ends in StateError
)

// An ErrorPolicy is a stream's :on-error start key: what a failure of its
// processor on a chunk does. The zero value holds the stream at once.
type ErrorPolicy struct {
	// Retry is how many times the chunk is tried again, on the same state,
	// before Then applies (0 to 100).
	Retry int
	// Backoff is the wait before the first retry; each next one waits
	// twice as long, at most maxRetryDelay.
	Backoff time.Duration
	// Then is ThenHold ("" means it), ThenSkip or ThenEnd.
	Then string
}

// Bounds of an :on-error policy.
const (
	maxRetries    = 100
	maxBackoff    = 10 * time.Minute
	maxRetryDelay = 10 * time.Minute
)

// ParseErrorPolicy reads an :on-error map, {:retry 3 :backoff-ms 200 :then
// :skip}: every key optional, :then one of :hold (the default), :skip or
// :end. An error names the key and what it takes.
func ParseErrorPolicy(v rtfs.Value) (ErrorPolicy, error) {
	var pol ErrorPolicy
	m, ok := v.(*rtfs.Map)
	if !ok {
		return pol, fmt.Errorf("must be a map such as {:retry 3 :backoff-ms 200 :then :skip}, got %s", KindOf(v))
	}
	var err error
	m.Range(func(k, val rtfs.Value) bool {
		name := ""
		switch k := k.(type) {
		case rtfs.Keyword:
			name = string(k)
		case rtfs.String:
			name = string(k)
		}
		switch name {
		case "retry":
			n, isInt := val.(rtfs.Int)
			if !isInt || n < 0 || n > maxRetries {
				err = fmt.Errorf(":retry must be an int from 0 to %d, got %s", maxRetries, KindOf(val))
				return false
			}
			pol.Retry = int(n)
		case "backoff-ms":
			n, isInt := val.(rtfs.Int)
			if !isInt || n < 0 || time.Duration(n)*time.Millisecond > maxBackoff {
				err = fmt.Errorf(":backoff-ms must be an int from 0 to %d, got %s", maxBackoff.Milliseconds(), KindOf(val))
				return false
			}
			pol.Backoff = time.Duration(n) * time.Millisecond
		case "then":
			var t string
			switch val := val.(type) {
			case rtfs.Keyword:
				t = string(val)
			case rtfs.String:
				t = string(val)
			}
			if t != ThenHold && t != ThenSkip && t != ThenEnd {
				err = fmt.Errorf(":then must be :hold, :skip or :end, got %s", KindOf(val))
				return false
			}
			pol.Then = t
		default:
			err = fmt.Errorf("unknown key %s; the keys are :retry :backoff-ms :then", KindOf(k))
			return false
		}
		return true
	})
	if pol.Then == "" {
		pol.Then = ThenHold
	}
	return pol, err
}

// then is the policy's Then, ThenHold when unset.
func (pol ErrorPolicy) then() string {
	if pol.Then == "" {
		return ThenHold
	}
	return pol.Then
}

// retryDelay is the wait before retry n (from 1).
func (pol ErrorPolicy) retryDelay(n int) time.Duration {
	d := pol.Backoff
	for i := 1; i < n && d < maxRetryDelay; i++ {
		d *= 2
	}
	return min(d, maxRetryDelay)
}

// hold is what a stream keeps of its failures, guarded by its mu.
type hold struct {
	failure *Failure // set while the stream is StateFailed
	// held is the failed chunk while it is in memory: Resume processes it
	// first. After a restart it is nil until the source or the journal
	// sends it again (it is then the queue's front).
	held *Item
	// skipping is the failure of a chunk Skip set aside before it came
	// back (a recovered stream): the worker sets it aside when it comes.
	skipping *Failure
	Dead     deadLetters // deadletter.go
	// reconnect: a Resume asks for the source to be connected again
	// (control.go launches it once mu is released).
	reconnect bool
	// Swapping: Upgrade swaps the processor of the held stream in place
	// (upgradeHeld); Resume and Skip wait for it to finish.
	Swapping bool
}

// failChunkLocked decides what the failure err of chunk it, after attempts
// failed calls, does under the stream's :on-error policy once its retries
// are spent: hold the stream, set the chunk aside, or end the stream.
func (s *Stream) failChunkLocked(it *Item, err error, attempts int) {
	f := &Failure{Kind: FailureProcessor, Seq: it.Number(), Error: err.Error(), Attempts: int64(attempts), AtEpochMs: time.Now().UnixMilli()}
	if prev := s.failure; prev != nil && prev.Kind == FailureProcessor && prev.Seq == f.Seq {
		f.Attempts += prev.Attempts // a Resume that failed again
	} else if prev := s.skipping; prev != nil && prev.Seq == f.Seq {
		f.Attempts += prev.Attempts
	}
	s.obs.Held(f.Kind)
	switch s.Def.OnError.then() {
	case ThenEnd:
		var pe *ProcessorError
		if errors.As(err, &pe) {
			s.failProcessor(pe)
		} else {
			s.fail("%s", err.Error())
		}
	case ThenSkip:
		s.failure = nil
		s.deadLetterLocked(it, f)
	default:
		held := *it
		held.shown = true // kept past the call: its map is never reused
		s.held = &held
		s.holdLocked(f)
	}
}

// holdLocked holds the stream as StateFailed for f (of any kind: a
// processor's, a source's, a store's): it takes no chunk until Resume,
// Skip or Cancel. Its message is f.Error.
func (s *Stream) holdLocked(f *Failure) {
	s.St, s.Msg, s.reason, s.failure, s.resumeAt = StateFailed, f.Error, "", f, time.Time{}
	s.noteLocked(TimelineEvent{Kind: "failed", Source: f.Kind, Chunk: f.Seq, Message: f.Error})
	s.Env.Log.Warn("stream held as failed", "stream", s.ID, "kind", f.Kind, "chunk", f.Seq, "err", f.Error)
}

// failSourceLocked holds a stream whose source gave up after its retries
// (err), once the chunks it delivered are processed, and reports whether
// it did. It does not when the stream's policy is :end, when the failure
// is permanent (a refusal no retry changes: a 4xx, the egress policy),
// and when the source cannot replay from a cursor (:exec, :stdio, the
// mock): connecting it again would start its program over, not carry it
// on, so such a stream ends as before.
func (s *Stream) failSourceLocked(err error) bool {
	var bug *transportPanic
	if s.Def.OnError.then() == ThenEnd || transport.IsPermanent(err) || errors.As(err, &bug) || !replayable(s.Def.Kind.Transport) {
		return false
	}
	s.srcDone, s.srcErr = false, nil
	s.obs.Held(FailureSource)
	s.holdLocked(&Failure{Kind: FailureSource, Seq: 0, Error: "transport: " + err.Error(), Attempts: 1, AtEpochMs: time.Now().UnixMilli()})
	return true
}

// SkipChange is Skip's change; s.mu is held and s is not terminal.
func SkipChange(s *Stream) error {
	f := s.failure
	if s.St != StateFailed || f == nil || f.Kind != FailureProcessor {
		what := string(s.St)
		if f != nil {
			what = "held by a failure of its " + f.Kind
		}
		return fmt.Errorf("cannot skip a chunk of stream %q: it is %s, not failed on a chunk", s.ID, what)
	}
	s.obs.Directive("skip", "request")
	s.noteLocked(TimelineEvent{Kind: "skip", Source: "request", Chunk: f.Seq})
	s.St, s.Msg, s.failure = StateActive, "", nil
	if s.held != nil {
		it := s.held
		s.held = nil
		s.deadLetterLocked(it, f)
		return nil
	}
	s.skipping = f
	return nil
}

// resumeFailedLocked moves a failed stream on for Resume: its held chunk
// is tried again, by the processor it has now; a source that gave up is
// connected again from the cursor (the caller launches it: reconnect).
func (s *Stream) resumeFailedLocked() (reconnect bool) {
	f := s.failure
	s.obs.Directive("resume", "request")
	s.noteLocked(TimelineEvent{Kind: "resume", Source: "request", Chunk: f.Seq})
	s.St, s.Msg = StateActive, ""
	// The failure stays known until the chunk succeeds, so that its
	// attempts add up if it fails again.
	return f != nil && f.Kind == FailureSource
}

// takeHeldLocked returns the chunk a resumed stream tries again, if it is
// in memory.
func (s *Stream) takeHeldLocked() (Item, bool) {
	if s.held == nil {
		return Item{}, false
	}
	it := *s.held
	s.held = nil
	return it, true
}

// skipTakenLocked sets a chunk the worker took aside when Skip asked for
// it before it came back, and reports whether it did.
func (s *Stream) skipTakenLocked(it *Item) bool {
	f := s.skipping
	if f == nil || it.Number() < f.Seq {
		return false
	}
	s.skipping = nil
	if it.Number() > f.Seq {
		return false // it was processed before the restart: nothing to skip
	}
	s.deadLetterLocked(it, f)
	return true
}

// succeededLocked forgets the failure of a chunk once it is processed.
func (s *Stream) succeededLocked() {
	if s.failure != nil && s.St != StateFailed {
		s.failure = nil
	}
}

// connectAgain connects the source of s again, from the stream's cursor,
// for Resume of a stream whose source gave up. A stream without a
// transport here (manual connect) gets its chunks from Deliver as before.
func (s *Stream) connectAgain() {
	if s.Def.Kind.Transport == nil || !s.Env.AutoConnect || !s.Env.Enter() {
		return
	}
	tdone := make(chan struct{})
	s.Mu.Lock()
	s.StartCursor = s.Cursor
	s.taskPresent, s.taskActive = true, true
	s.Mu.Unlock()
	go s.runTransport(s.Def.Kind.Transport, s.spec(), s.Env.Runs.follow(s.ID, tdone), tdone)
}
