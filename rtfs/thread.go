package rtfs

import "context"

// Limits bound one run of RTFS code on a Thread. A zero field takes its default.
type Limits struct {
	// MaxSteps bounds the VM instructions of one Run, Call or Resume (default 10,000,000).
	MaxSteps int64
	// MaxDepth bounds the RTFS call stack depth (default 100,000 frames).
	MaxDepth int
	// MaxCollectionSize bounds the length of any collection built (default 16,777,216).
	MaxCollectionSize int
}

// Defaults for the zero fields of Limits.
const (
	DefaultMaxSteps          = 10_000_000 // Limits.MaxSteps when zero
	DefaultMaxDepth          = 100_000    // Limits.MaxDepth when zero
	DefaultMaxCollectionSize = 1 << 24    // Limits.MaxCollectionSize when zero (16,777,216)
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
	return &Thread{limits: l}
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
