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
