package compile

import "github.com/rtfshost/rtfshost/rtfs/syntax"

// fnLabel names a function in messages: "fn" or "fn name".
func fnLabel(name string) string {
	if name == "" {
		return "fn"
	}
	return "fn " + name
}

func isTypeForm(n syntax.Node) bool {
	switch n.(type) {
	case *syntax.Keyword, *syntax.TypeExpr:
		return true
	}
	return false
}

// function compiles a fn or defn after its name: docstring?, attribute map?,
// then one arity ([params] :ret? body...) or several (([params] body...)...).
// It leaves the closure on the stack.
func (fc *fcomp) function(name, self string, pos syntax.Pos, rest []syntax.Node) {
	if len(rest) > 1 {
		if _, ok := rest[0].(*syntax.String); ok {
			rest = rest[1:] // docstring
		}
	}
	if len(rest) > 1 {
		if _, ok := rest[0].(*syntax.Map); ok {
			rest = rest[1:] // attribute map
		}
	}
	if len(rest) == 0 {
		errorf(pos, "%s: missing parameter vector", fnLabel(name))
	}
	free := &freeList{}
	var fn *Funcode
	switch p := rest[0].(type) {
	case *syntax.Vector:
		fn = fc.arity(name, self, pos, free, p, rest[1:])
	case *syntax.List:
		fn = fc.multiArity(name, self, pos, free, rest)
	default:
		errorf(rest[0].Pos(), "%s: expected a parameter vector, got %s", fnLabel(name), rest[0])
	}
	for _, src := range free.srcs {
		fc.emit(src.kind, src.index)
	}
	fc.setPos(pos)
	fc.emit(CLOSURE, fn.ID)
	fc.adjust(1 - len(free.srcs))
}

func (fc *fcomp) multiArity(name, self string, pos syntax.Pos, free *freeList, arities []syntax.Node) *Funcode {
	group := fc.c.newFuncode(name, pos)
	var bodies []*Funcode
	seen := map[int]bool{}
	variadic := false
	for _, a := range arities {
		l, ok := a.(*syntax.List)
		if !ok || len(l.Elems) == 0 {
			errorf(a.Pos(), "%s: expected an arity ([params] body...), got %s", fnLabel(name), a)
		}
		params, ok := l.Elems[0].(*syntax.Vector)
		if !ok {
			errorf(l.Elems[0].Pos(), "%s: expected a parameter vector, got %s", fnLabel(name), l.Elems[0])
		}
		b := fc.arity(name, self, l.At, free, params, l.Elems[1:])
		if b.Variadic {
			if variadic {
				errorf(l.At, "%s: more than one variadic arity", fnLabel(name))
			}
			variadic = true
		} else if seen[b.NumParams] {
			errorf(l.At, "%s: two arities with %d parameters", fnLabel(name), b.NumParams)
		}
		seen[b.NumParams] = true
		bodies = append(bodies, b)
	}
	sortArities(bodies)
	for _, b := range bodies {
		group.Arities = append(group.Arities, b.ID)
		b.NumFree = len(free.names)
		b.FreeNames = free.names
	}
	group.NumFree = len(free.names)
	group.FreeNames = free.names
	return group
}

func sortArities(bs []*Funcode) {
	key := func(f *Funcode) int {
		if f.Variadic {
			return 1 << 30
		}
		return f.NumParams
	}
	for i := 1; i < len(bs); i++ {
		for j := i; j > 0 && key(bs[j]) < key(bs[j-1]); j-- {
			bs[j], bs[j-1] = bs[j-1], bs[j]
		}
	}
}

type param struct {
	pattern syntax.Node
	typ     syntax.Node
}

// parseParams splits a parameter vector into fixed parameters and an optional
// rest parameter; a type form after a parameter is its annotation.
func parseParams(fname string, v *syntax.Vector) (fixed []param, rest *param) {
	es := v.Elems
	for i := 0; i < len(es); i++ {
		e := es[i]
		if s, ok := e.(*syntax.Symbol); ok && s.Name == "&" {
			if i+1 >= len(es) || !isPattern(es[i+1]) {
				errorf(s.At, "%s: & must be followed by a rest parameter", fnLabel(fname))
			}
			rest = &param{pattern: es[i+1]}
			i += 2
			if i < len(es) && isTypeForm(es[i]) {
				rest.typ = es[i]
				i++
			}
			if i < len(es) {
				errorf(es[i].Pos(), "%s: unexpected %s after the rest parameter", fnLabel(fname), es[i])
			}
			return fixed, rest
		}
		if !isPattern(e) {
			errorf(e.Pos(), "%s: expected a parameter name or pattern, got %s", fnLabel(fname), e)
		}
		p := param{pattern: e}
		if i+1 < len(es) && isTypeForm(es[i+1]) {
			p.typ = es[i+1]
			i++
		}
		fixed = append(fixed, p)
	}
	return fixed, nil
}

func isPattern(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.Symbol:
		return n.Name != "&"
	case *syntax.Vector, *syntax.Map:
		return true
	}
	return false
}

// arity compiles one ([params] :ret? body...) into a new Funcode.
func (fc *fcomp) arity(name, self string, pos syntax.Pos, free *freeList, pv *syntax.Vector, body []syntax.Node) *Funcode {
	child := &fcomp{c: fc.c, parent: fc, fn: fc.c.newFuncode(name, pos), self: self, free: free}
	f := child.fn
	if len(body) > 1 && isTypeForm(body[0]) {
		f.ReturnType = body[0]
		body = body[1:]
	}
	fixed, rest := parseParams(name, pv)
	f.NumParams = len(fixed)
	f.Variadic = rest != nil
	params := fixed
	if rest != nil {
		f.RestType = rest.typ
		params = append(params[:len(fixed):len(fixed)], *rest)
	}
	slots := make([]int, len(params))
	for _, p := range fixed {
		f.ParamTypes = append(f.ParamTypes, p.typ)
		child.annotation(p.typ)
	}
	child.annotation(f.RestType)
	for i := range params {
		slots[i] = child.newSlot()
	}
	child.setPos(pos)
	// recur rebinds the parameters and runs their destructuring again, as
	// Clojure's fn (a parameter pattern is a let inside the body). Versions
	// before rtfs-compile-4 jumped past the destructuring.
	child.loop = &loopTarget{start: len(f.Code), slots: slots, rest: rest != nil}
	for i, p := range params {
		if s, ok := p.pattern.(*syntax.Symbol); ok {
			if s.Name != "_" {
				child.bindName(s.Name, slots[i])
			}
			continue
		}
		child.emit(LOCAL, slots[i])
		child.bind(p.pattern)
	}
	if fc.c.before4() {
		child.loop.start = len(f.Code)
	}
	child.body(body, true)
	child.emit(RETURN, 0)
	child.finish()
	return f
}
