package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// A State is a stream's lifecycle state.
type State string

// The stream states. Completed, Cancelled and Error are terminal.
const (
	StateActive    State = "active"
	StatePaused    State = "paused"
	StateCompleted State = "completed"
	StateCancelled State = "cancelled"
	StateError     State = "error"
)

// Terminal reports whether a stream in state s has ended for good.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateCancelled || s == StateError
}

// Status is a snapshot of a stream's lifecycle.
type Status struct {
	StreamID string
	State    State
	// Message explains an :error state.
	Message string
	// EndReason says why a terminal stream ended: "processor" (its processor
	// completed or cancelled it), "source-ended", "request" (cancelled by
	// :mcp.stream.cancel or Provider.Cancel), "control-chunk", "error".
	EndReason string
	// Result is a completed stream's :result; nil otherwise.
	Result rtfs.Value
}

// errEnded is returned by Deliver once a stream has ended.
var errEnded = errors.New("stream has ended")

// stream is one running stream. The fields above mu are immutable after
// newStream; the others are guarded by mu.
type stream struct {
	p       *Provider
	id      string
	def     definition
	idVal   rtfs.Value
	epVal   rtfs.Value
	proc    processor
	ctx     context.Context // ends when the stream ends or the provider closes
	cancel  context.CancelFunc
	epoch   time.Time     // when the stream was made: the base of its monotonic clock
	started time.Time     // when the stream was first started (before any recovery)
	wake    chan struct{} // buffered 1: wakes the worker
	done    chan struct{} // closed when the worker has exited

	// dec decodes the chunks Deliver receives, reusing the keys it has seen;
	// decMu serializes it, since Deliver may run on several goroutines.
	decMu sync.Mutex
	dec   rtfs.JSONDecoder

	mu          sync.Mutex
	st          State
	msg         string
	reason      string
	state       rtfs.Value
	lastOut     rtfs.Value // nil: no output yet
	result      rtfs.Value
	queue       ring
	ctrl        []item        // control chunks that arrived while paused with a full queue
	space       chan struct{} // closed when room is made, if a Deliver waits
	seq         int64         // seq of the next chunk
	cursor      string        // ID of the last processed chunk
	srcDone     bool          // the transport returned
	srcErr      error         // its failure, if it failed
	taskPresent bool
	taskActive  bool
	resumeAt    time.Time // auto-resume deadline of a pause; zero if none
	stats       stats
	meta        metaBuilder // builds each chunk's metadata
	idle        bool        // the worker found nothing to do: the next chunk wakes it
	lowWater    int         // a Deliver waiting for room is released once the queue is this short
	subs        []*Subscription
	exited      bool   // the worker has exited; subs stays nil
	procNext    int64  // seq after the last processed chunk
	startCursor string // the cursor the transport starts after
	dormant     bool   // recovered without connecting: inspect only
	recovered   bool   // rebuilt from the store after a restart (transport.Spec.Resumed)

	ps *streamStore // nil without persistence

	// obs observes the stream (nopObserver when nothing does); it is set by
	// launch under mu before the stream's goroutines start, and observed
	// says it is a real one. startCtx is StartRequest.Context.
	obs      StreamObserver
	observed bool
	startCtx context.Context
}

// stats are the counters of DESIGN §4.3.
type stats struct {
	processed  int64
	dropped    int64
	latency    time.Duration
	hasLatency bool
	lastEvent  time.Time
	firstDone  time.Time
	lastDone   time.Time
	reconnects int64
	bytes      int64
	outputs    int64
}

func newStream(p *Provider, id string, def definition, proc processor) *stream {
	s := &stream{
		p: p, id: id, def: def, proc: proc,
		idVal: rtfs.String(id), epVal: rtfs.String(def.endpoint),
		wake: make(chan struct{}, 1), done: make(chan struct{}),
		st: StateActive, state: def.initial, epoch: time.Now(),
		obs: nopObserver{},
	}
	s.started = s.epoch
	s.meta = newMetaBuilder(s.idVal, s.epVal)
	s.lowWater = def.capacity - max(1, def.capacity/4)
	s.ctx, s.cancel = context.WithCancel(p.ctx)
	if rp, ok := proc.(*rtfsProcessor); ok {
		rp.stream = id // its host calls say which stream made them
	}
	return s
}

// Deliver implements transport.Sink: it decodes c and appends it to the
// queue, blocking while the queue is full. A chunk without data is no chunk
// and is ignored. While the stream is paused a control chunk is accepted even
// when the queue is full (up to the queue's capacity again), so that the
// source can resume a stream it paused.
func (s *stream) Deliver(ctx context.Context, c transport.Chunk) error {
	if len(c.Data) == 0 {
		return nil
	}
	s.decMu.Lock()
	chunk := decodeChunk(&s.dec, c)
	s.decMu.Unlock()
	ctrl := controlAction(chunk)
	if s.ps != nil && s.ps.journal {
		return s.deliverJournaled(ctx, c, chunk, ctrl)
	}
	s.mu.Lock()
	s.stats.bytes += int64(len(c.Data))
	if err := s.waitRoomLocked(ctx, ctrl); err != nil {
		s.mu.Unlock()
		return err
	}
	s.obs.ChunkReceived(len(c.Data))
	s.enqueueLocked(chunk, ctrl, c, s.seq, false)
	s.seq++
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

// enqueueLocked appends a decoded chunk, numbered seq, to the queue, or, for
// a control chunk that jumps a full queue, to the control list. journaled
// says that the chunk is in the stream's journal.
func (s *stream) enqueueLocked(chunk rtfs.Value, ctrl action, c transport.Chunk, seq int64, journaled bool) {
	it := item{chunk: chunk, ctrl: ctrl, cursor: c.ID, enqueued: c.ReceivedAt, seq: seq, journaled: journaled}
	if it.enqueued.IsZero() {
		it.enqueued = time.Now()
	}
	it.meta = s.meta.build(seq, c)
	s.stats.lastEvent = it.enqueued
	if s.queue.len() >= s.def.capacity {
		s.ctrl = append(s.ctrl, it)
	} else {
		s.queue.push(it, s.def.capacity)
	}
}

// Reconnecting implements transport.ReconnectObserver.
func (s *stream) Reconnecting(attempt int, _ time.Duration, cause error) {
	s.mu.Lock()
	s.stats.reconnects++
	obs := s.obs
	s.mu.Unlock()
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

// runTransport runs the transport until the source ends and reports the end
// to the worker.
func (s *stream) runTransport(tr transport.StreamTransport, spec transport.Spec) {
	defer s.p.wg.Done()
	ctx := s.obs.TransportStarted(s.ctx)
	err := runGuarded(ctx, tr, spec, s.startCursor, s)
	s.mu.Lock()
	s.taskActive = false
	failed := !s.st.Terminal() && s.ctx.Err() == nil && !errors.Is(err, errEnded)
	if failed {
		s.srcDone, s.srcErr = true, err
	}
	s.mu.Unlock()
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
			err = fmt.Errorf("transport panicked: %v", r)
		}
	}()
	return tr.Run(ctx, spec, cursor, sink)
}

// status returns the stream's Status.
func (s *stream) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

// endErr returns the error that Await and WaitAll report for s, which did
// not complete.
func (s *stream) endErr(st Status) error {
	if s.dormant {
		return &StreamError{StreamID: st.StreamID, State: st.State, Message: "it was loaded from the store without running (manual connect)"}
	}
	return st.err()
}

func (s *stream) statusLocked() Status {
	return Status{StreamID: s.id, State: s.st, Message: s.msg, EndReason: s.reason, Result: s.result}
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
}

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

// finishLocked moves the stream to a terminal state and stops its transport.
func (s *stream) finishLocked(st State, reason, msg string) {
	s.st, s.reason, s.msg = st, reason, msg
	s.resumeAt = time.Time{}
	s.roomMade()
	s.cancel()
}

// cancelLocked cancels the stream, dropping and counting its queued chunks.
func (s *stream) cancelLocked(reason string) {
	s.dropQueueLocked()
	s.ctrl = nil
	s.finishLocked(StateCancelled, reason, "")
}

// dropQueueLocked drops and counts the chunks still queued (those of the
// queue and the control chunks that jumped it).
func (s *stream) dropQueueLocked() {
	n := s.queue.clear() + len(s.ctrl)
	s.stats.dropped += int64(n)
	if n > 0 {
		s.obs.ChunksDropped(n)
	}
}
