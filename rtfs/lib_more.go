package rtfs

// More of clojure.core: key val list* rseq and the bit operations.

func addMoreBuiltins(t builtinTable) {
	t.add("reduced", 1, 1, func(_ *Thread, args []Value) (Value, error) { return MapOf(kwReduced, args[0]), nil })
	t.add("reduced?", 1, 1, func(_ *Thread, args []Value) (Value, error) { return Bool(isReduced(args[0])), nil })
	t.add("unreduced", 1, 1, func(_ *Thread, args []Value) (Value, error) { return unreduced(args[0]), nil })
	t.add("ensure-reduced", 1, 1, func(_ *Thread, args []Value) (Value, error) {
		if isReduced(args[0]) {
			return args[0], nil
		}
		return MapOf(kwReduced, args[0]), nil
	})
	t.add("key", 1, 1, entryPart(0, "key"))
	t.add("val", 1, 1, entryPart(1, "val"))
	t.add("list*", 1, -1, builtinListStar)
	t.add("rseq", 1, 1, builtinRseq)
	t.add("bit-and", 2, -1, bitFold(func(a, b int64) int64 { return a & b }))
	t.add("bit-or", 2, -1, bitFold(func(a, b int64) int64 { return a | b }))
	t.add("bit-xor", 2, -1, bitFold(func(a, b int64) int64 { return a ^ b }))
	t.add("bit-and-not", 2, -1, bitFold(func(a, b int64) int64 { return a &^ b }))
	t.add("bit-not", 1, 1, func(_ *Thread, args []Value) (Value, error) {
		x, err := toInt(1, args[0])
		return Int(^x), err
	})
	t.add("bit-shift-left", 2, 2, bitShift(func(x int64, n uint) int64 { return x << n }))
	t.add("bit-shift-right", 2, 2, bitShift(func(x int64, n uint) int64 { return x >> n }))
	t.add("unsigned-bit-shift-right", 2, 2, bitShift(func(x int64, n uint) int64 { return int64(uint64(x) >> n) }))
	t.add("bit-test", 2, 2, func(_ *Thread, args []Value) (Value, error) {
		x, n, err := shiftArgs(args)
		return Bool(x>>n&1 == 1), err
	})
	t.add("bit-set", 2, 2, bitShift(func(x int64, n uint) int64 { return x | 1<<n }))
	t.add("bit-clear", 2, 2, bitShift(func(x int64, n uint) int64 { return x &^ (1 << n) }))
}

// entryPart is key or val of a map entry, a [k v] vector here.
func entryPart(i int, name string) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		if v, ok := args[0].(*Vector); ok && v.Len() == 2 {
			return v.Index(i), nil
		}
		return nil, typeError("a map entry ([k v], as a map's seq gives)", args[0])
	}
}

// builtinListStar is (list* x ... coll): a list of the xs then coll's
// elements; nil when that is empty, as in Clojure.
func builtinListStar(th *Thread, args []Value) (Value, error) {
	last := args[len(args)-1]
	if _, ok := last.(*Lazy); ok {
		var s Value = last
		for i := len(args) - 2; i >= 0; i-- {
			s = lazyCons(args[i], s)
		}
		return s, nil
	}
	elems, err := seqSlice(th, last)
	if err != nil {
		return nil, seqErr(err, argTypeError(len(args), "a collection", last))
	}
	if len(args) == 1 && len(elems) == 0 {
		return Nil, nil
	}
	out := append(append(make([]Value, 0, len(args)-1+len(elems)), args[:len(args)-1]...), elems...)
	if err := th.build(len(out)); err != nil {
		return nil, err
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

func bitFold(f func(a, b int64) int64) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		acc, err := toInt(1, args[0])
		if err != nil {
			return nil, err
		}
		for i, a := range args[1:] {
			x, err := toInt(i+2, a)
			if err != nil {
				return nil, err
			}
			acc = f(acc, x)
		}
		return Int(acc), nil
	}
}

// shiftArgs reads (f x n); as the JVM does, only the low 6 bits of n count.
func shiftArgs(args []Value) (int64, uint, error) {
	x, err := toInt(1, args[0])
	if err != nil {
		return 0, 0, err
	}
	n, err := toInt(2, args[1])
	if err != nil {
		return 0, 0, err
	}
	return x, uint(n) & 63, nil
}

func bitShift(f func(x int64, n uint) int64) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		x, n, err := shiftArgs(args)
		if err != nil {
			return nil, err
		}
		return Int(f(x, n)), nil
	}
}

// (reduced x) is the map {:rtfs.internal/reduced x}: reduce, transduce and
// the transducers stop when a step returns one, and unwrap it.
var kwReduced = Keyword("rtfs.internal/reduced")

func isReduced(v Value) bool {
	m, ok := v.(*Map)
	if !ok || m.n != 1 {
		return false
	}
	_, ok = m.GetKeyword(string(kwReduced))
	return ok
}

func unreduced(v Value) Value {
	if isReduced(v) {
		x, _ := v.(*Map).GetKeyword(string(kwReduced))
		return x
	}
	return v
}
