package rtfs

import (
	"fmt"
)

// intrinsics are the pure Go helpers the prelude uses. They are not visible
// to programs under these names unless a program spells the % name, and they
// never call back into RTFS. The table is built once and never modified.
var intrinsics = map[string]*Builtin{
	"%items":         {name: "seq", impl: intrItems, minArgs: 1, maxArgs: 1},
	"%kv-items":      {name: "reduce-kv", impl: intrKVItems, minArgs: 1, maxArgs: 1},
	"%re-all":        {name: "replace", impl: intrReAll, minArgs: 3, maxArgs: 3},
	"%lz-step1":      {name: "seq", impl: intrLzStep1, minArgs: 2, maxArgs: 2},
	"%lz-run":        {name: "seq", impl: intrLzRun, minArgs: 2, maxArgs: 2},
	"%lz-swap":       {name: "seq", impl: intrLzSwap, minArgs: 3, maxArgs: 3},
	"%lazy":          {name: "lazy-seq", impl: intrLazy, minArgs: 1, maxArgs: 1},
	"%lazy-inf":      {name: "lazy-seq", impl: intrLazyInf, minArgs: 2, maxArgs: 2},
	"%lazy-like":     {name: "lazy-seq", impl: intrLazyLike, minArgs: 2, maxArgs: 2},
	"%lazy-like-all": {name: "lazy-seq", impl: intrLazyLikeAll, minArgs: 2, maxArgs: 2},
	"%realized":      {name: "println", impl: intrRealized, minArgs: 0, maxArgs: -1},
	"%sorted-empty":  {name: "sorted-map-by", impl: intrSortedEmpty, minArgs: 2, maxArgs: 2},
	"%sorted-info":   {name: "sorted-map-by", impl: intrSortedInfo, minArgs: 1, maxArgs: 1},
	"%sorted-put":    {name: "sorted-map-by", impl: intrSortedPut, minArgs: 4, maxArgs: 4},
	"%sorted-by?":    {name: "sorted-map-by", impl: intrSortedBy, minArgs: 1, maxArgs: 1},
	"%xf-wrapped?":   {name: "transduce", impl: intrXfWrapped, minArgs: 1, maxArgs: 1},
	"%lazy?":         {name: "seq", impl: intrIsLazy, minArgs: 1, maxArgs: -1},
	"%all-lazy?":     {name: "seq", impl: intrAllLazy, minArgs: 1, maxArgs: 1},
	"%eager-count":   {name: "count", impl: intrEagerCount, minArgs: 1, maxArgs: 1},
	"%items-n":       {name: "seq", impl: intrItemsN, minArgs: 2, maxArgs: 2},
	"%re-splice":     {name: "replace", impl: intrReSplice, minArgs: 3, maxArgs: 3},
	"%nth":           {name: "nth", impl: intrNth, minArgs: 2, maxArgs: 2},
	"%min-count":     {name: "count", impl: intrMinCount, minArgs: 1, maxArgs: -1},
	"%spread-args":   {name: "apply", impl: intrSpreadArgs, minArgs: 1, maxArgs: 1},
	"%cat":           {name: "concat", impl: intrCat, minArgs: 2, maxArgs: 2},
	"%into":          {name: "into", impl: intrInto, minArgs: 2, maxArgs: 2},
	"%slice":         {name: "subvec", impl: intrSlice, minArgs: 3, maxArgs: 3},
	"%half":          {name: "quot", impl: intrHalf, minArgs: 1, maxArgs: 1},
	"%cmp-less?":     {name: "comparator", impl: intrCmpLess, minArgs: 1, maxArgs: 1},
	"%sort":          {name: "sort", impl: intrSort, minArgs: 1, maxArgs: 1},
	"%sort-by-keys":  {name: "sort-by", impl: intrSortByKeys, minArgs: 2, maxArgs: 2},
	"%<":             {name: "dotimes", impl: intrLess, minArgs: 2, maxArgs: 2},
	"%inc":           {name: "dotimes", impl: intrInc, minArgs: 1, maxArgs: 1},
	"%assert":        {name: "%assert", impl: builtinAssert, minArgs: 3, maxArgs: 3, bare: true},   // its message is Clojure's
	"%no-match":      {name: "%no-match", impl: intrNoMatch, minArgs: 2, maxArgs: 2, bare: true},   // names case or condp itself
	"%lazy-only":     {name: "%lazy-only", impl: intrLazyOnly, minArgs: 2, maxArgs: 2, bare: true}, // names the function itself
	"%instance?":     {name: "instance?", impl: intrInstanceOf, minArgs: 2, maxArgs: 2},
	"%out-begin":     {name: "with-out-str", impl: intrOutBegin, minArgs: 0, maxArgs: 0},
	"%out?":          {name: "with-out-str", impl: intrOutCapturing, minArgs: 0, maxArgs: 0},
	"%out-write":     {name: "with-out-str", impl: intrOutWrite, minArgs: 0, maxArgs: -1},
	"%out-end":       {name: "with-out-str", impl: intrOutEnd, minArgs: 0, maxArgs: 1},
}

// intrinsicNames maps each intrinsic back to its % name; built once, never
// modified.
var intrinsicNames = func() map[*Builtin]string {
	m := make(map[*Builtin]string, len(intrinsics))
	for k, b := range intrinsics {
		m[b] = k
	}
	return m
}()

// builtinKey returns the name that builtinNamed resolves to b.
func builtinKey(b *Builtin) string {
	if k, ok := intrinsicNames[b]; ok {
		return k
	}
	return b.name
}

// items returns the elements of a collection as a vector: a vector itself,
// the entries of a map as [k v] vectors, the characters of a string.
func items(th *Thread, v Value) (*Vector, error) {
	switch c := v.(type) {
	case *Vector:
		return c, nil
	case NilType:
		return emptyVector, nil
	case *List:
		if c.vec != nil && c.off == 0 {
			return c.vec, nil
		}
		elems, err := seqSlice(th, c) // in one walk: Index is O(i) on cons cells
		if err != nil {
			return nil, err
		}
		return vectorOwned(elems), nil
	case *Set:
		return collect(th, c.Len(), c.Index)
	case *Map:
		if err := th.build(c.Len()); err != nil {
			return nil, err
		}
		kvs := make([]Value, 0, c.Len())
		c.Range(func(k, v Value) bool {
			kvs = append(kvs, vectorOwned([]Value{k, v}))
			return true
		})
		return vectorOwned(kvs), nil
	case *Lazy:
		elems, _, err := realize(th, c, -1)
		if err != nil {
			return nil, err
		}
		return vectorOwned(elems), th.build(len(elems))
	case String:
		rs := []rune(string(c))
		if err := th.build(len(rs)); err != nil {
			return nil, err
		}
		out := make([]Value, len(rs))
		for i, r := range rs {
			out[i] = String(string(r))
		}
		return vectorOwned(out), nil
	}
	return nil, fmt.Errorf("expected a collection, got %s", describe(v))
}

func collect(th *Thread, n int, at func(int) Value) (*Vector, error) {
	if err := th.build(n); err != nil {
		return nil, err
	}
	out := make([]Value, n)
	for i := range out {
		out[i] = at(i)
	}
	return vectorOwned(out), nil
}

func intrItems(th *Thread, args []Value) (Value, error) { return items(th, args[0]) }

// intrKVItems is the entries of reduce-kv's map (nil has none); a vector is
// walked by reduce-kv itself, by index.
func intrKVItems(th *Thread, args []Value) (Value, error) {
	switch args[0].(type) {
	case *Map, NilType:
		return items(th, args[0])
	}
	return nil, typeError("a map or a vector", args[0])
}

func intrNth(_ *Thread, args []Value) (Value, error) {
	v, ok := args[0].(*Vector)
	i, ok2 := args[1].(Int)
	if !ok || !ok2 || i < 0 || int(i) >= v.Len() {
		return nil, fmt.Errorf("internal index %s out of range", args[1])
	}
	return v.Index(int(i)), nil
}

func intrMinCount(_ *Thread, args []Value) (Value, error) {
	n := -1
	for _, a := range args {
		v, ok := a.(*Vector)
		if !ok {
			return nil, typeError("a vector", a)
		}
		if n < 0 || v.Len() < n {
			n = v.Len()
		}
	}
	return Int(n), nil
}

// intrSpreadArgs turns apply's (a b coll) into the vector [a b ...coll].
func intrSpreadArgs(th *Thread, args []Value) (Value, error) {
	l, ok := args[0].(*List)
	if !ok || l.Len() == 0 {
		return emptyVector, nil
	}
	lead, err := seqSlice(th, l)
	if err != nil {
		return nil, err
	}
	n := len(lead)
	last, err := items(th, lead[n-1])
	if err != nil {
		return nil, fmt.Errorf("last argument: %w", err)
	}
	if err := th.build(n - 1 + last.Len()); err != nil {
		return nil, err
	}
	return vectorOwned(last.appendTo(lead[:n-1], 0)), nil
}

func intrCat(th *Thread, args []Value) (Value, error) {
	a, err := items(th, args[0])
	if err != nil {
		return nil, err
	}
	return intrInto(th, []Value{a, args[1]})
}

func intrInto(th *Thread, args []Value) (Value, error) {
	acc, ok := args[0].(*Vector)
	if !ok {
		return nil, typeError("a vector", args[0])
	}
	more, err := items(th, args[1])
	if err != nil {
		return nil, err
	}
	if err := th.checkSize(acc.Len() + more.Len()); err != nil {
		return nil, err
	}
	if err := th.chargeElems(more.Len()); err != nil {
		return nil, err
	}
	for i := 0; i < more.Len(); i++ {
		acc = acc.Conj(more.Index(i))
	}
	return acc, nil
}

func intrSlice(th *Thread, args []Value) (Value, error) {
	v, ok := args[0].(*Vector)
	from, ok2 := args[1].(Int)
	to, ok3 := args[2].(Int)
	if !ok || !ok2 || !ok3 || from < 0 || to < from || int(to) > v.Len() {
		return nil, fmt.Errorf("internal slice [%s:%s] out of range", args[1], args[2])
	}
	if err := th.build(int(to - from)); err != nil {
		return nil, err
	}
	out := make([]Value, 0, to-from)
	for i := int(from); i < int(to); i++ {
		out = append(out, v.Index(i))
	}
	return vectorOwned(out), nil
}

func intrLess(_ *Thread, args []Value) (Value, error) {
	i, ok := args[0].(Int)
	n, ok2 := args[1].(Int)
	if !ok || !ok2 {
		return nil, typeError("an int count", args[1])
	}
	return Bool(i < n), nil
}

func intrInc(_ *Thread, args []Value) (Value, error) {
	i, ok := args[0].(Int)
	if !ok {
		return nil, typeError("an int", args[0])
	}
	return i + 1, nil
}

func intrHalf(_ *Thread, args []Value) (Value, error) {
	n, ok := args[0].(Int)
	if !ok {
		return nil, typeError("an int", args[0])
	}
	return n / 2, nil
}

// intrCmpLess interprets a comparator's result: true or a negative number
// means "less than".
func intrCmpLess(_ *Thread, args []Value) (Value, error) {
	switch c := args[0].(type) {
	case Bool:
		return c, nil
	case NilType:
		return False, nil
	case Int:
		return Bool(c < 0), nil
	case Float:
		return Bool(c < 0), nil
	}
	return nil, fmt.Errorf("a comparator must return a number or a boolean, got %s", describe(args[0]))
}

func intrSort(th *Thread, args []Value) (Value, error) {
	xs, err := items(th, args[0])
	if err != nil {
		return nil, err
	}
	out := xs.appendTo(make([]Value, 0, xs.Len()), 0)
	if err := sortValues(th, out); err != nil {
		return nil, err
	}
	return vectorOwned(out), nil
}

func intrSortByKeys(th *Thread, args []Value) (Value, error) {
	xs, ok := args[0].(*Vector)
	ks, ok2 := args[1].(*Vector)
	if !ok || !ok2 || xs.Len() != ks.Len() {
		return nil, fmt.Errorf("internal: mismatched keys")
	}
	if err := th.build(xs.Len()); err != nil {
		return nil, err
	}
	idx := make([]int, xs.Len())
	for i := range idx {
		idx[i] = i
	}
	m := meter{th: th}
	err := sortStable(th, idx, func(a, b int) (int, error) {
		c, err := m.compare(ks.Index(a), ks.Index(b))
		if err != nil && !isFatal(err) {
			return c, fmt.Errorf("cannot compare keys: %w", err)
		}
		return c, err
	})
	if err == nil {
		err = m.done()
	}
	if err != nil {
		return nil, err
	}
	out := make([]Value, len(idx))
	for i, j := range idx {
		out[i] = xs.Index(j)
	}
	return vectorOwned(out), nil
}

// intrXfWrapped is (%xf-wrapped? acc): acc is a stateful transducer's
// [:rtfs.internal/xf state acc] (prelude).
func intrXfWrapped(_ *Thread, args []Value) (Value, error) {
	v, ok := args[0].(*Vector)
	return Bool(ok && v.Len() == 3 && v.Index(0) == Keyword("rtfs.internal/xf")), nil
}
