package compile

import "github.com/rtfshost/rtfshost/rtfs/syntax"

type matchClause struct {
	pattern syntax.Node
	guard   syntax.Node
	body    syntax.Node
}

func parseMatch(l *syntax.List) []matchClause {
	es := l.Elems[2:]
	var out []matchClause
	for len(es) > 0 {
		mc := matchClause{pattern: es[0]}
		es = es[1:]
		if len(es) >= 2 && isGuardWord(es[0]) {
			mc.guard = es[1]
			es = es[2:]
		}
		if len(es) == 0 {
			errorf(mc.pattern.Pos(), "match: pattern %s has no body", mc.pattern)
		}
		mc.body = es[0]
		es = es[1:]
		out = append(out, mc)
	}
	return out
}

func isGuardWord(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.Keyword:
		return n.Name == "when"
	case *syntax.Symbol:
		return n.Name == "when"
	}
	return false
}

// match compiles (match value pattern [:when guard] body ...). No matching
// clause is a runtime error.
func (fc *fcomp) match(l *syntax.List, tail bool) {
	arity(l, 1, -1, "(match value pattern body...)")
	clauses := parseMatch(l)
	restore := fc.scope()
	defer restore()
	fc.expr(l.Elems[1], false)
	subj := fc.newSlot()
	fc.emit(SETLOCAL, subj)
	sp0 := fc.sp
	var ends []int
	for _, mc := range clauses {
		inner := fc.scope()
		var fails []int
		fc.matchPattern(mc.pattern, subj, &fails)
		if mc.guard != nil {
			fc.expr(mc.guard, false)
			fails = append(fails, fc.emit(JMPF, 0))
		}
		fc.expr(mc.body, tail)
		ends = append(ends, fc.emit(JMP, 0))
		inner()
		fc.sp = sp0
		for _, f := range fails {
			fc.patch(f)
		}
	}
	fc.setPos(l.At)
	fc.emit(LOCAL, subj)
	fc.emit(NOMATCH, 0)
	fc.adjust(1)
	for _, e := range ends {
		fc.patch(e)
	}
}

// matchPattern tests the value in slot subj against p, binding its names;
// failing tests jump to the addresses appended to fails.
func (fc *fcomp) matchPattern(p syntax.Node, subj int, fails *[]int) {
	switch p := p.(type) {
	case *syntax.Symbol:
		if p.Name == "_" {
			return
		}
		fc.emit(LOCAL, subj)
		fc.bind(p)
	case *syntax.Vector:
		fc.matchVector(p, subj, fails)
	case *syntax.Map:
		fc.setPos(p.At)
		fc.emit(LOCAL, subj)
		fc.emit(ISMAP, 0)
		*fails = append(*fails, fc.emit(JMPF, 0))
		for i := 0; i+1 < len(p.Elems); i += 2 {
			k, sub := p.Elems[i], p.Elems[i+1]
			if !isConstant(k) {
				errorf(k.Pos(), "match: map pattern keys must be literals, got %s", k)
			}
			kc := fc.constant(k)
			fc.emit(LOCAL, subj)
			fc.emit(HASKEY, kc)
			*fails = append(*fails, fc.emit(JMPF, 0))
			fc.emit(LOCAL, subj)
			fc.emit(LOOKUP, kc)
			fc.subPattern(sub, fails)
		}
	case *syntax.List:
		fc.matchAs(p, subj, fails)
	default:
		if !isConstant(p) {
			errorf(p.Pos(), "match: unsupported pattern %s", p)
		}
		fc.setPos(p.Pos())
		fc.emit(LOCAL, subj)
		fc.expr(p, false)
		fc.emit(EQ, 0)
		*fails = append(*fails, fc.emit(JMPF, 0))
	}
}

// subPattern matches the value on top of the stack against p.
func (fc *fcomp) subPattern(p syntax.Node, fails *[]int) {
	if s, ok := p.(*syntax.Symbol); ok {
		fc.bind(s)
		return
	}
	tmp := fc.newSlot()
	fc.emit(SETLOCAL, tmp)
	fc.matchPattern(p, tmp, fails)
}

func (fc *fcomp) matchVector(v *syntax.Vector, subj int, fails *[]int) {
	es := v.Elems
	fixed, restAt := len(es), -1
	for i, e := range es {
		if s, ok := e.(*syntax.Symbol); ok && s.Name == "&" {
			if i != len(es)-2 {
				errorf(s.At, "match: & must be followed by exactly one pattern")
			}
			fixed, restAt = i, i+1
			break
		}
	}
	arg := fixed << 1
	if restAt >= 0 {
		arg |= 1
	}
	fc.setPos(v.At)
	fc.emit(LOCAL, subj)
	fc.emit(ISSEQ, arg)
	*fails = append(*fails, fc.emit(JMPF, 0))
	for i := 0; i < fixed; i++ {
		fc.emit(LOCAL, subj)
		fc.emit(INDEX, i)
		fc.subPattern(es[i], fails)
	}
	if restAt >= 0 {
		fc.emit(LOCAL, subj)
		fc.emit(RESTFROM, fixed)
		fc.subPattern(es[restAt], fails)
	}
}

// matchAs handles (:as name pattern).
func (fc *fcomp) matchAs(l *syntax.List, subj int, fails *[]int) {
	if len(l.Elems) == 3 {
		if k, ok := l.Elems[0].(*syntax.Keyword); ok && k.Name == "as" {
			if s, ok := l.Elems[1].(*syntax.Symbol); ok {
				fc.emit(LOCAL, subj)
				fc.bind(s)
				fc.matchPattern(l.Elems[2], subj, fails)
				return
			}
		}
	}
	errorf(l.At, "match: unsupported pattern %s (expected (:as name pattern))", l)
}
