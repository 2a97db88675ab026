package rtfs

import (
	"errors"
	"slices"
	"unicode/utf8"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// Sequence access: count first second rest next last nth take drop peek pop
// empty? empty not-empty seq ffirst fnext nnext butlast drop-last take-last
// rseq, and repeat and interpose. Nil is the empty sequence; strings are
// sequences of one-code-point strings; maps are sequences of [key value]
// vectors. Like the rest of the library they are eager (lazy.go has the
// exceptions); every result that is a sequence is a list.

var errNotSeqable = errors.New("not a collection")

func addSeqBuiltins(t builtinTable) {
	t.add("count", 1, 1, builtinCount)
	t.add("first", 1, 1, func(th *Thread, args []Value) (Value, error) { return nthOr(th, args[0], 0, Nil) })
	t.add("second", 1, 1, func(th *Thread, args []Value) (Value, error) { return nthOr(th, args[0], 1, Nil) })
	t.add("rest", 1, 1, func(th *Thread, args []Value) (Value, error) { return dropSeq(th, args[0], 1) })
	t.add("next", 1, 1, builtinNext)
	t.add("last", 1, 1, builtinLast)
	t.add("nth", 2, 3, builtinNth)
	t.add("take", 1, 2, xformArity(1, "%xf-take", builtinTake))
	t.add("drop", 1, 2, xformArity(1, "%xf-drop", func(th *Thread, args []Value) (Value, error) {
		var n int
		var coll Value
		if err := unpackArgs(th, args, &n, &coll); err != nil {
			return nil, err
		}
		return dropSeq(th, coll, n)
	}))
	t.add("peek", 1, 1, builtinPeek)
	t.add("pop", 1, 1, builtinPop)
	t.add("empty?", 1, 1, func(th *Thread, args []Value) (Value, error) {
		e, err := seqEmpty(th, args[0])
		return Bool(e), err
	})
	t.add("not-empty", 1, 1, func(th *Thread, args []Value) (Value, error) {
		e, err := seqEmpty(th, args[0])
		if err != nil || e {
			return Nil, err
		}
		return args[0], nil
	})
	t.add("empty", 1, 1, builtinEmpty)
	t.add("seq", 1, 1, func(th *Thread, args []Value) (Value, error) { return seqOf(th, args[0]) })
	t.add("ffirst", 1, 1, func(th *Thread, args []Value) (Value, error) {
		x, err := nthOr(th, args[0], 0, Nil)
		if err != nil {
			return nil, err
		}
		return nthOr(th, x, 0, Nil)
	})
	t.add("fnext", 1, 1, func(th *Thread, args []Value) (Value, error) { return nthOr(th, args[0], 1, Nil) })
	t.add("nnext", 1, 1, func(th *Thread, args []Value) (Value, error) {
		return nextSeq(th, args[0], 2)
	})
	t.add("butlast", 1, 1, func(th *Thread, args []Value) (Value, error) {
		r, err := dropLast(th, args[0], 1)
		if err != nil || r.(*List).n == 0 {
			return Nil, err
		}
		return r, nil
	})
	t.add("drop-last", 1, 2, func(th *Thread, args []Value) (Value, error) {
		if len(args) == 1 {
			return dropLast(th, args[0], 1)
		}
		var n int
		var coll Value
		if err := unpackArgs(th, args, &n, &coll); err != nil {
			return nil, err
		}
		return dropLast(th, coll, n)
	})
	t.add("take-last", 2, 2, builtinTakeLast)
	t.add("repeat", 1, 2, builtinRepeat)
	t.add("interpose", 1, 2, xformArity(1, "%xf-interpose", lazyArity(1, "%lazy-interpose", builtinInterpose, False)))
	t.add("rseq", 1, 1, builtinRseq)
}

// countOf returns the number of elements of a collection, string (code
// points) or nil (0); a lazy sequence is realized, charged to th.
func countOf(th *Thread, v Value) (int, error) {
	switch x := v.(type) {
	case NilType:
		return 0, nil
	case *List:
		return x.n, nil
	case *Vector:
		return x.cnt, nil
	case *Map:
		return x.Len(), nil
	case *Set:
		return x.Len(), nil
	case String:
		return utf8.RuneCountInString(string(x)), nil
	case *Lazy:
		elems, _, err := realize(th, x, -1)
		return len(elems), err
	}
	return 0, typeError("a collection", v)
}

// seqEmpty reports whether a seqable value has no elements: in O(1) for a
// collection, string or nil, computing at most the first element of a lazy
// sequence.
func seqEmpty(th *Thread, v Value) (bool, error) {
	switch x := v.(type) {
	case *Lazy:
		elems, _, err := realize(th, x, 1)
		return len(elems) == 0, err
	case String:
		return len(x) == 0, nil
	}
	n, err := countOf(th, v)
	return n == 0, err
}

// asSeq is the rest of a sequence as a seq function returns it: a list or a
// lazy sequence (nil and the empty collections as the empty list).
func asSeq(th *Thread, v Value) (Value, error) {
	switch x := v.(type) {
	case NilType:
		return emptyList, nil
	case *List, *Lazy:
		return x, nil
	case *Vector:
		return listView(x, 0), nil
	}
	elems, err := seqSlice(th, v)
	return listOwned(elems), err
}

func builtinCount(th *Thread, args []Value) (Value, error) {
	n, err := countOf(th, args[0])
	if err != nil {
		return nil, err
	}
	if s, ok := args[0].(String); ok {
		return Int(n), th.scanText(len(s)) // counting code points reads them
	}
	return Int(n), nil
}

// seqErr is the error of a builtin whose seqSlice failed: the builtin's own
// description of a bad argument (bad) when the value was not seqable, else
// seqSlice's error itself (a limit or a cancellation).
func seqErr(err, bad error) error {
	if errors.Is(err, errNotSeqable) {
		return bad
	}
	return err
}

// seqSlice returns the elements of a seqable value as a fresh slice the
// caller owns: nil has none, maps give [key value] vectors, strings give
// one-code-point strings. It charges th for the n elements before it copies
// them (a nil th is not charged), so every O(n) builtin built on it pays for
// its work.
func seqSlice(th *Thread, v Value) ([]Value, error) {
	if l, ok := v.(*Lazy); ok {
		elems, _, err := realize(th, l, -1)
		return elems, err
	}
	n, err := countOf(th, v)
	if err != nil {
		return nil, errNotSeqable
	}
	if err := th.chargeElems(n); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case NilType:
		return nil, nil
	case *List:
		out := make([]Value, 0, x.n)
		it := newSeqIter(x)
		for e, ok := it.next(); ok; e, ok = it.next() {
			out = append(out, e)
		}
		return out, nil
	case *Vector:
		return x.appendTo(make([]Value, 0, x.cnt), 0), nil
	case *Set:
		out := make([]Value, 0, x.Len())
		x.Range(func(e Value) bool { out = append(out, e); return true })
		return out, nil
	case *Map:
		out := make([]Value, 0, x.n)
		x.Range(func(k, v Value) bool { out = append(out, NewVector(k, v)); return true })
		return out, nil
	case String:
		out := make([]Value, 0, len(x))
		for _, r := range string(x) {
			out = append(out, String(string(r)))
		}
		return out, nil
	}
	return nil, errNotSeqable
}

// nthOr returns element i of a seqable value, or def when i is out of range.
func nthOr(th *Thread, v Value, i int, def Value) (Value, error) {
	switch x := v.(type) {
	case NilType:
		return def, nil
	case *List:
		if i < x.n {
			if x.vec == nil {
				if err := th.charge(int64(i), 0); err != nil { // a cons list walks to i
					return nil, err
				}
			}
			return x.Index(i), nil
		}
		return def, nil
	case *Vector:
		if i < x.cnt {
			return x.Index(i), nil
		}
		return def, nil
	case *Set:
		if i < x.Len() {
			return x.Index(i), nil
		}
		return def, nil
	case *Lazy:
		elems, _, err := realize(th, x, i+1)
		if err != nil || i >= len(elems) {
			return def, err
		}
		return elems[i], nil
	}
	elems, err := seqSlice(th, v)
	if err != nil {
		return nil, seqErr(err, typeError("a collection", v))
	}
	if i < len(elems) {
		return elems[i], nil
	}
	return def, nil
}

// dropSeq returns the list of v's elements after the first n (O(n) for
// cons lists without allocating, O(1) for vectors).
func dropSeq(th *Thread, v Value, n int) (Value, error) {
	switch x := v.(type) {
	case NilType:
		return emptyList, nil
	case *List:
		if n >= x.n {
			return emptyList, nil
		}
		if x.vec != nil {
			return listView(x.vec, x.off+n), nil
		}
		if err := th.charge(int64(n), 0); err != nil { // a cons list walks n cells
			return nil, err
		}
		for ; n > 0 && x.vec == nil; n-- {
			x = x.tail
		}
		if n > 0 {
			return listView(x.vec, x.off+n), nil
		}
		return x, nil
	case *Vector:
		return listView(x, n), nil
	case *Lazy:
		elems, rest, err := realize(th, x, n)
		if err != nil {
			return nil, err
		}
		if len(elems) < n {
			return emptyList, nil
		}
		return asSeq(th, rest)
	}
	elems, err := seqSlice(th, v)
	if err != nil {
		return nil, seqErr(err, typeError("a collection", v))
	}
	return listOwned(elems[min(n, len(elems)):]), nil
}

func builtinNext(th *Thread, args []Value) (Value, error) {
	return nextSeq(th, args[0], 1)
}

// nextSeq is (nthnext v n): the elements after the first n, or nil when
// there are none. Of a lazy sequence it computes n+1 elements of v itself,
// so that a thunk in the way is the argument's to compute.
func nextSeq(th *Thread, v Value, n int) (Value, error) {
	if l, ok := v.(*Lazy); ok {
		elems, rest, err := realize(th, l, n+1)
		if err != nil || len(elems) <= n {
			return Nil, err
		}
		return lazyRun(elems[n:], rest), nil
	}
	r, err := dropSeq(th, v, n)
	if err != nil {
		return nil, err
	}
	return nilIfEmpty(th, r)
}

// nilIfEmpty is a seq function's rest, or nil when it has no elements.
func nilIfEmpty(th *Thread, r Value) (Value, error) {
	if e, err := seqEmpty(th, r); err != nil || e {
		return Nil, err
	}
	return r, nil
}

func builtinLast(th *Thread, args []Value) (Value, error) {
	n, err := countOf(th, args[0])
	if err != nil || n == 0 {
		return Nil, err
	}
	if l, ok := args[0].(*List); ok && l.vec == nil {
		if err := th.charge(int64(n), 0); err != nil {
			return nil, err
		}
		it := newSeqIter(l)
		var last Value
		for e, ok := it.next(); ok; e, ok = it.next() {
			last = e
		}
		return last, nil
	}
	return nthOr(th, args[0], n-1, Nil)
}

// builtinNth is (nth coll i [default]): an index out of range is an error
// unless a default is given; nil gives nil (or the default).
func builtinNth(th *Thread, args []Value) (Value, error) {
	var coll, def Value
	var i int64
	if err := unpackArgs(th, args, &coll, &i, &def); err != nil {
		return nil, err
	}
	switch coll.(type) {
	case NilType, *List, *Vector, String, *Lazy:
	default:
		return nil, argTypeError(1, "a list, vector or string", coll)
	}
	if def != nil {
		if i < 0 {
			return def, nil
		}
		return nthOr(th, coll, int(min(i, int64(maxInt))), def)
	}
	if coll == Nil {
		return Nil, nil
	}
	if l, ok := coll.(*Lazy); ok {
		elems, _, err := realize(th, l, int(min(max(i, 0), int64(maxInt-1)))+1)
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(elems)) {
			return nil, indexError("index %d out of bounds for a sequence of length %d", i, len(elems))
		}
		return elems[i], nil
	}
	n, _ := countOf(th, coll)
	if i < 0 || i >= int64(n) {
		return nil, indexError("index %d out of bounds for %s of length %d", i, coll.Kind(), n)
	}
	return nthOr(th, coll, int(i), Nil)
}

// builtinTake is (take n coll): a list of the first n elements.
func builtinTake(th *Thread, args []Value) (Value, error) {
	var n int
	var coll Value
	if err := unpackArgs(th, args, &n, &coll); err != nil {
		return nil, err
	}
	switch x := coll.(type) {
	case *List:
		if n >= x.n {
			return x, nil
		}
		if err := th.build(n); err != nil {
			return nil, err
		}
		out := make([]Value, 0, n)
		it := newSeqIter(x)
		for e, ok := it.next(); ok && len(out) < n; e, ok = it.next() {
			out = append(out, e)
		}
		return listOwned(out), nil
	case *Vector:
		n = min(n, x.cnt)
		if err := th.build(n); err != nil {
			return nil, err
		}
		out := make([]Value, 0, n)
		for i := 0; i < n; i++ {
			out = append(out, x.Index(i))
		}
		return listOwned(out), nil
	case *Lazy:
		elems, _, err := realize(th, x, n)
		return listOwned(elems), err
	}
	elems, err := toElems(th, 2, coll)
	if err != nil {
		return nil, err
	}
	return listOwned(elems[:min(n, len(elems))]), nil
}

// builtinPeek is the element conj would have added last: a list's first,
// a vector's last; nil for nil or an empty collection.
func builtinPeek(_ *Thread, args []Value) (Value, error) {
	switch x := args[0].(type) {
	case NilType:
		return Nil, nil
	case *List:
		return x.First(), nil
	case *Vector:
		if x.cnt == 0 {
			return Nil, nil
		}
		return x.Index(x.cnt - 1), nil
	}
	return nil, typeError("a list or vector", args[0])
}

// builtinPop removes what peek returns; popping an empty list or vector is
// an error, popping nil is nil.
func builtinPop(_ *Thread, args []Value) (Value, error) {
	switch x := args[0].(type) {
	case NilType:
		return Nil, nil
	case *List:
		if x.n == 0 {
			return nil, withKind(compile.KindState, errors.New("cannot pop an empty list"))
		}
		return x.Rest(), nil
	case *Vector:
		if x.cnt == 0 {
			return nil, withKind(compile.KindState, errors.New("cannot pop an empty vector"))
		}
		return x.Pop(), nil
	}
	return nil, typeError("a list or vector", args[0])
}

// builtinEmpty returns the empty collection of the argument's kind (nil
// for nil).
func builtinEmpty(_ *Thread, args []Value) (Value, error) {
	switch x := args[0].(type) {
	case NilType:
		return Nil, nil
	case *List:
		return emptyList, nil
	case *Vector:
		return emptyVector, nil
	case *Map:
		if o := x.sorted(); o != nil {
			return (&Map{}).withOrder(&sortedOrder{cmp: o.cmp}), nil
		}
		return emptyMap, nil
	case *Set:
		if o := x.m.sorted(); o != nil {
			return &Set{m: (&Map{}).withOrder(&sortedOrder{cmp: o.cmp})}, nil
		}
		return emptySet, nil
	case String:
		return String(""), nil
	case *Lazy:
		return emptyList, nil
	}
	return nil, typeError("a collection", args[0])
}

// seqOf is (seq x): nil for nil or an empty collection or string, else a
// list of the elements (a map's as [key value] vectors, a string's as
// one-code-point strings). A list is returned as it is, a vector as an O(1)
// list view of it.
func seqOf(th *Thread, v Value) (Value, error) {
	switch x := v.(type) {
	case NilType:
		return Nil, nil
	case *List:
		if x.n == 0 {
			return Nil, nil
		}
		return x, nil
	case *Vector:
		if x.cnt == 0 {
			return Nil, nil
		}
		return listView(x, 0), nil
	case *Lazy:
		elems, rest, err := realize(th, x, 1)
		if err != nil || len(elems) == 0 {
			return Nil, err
		}
		return lazyRun(elems, rest), nil
	}
	elems, err := seqSlice(th, v)
	if err != nil {
		return nil, seqErr(err, typeError("a collection", v))
	}
	if len(elems) == 0 {
		return Nil, nil
	}
	return listOwned(elems), nil
}

// dropLast is (drop-last n coll): a list of all but the last n elements.
func dropLast(th *Thread, v Value, n int) (Value, error) {
	elems, err := seqSlice(th, v)
	if err != nil {
		return nil, seqErr(err, typeError("a collection", v))
	}
	return listOwned(elems[:max(len(elems)-n, 0)]), nil
}

// builtinTakeLast is (take-last n coll): a list of the last n elements, nil
// when that is empty (as in Clojure).
func builtinTakeLast(th *Thread, args []Value) (Value, error) {
	var n int
	var elems []Value
	if err := unpackArgs(th, args, &n, &elems); err != nil {
		return nil, err
	}
	if n == 0 || len(elems) == 0 {
		return Nil, nil
	}
	return listOwned(elems[max(len(elems)-n, 0):]), nil
}

// builtinRepeat is (repeat n x): a list of n times x (empty for n ≤ 0),
// n bounded by the thread's collection-size limit; (repeat x) is the
// infinite lazy sequence of x.
func builtinRepeat(th *Thread, args []Value) (Value, error) {
	if len(args) == 1 {
		return &Lazy{kind: lzRepeat, inf: true, origin: "(repeat x)", a: args[0]}, nil
	}
	var n int
	var x Value
	if err := unpackArgs(th, args, &n, &x); err != nil {
		return nil, err
	}
	if err := th.build(n); err != nil {
		return nil, err
	}
	return listOwned(slices.Repeat([]Value{x}, n)), nil
}

// builtinInterpose is (interpose sep coll): a list of coll's elements with
// sep between each two.
func builtinInterpose(th *Thread, args []Value) (Value, error) {
	var sep Value
	var elems []Value
	if err := unpackArgs(th, args, &sep, &elems); err != nil {
		return nil, err
	}
	if len(elems) < 2 {
		return listOwned(elems), nil
	}
	if err := th.build(2*len(elems) - 1); err != nil {
		return nil, err
	}
	out := make([]Value, 0, 2*len(elems)-1)
	for i, e := range elems {
		if i > 0 {
			out = append(out, sep)
		}
		out = append(out, e)
	}
	return listOwned(out), nil
}

// builtinRseq is (rseq v): a vector's (or sorted collection's) elements in
// reverse order, nil when empty.
func builtinRseq(th *Thread, args []Value) (Value, error) {
	switch args[0].(type) {
	case *Vector, *Map, *Set:
		if !reversible(args[0]) {
			break
		}
		elems, err := seqSlice(th, args[0])
		if err != nil || len(elems) == 0 {
			return Nil, err
		}
		for i, j := 0, len(elems)-1; i < j; i, j = i+1, j-1 {
			elems[i], elems[j] = elems[j], elems[i]
		}
		return listOwned(elems), nil
	}
	return nil, typeError("a vector or a sorted collection", args[0])
}
