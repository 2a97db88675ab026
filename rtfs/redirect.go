package rtfs

import (
	"fmt"
)

// Builtins are Go leaf functions: they never call back into RTFS, so a
// suspended run never has a Go frame on its stack. When a builtin needs RTFS
// code to do its work (a callback a caller passed, such as str/replace's
// replacement function, or a lazy sequence whose elements come from RTFS
// functions), it returns a *redirect as its error, naming a prelude
// function and its arguments: the VM calls that function in the builtin's
// place, with the same stack layout as a call, so its result is the
// builtin's result and a host call made inside suspends and serializes
// like any other. No Go frame is left behind: the redirect is the
// builtin's last word.
type redirect struct {
	fn   Value
	args []Value
}

func (r *redirect) Error() string {
	return fmt.Sprintf("internal error: a redirect to %s was not taken", r.fn)
}

// redirectTo returns the redirect that calls the prelude function name with
// args (copied: a builtin's args alias the VM stack) in the builtin's
// place. It fails when the running program's prelude has no such function
// (a program compiled under an earlier version's prelude, legacy.go).
func (th *Thread) redirectTo(name string, args ...Value) error {
	var fn Value
	if th != nil && th.prog != nil {
		if i, ok := th.prog.index[name]; ok && i < len(th.prog.init) {
			fn = th.prog.init[i]
		}
	}
	if fn == nil {
		return fmt.Errorf("%s needs the prelude of this version; the program runs under %s", name, progVersion(th))
	}
	return &redirect{fn: fn, args: append([]Value(nil), args...)}
}

func progVersion(th *Thread) string {
	if th == nil || th.prog == nil {
		return "no program"
	}
	return th.prog.version
}

// takeRedirect performs a redirect: the value at th.stack[th.sp-1] is the
// slot of the builtin's result (where the builtin or its first operand
// was); the prelude function goes there and its arguments above it, then it
// is called as CALL would call it.
func (th *Thread) takeRedirect(rd *redirect) error {
	slot := th.sp - 1
	n := len(rd.args)
	th.ensureStack(slot + n + 2)
	th.hw = max(th.hw, slot+n+2)
	th.stack[slot] = rd.fn
	copy(th.stack[slot+1:], rd.args)
	th.sp = slot + 1 + n
	return th.callValue(n)
}
