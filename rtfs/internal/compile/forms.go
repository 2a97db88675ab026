package compile

import (
	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

type formFunc func(fc *fcomp, l *syntax.List, tail bool)

// specialForm returns the compiler of the special form name, or nil.
func specialForm(name string) formFunc {
	switch name {
	case "quote":
		return (*fcomp).quote
	case "do":
		return (*fcomp).do
	case "if":
		return (*fcomp).ifForm
	case "when", "when-not":
		return (*fcomp).when
	case "cond":
		return (*fcomp).cond
	case "and", "or":
		return (*fcomp).andOr
	case "let":
		return (*fcomp).let
	case "if-let", "when-let":
		return (*fcomp).ifLet
	case "loop":
		return (*fcomp).loopForm
	case "recur":
		return (*fcomp).recur
	case "def":
		return (*fcomp).def
	case "defn", "defn-": // RTFS has no namespaces: a private defn is a defn
		return (*fcomp).defn
	case "declare":
		return (*fcomp).declare
	case "fn", "λ":
		return (*fcomp).fnForm
	case "throw":
		return (*fcomp).throw
	case "try":
		return (*fcomp).try
	case "match":
		return (*fcomp).match
	case "call":
		return (*fcomp).hostCall
	case "ns":
		return (*fcomp).nsForm
	case "require":
		return (*fcomp).requireForm
	case "mcp-stream":
		return (*fcomp).mcpStream
	case "->", "->>":
		return (*fcomp).thread
	case "for", "doseq":
		return (*fcomp).forForm
	case "dotimes":
		return (*fcomp).dotimes
	case "%apply":
		return (*fcomp).applyForm
	case "%hostcall-spread":
		return (*fcomp).hostSpread
	}
	if macroForm(name) != nil {
		return (*fcomp).macro
	}
	if _, ok := unsupported[name]; ok {
		return (*fcomp).unsupportedForm
	}
	return nil
}

// unsupported are the Clojure reader forms RTFS reads but does not have,
// with what to write instead.
var unsupported = map[string]string{
	"quasiquote":       "syntax-quote (`) is not supported in RTFS: there are no macros; build the form with list, vector and quote",
	"unquote":          "unquote (~) is not supported in RTFS: there is no syntax-quote",
	"unquote-splicing": "unquote-splicing (~@) is not supported in RTFS: there is no syntax-quote",
	"deref":            "deref (@) is not supported in RTFS: values are immutable and there are no references; use the value itself",
}

func (fc *fcomp) unsupportedForm(l *syntax.List, _ bool) {
	errorf(l.At, "%s", unsupported[head(l)])
}

func isSpecial(name string) bool { return specialForm(name) != nil }

func head(l *syntax.List) string { return l.Elems[0].(*syntax.Symbol).Name }

// arity checks the number of forms after the head.
func arity(l *syntax.List, min, max int, usage string) {
	n := len(l.Elems) - 1
	if n < min || (max >= 0 && n > max) {
		errorf(l.At, "%s: wrong number of forms (%d), expected %s", head(l), n, usage)
	}
}

func (fc *fcomp) quote(l *syntax.List, _ bool) {
	arity(l, 1, 1, "(quote form)")
	fc.setPos(l.At)
	switch q := l.Elems[1].(type) {
	case *syntax.Nil:
		fc.emit(NIL, 0)
	case *syntax.Bool:
		fc.expr(q, false)
	default:
		fc.emit(CONST, fc.constant(q))
	}
}

// body compiles forms as an implicit do; an empty body is nil.
func (fc *fcomp) body(forms []syntax.Node, tail bool) {
	if len(forms) == 0 {
		fc.emit(NIL, 0)
		return
	}
	for i, f := range forms {
		if i > 0 {
			fc.emit(POP, 0)
		}
		fc.expr(f, tail && i == len(forms)-1)
	}
}

func (fc *fcomp) do(l *syntax.List, tail bool) { fc.body(l.Elems[1:], tail) }

func (fc *fcomp) ifForm(l *syntax.List, tail bool) {
	arity(l, 2, 3, "(if test then else?)")
	var els syntax.Node
	if len(l.Elems) == 4 {
		els = l.Elems[3]
	}
	fc.branch(l.Elems[1], func() { fc.expr(l.Elems[2], tail) }, func() {
		if els == nil {
			fc.emit(NIL, 0)
		} else {
			fc.expr(els, tail)
		}
	})
}

// branch compiles (if test (then) (else)).
func (fc *fcomp) branch(test syntax.Node, then, els func()) {
	fc.expr(test, false)
	jf := fc.emit(JMPF, 0)
	sp := fc.sp
	then()
	j := fc.emit(JMP, 0)
	fc.patch(jf)
	fc.sp = sp
	els()
	fc.patch(j)
}

func (fc *fcomp) when(l *syntax.List, tail bool) {
	arity(l, 1, -1, "(when test body...)")
	body := func() { fc.body(l.Elems[2:], tail) }
	nilf := func() { fc.emit(NIL, 0) }
	if head(l) == "when" {
		fc.branch(l.Elems[1], body, nilf)
	} else {
		fc.branch(l.Elems[1], nilf, body)
	}
}

func (fc *fcomp) cond(l *syntax.List, tail bool) {
	clauses := l.Elems[1:]
	if len(clauses)%2 != 0 {
		errorf(l.At, "cond: odd number of forms; expected test/expression pairs")
	}
	fc.condFrom(clauses, tail)
}

func (fc *fcomp) condFrom(clauses []syntax.Node, tail bool) {
	if len(clauses) == 0 {
		fc.emit(NIL, 0)
		return
	}
	if k, ok := clauses[0].(*syntax.Keyword); ok && k.Name == "else" {
		fc.expr(clauses[1], tail)
		return
	}
	fc.branch(clauses[0], func() { fc.expr(clauses[1], tail) }, func() { fc.condFrom(clauses[2:], tail) })
}

func (fc *fcomp) andOr(l *syntax.List, tail bool) {
	args := l.Elems[1:]
	isAnd := head(l) == "and"
	if len(args) == 0 {
		if isAnd {
			fc.emit(TRUE, 0)
		} else {
			fc.emit(NIL, 0)
		}
		return
	}
	var jumps []int
	for i, a := range args {
		fc.expr(a, tail && i == len(args)-1)
		if i == len(args)-1 {
			break
		}
		if isAnd {
			jumps = append(jumps, fc.emit(JMPFK, 0))
		} else {
			jumps = append(jumps, fc.emit(JMPTK, 0))
		}
		fc.adjust(-1)
	}
	for _, j := range jumps {
		fc.patch(j)
	}
}

func (fc *fcomp) let(l *syntax.List, tail bool) {
	arity(l, 1, -1, "(let [bindings...] body...)")
	bv, ok := l.Elems[1].(*syntax.Vector)
	if !ok {
		errorf(l.Elems[1].Pos(), "let: bindings must be a vector, got %s", l.Elems[1])
	}
	restore := fc.scope()
	for _, b := range parseBindings(bv, "let") {
		fc.annotation(b.typ)
		fc.expr(b.value, false)
		fc.bind(b.pattern)
	}
	fc.body(l.Elems[2:], tail)
	restore()
}

func (fc *fcomp) ifLet(l *syntax.List, tail bool) {
	isIf := head(l) == "if-let"
	if isIf {
		arity(l, 2, 3, "(if-let [binding test] then else?)")
	} else {
		arity(l, 1, -1, "(when-let [binding test] body...)")
	}
	bv, ok := l.Elems[1].(*syntax.Vector)
	bs := []binding(nil)
	if ok {
		bs = parseBindings(bv, head(l))
	}
	if len(bs) != 1 {
		errorf(l.Elems[1].Pos(), "%s: expected a vector of one binding and its test", head(l))
	}
	restore := fc.scope()
	fc.expr(bs[0].value, false)
	tmp := fc.newSlot()
	fc.emit(SETLOCAL, tmp)
	fc.emit(LOCAL, tmp)
	jf := fc.emit(JMPF, 0)
	sp := fc.sp
	inner := fc.scope()
	fc.emit(LOCAL, tmp)
	fc.bind(bs[0].pattern)
	if isIf {
		fc.expr(l.Elems[2], tail)
	} else {
		fc.body(l.Elems[2:], tail)
	}
	inner()
	j := fc.emit(JMP, 0)
	fc.patch(jf)
	fc.sp = sp
	if isIf && len(l.Elems) == 4 {
		fc.expr(l.Elems[3], tail)
	} else {
		fc.emit(NIL, 0)
	}
	fc.patch(j)
	restore()
}

func (fc *fcomp) loopForm(l *syntax.List, _ bool) {
	arity(l, 1, -1, "(loop [bindings...] body...)")
	bv, ok := l.Elems[1].(*syntax.Vector)
	if !ok {
		errorf(l.Elems[1].Pos(), "loop: bindings must be a vector, got %s", l.Elems[1])
	}
	restore := fc.scope()
	bs := parseBindings(bv, "loop")
	slots := make([]int, len(bs))
	for i, b := range bs {
		fc.annotation(b.typ)
		fc.expr(b.value, false)
		slots[i] = fc.newSlot()
		fc.emit(SETLOCAL, slots[i])
		if s, ok := b.pattern.(*syntax.Symbol); ok {
			fc.bindName(s.Name, slots[i])
		}
	}
	outer, noRecur := fc.loop, fc.noRecur
	fc.loop = &loopTarget{start: len(fc.fn.Code), slots: slots, sp: fc.sp}
	fc.noRecur = false
	inner := fc.scope()
	for i, b := range bs {
		if _, ok := b.pattern.(*syntax.Symbol); !ok {
			fc.emit(LOCAL, slots[i])
			fc.bind(b.pattern)
		}
	}
	fc.body(l.Elems[2:], true)
	inner()
	fc.loop, fc.noRecur = outer, noRecur
	restore()
}

func (fc *fcomp) recur(l *syntax.List, tail bool) {
	fc.setPos(l.At)
	if fc.loop == nil {
		errorf(l.At, "recur outside of loop or fn")
	}
	if fc.noRecur {
		errorf(l.At, "recur across try is not allowed")
	}
	if !tail {
		errorf(l.At, "recur not in tail position")
	}
	lt := fc.loop
	if len(l.Elems)-1 != len(lt.slots) {
		errorf(l.At, "recur: wrong number of arguments (%d), expected %d", len(l.Elems)-1, len(lt.slots))
	}
	for _, a := range l.Elems[1:] {
		fc.expr(a, false)
	}
	for i := len(lt.slots) - 1; i >= 0; i-- {
		fc.emit(SETLOCAL, lt.slots[i])
	}
	fc.emit(JMP, lt.start)
	// recur never falls through; account for the value its position expects.
	fc.adjust(1)
}

func (fc *fcomp) def(l *syntax.List, _ bool) {
	arity(l, 1, 3, "(def name :type? value)")
	name, ok := l.Elems[1].(*syntax.Symbol)
	if !ok {
		errorf(l.Elems[1].Pos(), "def: expected a symbol name, got %s", l.Elems[1])
	}
	var value syntax.Node = &syntax.Nil{At: l.At}
	switch len(l.Elems) {
	case 3:
		value = l.Elems[2]
	case 4:
		if !isTypeForm(l.Elems[2]) {
			errorf(l.Elems[2].Pos(), "def: expected a type annotation after the name, got %s", l.Elems[2])
		}
		fc.annotation(l.Elems[2])
		value = l.Elems[3]
	}
	slot := fc.c.globalSlot(name.Name)
	fc.expr(value, false)
	fc.setPos(l.At)
	fc.emit(SETGLOBAL, slot)
}

func (fc *fcomp) defn(l *syntax.List, _ bool) {
	arity(l, 2, -1, "(defn name [params] body...)")
	name, ok := l.Elems[1].(*syntax.Symbol)
	if !ok {
		errorf(l.Elems[1].Pos(), "defn: expected a symbol name, got %s", l.Elems[1])
	}
	slot := fc.c.globalSlot(name.Name)
	fc.function(name.Name, "", l.At, l.Elems[2:])
	fc.setPos(l.At)
	fc.emit(SETGLOBAL, slot)
}

// declare names globals that a later def defines, as Clojure's declare
// does; since a program's functions may already refer to globals defined
// later in the file, it only checks its names. Its value is nil.
func (fc *fcomp) declare(l *syntax.List, _ bool) {
	for _, e := range l.Elems[1:] {
		s, ok := e.(*syntax.Symbol)
		if !ok {
			errorf(e.Pos(), "declare: expected a symbol, got %s", e)
		}
		fc.c.globalSlot(s.Name)
	}
	fc.setPos(l.At)
	fc.emit(NIL, 0)
}

func (fc *fcomp) fnForm(l *syntax.List, _ bool) {
	arity(l, 1, -1, "(fn name? [params] body...)")
	rest := l.Elems[1:]
	self := ""
	if s, ok := rest[0].(*syntax.Symbol); ok {
		self = s.Name
		rest = rest[1:]
	}
	fc.function(self, self, l.At, rest)
}

func (fc *fcomp) throw(l *syntax.List, _ bool) {
	arity(l, 1, 1, "(throw value)")
	fc.expr(l.Elems[1], false)
	fc.setPos(l.At)
	fc.emit(THROW, 0)
	fc.adjust(1)
}

func (fc *fcomp) hostCall(l *syntax.List, _ bool) {
	arity(l, 1, -1, "(call :capability args...)")
	for _, a := range l.Elems[1:] {
		fc.expr(a, false)
	}
	fc.setPos(l.At)
	fc.emit(HOSTCALL, len(l.Elems)-2)
}

func (fc *fcomp) hostSpread(l *syntax.List, _ bool) {
	arity(l, 2, 2, "(%hostcall-spread cap args)")
	fc.expr(l.Elems[1], false)
	fc.expr(l.Elems[2], false)
	fc.setPos(l.At)
	fc.emit(HOSTSPREAD, 0)
}

func (fc *fcomp) applyForm(l *syntax.List, _ bool) {
	arity(l, 2, 2, "(%apply f args)")
	fc.expr(l.Elems[1], false)
	fc.expr(l.Elems[2], false)
	fc.setPos(l.At)
	fc.emit(CALLSPREAD, 0)
}

// mcpStream expands (mcp-stream endpoint config? processor initial-state?).
func (fc *fcomp) mcpStream(l *syntax.List, _ bool) {
	arity(l, 2, 4, "(mcp-stream endpoint config? processor initial-state?)")
	args := l.Elems[1:]
	kw := func(name string) syntax.Node { return &syntax.Keyword{At: l.At, Name: name} }
	elems := []syntax.Node{kw("endpoint"), args[0]}
	switch len(args) {
	case 2:
		elems = append(elems, kw("processor"), args[1])
	case 3:
		if _, isMap := args[1].(*syntax.Map); isMap {
			elems = append(elems, kw("config"), args[1], kw("processor"), args[2])
		} else {
			elems = append(elems, kw("processor"), args[1], kw("initial-state"), args[2])
		}
	case 4:
		elems = append(elems, kw("config"), args[1], kw("processor"), args[2], kw("initial-state"), args[3])
	}
	call := &syntax.List{At: l.At, Elems: []syntax.Node{
		&syntax.Symbol{At: l.At, Name: "call"},
		kw("mcp.stream.start"),
		&syntax.Map{At: l.At, Elems: elems},
	}}
	fc.hostCall(call, false)
}

// thread expands (-> x (f a) g) and (->> x (f a) g).
func (fc *fcomp) thread(l *syntax.List, tail bool) {
	arity(l, 1, -1, "(-> x forms...)")
	last := head(l) == "->>"
	acc := l.Elems[1]
	for _, f := range l.Elems[2:] {
		step, ok := f.(*syntax.List)
		if !ok || len(step.Elems) == 0 {
			acc = &syntax.List{At: f.Pos(), Elems: []syntax.Node{f, acc}}
			continue
		}
		elems := make([]syntax.Node, 0, len(step.Elems)+1)
		if last {
			elems = append(append(elems, step.Elems...), acc)
		} else {
			elems = append(append(append(elems, step.Elems[0]), acc), step.Elems[1:]...)
		}
		acc = &syntax.List{At: step.At, Elems: elems}
	}
	fc.expr(acc, tail)
}

// Forms lists the special forms and built-in macros a program can use,
// sorted (not the internal ones, whose names start with %); catch and
// finally belong to try. Every name is one specialForm compiles.
func Forms() []string {
	return []string{
		"->", "->>", "and", "as->", "assert", "call", "case", "cond", "cond->", "cond->>", "condp",
		"declare", "def", "defn", "defn-", "do", "doseq", "dotimes", "fn", "for", "if", "if-let",
		"if-not", "if-some", "lazy-cat", "lazy-seq", "let", "letfn", "loop", "match", "mcp-stream",
		"ns", "or", "quote", "require", "recur", "some->", "some->>", "throw", "try", "when", "when-first", "when-let",
		"when-not", "when-some", "with-out-str", "λ",
	}
}
