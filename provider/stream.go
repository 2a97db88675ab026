package provider

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

// A chunk's way through a stream, file by file:
//
//	deliver.go    the transport hands it over (Deliver); it is decoded (decode.go) and queued
//	queue.go      the flow: queue, backpressure, wake-ups
//	worker.go     the worker takes it and calls the processor (invoke.go)
//	directive.go  the result is parsed and applied: state, output, directive, lifecycle
//	failure.go    a chunk the processor fails on: retried, held, or set aside (deadletter.go)
//	stats.go      the counters it moves
//	persist.go    its effect (and, for a source that cannot replay, the chunk) is stored
//
// and around it: definition.go is what the stream was started with,
// stream.go starts its goroutines (launch), spec.go gives its transport
// what it connects with, request.go takes the requests of the provider's
// callers (pause, resume, cancel), keeper.go is what it asks of its store,
// recorder.go writes its recording, streamobs.go is what it tells its
// observer, jsonvalue.go carries its values in what it reports, and env.go
// is all it reaches of its provider.

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

// errEnded is returned by Deliver once a stream has ended.
var errEnded = errors.New("stream has ended")

// stream is one stream. The fields above mu are immutable after newStream
// (ps is set before the stream's goroutines start); the three parts below
// mu, and the fields after them, are guarded by mu.
type stream struct {
	env     *streamEnv     // what it reaches of its provider (env.go)
	rec     *chunkRecorder // the stream's recording (record.go); nil: none
	id      string
	def     definition
	idVal   rtfs.Value
	epVal   rtfs.Value
	proc    processor
	ctx     context.Context // ends when the stream ends or the provider closes
	cancel  context.CancelFunc
	epoch   time.Time     // when the stream was made: the base of its monotonic clock
	started time.Time     // when the stream was first started (before any recovery)
	done    chan struct{} // closed when the worker has exited
	ps      keeper        // persistence (persist.go); nil without a store

	// dec decodes the chunks Deliver receives, reusing the keys and
	// strings it has seen; decMu serializes it, since Deliver may run on
	// several goroutines.
	decMu sync.Mutex
	dec   rtfs.JSONDecoder
	// spare is a chunk map the processor let go of, for the next decode
	// to build its chunk in (queue.go's spares); Deliver sets it from the
	// spares under mu and takes it back under decMu.
	spare atomic.Pointer[rtfs.Map]

	mu        sync.Mutex
	flow      // queue.go: the chunks between transport and worker
	lifecycle // directive.go: status, state, outputs
	hold      // failure.go: a failure that holds the stream, dead letters
	stats     // stats.go: counters

	tl        timeline // timeline.go: the stream's recent events
	subs      []*Subscription
	exited    bool // the worker has exited; subs stays nil
	dormant   bool // recovered without connecting: inspect only
	recovered bool // rebuilt from the store after a restart (transport.Spec.Resumed)
	// stale is the process group a recovered stream's previous host
	// recorded and did not see end (transport.Spec.Stale); set before the
	// stream's goroutines start.
	stale transport.ChildProcess

	// out is what subscribers' outboxes reach of the stream: its delivery
	// policy and the outputs they dropped, by Priority (subscribe.go).
	out outputTally

	// moved: another host took the stream over (a commit was fenced); it
	// stops here without writing and leaves the provider (cluster.go).
	moved atomic.Bool
	// handingOver: placement stops the stream here to offer it to another
	// host (cluster.go); its end is not published.
	handingOver atomic.Bool

	// history lists the programs the stream's processor came from, oldest
	// first (origin.go); set before the stream is registered.
	history []ProgramVersion
	// upgrade is made (under mu) when Upgrade stops the stream to swap its
	// processor: the worker then closes it instead of done, keeps the
	// subscriptions, and replacedBy is set to the stream that goes on,
	// which takes over done (upgrade.go).
	upgrade    chan struct{}
	replacedBy atomic.Pointer[stream]
	// tdone is closed when the stream's first transport goroutine has
	// returned; the next transport run of the stream's id waits for it
	// (runs.go). A source connected again (Resume of a failed source) has
	// a tdone of its own.
	tdone chan struct{}

	// obs observes the stream (nopObserver when nothing does); it is set by
	// launch under mu before the stream's goroutines start, and observed
	// says it is a real one. startCtx is StartRequest.Context.
	obs      StreamObserver
	observed bool
	startCtx context.Context
}

func newStream(env *streamEnv, id string, def definition, proc processor) *stream {
	s := &stream{
		env: env, id: id, def: def, proc: proc,
		idVal: rtfs.String(id), epVal: rtfs.String(def.endpoint),
		done: make(chan struct{}), tdone: make(chan struct{}), epoch: time.Now(),
		obs: nopObserver{},
	}
	s.wake = make(chan struct{}, 1)
	s.out.delivery, s.out.obs = def.delivery, s.obs
	s.st, s.state = StateActive, def.initial
	s.progress = newProgress(def.milestones)
	s.started = s.epoch
	s.lowWater = def.capacity - max(1, def.capacity/4)
	s.ctx, s.cancel = context.WithCancel(env.ctx)
	if rp, ok := proc.(*rtfsProcessor); ok {
		rp.stream = id // its host calls say which stream made them
	}
	return s
}

// admit counts the goroutines launch will start for s, a stream just put
// in its provider's registry, whose mu is held: its worker, and its
// transport when it connects.
func (s *stream) admit() {
	connect := s.def.kind.Transport != nil && s.env.autoConnect
	s.taskPresent, s.taskActive = connect, connect
	s.env.wg.Add(1)
	if connect {
		s.env.wg.Add(1)
	}
}

// launch starts the stream's goroutines, which the registry counted in its
// wait group when it admitted s.
func (s *stream) launch() {
	s.mu.Lock()
	connect := s.taskPresent
	s.observe(s.startCtx, s.recovered)
	start := TimelineEvent{Kind: "start"}
	if s.recovered {
		start.Message = "recovered from the store"
	}
	s.noteLocked(start)
	s.mu.Unlock()
	go s.work()
	if connect {
		go s.runTransport(s.def.kind.Transport, s.spec(), s.env.runs.follow(s.id, s.tdone), s.tdone)
	}
	s.env.log.Debug("stream started", "stream", s.id, "endpoint", s.def.endpoint, "transport", s.def.transport)
}

// observe asks the provider's observer for s's StreamObserver. Called by
// launch, with s.mu held, before the stream's goroutines start.
func (s *stream) observe(ctx context.Context, recovered bool) {
	if s.env.observer == nil {
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	o := s.env.observer.StreamStarted(ctx, StreamDesc{
		ID: s.id, Endpoint: s.def.endpoint, Transport: s.def.transport,
		Processor: s.def.procName, Recovered: recovered,
	})
	if o != nil {
		s.obs, s.observed = o, true
		s.out.obs = o
	}
}

// current returns the stream that goes on for s: s, or the one that
// replaced it in an upgrade.
func (s *stream) current() *stream {
	for {
		next := s.replacedBy.Load()
		if next == nil {
			return s
		}
		s = next
	}
}

// runTransport runs the transport until the source ends and reports the end
// to the worker. It starts only once prev, the previous transport run of
// the stream's id, has returned (runs.go).
func (s *stream) runTransport(tr transport.StreamTransport, spec transport.Spec, prev <-chan struct{}, tdone chan struct{}) {
	defer s.env.wg.Done()
	defer s.env.runs.returned(s.id, tdone)
	var err error
	if s.awaitPrevious(prev) {
		ctx := s.obs.TransportStarted(s.ctx)
		s.mu.Lock()
		cursor := s.startCursor
		s.mu.Unlock()
		if s.recovered {
			// A recovered stream reconnects: not to an origin whose
			// circuit is open (a new stream's start asked already).
			err = s.env.breakers.Allow(s.def.origin)
		}
		if err == nil {
			err = runGuarded(ctx, tr, spec, cursor, s)
		}
	}
	s.mu.Lock()
	s.taskActive = false
	failed := !s.st.Terminal() && s.ctx.Err() == nil && !errors.Is(err, errEnded)
	if failed {
		s.srcDone, s.srcErr = true, err
	}
	uncounted := failed && !s.failCounted
	s.mu.Unlock()
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

// status returns the stream's Status.
func (s *stream) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
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

// stuck reports whether the stream is stuck (Provider.Stuck says when),
// and why.
func (s *stream) stuck() (StuckStream, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st == StateFailed && s.failure != nil {
		f := *s.failure
		return StuckStream{StreamID: s.id, Reason: failedReason(&f), Failure: &f}, true
	}
	if s.st != StatePaused || !s.resumeAt.IsZero() || s.pausedByRequest {
		return StuckStream{}, false
	}
	switch {
	case s.srcDone:
		return StuckStream{StreamID: s.id, Reason: "paused with no :resume-after-ms, and its source has ended"}, true
	case s.queue.len() >= s.def.capacity:
		return StuckStream{StreamID: s.id, Reason: fmt.Sprintf("paused with no :resume-after-ms, and its queue is full (%d chunks), so its source is held back", s.def.capacity)}, true
	case !s.taskPresent:
		return StuckStream{StreamID: s.id, Reason: "paused with no :resume-after-ms, and it has no source connected"}, true
	case !s.sentCtrl:
		return StuckStream{StreamID: s.id, Reason: "paused with no :resume-after-ms, and its source sends no control chunk that could resume it (it has sent none)"}, true
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

// endErr returns the error that Await and WaitAll report for s, which did
// not complete.
func (s *stream) endErr(st Status) error {
	if st.State == StateUnrecoverable {
		return &StreamError{StreamID: st.StreamID, State: st.State, Message: st.Message}
	}
	if s.dormant {
		return &StreamError{StreamID: st.StreamID, State: st.State, Message: "it was loaded from the store without running (manual connect)"}
	}
	e := &StreamError{StreamID: st.StreamID, State: st.State, Message: st.Message}
	if st.State == StateError {
		s.mu.Lock()
		e.Cause = s.cause
		s.mu.Unlock()
	}
	return e
}

func (s *stream) statusLocked() Status {
	st := Status{StreamID: s.id, State: s.st, Message: s.msg, EndReason: s.reason, Result: s.result}
	if s.st == StateFailed && s.failure != nil {
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
func (s *stream) connectedLocked() {
	s.connected, s.failCounted = true, false
	// The Set's lock is taken under mu, never the other way round.
	s.env.breakers.Success(s.def.origin)
}

// runFailed counts the failure for good of the stream's transport that the
// retry policy did not report: one that was never retried. A permanent
// error (a refusal of the server, a bad configuration) says nothing of the
// origin's health, and an open circuit's refusal is no attempt.
func (s *stream) runFailed(err error) {
	if err == nil || transport.IsPermanent(err) || errors.Is(err, breaker.ErrOpen) {
		return
	}
	s.env.breakers.Failure(s.def.origin, err)
}
