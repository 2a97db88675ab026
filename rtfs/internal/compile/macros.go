package compile

import (
	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// Clojure's control macros, expanded into the forms above them:
//
//	(if-not test then else?)         (case e k r (k1 k2) r default?)
//	(if-some [b e] then else?)       (condp pred e test r ... default?)
//	(when-some [b e] body...)        (some-> x forms...)  (some->> x forms...)
//	(when-first [x coll] body...)    (cond-> x test form ...)  (cond->> ...)
//	(as-> e name forms...)           (letfn [(f [x] ...) ...] body...)
//	(assert test message?)          (lazy-seq body...)  (lazy-cat coll ...)
//
// Temporaries are named with a leading % (programs cannot write such names),
// and each one is bound by a let around the code that reads it, so nested
// expansions shadow rather than collide.

func vec(at syntax.Pos, elems ...syntax.Node) *syntax.Vector {
	return &syntax.Vector{At: at, Elems: elems}
}

func quoted(n syntax.Node) syntax.Node {
	return list(n.Pos(), sym(n.Pos(), "quote"), n)
}

func str(at syntax.Pos, s string) *syntax.String { return &syntax.String{At: at, Value: s} }

func nilNode(at syntax.Pos) syntax.Node { return &syntax.Nil{At: at} }

// macroForm returns the expander of a macro, or nil.
func macroForm(name string) func(l *syntax.List) syntax.Node {
	switch name {
	case "if-not":
		return expandIfNot
	case "if-some", "when-some":
		return expandIfSome
	case "when-first":
		return expandWhenFirst
	case "some->", "some->>":
		return expandSomeThread
	case "cond->", "cond->>":
		return expandCondThread
	case "as->":
		return expandAs
	case "case":
		return expandCase
	case "condp":
		return expandCondp
	case "letfn":
		return expandLetfn
	case "assert":
		return expandAssert
	case "lazy-seq":
		return expandLazySeq
	case "lazy-cat":
		return expandLazyCat
	case "with-out-str":
		return expandWithOutStr
	}
	return nil
}

// expandWithOutStr: (with-out-str body...) is the text print, println,
// prn and printf write while the body runs: (%with-out-str (fn [] body...)).
func expandWithOutStr(l *syntax.List) syntax.Node {
	at := l.At
	fn := append([]syntax.Node{sym(at, "fn"), vec(at)}, l.Elems[1:]...)
	return list(at, sym(at, "%with-out-str"), list(at, fn...))
}

// expandLazySeq: (lazy-seq body...) is the lazy sequence of the body's
// value, computed when an element is needed: (%lazy (fn [] body...)).
func expandLazySeq(l *syntax.List) syntax.Node {
	at := l.At
	fn := append([]syntax.Node{sym(at, "fn"), vec(at)}, l.Elems[1:]...)
	return list(at, sym(at, "%lazy"), list(at, fn...))
}

// expandLazyCat: (lazy-cat a b ...) is (concat (lazy-seq a) (lazy-seq b) ...).
func expandLazyCat(l *syntax.List) syntax.Node {
	at := l.At
	out := []syntax.Node{sym(at, "concat")}
	for _, e := range l.Elems[1:] {
		out = append(out, list(e.Pos(), sym(at, "lazy-seq"), e))
	}
	return list(at, out...)
}

func (fc *fcomp) macro(l *syntax.List, tail bool) {
	fc.expr(macroForm(head(l))(l), tail)
}

func expandIfNot(l *syntax.List) syntax.Node {
	arity(l, 2, 3, "(if-not test then else?)")
	els := nilNode(l.At)
	if len(l.Elems) == 4 {
		els = l.Elems[3]
	}
	return list(l.At, sym(l.At, "if"), l.Elems[1], els, l.Elems[2])
}

// oneBinding reads the [binding expr] vector of if-some and friends.
func oneBinding(l *syntax.List) (pattern, expr syntax.Node) {
	bv, ok := l.Elems[1].(*syntax.Vector)
	if !ok || len(bv.Elems) != 2 {
		errorf(l.Elems[1].Pos(), "%s: expected a vector of one binding and its expression", head(l))
	}
	return bv.Elems[0], bv.Elems[1]
}

func expandIfSome(l *syntax.List) syntax.Node {
	at, isIf := l.At, head(l) == "if-some"
	if isIf {
		arity(l, 2, 3, "(if-some [binding expr] then else?)")
	} else {
		arity(l, 1, -1, "(when-some [binding expr] body...)")
	}
	pat, e := oneBinding(l)
	t := sym(at, "%some")
	var then syntax.Node
	els := nilNode(at)
	if isIf {
		then = l.Elems[2]
		if len(l.Elems) == 4 {
			els = l.Elems[3]
		}
	} else {
		then = list(at, append([]syntax.Node{sym(at, "do")}, l.Elems[2:]...)...)
	}
	return list(at, sym(at, "let"), vec(at, t, e),
		list(at, sym(at, "if"), list(at, sym(at, "nil?"), t), els,
			list(at, sym(at, "let"), vec(at, pat, t), then)))
}

func expandWhenFirst(l *syntax.List) syntax.Node {
	arity(l, 1, -1, "(when-first [x coll] body...)")
	at := l.At
	pat, e := oneBinding(l)
	t := sym(at, "%coll")
	body := list(at, append([]syntax.Node{sym(at, "do")}, l.Elems[2:]...)...)
	return list(at, sym(at, "let"), vec(at, t, e),
		list(at, sym(at, "when"), list(at, sym(at, "seq"), t),
			list(at, sym(at, "let"), vec(at, pat, list(at, sym(at, "first"), t)), body)))
}

// threadStep is (-> x form) or (->> x form) for one form.
func threadStep(at syntax.Pos, last bool, x, form syntax.Node) syntax.Node {
	op := "->"
	if last {
		op = "->>"
	}
	return list(at, sym(at, op), x, form)
}

func expandSomeThread(l *syntax.List) syntax.Node {
	arity(l, 1, -1, "(some-> x forms...)")
	at, last := l.At, head(l) == "some->>"
	t := sym(at, "%x")
	acc := l.Elems[1]
	// (let [%x x %x (if (nil? %x) nil (-> %x f)) ...] %x)
	bs := []syntax.Node{t, acc}
	for _, f := range l.Elems[2:] {
		bs = append(bs, t, list(f.Pos(), sym(at, "if"), list(at, sym(at, "nil?"), t), nilNode(at), threadStep(f.Pos(), last, t, f)))
	}
	return list(at, sym(at, "let"), vec(at, bs...), t)
}

func expandCondThread(l *syntax.List) syntax.Node {
	arity(l, 1, -1, "(cond-> x test form ...)")
	at, last := l.At, head(l) == "cond->>"
	if len(l.Elems[2:])%2 != 0 {
		errorf(at, "%s: expected pairs of test and form after the value", head(l))
	}
	t := sym(at, "%x")
	bs := []syntax.Node{t, l.Elems[1]}
	for i := 2; i < len(l.Elems); i += 2 {
		test, f := l.Elems[i], l.Elems[i+1]
		bs = append(bs, t, list(f.Pos(), sym(at, "if"), test, threadStep(f.Pos(), last, t, f), t))
	}
	return list(at, sym(at, "let"), vec(at, bs...), t)
}

func expandAs(l *syntax.List) syntax.Node {
	arity(l, 2, -1, "(as-> expr name forms...)")
	at := l.At
	name, ok := l.Elems[2].(*syntax.Symbol)
	if !ok {
		errorf(l.Elems[2].Pos(), "as->: expected a name, got %s", l.Elems[2])
	}
	bs := []syntax.Node{name, l.Elems[1]}
	for _, f := range l.Elems[3:] {
		bs = append(bs, name, f)
	}
	return list(at, sym(at, "let"), vec(at, bs...), name)
}

// expandCase: the constants are not evaluated; a list groups several.
func expandCase(l *syntax.List) syntax.Node {
	arity(l, 1, -1, "(case expr constant result ... default?)")
	at := l.At
	e := sym(at, "%case")
	clauses := l.Elems[2:]
	var def syntax.Node = list(at, sym(at, "%no-match"), str(at, "case"), e)
	if len(clauses)%2 == 1 {
		def = clauses[len(clauses)-1]
		clauses = clauses[:len(clauses)-1]
	}
	cond := []syntax.Node{sym(at, "cond")}
	for i := 0; i < len(clauses); i += 2 {
		k := clauses[i]
		var test syntax.Node
		if grp, ok := k.(*syntax.List); ok {
			or := []syntax.Node{sym(at, "or")}
			for _, alt := range grp.Elems {
				or = append(or, list(alt.Pos(), sym(at, "="), e, quoted(alt)))
			}
			test = list(k.Pos(), or...)
		} else {
			test = list(k.Pos(), sym(at, "="), e, quoted(k))
		}
		cond = append(cond, test, clauses[i+1])
	}
	cond = append(cond, &syntax.Keyword{At: at, Name: "else"}, def)
	return list(at, sym(at, "let"), vec(at, e, l.Elems[1]), list(at, cond...))
}

// expandCondp: (condp pred expr test result ... default?) tries (pred test
// expr) in turn.
func expandCondp(l *syntax.List) syntax.Node {
	arity(l, 2, -1, "(condp pred expr test result ... default?)")
	at := l.At
	p, e := sym(at, "%pred"), sym(at, "%expr")
	clauses := l.Elems[3:]
	var def syntax.Node = list(at, sym(at, "%no-match"), str(at, "condp"), e)
	if len(clauses)%2 == 1 {
		def = clauses[len(clauses)-1]
		clauses = clauses[:len(clauses)-1]
	}
	cond := []syntax.Node{sym(at, "cond")}
	for i := 0; i < len(clauses); i += 2 {
		if k, ok := clauses[i+1].(*syntax.Keyword); ok && k.Name == ">>" {
			errorf(k.At, "condp: the :>> form is not supported in RTFS; call the function in the result")
		}
		cond = append(cond, list(clauses[i].Pos(), p, clauses[i], e), clauses[i+1])
	}
	cond = append(cond, &syntax.Keyword{At: at, Name: "else"}, def)
	return list(at, sym(at, "let"), vec(at, p, l.Elems[1], e, l.Elems[2]), list(at, cond...))
}

// expandLetfn makes the functions visible to each other (and to the body)
// through one named function that returns them all: each function's body
// first binds every name from it, so mutual recursion works.
//
//	(letfn [(f [x] ...) (g [y] ...)] body)
//	=> (let [%fns (fn %fns [] {:f (fn f [x] (let [f (:f (%fns)) g (:g (%fns))] ...)) ...})
//	         f (:f (%fns)) g (:g (%fns))]
//	     body)
func expandLetfn(l *syntax.List) syntax.Node {
	arity(l, 1, -1, "(letfn [(name [params] body...) ...] body...)")
	at := l.At
	specs, ok := l.Elems[1].(*syntax.Vector)
	if !ok {
		errorf(l.Elems[1].Pos(), "letfn: expected a vector of function specs")
	}
	fns := sym(at, "%fns")
	var names []*syntax.Symbol
	for _, s := range specs.Elems {
		sl, ok := s.(*syntax.List)
		if !ok || len(sl.Elems) < 2 {
			errorf(s.Pos(), "letfn: expected (name [params] body...), got %s", s)
		}
		name, ok := sl.Elems[0].(*syntax.Symbol)
		if !ok {
			errorf(sl.Elems[0].Pos(), "letfn: expected a function name, got %s", sl.Elems[0])
		}
		names = append(names, name)
	}
	rebind := func(at syntax.Pos) *syntax.Vector {
		bs := vec(at)
		for _, n := range names {
			bs.Elems = append(bs.Elems, n, list(at, &syntax.Keyword{At: at, Name: n.Name}, list(at, fns)))
		}
		return bs
	}
	table := &syntax.Map{At: at}
	for i, s := range specs.Elems {
		sl := s.(*syntax.List)
		fn := []syntax.Node{sym(sl.At, "fn"), names[i]}
		wrap := func(params syntax.Node, body []syntax.Node, at syntax.Pos) []syntax.Node {
			return []syntax.Node{params, list(at, append([]syntax.Node{sym(at, "let"), rebind(at)}, body...)...)}
		}
		if _, single := sl.Elems[1].(*syntax.Vector); single {
			fn = append(fn, wrap(sl.Elems[1], sl.Elems[2:], sl.At)...)
		} else {
			for _, ar := range sl.Elems[1:] {
				al, ok := ar.(*syntax.List)
				if !ok || len(al.Elems) == 0 {
					errorf(ar.Pos(), "letfn: expected ([params] body...), got %s", ar)
				}
				fn = append(fn, list(al.At, wrap(al.Elems[0], al.Elems[1:], al.At)...))
			}
		}
		table.Elems = append(table.Elems, &syntax.Keyword{At: sl.At, Name: names[i].Name}, list(sl.At, fn...))
	}
	bs := append([]syntax.Node{fns, list(at, sym(at, "fn"), fns, vec(at), table)}, rebind(at).Elems...)
	return list(at, append([]syntax.Node{sym(at, "let"), vec(at, bs...)}, l.Elems[2:]...)...)
}

// expandAssert: (assert test message?) throws "Assert failed: message" and
// the form when test is false or nil, as Clojure's assert does.
func expandAssert(l *syntax.List) syntax.Node {
	arity(l, 1, 2, "(assert test message?)")
	at := l.At
	var msg syntax.Node = nilNode(at)
	if len(l.Elems) == 3 {
		msg = l.Elems[2]
	}
	return list(at, sym(at, "%assert"), l.Elems[1], msg, str(at, l.Elems[1].String()))
}
