package rtfs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// An Outcome is the result of Run, Call, Resume or ResumeError. If Call is
// non-nil the VM suspended at (call :capability args...): the host performs
// the call and continues with Resume or ResumeError on Continuation.
// Otherwise Value is the result. Globals is the snapshot of the program's
// global variables at that moment.
type Outcome struct {
	// Value is the result of a run that finished; nil (the Go nil, not
	// rtfs.Nil) while the run is suspended.
	Value Value
	// Call is the host call the run suspended at, nil if it finished. The
	// host owns it.
	Call *HostCall
	// Continuation resumes a suspended run (with Resume or ResumeError, on
	// any Thread); nil if the run finished. It is immutable and may be
	// marshaled, kept and resumed more than once.
	Continuation *Continuation
	// Globals is the snapshot of the program's global variables when the
	// run finished or suspended; pass it to Thread.Call to call the
	// program's functions. Immutable; safe to share between goroutines.
	Globals *Globals
}

// A HostCall is the request of a suspended (call :capability args...).
type HostCall struct {
	// Capability is the capability id without the colon, e.g. "mcp.stream.start".
	Capability string
	// Args are the call's arguments; the host owns the slice.
	Args []Value
	// Pos is the position of the call in the program's source.
	Pos syntax.Pos
}

// Run runs a program's top level on th. Each Run starts with the program's
// fresh globals.
func (th *Thread) Run(ctx context.Context, p *Program) (out Outcome, err error) {
	if p == nil {
		return Outcome{}, errors.New("rtfs: Run: nil program")
	}
	defer func() {
		if r := recover(); r != nil {
			err = th.panicked(r)
		}
	}()
	th.start(ctx, p)
	th.globals = append([]Value(nil), p.init...)
	th.gsnap = nil
	th.ensureStack(1)
	th.stack[0] = p.toplevel.static
	th.sp = 1
	if err := th.pushFrame(th.stack[0].(*Closure), 0); err != nil {
		return Outcome{}, th.fail(err)
	}
	return th.finish(th.run(nil))
}

// Call calls fn (a function value of g's program or of a program with the
// same Hash, a core function, a keyword...) with args, using the global
// variables g. It copies args onto the VM stack and does not retain the
// slice; a Go nil argument counts as Nil. On the hot path (a warm Thread, a
// closure that builds nothing) it does not allocate.
func (th *Thread) Call(ctx context.Context, g *Globals, fn Value, args ...Value) (out Outcome, err error) {
	// No panic leaves the package; a call that returned normally (the
	// common path sets returned) spares itself the call of recover.
	returned := false
	defer func() {
		if !returned {
			if r := recover(); r != nil {
				err = th.panicked(r)
			}
		}
	}()
	// The common call, a host's call of a processor: a closure of g's own
	// program, of fixed arity, with its number of arguments.
	if cl, ok := fn.(*Closure); ok && g != nil && cl.fn.prog == g.prog {
		if c := cl.fn.code; cl.fn.arities == nil && !c.Variadic && len(args) == c.NumParams {
			// start, and pushArgs and pushFrame, in one pass and
			// inlined: a call costs as much as the rest of the setup.
			if ctx == nil {
				ctx = context.Background()
			}
			done := ctx.Done()
			th.begin(ctx, done, g.prog)
			if done != nil || th.limits.MaxDuration > 0 {
				th.firstCheck()
			}
			// The writes that would not change a pointer are skipped:
			// while the collector marks, each costs a write barrier.
			if th.gsnap != g { // else th.globals is g.values already
				th.globals, th.gsnap = g.values, g
			}
			// cl, then args, then cl's frame over them; the depth limit
			// is at least 1 (NewThread), so an empty call stack is
			// within it.
			locals := 1 + c.NumLocals // the frame's locals start at 1, above cl
			top := locals + c.MaxStack + 1
			th.ensureStack(top)
			stack := th.stack[:top]
			if len(args) == 3 {
				// A processor's (state, chunk, meta), stored in one
				// statement: one write-barrier check for the four.
				s, c, m := args[0], args[1], args[2]
				if s == nil || c == nil || m == nil {
					s, c, m = argValue(s), argValue(c), argValue(m)
				}
				_ = stack[3] // one bounds check for the four
				stack[0], stack[1], stack[2], stack[3] = cl, s, c, m
			} else {
				stack[0] = cl
				params := stack[1 : 1+len(args)]
				for i, a := range args {
					params[i] = argValue(a)
				}
			}
			for i := 1 + len(args); i < locals; i++ {
				stack[i] = nil
			}
			th.hw = max(th.hw, top)
			th.frames = append(th.frames[:0], frame{fn: cl.fn, cl: cl, base: 1})
			th.sp = locals
			v, err := th.run(nil)
			if err != nil || th.call != nil {
				return th.finish(v, err)
			}
			// The common end, built here rather than copied out of
			// finish's result: a call that returned a value.
			if th.gsnap != g {
				// A def in the call made new globals: the caller gets
				// them, the idle thread does not keep them.
				g = th.snapshot()
				th.globals, th.gsnap = nil, nil
			}
			th.clearUsed()
			th.dropCtx()
			returned = true
			return Outcome{Value: v, Globals: g}, nil
		}
	}
	return th.callAny(ctx, g, fn, args)
}

// callAny is Call for any function value: a closure of another program
// with the same Hash, of several arities or variadic, a core function, a
// keyword... Call's deferred recover covers it.
func (th *Thread) callAny(ctx context.Context, g *Globals, fn Value, args []Value) (Outcome, error) {
	if g == nil {
		return Outcome{}, errors.New("rtfs: Call: nil globals")
	}
	cl, isClosure := fn.(*Closure)
	if isClosure && cl.fn.prog != g.prog && cl.fn.prog != nil && cl.fn.prog.hash != g.prog.hash {
		return Outcome{}, fmt.Errorf("rtfs: Call: function %s belongs to program %s, globals to %s",
			fnName(cl.fn), cl.fn.prog.name, g.prog.name)
	}
	th.start(ctx, g.prog)
	th.globals, th.gsnap = g.values, g
	if !isClosure {
		th.pushArgs(fn, args)
		if err := th.callValue(len(args)); err != nil {
			return Outcome{}, th.fail(err)
		}
		if len(th.frames) > 0 { // a builtin redirected to the prelude
			return th.finish(th.run(nil))
		}
		v := th.stack[0]
		th.clearStack()
		th.dropCtx()
		return Outcome{Value: v, Globals: g}, nil
	}
	th.pushArgs(cl, args)
	if err := th.pushFrame(cl, len(args)); err != nil {
		return Outcome{}, th.fail(err)
	}
	return th.finish(th.run(nil))
}

// argValue is the value of an argument given from Go: a Go nil counts as
// RTFS nil.
func argValue(v Value) Value {
	if v == nil {
		return Nil
	}
	return v
}

// pushArgs puts fn and args on the empty stack, a Go nil as Nil.
func (th *Thread) pushArgs(fn Value, args []Value) {
	n := len(args)
	th.ensureStack(n + 1)
	stack := th.stack[:n+1]
	stack[0] = fn
	for i, a := range args {
		stack[1+i] = argValue(a)
	}
	th.sp = n + 1
}

// Resume continues a suspended run, with v as the result of its host call.
// A Continuation may be resumed any number of times, on any Thread.
func (th *Thread) Resume(ctx context.Context, k *Continuation, v Value) (out Outcome, err error) {
	if k == nil {
		return Outcome{}, errors.New("rtfs: Resume: nil continuation")
	}
	v = argValue(v)
	defer func() {
		if r := recover(); r != nil {
			err = th.panicked(r)
		}
	}()
	th.restore(ctx, k)
	th.stack[th.sp] = v
	th.sp++
	return th.finish(th.run(nil))
}

// ResumeError continues a suspended run by raising err at its host call. RTFS
// code sees it as an error map {:type :error :message "cap: msg" :capability
// "cap"}; if nothing catches it, the returned *EvalError unwraps to err.
func (th *Thread) ResumeError(ctx context.Context, k *Continuation, err error) (out Outcome, rerr error) {
	if k == nil {
		return Outcome{}, errors.New("rtfs: ResumeError: nil continuation")
	}
	if err == nil {
		err = errors.New("unknown host error")
	}
	defer func() {
		if r := recover(); r != nil {
			rerr = th.panicked(r)
		}
	}()
	th.restore(ctx, k)
	return th.finish(th.run(&hostError{err: err, cap: k.call.Capability}))
}

// start prepares th for a run of p under ctx on an empty stack.
func (th *Thread) start(ctx context.Context, p *Program) {
	if ctx == nil {
		ctx = context.Background()
	}
	done := ctx.Done()
	th.begin(ctx, done, p)
	if done != nil || th.limits.MaxDuration > 0 {
		th.firstCheck()
	}
	th.sp = 0
	th.frames = th.frames[:0]
}

// begin resets the run's context, counters and budgets for a run of p
// under ctx, whose Done channel is done. The run loop checks the limits and
// the context at its first instruction only when firstCheck, which the
// caller calls when there is a Done channel or a time limit, says so. (Both
// are kept out of start so that Call's common path inlines them.)
func (th *Thread) begin(ctx context.Context, done <-chan struct{}, p *Program) {
	// The run reads ctx only when its Done channel is not nil (to ask its
	// Err once done is closed), so a context that is never done is not
	// kept: th.ctx and th.done are both set or both nil, and nil between
	// runs. The writes skipped are write barriers spared while the
	// collector marks.
	if done != nil {
		th.ctx, th.done = ctx, done
	} else {
		th.dropCtx()
	}
	if th.prog != p {
		th.prog = p
	}
	if th.call != nil {
		th.call = nil
	}
	th.steps = 0
	th.work, th.mem, th.unpolled = 0, 0, 0
	th.out = th.out[:0]
	th.handlers = th.handlers[:0]
	th.nextCheck = min(checkInterval, th.limits.MaxSteps)
}

// firstCheck is the check of the run's first instruction: at step 0, with
// nothing run or charged yet, only a context that is already cancelled or
// a time limit (which may be as short as a nanosecond) can stop the run,
// and checking them here spares the run loop a checkpoint. It starts the
// run's clock.
func (th *Thread) firstCheck() {
	if th.limits.MaxDuration > 0 {
		th.started = time.Now()
		th.nextCheck = 0
	}
	if th.done != nil {
		select {
		case <-th.done:
			th.nextCheck = 0
		default:
		}
	}
}

// dropCtx forgets the run's context, so that an idle thread keeps none.
func (th *Thread) dropCtx() {
	if th.done != nil { // else th.ctx is nil too (begin)
		th.ctx, th.done = nil, nil
	}
}

// fail turns an error raised before the run loop started into an EvalError.
func (th *Thread) fail(err error) error {
	ee, _ := th.evalError(err)
	th.resetStacks()
	th.dropCtx()
	return ee
}

// finish builds the Outcome of a run that returned or suspended.
func (th *Thread) finish(v Value, err error) (Outcome, error) {
	if err != nil {
		th.globals, th.gsnap = nil, nil
		th.dropCtx()
		return Outcome{}, err
	}
	g := th.snapshot()
	if th.call == nil {
		th.clearStack()
		th.dropCtx()
		return Outcome{Value: v, Globals: g}, nil
	}
	k := th.capture(g)
	call := th.call
	th.call = nil
	th.resetStacks()
	th.dropCtx()
	return Outcome{Call: call, Continuation: k, Globals: g}, nil
}

// snapshot returns the current globals as an immutable Globals; later
// writes copy them first.
func (th *Thread) snapshot() *Globals {
	if th.gsnap == nil {
		th.gsnap = &Globals{prog: th.prog, values: th.globals}
	}
	return th.gsnap
}

// panicked turns a Go panic inside the VM (a bug) into an error, so that no
// panic crosses the package boundary, and resets the thread.
func (th *Thread) panicked(r any) error {
	clear(th.frames[:cap(th.frames)])
	th.frames, th.handlers, th.sp, th.hw, th.call = th.frames[:0], th.handlers[:0], 0, 0, nil
	clear(th.stack)
	clear(th.out)
	th.out = th.out[:0]
	th.globals, th.gsnap, th.ctx, th.done = nil, nil, nil, nil
	return fmt.Errorf("rtfs: internal error: %v", r)
}
