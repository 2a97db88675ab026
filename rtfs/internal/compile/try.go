package compile

import "github.com/rtfshost/rtfshost/rtfs/syntax"

type catchClause struct {
	pattern syntax.Node // nil catches everything
	binding *syntax.Symbol
	body    []syntax.Node
	at      syntax.Pos
}

// catchAll lists the type names that catch every error besides the
// exception classes that do (Throwable, Exception, RuntimeException...).
func catchAll(name string) bool {
	switch name {
	case "_", "Exception", "Error", "Throwable", "RuntimeError", "Object", ":any", "any":
		return true
	}
	return false
}

// parseCatch reads (catch pattern? binding body...). The pattern is a
// keyword, a string, or a symbol: an exception class (ExceptionInfo,
// java.lang.ArithmeticException...; Exception and Throwable catch
// everything), which may be followed by the binding alone, so (catch
// Exception e) is nil; an unknown class name is an error. A lower-case
// symbol followed by the binding and a body is read as the keyword of the
// same name; a lone symbol is the binding, catching everything.
func (fc *fcomp) parseCatch(l *syntax.List) catchClause {
	es := l.Elems[1:]
	cc := catchClause{at: l.At}
	if len(es) == 0 {
		errorf(l.At, "catch: expected a binding symbol")
	}
	first := es[0]
	switch f := first.(type) {
	case *syntax.Keyword, *syntax.String:
		if len(es) < 2 {
			errorf(l.At, "catch: expected a binding symbol after %s", f)
		}
		cc.pattern = first
		es = es[1:]
	case *syntax.Symbol:
		_, second := at(es, 1).(*syntax.Symbol)
		switch {
		case !second:
		case fc.c.version == compile2:
			// rtfs-compile-2 read every symbol pattern as a keyword and
			// knew no classes; its programs compile as they did.
			if len(es) > 2 {
				if !catchAll(f.Name) {
					cc.pattern = &syntax.Keyword{At: f.At, Name: f.Name}
				}
				es = es[1:]
			}
		case catchAll(f.Name):
			es = es[1:]
		default:
			if kinds, ok := ExceptionKinds(f.Name); ok {
				if kinds != nil {
					cc.pattern = &syntax.Symbol{At: f.At, Name: className(f.Name)}
				}
				es = es[1:]
			} else if looksLikeClass(f.Name) {
				errorf(f.At, "catch: unknown exception class %s; RTFS knows %s (Exception and Throwable catch every error)", f.Name, knownClasses())
			} else if len(es) > 2 {
				cc.pattern = &syntax.Keyword{At: f.At, Name: f.Name}
				es = es[1:]
			}
		}
	default:
		errorf(first.Pos(), "catch: expected a pattern or binding symbol, got %s", first)
	}
	b, ok := es[0].(*syntax.Symbol)
	if !ok {
		errorf(es[0].Pos(), "catch: expected a binding symbol, got %s", es[0])
	}
	cc.binding = b
	cc.body = es[1:]
	return cc
}

func at(es []syntax.Node, i int) syntax.Node {
	if i < len(es) {
		return es[i]
	}
	return nil
}

func isClause(n syntax.Node, name string) (*syntax.List, bool) {
	l, ok := n.(*syntax.List)
	if !ok || len(l.Elems) == 0 {
		return nil, false
	}
	s, ok := l.Elems[0].(*syntax.Symbol)
	return l, ok && s.Name == name
}

func (fc *fcomp) try(l *syntax.List, _ bool) {
	var body []syntax.Node
	var catches []catchClause
	var finally *syntax.List
	for _, e := range l.Elems[1:] {
		if c, ok := isClause(e, "catch"); ok {
			if finally != nil {
				errorf(c.At, "try: catch after finally")
			}
			catches = append(catches, fc.parseCatch(c))
			continue
		}
		if f, ok := isClause(e, "finally"); ok {
			if finally != nil {
				errorf(f.At, "try: more than one finally")
			}
			finally = f
			continue
		}
		if len(catches) > 0 || finally != nil {
			errorf(e.Pos(), "try: body form %s after catch or finally", e)
		}
		body = append(body, e)
	}
	saved := fc.noRecur
	fc.noRecur = true
	fc.tryBody(l.At, body, catches, finally)
	fc.noRecur = saved
}

func (fc *fcomp) tryBody(pos syntax.Pos, body []syntax.Node, catches []catchClause, finally *syntax.List) {
	sp0 := fc.sp
	fc.setPos(pos)
	hf, hc := -1, -1
	if finally != nil {
		hf = fc.emit(PUSHTRY, 0)
	}
	if len(catches) > 0 {
		hc = fc.emit(PUSHTRY, 0)
	}
	fc.body(body, false)
	if hc >= 0 {
		fc.emit(POPTRY, 0)
	}
	jok := []int{fc.emit(JMP, 0)}
	if hc >= 0 {
		fc.patch(hc)
		fc.sp = sp0 + 1
		jok = append(jok, fc.catchClauses(pos, sp0, catches)...)
	}
	for _, j := range jok {
		fc.patch(j)
	}
	fc.sp = sp0 + 1
	if hf < 0 {
		return
	}
	fc.emit(POPTRY, 0)
	fc.body(finally.Elems[1:], false)
	fc.emit(POP, 0)
	jend := fc.emit(JMP, 0)
	fc.patch(hf)
	fc.sp = sp0 + 1
	fc.body(finally.Elems[1:], false)
	fc.emit(POP, 0)
	fc.emit(RERAISE, 0)
	fc.patch(jend)
	fc.sp = sp0 + 1
}

// catchClauses compiles the handler code; the caught error is on the stack.
// It returns the jumps to patch to the end of the try.
func (fc *fcomp) catchClauses(pos syntax.Pos, sp0 int, catches []catchClause) []int {
	restore := fc.scope()
	defer restore()
	errSlot := fc.newSlot()
	fc.emit(SETLOCAL, errSlot)
	var ends []int
	for _, cc := range catches {
		fc.setPos(cc.at)
		next := -1
		if cc.pattern != nil {
			fc.emit(LOCAL, errSlot)
			fc.emit(CATCHES, fc.constant(cc.pattern))
			next = fc.emit(JMPF, 0)
		}
		inner := fc.scope()
		fc.emit(LOCAL, errSlot)
		fc.emit(ERRVAL, 0)
		fc.bind(cc.binding)
		fc.body(cc.body, false)
		inner()
		ends = append(ends, fc.emit(JMP, 0))
		fc.sp = sp0
		if next >= 0 {
			fc.patch(next)
		}
	}
	fc.setPos(pos)
	fc.emit(LOCAL, errSlot)
	fc.emit(RERAISE, 0)
	return ends
}
