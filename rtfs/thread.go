package rtfs

import (
	"context"
	"math"
	"strings"
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
	// MaxOutput bounds, in bytes, one encoding of a value a run produced
	// (its result, a stream's output or state): as JSON for a client, or
	// in the store's codec. Zero or negative: no bound of its own; the
	// memory budget bounds it anyway (see OutputLimit).
	MaxOutput int64
}

// OutputLimit is the bound on one encoding of a value that a run with
// these limits produced: the smaller of MaxOutput and the memory budget
// MaxMemory (default 1 GiB), since the encoding's buffer is memory the run
// caused; 0 (no bound) when neither bounds it. Pass it to AppendJSON,
// OutputJSON and MarshalValueOpts.
func (l Limits) OutputLimit() int64 {
	mem := l.MaxMemory
	switch {
	case mem == 0:
		mem = DefaultMaxMemory
	case mem < 0:
		mem = 0
	}
	switch {
	case l.MaxOutput <= 0:
		return mem
	case mem == 0:
		return l.MaxOutput
	}
	return min(l.MaxOutput, mem)
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
// it holds no state that affects the next run, and keeps none of the last
// run's values alive.
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

	// out holds the text of the with-out-str forms running, innermost last;
	// print and println write there instead of making a host call.
	out []*strings.Builder

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
// builds it on the heap). kvs is copied, never retained; mt charges the
// comparing of computed keys, as for any literal.
func (b *resultBox) build(kvs []Value, mt *meter) *Map {
	if b.m.kvs == nil {
		b.m.kvs, b.m.slots = &b.kv[0], int32(len(b.kv))
	}
	if !b.m.refill(kvs, mt) {
		return nil
	}
	return &b.m
}

// Limits returns the thread's limits (with defaults filled in).
func (th *Thread) Limits() Limits { return th.limits }

// checkSize returns a *LimitError if a collection of n elements exceeds the
// thread's MaxCollectionSize. Builtins call it before building a collection.
// A nil thread has no limit.
func (th *Thread) checkSize(n int) error {
	if th != nil && n > th.limits.MaxCollectionSize {
		return &LimitError{Limit: LimitCollectionSize, Max: int64(th.limits.MaxCollectionSize)}
	}
	return nil
}
