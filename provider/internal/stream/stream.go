package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/breaker"
)

// A State is a stream's lifecycle state.
type State string

// The stream states. Completed, Cancelled and Error are terminal.
const (
	StateActive State = "active"
	StatePaused State = "paused"
	// StateFailed is the state of a stream held by a failure (failure.go):
	// its processor failed on a chunk, or its source gave up, and its
	// :on-error policy holds it (the default). It is not an end: the state
	// after the last chunk processed is kept, the failed chunk stays where
	// it was (cursor or journal), a program awaiting the stream stays
	// parked, and Resume (retry), Skip (set the chunk aside as a dead
	// letter), Upgrade (a new processor, then Resume) or Cancel move it on.
	// It is stored, and a failed stream recovered after a restart is held
	// again.
	StateFailed    State = "failed"
	StateCompleted State = "completed"
	StateCancelled State = "cancelled"
	StateError     State = "error"
	// StateUnrecoverable is the state of a stored stream that recovery
	// could not rebuild (its message says why): it is listed, and can be
	// inspected, removed or given a processor again (rtfshost upgrade),
	// but it does not run. It is never stored.
	StateUnrecoverable State = "unrecoverable"
)

// Terminal reports whether a stream in state s has ended for good.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateCancelled || s == StateError
}

// Status is a snapshot of a stream's lifecycle.
type Status struct {
	StreamID string
	State    State
	// Message explains an :error or a failed state.
	Message string
	// EndReason says why a terminal stream ended: "processor" (its processor
	// completed or cancelled it), "source-ended", "request" (cancelled by
	// :mcp.stream.cancel or Provider.Cancel), "control-chunk", "error".
	EndReason string
	// Result is a completed stream's :result; nil otherwise.
	Result rtfs.Value
	// Failure says why a StateFailed stream is held (a copy); nil in any
	// other state.
	Failure *Failure
	// Stale, when set, says that the status was read from the stream's
	// stored records because the host that runs it did not answer (with
	// Options.Cluster): the stream may have moved on since.
	Stale *Stale
}

// A Stale marks an answer about a stream that its owner, a host of the
// cluster that holds the stream's lease, did not give: it does not answer
// (it may have died, and another host takes the stream over when the lease
// expires), so the answer is the stream as its stored records say, as of
// the owner's last commit.
type Stale struct {
	// Owner is the node name of the host that owns the stream.
	Owner string `json:"owner"`
	// SinceEpochMs is when the owner was last heard from (its last
	// heartbeat), in Unix milliseconds; nil when not known (its heartbeat
	// expired while NATS did not take writes).
	SinceEpochMs *int64 `json:"since-epoch-ms"`
}

// ErrDeliverEnded is returned by Deliver once a stream has ended.
var ErrDeliverEnded = errors.New("stream has ended")

// Stream is one stream. The fields above mu are immutable after NewStream
// (ps is set before the stream's goroutines start); the three parts below
// mu, and the fields after them, are guarded by mu.
type Stream struct {
	Env     *StreamEnv     // what it reaches of its provider (env.go)
	Rec     *chunkRecorder // the stream's recording (record.go); nil: none
	ID      string
	Def     Definition
	idVal   rtfs.Value
	epVal   rtfs.Value
	Proc    Processor
	ctx     context.Context // ends when the stream ends or the provider closes
	Cancel  context.CancelFunc
	epoch   time.Time     // when the stream was made: the base of its monotonic clock
	Started time.Time     // when the stream was first started (before any recovery)
	Done    chan struct{} // closed when the worker has exited
	Ps      keeper        // persistence (persist.go); nil without a store

	// dec decodes the chunks Deliver receives, reusing the keys and
	// strings it has seen; decMu serializes it, since Deliver may run on
	// several goroutines.
	decMu sync.Mutex
	dec   rtfs.JSONDecoder
	// Spare is a chunk map the processor let go of, for the next decode
	// to build its chunk in (queue.go's spares); Deliver sets it from the
	// spares under mu and takes it back under decMu.
	Spare atomic.Pointer[rtfs.Map]

	Mu        sync.Mutex
	flow      // queue.go: the chunks between transport and worker
	lifecycle // directive.go: status, state, outputs
	hold      // failure.go: a failure that holds the stream, dead letters
	Stats     // stats.go: counters

	tl        timeline // timeline.go: the stream's recent events
	Subs      []*Subscription
	Exited    bool // the worker has exited; subs stays nil
	Dormant   bool // recovered without connecting: inspect only
	Recovered bool // rebuilt from the store after a restart (transport.Spec.Resumed)
	// Stale is the process group a recovered stream's previous host
	// recorded and did not see end (transport.Spec.Stale); set before the
	// stream's goroutines start.
	Stale transport.ChildProcess

	// Out is what subscribers' outboxes reach of the stream: its delivery
	// policy and the outputs they dropped, by Priority (subscribe.go).
	Out OutputTally

	// Moved: another host took the stream over (a commit was fenced); it
	// stops here without writing and leaves the provider (cluster.go).
	Moved atomic.Bool
	// HandingOver: placement stops the stream here to offer it to another
	// host (cluster.go); its end is not published.
	HandingOver atomic.Bool

	// History lists the programs the stream's processor came from, oldest
	// first (origin.go); set before the stream is registered.
	History []ProgramVersion
	// Upgrade is made (under mu) when Upgrade stops the stream to swap its
	// processor: the worker then closes it instead of done, keeps the
	// subscriptions, and ReplacedBy is set to the stream that goes on,
	// which takes over done (upgrade.go).
	Upgrade    chan struct{}
	ReplacedBy atomic.Pointer[Stream]
	// tdone is closed when the stream's first transport goroutine has
	// returned; the next transport run of the stream's id waits for it
	// (runs.go). A source connected again (Resume of a failed source) has
	// a tdone of its own.
	tdone chan struct{}

	// obs observes the stream (nopObserver when nothing does); it is set by
	// launch under mu before the stream's goroutines start, and observed
	// says it is a real one. StartCtx is StartRequest.Context.
	obs      StreamObserver
	observed bool
	StartCtx context.Context
}

func NewStream(env *StreamEnv, id string, def Definition, proc Processor) *Stream {
	s := &Stream{
		Env: env, ID: id, Def: def, Proc: proc,
		idVal: rtfs.String(id), epVal: rtfs.String(def.Endpoint),
		Done: make(chan struct{}), tdone: make(chan struct{}), epoch: time.Now(),
		obs: nopObserver{},
	}
	s.wake = make(chan struct{}, 1)
	s.Out.Delivery, s.Out.obs = def.Delivery, s.obs
	s.St, s.State = StateActive, def.Initial
	s.progress = newProgress(def.Milestones)
	s.Started = s.epoch
	s.lowWater = def.Capacity - max(1, def.Capacity/4)
	s.ctx, s.Cancel = context.WithCancel(env.Ctx)
	if rp, ok := proc.(*RTFSProcessor); ok {
		rp.Stream = id // its host calls say which stream made them
	}
	return s
}

// Admit counts the goroutines launch will start for s, a stream just put
// in its provider's registry, whose mu is held: its worker, and its
// transport when it connects.
func (s *Stream) Admit() {
	connect := s.Def.Kind.Transport != nil && s.Env.AutoConnect
	s.taskPresent, s.taskActive = connect, connect
	s.Env.Wg.Add(1)
	if connect {
		s.Env.Wg.Add(1)
	}
}

// Launch starts the stream's goroutines, which the registry counted in its
// wait group when it admitted s.
func (s *Stream) Launch() {
	s.Mu.Lock()
	connect := s.taskPresent
	s.observe(s.StartCtx, s.Recovered)
	start := TimelineEvent{Kind: "start"}
	if s.Recovered {
		start.Message = "recovered from the store"
	}
	s.noteLocked(start)
	s.Mu.Unlock()
	go s.work()
	if connect {
		go s.runTransport(s.Def.Kind.Transport, s.spec(), s.Env.Runs.follow(s.ID, s.tdone), s.tdone)
	}
	s.Env.Log.Debug("stream started", "stream", s.ID, "endpoint", s.Def.Endpoint, "transport", s.Def.Transport)
}

// observe asks the provider's observer for s's StreamObserver. Called by
// launch, with s.mu held, before the stream's goroutines start.
func (s *Stream) observe(ctx context.Context, recovered bool) {
	if s.Env.Observer == nil {
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	o := s.Env.Observer.StreamStarted(ctx, StreamDesc{
		ID: s.ID, Endpoint: s.Def.Endpoint, Transport: s.Def.Transport,
		Processor: s.Def.ProcName, Recovered: recovered,
	})
	if o != nil {
		s.obs, s.observed = o, true
		s.Out.obs = o
	}
}

// Current returns the stream that goes on for s: s, or the one that
// replaced it in an upgrade.
func (s *Stream) Current() *Stream {
	for {
		next := s.ReplacedBy.Load()
		if next == nil {
			return s
		}
		s = next
	}
}

// runTransport runs the transport until the source ends and reports the end
// to the worker. It starts only once prev, the previous transport run of
// the stream's id, has returned (runs.go).
func (s *Stream) runTransport(tr transport.StreamTransport, spec transport.Spec, prev <-chan struct{}, tdone chan struct{}) {
	defer s.Env.Wg.Done()
	defer s.Env.Runs.returned(s.ID, tdone)
	var err error
	if s.awaitPrevious(prev) {
		ctx := s.obs.TransportStarted(s.ctx)
		s.Mu.Lock()
		cursor := s.StartCursor
		s.Mu.Unlock()
		if s.Recovered {
			// A recovered stream reconnects: not to an origin whose
			// circuit is open (a new stream's start asked already).
			err = s.Env.Breakers.Allow(s.Def.Origin)
		}
		if err == nil {
			err = runGuarded(ctx, tr, spec, cursor, s)
		}
	}
	s.Mu.Lock()
	s.taskActive = false
	failed := !s.St.Terminal() && s.ctx.Err() == nil && !errors.Is(err, ErrDeliverEnded)
	if failed {
		s.srcDone, s.srcErr = true, err
	}
	uncounted := failed && !s.failCounted
	s.Mu.Unlock()
	if uncounted {
		s.runFailed(err)
	}
	if !failed {
		err = nil
	}
	s.obs.TransportEnded(err)
	s.signal()
}

// runGuarded runs tr, turning a panic in it into an error.
func runGuarded(ctx context.Context, tr transport.StreamTransport, spec transport.Spec, cursor string, sink transport.Sink) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &transportPanic{r}
		}
	}()
	return tr.Run(ctx, spec, cursor, sink)
}

// A transportPanic is the error of a transport that panicked: a bug, which
// connecting again would not fix (the stream ends, failure.go).
type transportPanic struct{ v any }

func (e *transportPanic) Error() string { return fmt.Sprintf("transport panicked: %v", e.v) }

// Status returns the stream's Status.
func (s *Stream) Status() Status {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.statusLocked()
}

// A StuckStream is a stream that is paused for good, or held by a
// failure: nothing the provider or its source will do can move it on.
type StuckStream struct {
	StreamID string
	Reason   string // e.g. "paused with no :resume-after-ms, and its source has ended"
	// Failure is what holds a failed stream (a copy); nil for a paused one.
	Failure *Failure
}

// Stuck reports whether the stream is stuck (Provider.Stuck says when),
// and why.
func (s *Stream) Stuck() (StuckStream, bool) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.St == StateFailed && s.failure != nil {
		f := *s.failure
		return StuckStream{StreamID: s.ID, Reason: failedReason(&f), Failure: &f}, true
	}
	if s.St != StatePaused || !s.resumeAt.IsZero() || s.pausedByRequest {
		return StuckStream{}, false
	}
	switch {
	case s.srcDone:
		return StuckStream{StreamID: s.ID, Reason: "paused with no :resume-after-ms, and its source has ended"}, true
	case s.Queue.Len() >= s.Def.Capacity:
		return StuckStream{StreamID: s.ID, Reason: fmt.Sprintf("paused with no :resume-after-ms, and its queue is full (%d chunks), so its source is held back", s.Def.Capacity)}, true
	case !s.taskPresent:
		return StuckStream{StreamID: s.ID, Reason: "paused with no :resume-after-ms, and it has no source connected"}, true
	case !s.sentCtrl:
		return StuckStream{StreamID: s.ID, Reason: "paused with no :resume-after-ms, and its source sends no control chunk that could resume it (it has sent none)"}, true
	}
	return StuckStream{}, false
}

// failedReason is a StuckStream's reason for a stream held by f: what
// failed, and what repairs it.
func failedReason(f *Failure) string {
	if f.Kind == FailureProcessor {
		return fmt.Sprintf("failed on chunk %d (%s); retry it (resume), set it aside (resume --skip), or upgrade the processor and resume", f.Seq, f.Error)
	}
	return fmt.Sprintf("failed: its %s failed (%s); resume it once that is fixed", f.Kind, f.Error)
}

// EndErr returns the error that Await and WaitAll report for s, which did
// not complete.
func (s *Stream) EndErr(st Status) error {
	if st.State == StateUnrecoverable {
		return &StreamError{StreamID: st.StreamID, State: st.State, Message: st.Message}
	}
	if s.Dormant {
		return &StreamError{StreamID: st.StreamID, State: st.State, Message: "it was loaded from the store without running (manual connect)"}
	}
	e := &StreamError{StreamID: st.StreamID, State: st.State, Message: st.Message}
	if st.State == StateError {
		s.Mu.Lock()
		e.Cause = s.cause
		s.Mu.Unlock()
	}
	return e
}

func (s *Stream) statusLocked() Status {
	st := Status{StreamID: s.ID, State: s.St, Message: s.Msg, EndReason: s.reason, Result: s.Result}
	if s.St == StateFailed && s.failure != nil {
		f := *s.failure
		st.Failure = &f
	}
	return st
}

// err returns the error that Await reports for a stream that did not
// complete.
func (st Status) err() error {
	return &StreamError{StreamID: st.StreamID, State: st.State, Message: st.Message}
}

// StatusErr returns the error that Await reports for a stream whose
// status is st and that did not complete.
func StatusErr(st Status) error { return st.err() }

// A StreamError reports a stream that ended without completing, or that was
// interrupted by Close (State is then not terminal).
type StreamError struct {
	StreamID string
	State    State
	Message  string
	// Cause is why a failed stream failed, when the provider knows more
	// than Message: a *ProcessorError for a processor's failure. Nil
	// otherwise, and for a stream loaded from the store.
	Cause error
}

// Unwrap returns the Cause.
func (e *StreamError) Unwrap() error { return e.Cause }

// Error says how the stream ended: "stream "x" was cancelled", "stream "x"
// failed: MESSAGE", that it was interrupted by Close, or, with a Message and
// a state that is not terminal, why it does not run (a stream recovered with
// manual connect).
func (e *StreamError) Error() string {
	switch e.State {
	case StateCancelled:
		return fmt.Sprintf("stream %q was cancelled", e.StreamID)
	case StateError:
		return fmt.Sprintf("stream %q failed: %s", e.StreamID, e.Message)
	}
	if e.Message != "" {
		return fmt.Sprintf("stream %q is %s but not running: %s", e.StreamID, e.State, e.Message)
	}
	return fmt.Sprintf("stream %q was interrupted while %s: the provider closed", e.StreamID, e.State)
}

// connectedLocked records that a chunk arrived: the origin works. Called
// with mu held by the first chunk after a start or a failed attempt.
func (s *Stream) connectedLocked() {
	s.connected, s.failCounted = true, false
	// The Set's lock is taken under mu, never the other way round.
	s.Env.Breakers.Success(s.Def.Origin)
}

// runFailed counts the failure for good of the stream's transport that the
// retry policy did not report: one that was never retried. A permanent
// error (a refusal of the server, a bad configuration) says nothing of the
// origin's health, and an open circuit's refusal is no attempt.
func (s *Stream) runFailed(err error) {
	if err == nil || transport.IsPermanent(err) || errors.Is(err, breaker.ErrOpen) {
		return
	}
	s.Env.Breakers.Failure(s.Def.Origin, err)
}

// Runs reports whether s, just made from its records, is to run: it has
// not ended and its provider runs the streams it loads (auto-connect).
// Until s runs, nothing else reads its state.
func (s *Stream) Runs() bool { return !s.St.Terminal() && s.Env.AutoConnect }

// LaunchRecovered launches s, a stream recovered from its records and
// registered, and logs where it goes on from: its cursor, and the chunks
// its journal queued again.
func (s *Stream) LaunchRecovered() {
	queued := s.Queue.Len()
	s.Recovered = true
	s.Launch()
	s.Env.Log.Info("stream recovered", "stream", s.ID, "cursor", s.StartCursor, "journaled", queued)
}

// Settle makes s, a stream made from its records that is not to run (it
// has ended, or its provider does not connect what it loads), what it
// stays until it is loaded again: dormant unless it ended, its worker
// counted as exited, its Done closed.
func (s *Stream) Settle() {
	s.Dormant = !s.St.Terminal()
	s.Exited = true
	s.Cancel()
	close(s.Done)
}
