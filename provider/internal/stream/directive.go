package stream

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// A processor's result, parsed and applied in one place (the directives of
// docs/streams.md): the
// worker hands apply the result of a chunk; apply reads its :state,
// :output, :action and :config, and moves the stream's lifecycle.

// lifecycle is a stream's status and the values its processor produced,
// guarded by the stream's mu.
type lifecycle struct {
	St       State
	Msg      string
	reason   string
	State    rtfs.Value
	LastOut  rtfs.Value // nil: no output yet
	Result   rtfs.Value
	resumeAt time.Time // auto-resume deadline of a pause; zero if none
	Cursor   string    // ID of the last processed chunk
	cause    error     // why a failed stream failed, when known (*ProcessorError)
	// pausedByRequest: a pause call (not the processor, nor a control
	// chunk) paused the stream; Stuck leaves it to whoever paused it.
	pausedByRequest bool
	procNext        int64    // seq after the last processed chunk
	progress        Progress // progress.go
	// progressShown: an event of this run of the stream carried its
	// progress.
	progressShown bool
	// progressVer counts the changes of progress (deliveryrec.go).
	progressVer int64
}

// An Action is a directive (docs/streams.md, *Directives*).
type Action uint8

const (
	ActNone Action = iota // no directive named
	ActContinue
	ActPause
	ActResume
	ActCancel
	ActComplete
)

const ValidActions = ":continue :pause :resume :cancel :complete"

// parseAction reads a directive from a keyword or a string. ok is false for
// any other value, or an unknown name.
func parseAction(v rtfs.Value) (Action, bool) {
	var name string
	switch v := v.(type) {
	case rtfs.Keyword:
		name = string(v)
	case rtfs.String:
		name = string(v)
	default:
		return ActNone, false
	}
	switch name {
	case "continue":
		return ActContinue, true
	case "pause":
		return ActPause, true
	case "resume":
		return ActResume, true
	case "cancel":
		return ActCancel, true
	case "complete":
		return ActComplete, true
	}
	return ActNone, false
}

// A directive is a processor result's directive, parsed.
type directive struct {
	Act    Action
	Reason string        // the end reason if it ends the stream
	after  time.Duration // :pause with :config {:resume-after-ms n}
	Timed  bool
}

// A result is the parts of a processor's result map the stream reads,
// found in one pass over its entries (nil: absent).
type result struct {
	State, Output, action, config rtfs.Value
	// How the output is delivered, and the stream's progress
	// (delivery.go, progress.go).
	priority, kind, progress, milestone rtfs.Value
}

// resultOf reads the :state, :output, :action, :config, :priority, :kind,
// :progress and :milestone of m.
func resultOf(m *rtfs.Map) result {
	var r result
	m.Range(func(k, v rtfs.Value) bool {
		if kw, ok := k.(rtfs.Keyword); ok {
			switch kw {
			case "state":
				r.State = v
			case "output":
				r.Output = v
			case "action":
				r.action = v
			case "config":
				r.config = v
			case "priority":
				r.priority = v
			case "kind":
				r.kind = v
			case "progress":
				r.progress = v
			case "milestone":
				r.milestone = v
			}
		}
		return true
	})
	return r
}

// outputClass reads a result's :priority and :kind: how its output is
// delivered. An absent or nil :priority is :normal; :kind is a keyword or
// a string, compared by name.
func outputClass(r *result) (Priority, string, error) {
	prio := PriorityNormal
	if v := r.priority; v != nil && v != rtfs.Nil {
		var err error
		if prio, err = parsePriority(v); err != nil {
			return prio, "", err
		}
	}
	var kind string
	switch v := r.kind.(type) {
	case nil, rtfs.NilType:
	case rtfs.Keyword:
		kind = string(v)
	case rtfs.String:
		kind = string(v)
	default:
		return prio, "", fmt.Errorf(":kind must be a keyword or a string, got %s", KindOf(v))
	}
	return prio, kind, nil
}

// parseDirective reads a result's :action, else the chunk's own action
// (chunkAct), and for a pause its :config {:resume-after-ms n}. An unknown
// :action or a bad :config is an error naming what is valid. A result that
// names no action on an ordinary chunk gives ActNone: no directive.
func parseDirective(r *result, chunkAct Action) (directive, error) {
	d := directive{Act: chunkAct}
	if chunkAct != ActNone {
		d.Reason = "control-chunk"
	}
	if v := r.action; v != nil && v != rtfs.Nil {
		act, ok := parseAction(v)
		if !ok {
			return d, fmt.Errorf("unknown action %s; valid actions are %s", KindOf(v), ValidActions)
		}
		d.Act, d.Reason = act, "processor"
	}
	if d.Act == ActPause {
		var err error
		if d.after, d.Timed, err = resumeAfter(r.config); err != nil {
			return d, err
		}
	}
	return d, nil
}

// ReadResult reads a processor's result map as a stream applies it: its
// parts, its directive (ctrl is the chunk's own, for a control chunk) and
// how its output is delivered. Streams and dry runs (dryrun.go) read
// results here.
func ReadResult(m *rtfs.Map, ctrl Action) (result, directive, Priority, string, error) {
	r := resultOf(m)
	d, err := parseDirective(&r, ctrl)
	if err != nil {
		return r, d, PriorityNormal, "", err
	}
	prio, kind, err := outputClass(&r)
	return r, d, prio, kind, err
}

// ShapeError is the message of a processor result that is not a map.
func ShapeError(proc string, chunk int64, res rtfs.Value) string {
	return fmt.Sprintf("processor %s returned an invalid shape on chunk %d: expected a map {:state :action :output}, got %s", proc, chunk, KindOf(res))
}

// Completion is the result a stream that completes has: the output of the
// result that completed it, else its last output, else nil.
func Completion(out, lastOut rtfs.Value) rtfs.Value {
	switch {
	case out != nil:
		return out
	case lastOut != nil:
		return lastOut
	}
	return rtfs.Nil
}

// resumeAfter reads {:resume-after-ms n} from a processor result's
// :config (nil when it has none). ok is false when there is none; an
// invalid value is an error.
func resumeAfter(cfg rtfs.Value) (time.Duration, bool, error) {
	if cfg == nil || cfg == rtfs.Nil {
		return 0, false, nil
	}
	cm, isMap := cfg.(*rtfs.Map)
	if !isMap {
		return 0, false, fmt.Errorf("processor result :config must be a map, got %s", KindOf(cfg))
	}
	v, ok := cm.GetKeyword("resume-after-ms")
	if !ok || v == rtfs.Nil {
		return 0, false, nil
	}
	n, isInt := v.(rtfs.Int)
	if !isInt || n < 0 {
		return 0, false, fmt.Errorf("processor result :config :resume-after-ms must be a non-negative int, got %s", KindOf(v))
	}
	return time.Duration(n) * time.Millisecond, true, nil
}

// applyLocked applies the processor's result for it and returns the event
// to publish, if any (its Kind is 0 when there is none), with the stream's
// subscribers. A call that failed (err), or a result that cannot be
// applied, changes nothing and is returned as the chunk's failure (a
// *ProcessorError for err), which the worker hands to the stream's
// :on-error policy (failure.go).
func (s *Stream) applyLocked(it *Item, res rtfs.Value, err error) (Event, []*Subscription, error) {
	if s.St.Terminal() || (err != nil && s.ctx.Err() != nil) {
		return Event{}, nil, nil // cancelled or closed while the processor ran
	}
	if err != nil {
		return Event{}, nil, &ProcessorError{Processor: s.Proc.Name(), Chunk: it.Number(), Err: err}
	}
	m, ok := res.(*rtfs.Map)
	if !ok {
		return Event{}, nil, errors.New(ShapeError(s.Proc.Name(), it.Number(), res))
	}
	r, d, prio, kind, err := ReadResult(m, it.Ctrl)
	ev := Event{Priority: prio, OutputKind: kind}
	var progressed bool
	if err == nil && (r.progress != nil || r.milestone != nil) {
		progressed, err = s.ApplyProgressLocked(r.milestone, r.progress, time.Now())
	}
	if err != nil {
		return Event{}, nil, fmt.Errorf("processor %s on chunk %d: %w", s.Proc.Name(), it.Number(), err)
	}
	s.succeededLocked()
	s.countLocked(it)
	s.Cursor = it.cursor()
	if it.Seq >= s.procNext {
		s.procNext = it.Seq + 1
	}
	if it.journaled {
		s.Ps.processedLocked(it.Seq)
	}
	if r.State != nil {
		s.State = r.State
	}
	var out rtfs.Value
	if v := r.Output; v != nil && v != rtfs.Nil {
		s.LastOut, out = v, v
		s.Stats.Outputs++
		ev.Kind, ev.Output = EventOutput, v
	}
	// The first output of a stream with a progress (it declares
	// milestones) carries it too, so that a subscriber knows the total
	// from the start.
	if progressed || (out != nil && s.progress.Known && !s.progressShown) {
		ev.Progress, s.progressShown = s.ProgressInfoLocked(time.Now()), true
		if out == nil {
			ev.Kind = EventProgress
		}
	}
	if s.observed && d.Act != ActNone {
		s.obs.Directive(ActionNames[d.Act], d.Reason) // a directive applied: none for a plain chunk
	}
	if d.Act > ActContinue {
		s.noteLocked(TimelineEvent{Kind: ActionNames[d.Act], Source: d.Reason, Chunk: it.Number()})
	}
	s.directLocked(d, out)
	if ev.Kind != 0 {
		ev.StreamID, ev.Seq, ev.src = s.ID, it.Number(), &s.Out
	}
	return ev, s.Subs, nil
}

// cursor is the chunk's ID, which becomes the stream's cursor once the
// chunk is processed.
func (it *Item) cursor() string { return it.ID }

// directLocked applies a directive. out is the output of the result that
// named it (nil if none).
func (s *Stream) directLocked(d directive, out rtfs.Value) {
	switch d.Act {
	case ActPause:
		s.St, s.resumeAt, s.pausedByRequest = StatePaused, time.Time{}, false
		if d.Timed {
			s.resumeAt = time.Now().Add(d.after)
		}
	case ActResume:
		s.St, s.resumeAt = StateActive, time.Time{}
	case ActCancel:
		s.cancelLocked(d.Reason)
	case ActComplete:
		s.Result = Completion(out, s.LastOut)
		s.finishLocked(StateCompleted, d.Reason, "")
	}
}

// endOfSourceLocked ends a stream whose source ended and whose queue is
// empty, and reports whether it did: :completed with the last output as
// :result after a clean end; after a failure, a source that can be
// connected again holds the stream as failed (failure.go), any other ends
// it in :error with the transport's message.
func (s *Stream) endOfSourceLocked() bool {
	if s.srcErr != nil {
		reason := "error"
		if errors.Is(s.srcErr, transport.ErrSourceLost) {
			reason = "source-lost" // docs/durability.md: a source that cannot resume
		} else if s.failSourceLocked(s.srcErr) {
			return false
		}
		s.finishLocked(StateError, reason, "transport: "+s.srcErr.Error())
		return true
	}
	s.Result = Completion(nil, s.LastOut)
	s.finishLocked(StateCompleted, "source-ended", "")
	return true
}

// finishLocked moves the stream to a terminal state and stops its transport.
func (s *Stream) finishLocked(st State, reason, msg string) {
	s.St, s.reason, s.Msg = st, reason, msg
	s.noteEndLocked()
	s.resumeAt = time.Time{}
	s.roomMade()
	s.Cancel()
}

// cancelLocked cancels the stream, dropping and counting its queued chunks.
func (s *Stream) cancelLocked(reason string) {
	s.dropQueueLocked()
	s.finishLocked(StateCancelled, reason, "")
}

// fail puts the stream in :error with a formatted message. Like a cancel,
// an error drops and counts the chunks still queued: no one will process
// them (the final save deletes their journal entries).
func (s *Stream) fail(format string, args ...any) {
	s.dropQueueLocked()
	s.finishLocked(StateError, "error", fmt.Sprintf(format, args...))
}

// failProcessor puts the stream in :error because its processor failed:
// the message is e's, and e is kept as the cause Await and WaitAll report
// (StreamError.Cause).
func (s *Stream) failProcessor(e *ProcessorError) {
	s.fail("%s", e.Error())
	s.cause = e
}

// A ProcessorError is why a stream failed in its processor: the processor,
// the chunk (its :seq) and the processor's error, an *rtfs.EvalError with
// the failing form's position and the thrown value for an RTFS processor.
// A StreamError of such a stream carries it as its Cause while the
// provider that ran the stream lives; the stored stream keeps only the
// message.
type ProcessorError struct {
	Processor string
	Chunk     int64
	Err       error
}

// Error is "processor NAME failed on chunk N: ERR", the stream's message.
func (e *ProcessorError) Error() string {
	return fmt.Sprintf("processor %s failed on chunk %d: %v", e.Processor, e.Chunk, e.Err)
}

// Unwrap returns the processor's error.
func (e *ProcessorError) Unwrap() error { return e.Err }

// dropQueueLocked drops and counts the chunks still queued (those of the
// queue and the control chunks that jumped it).
func (s *Stream) dropQueueLocked() {
	n := s.Queue.Clear() + len(s.ctrl)
	s.Stats.Dropped += int64(n)
	s.ctrl = nil
	if n > 0 {
		s.obs.ChunksDropped(n)
	}
}

// KindOf names a value for messages: its kind, and its printed form when short.
func KindOf(v rtfs.Value) string {
	if v == nil {
		return "nothing"
	}
	s := rtfs.Excerpt(v, 57)
	if v.Kind().String() == "nil" {
		return "nil"
	}
	return v.Kind().String() + " " + s
}

func Itoa(n int64) string { return strconv.FormatInt(n, 10) }
