// Package compile turns RTFS forms read by package syntax into bytecode for the
// VM of package rtfs. It resolves lexical scopes to local slots, closure free
// variables and global slots, expands the special forms, and records a pc to
// position table for every function.
//
// Compiled code holds no rtfs values: constants are syntax nodes (literals and
// quoted forms) that package rtfs turns into values once per Program, and
// references to Go builtins are names that package rtfs resolves.
//
// The main types are Program (the compiled functions and global names) and
// Funcode (one function's code). Both are immutable after Compile returns and
// are safe to share between goroutines.
package compile

import "github.com/rtfshost/rtfshost/rtfs/syntax"

// Version identifies the bytecode format and the prelude; it is part of every
// program hash and continuation. Package rtfs keeps reading continuations of
// the earlier versions it lists (rtfs/legacy.go): bump Version with a change
// of the compiler's output or of the prelude, and keep the previous prelude
// there.
const Version = "rtfs-compile-4"

// A Program is the result of compiling one or more units on top of an optional
// base program (the prelude). Its Funcs start with the base's functions, then
// the top-level function, then the nested functions; a
// function's index in Funcs is its stable id.
type Program struct {
	Funcs    []*Funcode
	Globals  []string // global slot names; the base's come first (a unit may reuse a base name)
	Toplevel int      // id of the top-level function, which runs all units' forms in order
	NumBase  int      // number of functions that come from the base program
}

// A Funcode is one compiled function.
type Funcode struct {
	ID       int
	Name     string // "" for anonymous fns; "<toplevel>" for a unit's top level
	Pos      syntax.Pos
	Internal bool // defined by the prelude or a host-supplied unit: hidden from error positions
	// SeqLookup: the function was compiled as a version before
	// rtfs-compile-4 did it, whose map patterns have no MAPARG and read a
	// sequence as key/value pairs in LOOKUP itself.
	SeqLookup bool
	Code      []uint32
	// CalleeNames maps the pc of a CALL whose function is a name (a local
	// or a global) to that name, for the error of calling nil.
	CalleeNames map[int]string
	Depth       []int32 // operand stack depth before each instruction (to validate continuations)
	PCPos       []PCPos // sorted by PC
	Consts      []syntax.Node
	Builtins    []string // names of the Go builtins the code refers to (BUILTIN k)
	NumParams   int      // fixed parameters, excluding a rest parameter
	Variadic    bool     // a rest parameter follows the fixed ones, bound to a list
	NumLocals   int      // slots for parameters and locals
	MaxStack    int      // operand stack depth needed above the locals
	NumFree     int      // captured values
	FreeNames   []string

	ParamTypes []syntax.Node // type annotations per parameter, nil where none
	RestType   syntax.Node
	ReturnType syntax.Node // the declared return type form, or nil
	// TypeForms lists every type annotation in the function's own code
	// (parameters, let bindings, defs), for validation.
	TypeForms []syntax.Node

	// Arities lists, for a multi-arity fn, the ids of its single-arity bodies
	// (sorted by NumParams, a variadic one last). A multi-arity Funcode has no
	// code of its own; its bodies share its free variables.
	Arities []int
}

// A PCPos maps the instructions from PC on to a source position.
type PCPos struct {
	PC  int
	Pos syntax.Pos
}

// PosAt returns the source position of the instruction at pc.
func (f *Funcode) PosAt(pc int) syntax.Pos {
	pos := f.Pos
	lo, hi := 0, len(f.PCPos)
	for lo < hi {
		m := (lo + hi) / 2
		if f.PCPos[m].PC <= pc {
			pos = f.PCPos[m].Pos
			lo = m + 1
		} else {
			hi = m
		}
	}
	return pos
}

// A Unit is one source file's forms.
type Unit struct {
	Nodes    []syntax.Node
	Internal bool // the unit's functions are host-supplied helpers (see Funcode.Internal)
}

// A Resolver tells the compiler which names are Go builtins.
type Resolver func(name string) bool
