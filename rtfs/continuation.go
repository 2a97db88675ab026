package rtfs

import (
	"context"
)

// A Continuation is a suspended RTFS run: the frames of the RTFS call stack
// (function, pc, locals and operand stack), the active try handlers, the
// globals, and the host call it waits for. It is immutable plain data; it can
// be resumed any number of times, on any Thread, and serialized with
// MarshalBinary. It refers to code by function id within its Program.
type Continuation struct {
	prog     *Program
	globals  *Globals
	frames   []frame
	stack    []Value
	handlers []handler
	call     *HostCall
}

// Globals returns the globals of the suspended run.
func (k *Continuation) Globals() *Globals { return k.globals }

// Program returns the program the continuation belongs to.
func (k *Continuation) Program() *Program { return k.prog }

// Call returns the host call the continuation waits for.
func (k *Continuation) Call() *HostCall { return k.call }

// capture copies the suspended VM state into a Continuation.
func (th *Thread) capture(g *Globals) *Continuation {
	return &Continuation{
		prog:     th.prog,
		globals:  g,
		frames:   append([]frame(nil), th.frames...),
		stack:    append([]Value(nil), th.stack[:th.sp]...),
		handlers: append([]handler(nil), th.handlers...),
		call:     th.call,
	}
}

// restore loads a continuation into the thread, ready to push the host
// call's result.
func (th *Thread) restore(ctx context.Context, k *Continuation) {
	th.start(ctx, k.prog)
	th.globals, th.gsnap = k.globals.values, k.globals
	th.frames = append(th.frames[:0], k.frames...)
	th.handlers = append(th.handlers[:0], k.handlers...)
	th.sp = 0
	th.ensureStack(len(k.stack) + 1)
	copy(th.stack, k.stack)
	th.sp = len(k.stack)
	top := &th.frames[len(th.frames)-1]
	th.hw = top.base + top.fn.code.NumLocals + top.fn.code.MaxStack + 1
	th.ensureStack(th.hw)
}
