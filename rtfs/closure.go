package rtfs

import (
	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
	"github.com/rtfshost/rtfshost/rtfs/types"
)

// A Closure is an RTFS function value: compiled code (identified by a
// function id within its Program) and the values it captured. Closures are
// immutable and safe to share between goroutines; they serialize as the
// function id and the captured values.
type Closure struct {
	fn   *funcInfo
	free []Value
}

// parseType turns a type annotation form into a types.Type.
func parseType(n syntax.Node) (types.Type, error) { return types.Parse(n) }

// Kind implements Value.
func (*Closure) Kind() Kind { return types.KindFn }

// String implements Value: #<fn name> or #<fn> for an anonymous fn.
func (c *Closure) String() string {
	if c.fn.code.Name == "" {
		return "#<fn>"
	}
	return "#<fn " + c.fn.code.Name + ">"
}

// Name returns the function's name ("" for an anonymous fn).
func (c *Closure) Name() string { return c.fn.code.Name }

// ReturnType returns the declared return type, or nil if none was declared.
// For a multi-arity fn it is the first arity's declared type.
func (c *Closure) ReturnType() types.Type {
	if c.fn.retType == nil && len(c.fn.arities) > 0 {
		return c.fn.arities[0].retType
	}
	return c.fn.retType
}

// Program returns the program that defined the function, or nil for a core
// function of the prelude (such as the closure (partial f x) returns).
func (c *Closure) Program() *Program { return c.fn.prog }

// CheckResult checks v against the function's declared return type and
// returns a *types.CheckError naming the offending part, or nil when v
// conforms or no return type was declared. Cost: linear in the parts of v
// that the type describes.
func (c *Closure) CheckResult(v Value) error {
	t := c.ReturnType()
	if t == nil {
		return nil
	}
	return types.Check(t, v)
}

// Accepts reports whether the function can be called with n arguments: one
// of its arities has n parameters, or takes a rest parameter after at most n.
// Hosts use it to reject a function of the wrong shape before calling it.
func (c *Closure) Accepts(n int) bool {
	fi := c.fn
	if fi.arities != nil {
		return selectArity(fi, n) != nil
	}
	return fi.code.NumParams == n || (fi.code.Variadic && n >= fi.code.NumParams)
}

// ReadsParam reports whether the function's code reads its i-th parameter
// (0-based): a host may pass nil for a parameter the function never reads
// and spare building the value. It is true when in doubt: for a multi-arity
// or variadic function, an index out of range, or a parameter that a
// destructuring pattern takes apart. Cost: one scan of the function's code.
func (c *Closure) ReadsParam(i int) bool {
	code := c.fn.code
	if c.fn.arities != nil || code.Variadic || i < 0 || i >= code.NumParams {
		return true
	}
	// Parameters take the first slots; only LOCAL reads a slot (a nested fn
	// captures it through a LOCAL before its CLOSURE).
	for _, ins := range code.Code {
		if op, arg := compile.Decode(ins); op == compile.LOCAL && arg == i {
			return true
		}
	}
	return false
}

// MayKeepParam reports whether a call of the function may keep its i-th
// parameter (0-based) beyond the call, or hand it to code that may. It is
// false only when the function's code merely reads from the parameter:
// every use of it is the collection of a get (with or without a default),
// of a keyword called on it, of contains? or count, or of a destructuring
// pattern's lookups, or binds it to a local used only so. A host may then
// reuse the storage of a collection it passed there once a call has
// returned without suspending (a suspended call's continuation holds its
// arguments). True when in doubt, as for ReadsParam. Cost: a few scans of
// the function's code.
func (c *Closure) MayKeepParam(i int) bool {
	fi := c.fn
	code := fi.code
	if fi.arities != nil || code.Variadic || i < 0 || i >= code.NumParams {
		return true
	}
	ins := code.Code
	targets := jumpTargets(ins)
	held := make([]bool, max(code.NumLocals, i+1)) // the locals that may hold the parameter
	held[i] = true
	for grew := true; grew; {
		grew = false
		for pc, in := range ins {
			op, slot := compile.Decode(in)
			if op != compile.LOCAL || slot >= len(held) || !held[slot] {
				continue
			}
			alias, ok := readOnlyUse(fi, ins, targets, pc)
			if !ok {
				return true
			}
			if alias >= 0 && alias < len(held) && !held[alias] {
				held[alias], grew = true, true
			} else if alias >= len(held) {
				return true
			}
		}
	}
	return false
}

// readOnlyUse reports whether the value the LOCAL at pc pushes is only
// read from: consumed by an instruction that looks into it, or stored in
// the local alias (-1 when none), whose own uses the caller checks.
func readOnlyUse(fi *funcInfo, ins []uint32, targets map[int]bool, pc int) (alias int, ok bool) {
	at := func(k int) (compile.Opcode, int) {
		if k < 0 || k >= len(ins) {
			return compile.NOP, -1 // never a use
		}
		return compile.Decode(ins[k])
	}
	op, arg := at(pc + 1)
	switch op {
	case compile.COUNT, compile.LOOKUP, compile.LOOKUPD, compile.HASKEY, compile.ISMAP, compile.ISSEQ, compile.INDEX:
		return -1, true
	case compile.SETLOCAL:
		return arg, true
	case compile.MAPARG:
		// A map pattern's value, stored in its temporary local: a map
		// passes through to that local unchanged.
		if op2, arg2 := at(pc + 2); op2 == compile.SETLOCAL {
			return arg2, true
		}
	}
	// The collection of (get coll k) and (get coll k default), compiled
	// to one instruction after the pushes of its key and default.
	n := 0 // plain pushes after it
	for ; n < 2 && pushesOne(at(pc+1+n)); n++ {
	}
	next, nargs := at(pc + 1 + n)
	if (next == compile.GET && n == 1) || (next == compile.GETDEF && n == 2) {
		return -1, true
	}
	// The first argument of a call of a keyword, of get or of contains?:
	// the callee is pushed just before it, and no jump lands between the
	// two (another path could bring another callee).
	if next != compile.CALL || targets[pc] || n+1 != nargs {
		return -1, false
	}
	callee, k := at(pc - 1)
	switch callee {
	case compile.CONST:
		_, isKw := fi.consts[k].(Keyword)
		return -1, isKw && nargs <= 2
	case compile.BUILTIN:
		b, _ := fi.builtins[k].(*Builtin)
		return -1, (b == lookupBuiltin("get") && nargs <= 3) || (b == lookupBuiltin("contains?") && nargs == 2)
	}
	return -1, false
}

// pushesOne reports whether an instruction pushes one value and does
// nothing else.
func pushesOne(op compile.Opcode, _ int) bool {
	switch op {
	case compile.CONST, compile.BUILTIN, compile.NIL, compile.TRUE, compile.FALSE,
		compile.LOCAL, compile.FREE, compile.SELF, compile.GLOBAL:
		return true
	}
	return false
}

// jumpTargets returns the instructions a jump or a try handler may reach
// other than by falling through.
func jumpTargets(ins []uint32) map[int]bool {
	t := make(map[int]bool)
	for _, in := range ins {
		switch op, arg := compile.Decode(in); op {
		case compile.JMP, compile.JMPF, compile.JMPT, compile.JMPFK, compile.JMPTK, compile.PUSHTRY:
			t[arg] = true
		}
	}
	return t
}
