package rtfs

import (
	"fmt"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// errorf returns a plain runtime error; the VM adds position and stack.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// callValue calls the value below the top n stack values with them as
// arguments. A closure gets a new frame (the caller continues from the
// frame on top); other callables produce their result at once.
func (th *Thread) callValue(n int) error {
	sp := th.sp
	switch f := th.stack[sp-n-1].(type) {
	case *Closure:
		return th.pushFrame(f, n)
	case *Builtin:
		v, err := f.call(th, th.stack[sp-n:sp])
		th.sp = sp - n
		th.stack[th.sp-1] = v
		if rd, ok := err.(*redirect); ok {
			return th.takeRedirect(rd)
		}
		return err
	default:
		v, err := th.callData(f, th.stack[sp-n:sp])
		th.sp = sp - n
		th.stack[th.sp-1] = v
		return err
	}
}

// callSpread replaces (f seq) on the stack by f and the elements of seq,
// then calls f.
func (th *Thread) callSpread() error {
	sp := th.sp
	xs, err := items(th, th.stack[sp-1])
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	n := xs.Len()
	if err := th.chargeElems(n); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	th.sp = sp - 1
	th.ensureStack(th.sp + n + 1)
	th.hw = max(th.hw, th.sp+n+1)
	for i := 0; i < n; i++ {
		th.stack[th.sp] = xs.Index(i)
		th.sp++
	}
	return th.callValue(n)
}

func (th *Thread) ensureStack(need int) {
	if need <= len(th.stack) {
		return
	}
	size := max(2*len(th.stack), need, 256)
	s := make([]Value, size)
	copy(s, th.stack[:th.sp])
	th.stack = s
}

// pushFrame enters closure cl with the top n stack values as arguments.
func (th *Thread) pushFrame(cl *Closure, n int) error {
	fi := cl.fn
	if fi.arities != nil {
		fi = selectArity(fi, n)
		if fi == nil {
			return withKind(compile.KindArity, fmt.Errorf("%s: no arity takes %d argument%s", fnName(cl.fn), n, plural(n)))
		}
	}
	c := fi.code
	if len(th.frames) >= th.limits.MaxDepth {
		return &LimitError{Limit: LimitDepth, Max: int64(th.limits.MaxDepth)}
	}
	base := th.sp - n
	top := base + c.NumLocals + c.MaxStack + 1
	th.ensureStack(top)
	th.hw = max(th.hw, top)
	stack := th.stack
	nparams := c.NumParams
	if c.Variadic {
		if n < nparams {
			return withKind(compile.KindArity, fmt.Errorf("%s: expected at least %d argument%s, got %d", fnName(fi), nparams, plural(nparams), n))
		}
		var rest Value = Nil // Clojure: no rest arguments is nil, not ()
		if n > nparams {
			rest = listOwned(append([]Value(nil), stack[base+nparams:base+n]...))
		}
		stack[base+nparams] = rest
		nparams++
	} else if n != nparams {
		return withKind(compile.KindArity, fmt.Errorf("%s: expected %d argument%s, got %d", fnName(fi), nparams, plural(nparams), n))
	}
	for i := base + nparams; i < base+c.NumLocals; i++ {
		stack[i] = nil
	}
	th.frames = append(th.frames, frame{fn: fi, cl: cl, base: base})
	th.sp = base + c.NumLocals
	return nil
}

func selectArity(fi *funcInfo, n int) *funcInfo {
	for _, a := range fi.arities {
		if a.code.NumParams == n || (a.code.Variadic && n >= a.code.NumParams) {
			return a
		}
	}
	return nil
}

func fnName(fi *funcInfo) string {
	if fi.code.Name == "" {
		return "fn"
	}
	return fi.code.Name
}

// callData calls a keyword, map, vector or set as a function, charging the
// hashing and comparing of a key as get does.
func (th *Thread) callData(f Value, args []Value) (Value, error) {
	m := meter{th: th}
	v, err := callDataOn(f, args, &m)
	if err != nil {
		return nil, err
	}
	return v, m.done()
}

func callDataOn(f Value, args []Value, m *meter) (Value, error) {
	switch f := f.(type) {
	case Keyword:
		if len(args) != 1 && len(args) != 2 {
			return nil, fmt.Errorf("keyword %s: expected 1 or 2 arguments, got %d", f, len(args))
		}
		return getOr(args[0], f, args[1:], m), nil
	case Symbol:
		// A symbol looks itself up like a keyword: ('a {'a 1}) is 1.
		if len(args) != 1 && len(args) != 2 {
			return nil, fmt.Errorf("symbol %s: expected 1 or 2 arguments, got %d", f, len(args))
		}
		return getOr(args[0], f, args[1:], m), nil
	case *Map:
		if len(args) != 1 && len(args) != 2 {
			return nil, fmt.Errorf("map as function: expected 1 or 2 arguments, got %d", len(args))
		}
		return getOr(f, args[0], args[1:], m), nil
	case *Vector:
		if len(args) != 1 {
			return nil, fmt.Errorf("vector as function: expected 1 argument, got %d", len(args))
		}
		i, ok := args[0].(Int)
		if !ok || i < 0 || int(i) >= f.Len() {
			return nil, indexError("vector as function: index %s out of range for a vector of %d", args[0], f.Len())
		}
		return f.Index(int(i)), nil
	case *Set:
		if len(args) != 1 {
			return nil, fmt.Errorf("set as function: expected 1 argument, got %d", len(args))
		}
		if f.has(args[0], m) {
			return args[0], nil
		}
		return Nil, nil
	}
	return nil, withKind(typeKind(f), fmt.Errorf("cannot call %s: not a function", describe(f)))
}

// suspend records the host call on top of the stack in th.call.
func (th *Thread) suspend(spread bool, n int) error {
	if len(th.out) > 0 {
		// A suspended run keeps no captured output, and the call would
		// happen while the text it belongs with is still held.
		return withKind(compile.KindState, errorf("with-out-str: a host call inside it is not supported (it captures print, println and prn only)"))
	}
	sp := th.sp
	var args []Value
	if spread {
		xs, err := items(th, th.stack[sp-1])
		if err != nil {
			return fmt.Errorf("call: arguments: %w", err)
		}
		args = xs.appendTo(make([]Value, 0, xs.Len()), 0)
		n = 1
	} else {
		args = append([]Value(nil), th.stack[sp-n:sp]...)
	}
	capv := th.stack[sp-n-1]
	var name string
	switch c := capv.(type) {
	case Keyword:
		name = string(c)
	case String:
		name = string(c)
	default:
		return fmt.Errorf("call: the capability must be a keyword or string, got %s", describe(capv))
	}
	if name == "" {
		return fmt.Errorf("call: empty capability name")
	}
	th.sp = sp - n - 1
	th.call = &HostCall{Capability: name, Args: args, Pos: th.userPos()}
	return nil
}
