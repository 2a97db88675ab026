package rtfs

import (
	"context"
	"math"
	"time"
)

// Limits bound one run of RTFS code on a Thread. A zero field takes its default.
type Limits struct {
	// MaxSteps bounds the VM instructions of one Run, Call or Resume (default 10,000,000).
	MaxSteps int64
	// MaxDepth bounds the RTFS call stack depth (default 100,000 frames).
	MaxDepth int
	// MaxCollectionSize bounds the length of any collection built (default 16,777,216).
	MaxCollectionSize int
	// MaxMemory bounds the bytes that builtins and collection literals
	// allocate during one Run, Call or Resume (default 1 GiB). It is an
	// allocation budget, not a heap size: every element a builtin builds
	// counts 16 bytes (one Value), every string byte one byte, and memory
	// freed during the run is not given back. A negative value disables it.
	MaxMemory int64
	// MaxDuration bounds the wall time of one Run, Call or Resume (zero: no
	// bound). It is checked with the step budget, every 1,024 instructions
	// and whenever a builtin charges its work, so it stops CPU-bound code
	// promptly; time spent by the host between a suspension and the Resume
	// does not count.
	MaxDuration time.Duration
}

// Defaults for the zero fields of Limits.
const (
	DefaultMaxSteps          = 10_000_000 // Limits.MaxSteps when zero
	DefaultMaxDepth          = 100_000    // Limits.MaxDepth when zero
	DefaultMaxCollectionSize = 1 << 24    // Limits.MaxCollectionSize when zero (16,777,216)
	DefaultMaxMemory         = 1 << 30    // Limits.MaxMemory when zero (1 GiB)
)

// A Thread runs RTFS code: one per stream or per program run. It carries the
// limits and the VM's stacks, which it reuses from run to run, so a Thread
// that has warmed up runs calls without allocating for its frames. A Thread
// is not safe for concurrent use; use one Thread per goroutine. Between runs
// it holds no state that affects the next run.
type Thread struct {
	limits Limits

	stack    []Value   // locals and operand stacks of all frames
	sp       int       // stack top
	hw       int       // high-water mark of the stack in this run (cleared at its end)
	frames   []frame   // the RTFS call stack, innermost last
	handlers []handler // active try handlers, innermost last

	globals []Value  // the running program's globals
	gsnap   *Globals // when non-nil, globals is shared with this snapshot (copy on write)
	prog    *Program // the running program

	ctx       context.Context
	done      <-chan struct{}
	steps     int64 // instructions executed in this run
	nextCheck int64 // step count of the next limit and cancellation check

	call *HostCall // set when the run suspended

	// The budgets builtins charge (see charge), after the VM's hot fields.
	work     int64     // step equivalents charged by builtins in this run
	mem      int64     // bytes charged by builtins and literals in this run
	unpolled int64     // steps charged since charge last looked at the context
	started  time.Time // when this run started, if Limits.MaxDuration is set

	// The map a run returns to a host that reuses results (ReuseResults).
	reuse bool
	res   resultBox
}

// NewThread returns a Thread with the given limits.
func NewThread(l Limits) *Thread {
	if l.MaxSteps <= 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxCollectionSize <= 0 {
		l.MaxCollectionSize = DefaultMaxCollectionSize
	}
	switch {
	case l.MaxMemory == 0:
		l.MaxMemory = DefaultMaxMemory
	case l.MaxMemory < 0:
		l.MaxMemory = math.MaxInt64
	}
	return &Thread{limits: l}
}

// ReuseResults sets whether the thread may build the map a run returns in
// storage of its own, reused from run to run: when on, a map that the
// called function builds with a map literal as its very last step (the
// literal is the function's return value, so nothing else can refer to
// it), of up to 8 distinct keys, is built there instead of on the heap, which
// spares the allocation a processor's result map costs on every call. The
// returned *Map is then valid only until the next Run, Call or Resume on th:
// the caller reads it and keeps its keys and values (ordinary values, which
// may be kept) but never the map itself, nor hands it to RTFS code. A stream
// processor's host, which reads a result's :state and :output and drops the
// map, turns it on. Off by default.
func (th *Thread) ReuseResults(on bool) { th.reuse = on }

// A resultBox is the storage ReuseResults builds a result map in.
type resultBox struct {
	m  Map
	kv [2 * arrayMapMax]Value
}

// build returns the map of the key/value pairs kvs built in the box, or nil
// when they do not make an array-map of distinct keys (the caller then
// builds it on the heap). kvs is copied, never retained.
func (b *resultBox) build(kvs []Value) *Map {
	if b.m.kvs == nil {
		b.m.kvs = b.kv[:0]
	}
	if !b.m.refill(kvs) {
		return nil
	}
	return &b.m
}

// Limits returns the thread's limits (with defaults filled in).
func (th *Thread) Limits() Limits { return th.limits }

// elemBytes is what one element of a collection costs against
// Limits.MaxMemory: the size of a Value (an interface header).
const elemBytes = 16

// pollEvery is how many elements a long builtin handles between two
// charges (and so between two looks at the context): about 10k elements
// stay well under a millisecond, so a limit or a cancel stops a builtin
// promptly.
const pollEvery = 1 << 13

// charge accounts for the work of a builtin beyond the one VM step of its
// call: steps step-equivalents (n for an O(n) builtin, n log n for a sort)
// and bytes of memory it allocates. It returns a *LimitError when the run's
// step or memory budget is spent, and a fatal cancellation error when the
// run's context is done, so a builtin that charges as it goes (every
// pollEvery elements at least) stops within a fraction of a millisecond of
// either. Builtins charge before they allocate where they know the size,
// so a budget refuses a huge collection before it exists. A nil thread
// (a builtin called outside a run) has no budget. Cost: a few additions
// and a non-blocking channel poll.
func (th *Thread) charge(steps, bytes int64) error {
	if th == nil {
		return nil
	}
	th.work += steps
	th.mem += bytes
	if th.steps+th.work > th.limits.MaxSteps {
		return &LimitError{Limit: LimitSteps, Max: th.limits.MaxSteps}
	}
	if th.mem > th.limits.MaxMemory {
		return &LimitError{Limit: LimitMemory, Max: th.limits.MaxMemory}
	}
	// Small charges (a literal, a short builtin) look at the clock and the
	// context only once enough work has added up; the VM's own checkpoint
	// covers them every 1,024 instructions anyway.
	if th.unpolled += steps; th.unpolled < pollEvery && steps > 0 {
		return nil
	}
	th.unpolled = 0
	if err := th.checkTime(); err != nil {
		return err
	}
	if th.done != nil {
		select {
		case <-th.done:
			return &fatalError{th.ctx.Err()}
		default:
		}
	}
	return nil
}

// checkTime returns a *LimitError once the run has taken longer than
// Limits.MaxDuration.
func (th *Thread) checkTime() error {
	if th.limits.MaxDuration > 0 && time.Since(th.started) > th.limits.MaxDuration {
		return &LimitError{Limit: LimitTime, Max: int64(th.limits.MaxDuration)}
	}
	return nil
}

// chargeElems charges a builtin that handles or builds n elements: n steps
// and n elements of memory.
func (th *Thread) chargeElems(n int) error {
	return th.charge(int64(n), int64(n)*elemBytes)
}

// A meter charges a builtin's loop as it goes: tick once per element, and
// every pollEvery elements it charges them (steps and memory) and looks at
// the context. The zero meter of a nil thread never fails.
type meter struct {
	th *Thread
	n  int
}

// tick counts one element; it returns the charge's error every pollEvery
// elements.
func (m *meter) tick() error {
	m.n++
	if m.n < pollEvery {
		return nil
	}
	m.n = 0
	return m.th.chargeElems(pollEvery)
}

// build checks and charges a builtin about to build a collection of n
// elements from scratch: the size limit, then n steps and n elements of
// memory. Operations that add to a persistent collection (conj, assoc)
// call checkSize alone: their work does not grow with the collection.
func (th *Thread) build(n int) error {
	if err := th.checkSize(n); err != nil {
		return err
	}
	return th.chargeElems(n)
}

// buildText checks and charges a builtin that has built a string of n
// bytes: the size limit, n bytes of memory and one step per 16 bytes.
func (th *Thread) buildText(n int) error {
	if err := th.checkSize(n); err != nil {
		return err
	}
	return th.charge(int64(n)/elemBytes, int64(n))
}

// textRoom is how many bytes a builtin may still print into one string
// before the size limit or the memory budget stops it: the limit given to
// writeLimited, so printing a huge collection stops early instead of
// building all of it first.
func (th *Thread) textRoom() int {
	if th == nil {
		return -1
	}
	room := int64(th.limits.MaxCollectionSize)
	if left := th.limits.MaxMemory - th.mem; left < room {
		room = max(left, 0)
	}
	return int(room)
}

// checkSize returns a *LimitError if a collection of n elements exceeds the
// thread's MaxCollectionSize. Builtins call it before building a collection.
// A nil thread has no limit.
func (th *Thread) checkSize(n int) error {
	if th != nil && n > th.limits.MaxCollectionSize {
		return &LimitError{Limit: LimitCollectionSize, Max: int64(th.limits.MaxCollectionSize)}
	}
	return nil
}
