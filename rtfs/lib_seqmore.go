package rtfs

import (
	"slices"
)

// More sequence functions, after Clojure: seq ffirst fnext nnext butlast
// drop-last take-last repeat interpose. Like the rest of the library they are
// eager; every result that is a sequence is a list.

func addSeqMoreBuiltins(t builtinTable) {
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
		n, err := toCount(1, args[0], true)
		if err != nil {
			return nil, err
		}
		return dropLast(th, args[1], n)
	})
	t.add("take-last", 2, 2, builtinTakeLast)
	t.add("repeat", 1, 2, builtinRepeat)
	t.add("interpose", 2, 2, builtinInterpose)
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
	n, err := toCount(1, args[0], true)
	if err != nil {
		return nil, err
	}
	elems, err := seqSlice(th, args[1])
	if err != nil {
		return nil, seqErr(err, argTypeError(2, "a collection", args[1]))
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
	n, err := toCount(1, args[0], true)
	if err != nil {
		return nil, err
	}
	if err := th.build(n); err != nil {
		return nil, err
	}
	return listOwned(slices.Repeat([]Value{args[1]}, n)), nil
}

// builtinInterpose is (interpose sep coll): a list of coll's elements with
// sep between each two.
func builtinInterpose(th *Thread, args []Value) (Value, error) {
	elems, err := seqSlice(th, args[1])
	if err != nil {
		return nil, seqErr(err, argTypeError(2, "a collection", args[1]))
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
			out = append(out, args[0])
		}
		out = append(out, e)
	}
	return listOwned(out), nil
}
