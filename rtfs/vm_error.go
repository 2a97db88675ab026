package rtfs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
	"github.com/rtfshost/rtfshost/rtfs/types"
)

// thrownError is raised by (throw v).
type thrownError struct{ value Value }

func (e *thrownError) Error() string { return throwMessage(e.value) }

// reraise raises a caught error again, keeping its original stack.
type reraise struct{ err *EvalError }

func (e *reraise) Error() string { return e.err.Error() }

// fatalError wraps a cancellation: it cannot be caught by RTFS code.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// hostError is an error the host passed to ResumeError.
type hostError struct {
	err error
	cap string
}

// Error names the capability once: before the host's message, unless that
// message already begins with it (a capabilities.Error does: "capability
// :ID: ...").
func (e *hostError) Error() string {
	msg := e.err.Error()
	if rest, ok := strings.CutPrefix(msg, "capability :"); ok && strings.HasPrefix(rest, e.cap) &&
		(len(rest) == len(e.cap) || rest[len(e.cap)] == ':') {
		return msg
	}
	return e.cap + ": " + msg
}
func (e *hostError) Unwrap() error { return e.err }

// caught is the stack representation of an error caught by a try handler.
// The compiler only lets ERRVAL, CATCHES and RERAISE see it.
type caught struct{ err *EvalError }

func (*caught) Kind() Kind       { return types.KindNil }
func (c *caught) String() string { return "#<error " + c.err.Msg + ">" }

// caughtOp runs the instructions that look at a caught error on top of the
// stack: rethrow it, replace it by the value a catch binds, or test a catch
// pattern against it.
func caughtOp(op compile.Opcode, consts []Value, arg int, stack []Value, sp *int) error {
	c, ok := stack[*sp-1].(*caught)
	if !ok {
		return fmt.Errorf("corrupt continuation: no caught error for %s", op)
	}
	switch op {
	case compile.RERAISE:
		*sp--
		return &reraise{c.err}
	case compile.ERRVAL:
		stack[*sp-1] = c.err.Value
	case compile.CATCHES:
		stack[*sp-1] = Bool(catchMatches(consts[arg], c.err.Value))
	}
	return nil
}

// throwMessage is the message of (throw v): a string itself; a map's
// :message, followed by its :data when it has some, as (ex-info msg data)
// gives (so that an uncaught ex-info shows what it carries).
func throwMessage(v Value) string {
	switch v := v.(type) {
	case String:
		return string(v)
	case *Map:
		if m, ok := v.GetKeyword("message"); ok {
			if s, ok := m.(String); ok {
				if d, ok := v.GetKeyword("data"); ok && d != Nil && !emptyColl(d) {
					return string(s) + " " + d.String()
				}
				return string(s)
			}
		}
	}
	return "uncaught throw: " + v.String()
}

// errorValue is the value a catch binds for a runtime or host error: a map
// {:type :error :message msg :kind k}, with :capability for a host error.
func errorValue(msg string, host *hostError, kind string) Value {
	if host != nil {
		return MapOf(Keyword("type"), Keyword("error"), Keyword("message"), String(msg),
			Keyword("kind"), Keyword(kindHost), Keyword("capability"), String(host.cap))
	}
	return MapOf(Keyword("type"), Keyword("error"), Keyword("message"), String(msg), Keyword("kind"), Keyword(kind))
}

// handle turns err into an *EvalError and unwinds to the innermost try
// handler if there is one and the error is catchable; it reports whether a
// handler took it.
//
// A redirect (a builtin called by CALL or a fast op that handed its work to
// the prelude, redirect.go) is not an error: handle makes the call in the
// builtin's place, its result slot being the top of the stack, and
// reports it taken.
func (th *Thread) handle(err error) (bool, *EvalError) {
	if rd, ok := err.(*redirect); ok {
		if err = th.takeRedirect(rd); err == nil {
			return true, nil
		}
	}
	ee, catchable := th.evalError(err)
	if !catchable || len(th.handlers) == 0 {
		th.resetStacks()
		return false, ee
	}
	h := th.handlers[len(th.handlers)-1]
	th.handlers = th.handlers[:len(th.handlers)-1]
	clear(th.frames[h.frame+1:]) // as RETURN does
	th.frames = th.frames[:h.frame+1]
	th.frames[h.frame].pc = h.pc
	th.stack[h.sp] = &caught{ee}
	th.sp = h.sp + 1
	return true, nil
}

// evalError builds the error the host sees, with the current RTFS stack.
func (th *Thread) evalError(err error) (*EvalError, bool) {
	if r, ok := err.(*reraise); ok {
		return r.err, true
	}
	ee := &EvalError{Msg: err.Error(), cause: err}
	catchable := true
	var le *LimitError
	var fe *fatalError
	var he *hostError
	switch {
	case errors.As(err, &fe):
		catchable = false
		ee.cause = fe.err
	case errors.As(err, &le):
		catchable = false
	}
	if t, ok := err.(*thrownError); ok {
		ee.Value, ee.cause = t.value, nil
	} else if errors.As(err, &he) {
		ee.Value = errorValue(ee.Msg, he, kindHost)
	}
	th.fillStack(ee)
	if ee.Value == nil {
		ee.Value = errorValue(ee.Msg, nil, errorKind(err, kindVM))
	}
	return ee, catchable
}

// fillStack records the RTFS call stack, the user position, and names the
// core function the program called when the error arose inside the prelude.
func (th *Thread) fillStack(ee *EvalError) {
	ee.Stack = make([]StackFrame, len(th.frames))
	user := -1
	for i := range th.frames {
		f := &th.frames[i]
		pos := f.fn.code.PosAt(max(f.pc-1, 0))
		ee.Stack[i] = StackFrame{Name: fnName(f.fn), Pos: pos}
		if !f.fn.internal {
			user = i
		}
	}
	if user >= 0 {
		ee.Pos = ee.Stack[user].Pos
	} else if n := len(ee.Stack); n > 0 {
		ee.Pos = ee.Stack[n-1].Pos
	}
	if user+1 < len(th.frames) && user >= 0 {
		name := fnName(th.frames[user+1].fn)
		if _, thrown := ee.cause.(*thrownError); !thrown && ee.cause != nil && !strings.HasPrefix(ee.Msg, name+":") {
			ee.Msg = name + ": " + ee.Msg
		}
	}
}

// userPos is the position of the innermost frame of non-internal code.
func (th *Thread) userPos() syntax.Pos {
	for i := len(th.frames) - 1; i >= 0; i-- {
		f := &th.frames[i]
		if !f.fn.internal || i == 0 {
			return f.fn.code.PosAt(max(f.pc-1, 0))
		}
	}
	return syntax.Pos{}
}

// catchMatches reports whether a catch pattern matches an error value: an
// exception class (a symbol) one of its kinds (classMatches); a keyword or
// string the value itself, or a map whose :type is the pattern.
func catchMatches(pattern, v Value) bool {
	if s, ok := pattern.(Symbol); ok {
		return classMatches(string(s), v)
	}
	if Equal(pattern, v) {
		return true
	}
	if m, ok := v.(*Map); ok {
		if t, ok := m.GetKeyword("type"); ok {
			return Equal(t, pattern) || (t.Kind() == types.KindKeyword && pattern.Kind() == types.KindString && string(t.(Keyword)) == string(pattern.(String)))
		}
	}
	return false
}

// resetStacks drops all frames and handlers after a run ends with an error,
// leaving the Thread ready for the next run.
func (th *Thread) resetStacks() {
	th.clearStack()
	clear(th.frames)
	th.frames = th.frames[:0]
	th.handlers = th.handlers[:0]
	clear(th.out) // the text of a with-out-str the run left open
	th.out = th.out[:0]
}

// clearStack drops the references the stack holds, so that a Thread kept
// between runs does not keep old values alive.
func (th *Thread) clearStack() {
	clearSlots(th.stack, max(th.hw, th.sp+1))
	th.sp, th.hw = 0, 0
}

// clearUsed is clearStack after the entry frame returned (th.sp is 0), on
// a stack ensureStack made (at least 256 slots): a call that used no more
// than 8 or 16 slots, most, clears them in one block, with no loop; a
// larger one with memclrHasPointers.
func (th *Thread) clearUsed() {
	switch n := th.hw; {
	case n <= 8:
		*(*[8]Value)(th.stack) = [8]Value{}
	case n <= 16:
		*(*[16]Value)(th.stack) = [16]Value{}
	default:
		clear(th.stack[:min(n, len(th.stack))])
	}
	th.hw = 0
}

// clearSlots sets stack[:n] (or all of stack, if shorter) to nil. The
// slots past n are nil already, so it clears in blocks of 8 slots, which
// cost one write-barrier check and a few vector stores each, where a loop
// pays a check per slot and memclrHasPointers a call.
func clearSlots(stack []Value, n int) {
	if n > 64 {
		clear(stack[:min(n, len(stack))])
		return
	}
	for len(stack) >= 8 && n > 0 {
		*(*[8]Value)(stack) = [8]Value{}
		stack, n = stack[8:], n-8
	}
	for i := 0; i < min(n, len(stack)); i++ {
		stack[i] = nil
	}
}

// emptyColl reports whether v is an empty map.
func emptyColl(v Value) bool {
	m, ok := v.(*Map)
	return ok && m.Len() == 0
}
