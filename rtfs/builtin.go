package rtfs

import (
	"errors"
	"fmt"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"

	"github.com/rtfshost/rtfshost/rtfs/types"
)

// A Builtin is a function implemented in Go. Builtins are pure leaf
// functions: they never call back into RTFS, so a suspended VM never has a
// Go frame on its stack. A Builtin is immutable and safe to share between
// goroutines.
type Builtin struct {
	name             string
	aliasOf          string // the builtin this one is another name for, if any
	bare             bool   // its errors name their form themselves: no name prefix
	impl             func(th *Thread, args []Value) (Value, error)
	minArgs, maxArgs int // maxArgs < 0: variadic
}

// NewBuiltin returns a builtin named name that runs fn. fn receives the
// calling Thread (nil when called outside a run) and the arguments; it
// must not retain or modify args (the VM reuses that slice), must not
// panic, and reports failures as errors, which the VM prefixes with the
// function's name and decorates with the RTFS position and call stack.
// Collections it builds should be checked with the thread's size limit.
func NewBuiltin(name string, fn func(th *Thread, args []Value) (Value, error)) *Builtin {
	return &Builtin{name: name, impl: fn, maxArgs: -1}
}

// Name returns the builtin's name.
func (b *Builtin) Name() string { return b.name }

// Kind implements Value: builtins are functions.
func (*Builtin) Kind() Kind { return types.KindFn }

// String implements Value: #<builtin name>.
func (b *Builtin) String() string { return "#<builtin " + b.name + ">" }

// call runs the builtin: it checks the arity, runs the function and
// prefixes any error with the builtin's name ("count: expected a
// collection, got int 5"), keeping the cause reachable with errors.As/Is.
// The VM calls builtins only through call.
func (b *Builtin) call(th *Thread, args []Value) (Value, error) {
	if len(args) < b.minArgs || (b.maxArgs >= 0 && len(args) > b.maxArgs) {
		return nil, withKind(compile.KindArity, fmt.Errorf("%s: %s", b.name, arityMessage(b.minArgs, b.maxArgs, len(args))))
	}
	v, err := b.impl(th, args)
	if err != nil {
		if _, ok := err.(*redirect); ok {
			return nil, err
		}
		if errors.Is(err, errSortedBy) {
			// A key to add to a map or set sorted by an RTFS function:
			// the prelude finds its place with the comparator (sorted.go).
			return nil, th.redirectTo("%sorted-retry", String(b.name), NewVector(args...))
		}
		var nr *needRealize
		if errors.As(err, &nr) {
			// A lazy sequence reached a thunk: the prelude computes the
			// elements and calls b again (lazy.go).
			return nil, th.redirectTo("%lz-retry", b, NewVector(args...), nr.seq, Int(nr.n))
		}
		if !hasKind(err) {
			err = withKind(compile.KindArgument, err)
		}
		if b.bare {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", b.name, err)
	}
	return v, nil
}

func arityMessage(lo, hi, got int) string {
	switch {
	case lo == hi:
		return fmt.Sprintf("expected %d argument%s, got %d", lo, plural(lo), got)
	case hi < 0:
		return fmt.Sprintf("expected at least %d argument%s, got %d", lo, plural(lo), got)
	}
	return fmt.Sprintf("expected %d to %d arguments, got %d", lo, hi, got)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// builtinFn is the Go signature of a core function.
type builtinFn = func(th *Thread, args []Value) (Value, error)

// builtinTable maps names to the core library's builtins. It is built once
// and never modified afterwards.
type builtinTable map[string]*Builtin

// add registers fn under name with the arity lo..hi (hi < 0: variadic).
func (t builtinTable) add(name string, lo, hi int, fn builtinFn) {
	if _, dup := t[name]; dup {
		panic("rtfs: duplicate builtin " + name) // programming error, caught by tests
	}
	t[name] = &Builtin{name: name, impl: fn, minArgs: lo, maxArgs: hi}
}

// alias registers the builtin name under another name too; errors name
// the alias the program used.
func (t builtinTable) alias(alias, name string) {
	b := t[name]
	t.add(alias, b.minArgs, b.maxArgs, b.impl)
	t[alias].aliasOf = name
}

// coreBuiltins is the immutable table of the pure core library.
var coreBuiltins = newCoreBuiltins()

func newCoreBuiltins() builtinTable {
	t := make(builtinTable, 256)
	addNumBuiltins(t)
	addCmpBuiltins(t)
	addPredBuiltins(t)
	addStrBuiltins(t)
	addSeqBuiltins(t)
	addCollBuiltins(t)
	addMapBuiltins(t)
	addConvBuiltins(t)
	addCljBuiltins(t)
	addRegexBuiltins(t)
	addSortedBuiltins(t)
	addBitBuiltins(t)
	addReducedBuiltins(t)
	addSetBuiltins(t)
	addLazySeqBuiltins(t)
	addMathBuiltins(t)
	addInteropBuiltins(t)
	return t
}

// lookupBuiltin returns the core builtin called name, or nil. The compiler
// uses it for names the program does not define. Safe for concurrent use.
func lookupBuiltin(name string) *Builtin { return coreBuiltins[name] }
