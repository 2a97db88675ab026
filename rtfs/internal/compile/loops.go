package compile

import "github.com/rtfshost/rtfshost/rtfs/syntax"

// Sequence comprehensions and counted loops, expanded into other forms:
//
//	(for [x xs y ys :when test :while t :let [z e]] body)  a vector of body's values
//	(doseq [x xs ...] body...)                    the same loop, for effect; nil
//	(dotimes [i n] body...)                       body with i = 0..n-1; nil
//
// The expansions call the prelude's %for-cat (%for-lazy for for) and the
// VM's %< and %inc, which programs cannot shadow.

func sym(at syntax.Pos, name string) *syntax.Symbol { return &syntax.Symbol{At: at, Name: name} }

func list(at syntax.Pos, elems ...syntax.Node) *syntax.List {
	return &syntax.List{At: at, Elems: elems}
}

func (fc *fcomp) forForm(l *syntax.List, tail bool) {
	arity(l, 2, -1, "(for [bindings...] body)")
	bv, ok := l.Elems[1].(*syntax.Vector)
	if !ok || len(bv.Elems)%2 != 0 || len(bv.Elems) == 0 {
		errorf(l.Elems[1].Pos(), "%s: expected a vector of binding/collection pairs", head(l))
	}
	var body syntax.Node = &syntax.Vector{At: l.At, Elems: []syntax.Node{&syntax.Nil{At: l.At}}}
	if head(l) == "for" {
		arity(l, 2, 2, "(for [bindings...] body)")
		body = &syntax.Vector{At: l.At, Elems: []syntax.Node{l.Elems[2]}}
	} else {
		body = list(l.At, append([]syntax.Node{sym(l.At, "do")}, append(l.Elems[2:], body)...)...)
	}
	// for is lazy over a lazy sequence (%for-lazy, from rtfs-compile-4 on);
	// doseq runs its body at once, so it keeps the eager %for-cat.
	cat := "%for-cat"
	if head(l) == "for" && !fc.c.before4() {
		cat = "%for-lazy"
	}
	expanded := forExpand(l.At, bv.Elems, body, cat)
	if head(l) == "doseq" {
		expanded = list(l.At, sym(l.At, "do"), expanded, &syntax.Nil{At: l.At})
	}
	fc.expr(expanded, tail)
}

// forStop is the keyword a :while test that fails returns in place of the
// body's values; the prelude's %for-cat stops its loop there.
const forStop = "rtfs.internal/for-stop"

// forExpand nests one %for-cat per binding; :when, :while and :let apply to
// the bindings before them.
func forExpand(at syntax.Pos, bs []syntax.Node, body syntax.Node, cat string) syntax.Node {
	if len(bs) == 0 {
		return body
	}
	rest := forExpand(at, bs[2:], body, cat)
	if k, ok := bs[0].(*syntax.Keyword); ok {
		switch k.Name {
		case "when":
			return list(k.At, sym(k.At, "if"), bs[1], rest, &syntax.Vector{At: k.At})
		case "let":
			return list(k.At, sym(k.At, "let"), bs[1], rest)
		case "while":
			// The binding's loop stops at the first false test:
			// %for-cat ends at this marker.
			return list(k.At, sym(k.At, "if"), bs[1], rest, &syntax.Keyword{At: k.At, Name: forStop})
		}
		errorf(k.At, "for: unknown modifier %s (expected :when, :while or :let)", k)
	}
	if !isPattern(bs[0]) {
		errorf(bs[0].Pos(), "for: expected a binding name or pattern, got %s", bs[0])
	}
	fn := list(at, sym(at, "fn"), &syntax.Vector{At: at, Elems: []syntax.Node{bs[0]}}, rest)
	return list(at, sym(at, cat), fn, bs[1])
}

func (fc *fcomp) dotimes(l *syntax.List, tail bool) {
	arity(l, 1, -1, "(dotimes [i n] body...)")
	bv, ok := l.Elems[1].(*syntax.Vector)
	if !ok || len(bv.Elems) != 2 {
		errorf(l.Elems[1].Pos(), "dotimes: expected [name count]")
	}
	i, ok := bv.Elems[0].(*syntax.Symbol)
	if !ok {
		errorf(bv.Elems[0].Pos(), "dotimes: expected a name, got %s", bv.Elems[0])
	}
	at := l.At
	n := sym(at, "%dotimes-n")
	body := append([]syntax.Node{sym(at, "do")}, l.Elems[2:]...)
	body = append(body, list(at, sym(at, "recur"), list(at, sym(at, "%inc"), i)))
	loop := list(at, sym(at, "loop"), &syntax.Vector{At: at, Elems: []syntax.Node{i, &syntax.Int{At: at}}},
		list(at, sym(at, "if"), list(at, sym(at, "%<"), i, n), list(at, body...), &syntax.Nil{At: at}))
	fc.expr(list(at, sym(at, "let"), &syntax.Vector{At: at, Elems: []syntax.Node{n, bv.Elems[1]}}, loop), tail)
}
