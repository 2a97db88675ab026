package compile

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// Compile compiles units on top of base (which may be nil). isBuiltin reports
// which free names are Go builtins; names that are neither locals, globals of
// base or of the units, nor builtins are compile errors. A compile error is a
// *syntax.Error: "file:line:col: message", on one line.
func Compile(base *Program, units []Unit, isBuiltin Resolver) (prog *Program, err error) {
	return CompileVersion(Version, base, units, isBuiltin)
}

// compile2 and compile3 are the versions whose programs CompileVersion
// still compiles as they did, for their continuations.
const (
	compile2 = "rtfs-compile-2"
	compile3 = "rtfs-compile-3"
)

// before4 reports whether the compiler produces the output of a version
// before rtfs-compile-4, whose function parameters recur into their
// destructuring and whose map patterns read keyword-argument sequences.
func (c *compiler) before4() bool { return c.version == compile2 || c.version == compile3 }

// CompileVersion is Compile as the compiler of an earlier version (Version
// or an earlier one this package lists) did it: the same bytecode, so that a continuation of
// that version finds the code it was suspended in. Forms added since keep
// their meaning; only where a later version changed the meaning of a form
// the earlier one accepted does the earlier meaning apply.
func CompileVersion(version string, base *Program, units []Unit, isBuiltin Resolver) (prog *Program, err error) {
	c := &compiler{
		version:     version,
		prog:        &Program{},
		globals:     make(map[string]int),
		baseGlobals: make(map[string]int),
		isBuiltin:   isBuiltin,
	}
	if base != nil {
		c.prog.Funcs = append(c.prog.Funcs, base.Funcs...)
		c.prog.Globals = append(c.prog.Globals, base.Globals...)
		c.prog.NumBase = len(base.Funcs)
		for i, name := range base.Globals {
			c.baseGlobals[name] = i
		}
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*syntax.Error)
			if !ok {
				e = &syntax.Error{Msg: fmt.Sprintf("internal compiler error: %v", r)}
			}
			prog, err = nil, e
		}
	}()
	for _, u := range units {
		c.declareGlobals(u.Nodes)
	}
	c.compileUnits(units)
	return c.prog, nil
}

type compiler struct {
	version     string // the compiler version whose output to produce
	prog        *Program
	globals     map[string]int // the units' globals
	baseGlobals map[string]int // the base's globals; a unit's global of the same name shadows one
	isBuiltin   Resolver
	internal    bool
	aliases     map[string]string // require's :as: alias -> namespace
	refers      map[string]string // require's :refer: name -> full name
}

// global returns the slot of the global name, if there is one.
func (c *compiler) global(name string) (int, bool) {
	if i, ok := c.globals[name]; ok {
		return i, true
	}
	i, ok := c.baseGlobals[name]
	return i, ok
}

// errorf aborts compilation with an error at pos. Compile recovers it; the
// panic never leaves this package.
func errorf(pos syntax.Pos, format string, args ...any) {
	panic(&syntax.Error{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

// declareGlobals gives a slot to every name that a top-level def or defn
// defines, so that functions may refer to globals defined later in the file.
func (c *compiler) declareGlobals(nodes []syntax.Node) {
	for _, n := range nodes {
		l, ok := n.(*syntax.List)
		if !ok || len(l.Elems) < 2 {
			continue
		}
		head, ok := l.Elems[0].(*syntax.Symbol)
		if !ok {
			continue
		}
		switch head.Name {
		case "def", "defn", "defn-":
			if name, ok := l.Elems[1].(*syntax.Symbol); ok {
				c.globalSlot(name.Name)
			}
		case "declare":
			for _, e := range l.Elems[1:] {
				if name, ok := e.(*syntax.Symbol); ok {
					c.globalSlot(name.Name)
				}
			}
		case "do":
			c.declareGlobals(l.Elems[1:])
		}
	}
}

func (c *compiler) globalSlot(name string) int {
	if i, ok := c.globals[name]; ok {
		return i
	}
	i := len(c.prog.Globals)
	c.prog.Globals = append(c.prog.Globals, name)
	c.globals[name] = i
	return i
}

func (c *compiler) newFuncode(name string, pos syntax.Pos) *Funcode {
	f := &Funcode{ID: len(c.prog.Funcs), Name: name, Pos: pos, Internal: c.internal, SeqLookup: c.before4()}
	c.prog.Funcs = append(c.prog.Funcs, f)
	return f
}

// compileUnits compiles the units' forms, in order, into one top-level
// function.
func (c *compiler) compileUnits(units []Unit) {
	var pos syntax.Pos
	for _, u := range units {
		if len(u.Nodes) > 0 && !pos.IsValid() {
			pos = u.Nodes[0].Pos()
		}
	}
	fc := &fcomp{c: c, fn: c.newFuncode("<toplevel>", pos), free: &freeList{}, toplevel: true}
	c.prog.Toplevel = fc.fn.ID
	n := 0
	for _, u := range units {
		c.internal = u.Internal
		for _, node := range u.Nodes {
			if n > 0 {
				fc.emit(POP, 0)
			}
			fc.expr(node, false)
			n++
		}
	}
	c.internal = false
	if n == 0 {
		fc.emit(NIL, 0)
	}
	fc.emit(RETURN, 0)
	fc.finish()
}

// A ref says where an enclosing function finds a value that a closure captures.
type ref struct {
	kind  Opcode // LOCAL, FREE or SELF
	index int
}

type freeList struct {
	names []string
	srcs  []ref
}

type local struct {
	name string
	slot int
}

type loopTarget struct {
	start int
	slots []int
	rest  bool // the last slot is a rest parameter (recur passes a seq)
	sp    int
}

// fcomp compiles one function body.
type fcomp struct {
	c        *compiler
	parent   *fcomp
	fn       *Funcode
	self     string
	locals   []local
	nslots   int
	free     *freeList
	sp       int
	loop     *loopTarget
	toplevel bool
	noRecur  bool // inside try: recur is not allowed
	consts   map[string]int
	pos      syntax.Pos
}

func (fc *fcomp) finish() {
	if fc.fn.NumLocals < fc.nslots {
		fc.fn.NumLocals = fc.nslots
	}
	fc.fn.NumFree = len(fc.free.names)
	fc.fn.FreeNames = fc.free.names
	if len(fc.fn.Code) > MaxArg {
		errorf(fc.fn.Pos, "function %s is too large", fc.fn.Name)
	}
}

func (fc *fcomp) setPos(p syntax.Pos) {
	if !p.IsValid() || p == fc.pos {
		return
	}
	fc.pos = p
	pc := len(fc.fn.Code)
	if n := len(fc.fn.PCPos); n > 0 && fc.fn.PCPos[n-1].PC == pc {
		fc.fn.PCPos[n-1].Pos = p
		return
	}
	fc.fn.PCPos = append(fc.fn.PCPos, PCPos{PC: pc, Pos: p})
}

func (fc *fcomp) emit(op Opcode, arg int) int {
	if arg < 0 || arg > MaxArg {
		errorf(fc.pos, "internal limit exceeded (%s argument %d)", op, arg)
	}
	pc := len(fc.fn.Code)
	fc.fn.Code = append(fc.fn.Code, Encode(op, arg))
	fc.fn.Depth = append(fc.fn.Depth, int32(fc.sp))
	fc.adjust(stackEffect(op, arg))
	return pc
}

func (fc *fcomp) adjust(d int) {
	fc.sp += d
	if fc.sp > fc.fn.MaxStack {
		fc.fn.MaxStack = fc.sp
	}
}

// patch sets the jump target of the instruction at pc to the current end.
func (fc *fcomp) patch(pc int) { fc.patchTo(pc, len(fc.fn.Code)) }

func (fc *fcomp) patchTo(pc, target int) {
	op, _ := Decode(fc.fn.Code[pc])
	fc.fn.Code[pc] = Encode(op, target)
}

func (fc *fcomp) constant(n syntax.Node) int {
	key := constKey(n)
	if key != "" {
		if i, ok := fc.consts[key]; ok {
			return i
		}
	}
	i := len(fc.fn.Consts)
	fc.fn.Consts = append(fc.fn.Consts, n)
	if key != "" {
		if fc.consts == nil {
			fc.consts = make(map[string]int)
		}
		fc.consts[key] = i
	}
	return i
}

func constKey(n syntax.Node) string {
	switch n := n.(type) {
	case *syntax.Keyword:
		return "k" + n.Name
	case *syntax.String:
		return "s" + n.Value
	case *syntax.Int:
		return "i" + strconv.FormatInt(n.Value, 10)
	case *syntax.Regex:
		return "r" + n.Pattern
	}
	return ""
}

func (fc *fcomp) builtin(name string) int {
	for i, b := range fc.fn.Builtins {
		if b == name {
			return i
		}
	}
	fc.fn.Builtins = append(fc.fn.Builtins, name)
	return len(fc.fn.Builtins) - 1
}

// annotation records a type annotation form for validation (nil is none).
func (fc *fcomp) annotation(n syntax.Node) {
	if n != nil {
		fc.fn.TypeForms = append(fc.fn.TypeForms, n)
	}
}

// newSlot reserves a local slot (not yet visible by name).
func (fc *fcomp) newSlot() int {
	s := fc.nslots
	fc.nslots++
	if fc.nslots > fc.fn.NumLocals {
		fc.fn.NumLocals = fc.nslots
	}
	return s
}

func (fc *fcomp) bindName(name string, slot int) {
	fc.locals = append(fc.locals, local{name, slot})
}

// scope returns a function that restores the visible locals and slot count.
func (fc *fcomp) scope() func() {
	nl, ns := len(fc.locals), fc.nslots
	return func() { fc.locals, fc.nslots = fc.locals[:nl], ns }
}

// lookup finds name as a local, the function itself or a captured variable.
func (fc *fcomp) lookup(name string) (ref, bool) {
	for i := len(fc.locals) - 1; i >= 0; i-- {
		if fc.locals[i].name == name {
			return ref{LOCAL, fc.locals[i].slot}, true
		}
	}
	if fc.self != "" && fc.self == name {
		return ref{SELF, 0}, true
	}
	for i, n := range fc.free.names {
		if n == name {
			return ref{FREE, i}, true
		}
	}
	if fc.parent == nil {
		return ref{}, false
	}
	src, ok := fc.parent.lookup(name)
	if !ok {
		return ref{}, false
	}
	fc.free.names = append(fc.free.names, name)
	fc.free.srcs = append(fc.free.srcs, src)
	return ref{FREE, len(fc.free.names) - 1}, true
}

// symbol compiles a reference to a name.
func (fc *fcomp) symbol(s *syntax.Symbol) {
	fc.setPos(s.At)
	if r, ok := fc.lookup(s.Name); ok {
		fc.emit(r.kind, r.index)
		return
	}
	if i, ok := fc.c.global(s.Name); ok {
		fc.emit(GLOBAL, i)
		return
	}
	if full, ok := fc.c.resolveAlias(s.Name); ok {
		if fc.c.isBuiltin != nil && fc.c.isBuiltin(full) {
			fc.emit(BUILTIN, fc.builtin(full))
			return
		}
		if c, ok := Constant(full); ok {
			fc.emit(CONST, fc.constant(c))
			return
		}
		errorf(s.At, "undefined symbol %s (%s)", s.Name, full)
	}
	if fc.c.isBuiltin != nil && fc.c.isBuiltin(s.Name) {
		fc.emit(BUILTIN, fc.builtin(s.Name))
		return
	}
	if c, ok := Constant(s.Name); ok {
		fc.emit(CONST, fc.constant(c))
		return
	}
	if isSpecial(s.Name) {
		errorf(s.At, "%s is a special form and cannot be used as a value", s.Name)
	}
	errorf(s.At, "undefined symbol %s", s.Name)
}

// resolvesToBuiltin reports whether name refers to the Go builtin of that name.
func (fc *fcomp) resolvesToBuiltin(name string) bool {
	if fc.isLocal(name) {
		return false
	}
	if _, ok := fc.c.global(name); ok {
		return false
	}
	return fc.c.isBuiltin != nil && fc.c.isBuiltin(name)
}

// isLocal reports whether name is bound in this or an enclosing function,
// without capturing it.
func (fc *fcomp) isLocal(name string) bool {
	for f := fc; f != nil; f = f.parent {
		for _, l := range f.locals {
			if l.name == name {
				return true
			}
		}
		if f.self == name || slices.Contains(f.free.names, name) {
			return true
		}
	}
	return false
}

// expr compiles n, leaving its value on the stack. tail reports whether n is
// in tail position of the innermost loop or fn (where recur is allowed).
func (fc *fcomp) expr(n syntax.Node, tail bool) {
	switch n := n.(type) {
	case *syntax.Nil:
		fc.setPos(n.At)
		fc.emit(NIL, 0)
	case *syntax.Bool:
		fc.setPos(n.At)
		if n.Value {
			fc.emit(TRUE, 0)
		} else {
			fc.emit(FALSE, 0)
		}
	case *syntax.Int, *syntax.Float, *syntax.String, *syntax.Keyword, *syntax.Regex:
		fc.setPos(n.Pos())
		fc.emit(CONST, fc.constant(n))
	case *syntax.Symbol:
		fc.symbol(n)
	case *syntax.Vector:
		fc.vector(n)
	case *syntax.Map:
		fc.mapLit(n)
	case *syntax.Set:
		fc.setLit(n)
	case *syntax.List:
		fc.list(n, tail)
	case *syntax.TypeExpr:
		errorf(n.At, "a type expression %s is not a value", n.String())
	default:
		errorf(n.Pos(), "cannot evaluate %s", n.String())
	}
}

// isConstant reports whether n is a literal whose value needs no evaluation.
func isConstant(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.Nil, *syntax.Bool, *syntax.Int, *syntax.Float, *syntax.String, *syntax.Keyword, *syntax.Regex:
		return true
	case *syntax.Vector:
		return allConstant(n.Elems)
	case *syntax.Map:
		return allConstant(n.Elems)
	case *syntax.Set:
		return allConstant(n.Elems)
	}
	return false
}

func allConstant(ns []syntax.Node) bool {
	for _, e := range ns {
		if !isConstant(e) {
			return false
		}
	}
	return true
}

func (fc *fcomp) vector(v *syntax.Vector) {
	fc.setPos(v.At)
	if allConstant(v.Elems) {
		fc.emit(CONST, fc.constant(v))
		return
	}
	for _, e := range v.Elems {
		fc.expr(e, false)
	}
	fc.setPos(v.At)
	fc.emit(MKVEC, len(v.Elems))
}

func (fc *fcomp) setLit(v *syntax.Set) {
	fc.setPos(v.At)
	if allConstant(v.Elems) {
		fc.emit(CONST, fc.constant(v))
		return
	}
	for _, e := range v.Elems {
		fc.expr(e, false)
	}
	fc.setPos(v.At)
	fc.emit(MKSET, len(v.Elems))
}

func (fc *fcomp) mapLit(m *syntax.Map) {
	fc.setPos(m.At)
	if len(m.Elems)%2 != 0 {
		errorf(m.At, "map literal has an odd number of forms")
	}
	if allConstant(m.Elems) {
		fc.emit(CONST, fc.constant(m))
		return
	}
	for _, e := range m.Elems {
		fc.expr(e, false)
	}
	fc.setPos(m.At)
	fc.emit(MKMAP, len(m.Elems)/2)
}

func (fc *fcomp) list(l *syntax.List, tail bool) {
	if len(l.Elems) == 0 {
		fc.setPos(l.At)
		fc.emit(CONST, fc.constant(l))
		return
	}
	if head, ok := l.Elems[0].(*syntax.Symbol); ok {
		if sf := specialForm(head.Name); sf != nil {
			sf(fc, l, tail)
			return
		}
		if fc.fastOp(head.Name, l) {
			return
		}
		if head.Name == "instance?" && fc.instanceForm(l) {
			return
		}
	}
	fc.call(l)
}

func (fc *fcomp) call(l *syntax.List) {
	for _, e := range l.Elems {
		fc.expr(e, false)
	}
	fc.setPos(l.At)
	pc := fc.emit(CALL, len(l.Elems)-1)
	if s, ok := l.Elems[0].(*syntax.Symbol); ok {
		if fc.fn.CalleeNames == nil {
			fc.fn.CalleeNames = make(map[int]string)
		}
		fc.fn.CalleeNames[pc] = s.Name
	}
}

var fastOps = map[string]struct {
	op    Opcode
	nargs int
}{
	"+": {ADD, 2}, "-": {SUB, 2}, "<": {LT, 2}, ">": {GT, 2}, "<=": {LE, 2}, ">=": {GE, 2},
	"=": {EQ, 2}, "get": {GET, 2}, "count": {COUNT, 1}, "not": {NOT, 1},
}

// fastOp compiles calls of a few hot builtins to single instructions. The VM
// handles the common operand types inline and otherwise calls the builtin.
func (fc *fcomp) fastOp(name string, l *syntax.List) bool {
	nargs := len(l.Elems) - 1
	f, ok := fastOps[name]
	if name == "get" && nargs == 3 {
		f, ok = struct {
			op    Opcode
			nargs int
		}{GETDEF, 3}, true
	}
	if !ok || f.nargs != nargs || !fc.resolvesToBuiltin(name) {
		return false
	}
	for _, e := range l.Elems[1:] {
		fc.expr(e, false)
	}
	fc.setPos(l.At)
	fc.emit(f.op, fc.builtin(name))
	return true
}
