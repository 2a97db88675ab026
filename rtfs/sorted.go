package rtfs

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
	"github.com/rtfshost/rtfshost/rtfs/types"
)

// Sorted maps and sets: sorted-map, sorted-set, sorted-map-by and
// sorted-set-by. A sorted map is a *Map (a sorted set a *Set over one) that
// also keeps its keys in order: lookups are a map's, Range, seq, keys,
// printing and encoding follow the order, and adding a key inserts it, O(n).
// The order is compare's (natural), a Go builtin comparator's (>, <,
// compare), or an RTFS function's: a builtin cannot call that one, so
// adding a new key to such a map goes through the prelude, which finds the
// place with the comparator and inserts it there (%sorted-put).

// A sortedOrder is a sorted map's keys in order and its comparator. It is
// never modified: insert and remove return a new one. It is a Value only to
// be held in the map's kvs (Map.sorted); no program ever sees one.
type sortedOrder struct {
	cmp  Value   // nil: compare's order; else a *Builtin or an RTFS function of two arguments
	keys []Value // the keys, in order
}

func (*sortedOrder) Kind() Kind     { return types.KindNil }
func (*sortedOrder) String() string { return "#<sorted order>" }

// goComparable reports whether Go can order keys itself (natural order or a
// builtin comparator).
func (o *sortedOrder) goComparable() bool {
	_, isBuiltin := o.cmp.(*Builtin)
	return o.cmp == nil || isBuiltin
}

// compare orders a and b: -1, 0 or 1. A comparator's result is read as
// Clojure reads it: a number by its sign, true as "a before b", and a false
// asks the comparator again with b and a. The comparison is counted on m
// (nil: not counted).
func (o *sortedOrder) compare(a, b Value, m *meter) (int, error) {
	switch c := o.cmp.(type) {
	case nil:
		r, err := m.compare(a, b)
		if m.failed() {
			return 0, m.err
		}
		return r, err
	case *Builtin:
		if !m.visit(1) {
			return 0, m.err
		}
		var th *Thread
		if m != nil {
			th = m.th
		}
		r, err := c.call(th, []Value{a, b})
		if err != nil {
			return 0, err
		}
		switch x := r.(type) {
		case Int:
			return boolCmp(x > 0, x < 0), nil
		case Float:
			return boolCmp(x > 0, x < 0), nil
		}
		if Truth(r) {
			return -1, nil
		}
		r2, err := c.call(th, []Value{b, a})
		if err != nil {
			return 0, err
		}
		if Truth(r2) {
			return 1, nil
		}
		return 0, nil
	}
	return 0, errSortedBy
}

// errSortedBy is the error of a builtin that must add a key to a map or set
// sorted by an RTFS function; (*Builtin).call redirects it to the prelude.
var errSortedBy = errors.New("internal error: a sorted-by collection needs the prelude")

// position is where k goes in the order (the first key not before it),
// its comparisons counted on m.
func (o *sortedOrder) position(k Value, m *meter) (int, error) {
	var err error
	i := sort.Search(len(o.keys), func(i int) bool {
		if err != nil {
			return true
		}
		c, e := o.compare(o.keys[i], k, m)
		if e != nil {
			err = e
			return true
		}
		return c >= 0
	})
	return i, err
}

// insert returns the order with the new key k in its place. Go code that
// adds keys (Map.Assoc) reaches here only for orders it can compare (the
// builtins check first, sortedCheck); an incomparable key goes last. Its
// comparisons are counted on m; the copy of the keys is charged by the
// builtin (sortedCheck).
func (o *sortedOrder) insert(k Value, m *meter) *sortedOrder {
	i, err := o.position(k, m)
	if err != nil {
		i = len(o.keys)
	}
	return o.insertAt(k, i)
}

func (o *sortedOrder) insertAt(k Value, i int) *sortedOrder {
	keys := make([]Value, 0, len(o.keys)+1)
	keys = append(append(append(keys, o.keys[:i]...), k), o.keys[i:]...)
	return &sortedOrder{cmp: o.cmp, keys: keys}
}

// remove returns the order without key k, counting on m a unit per key it
// compares and copies.
func (o *sortedOrder) remove(k Value, m *meter) *sortedOrder {
	keys := make([]Value, 0, len(o.keys))
	for _, x := range o.keys {
		if !m.visit(1) || !m.equal(x, k) {
			keys = append(keys, x)
		}
	}
	return &sortedOrder{cmp: o.cmp, keys: keys}
}

// sortedCheck is what a builtin does before it adds k to m: nothing for a
// map that is not sorted or already holds k; for a sorted one it charges
// the insertion and checks that k can be ordered (Clojure's
// ClassCastException), and for one sorted by an RTFS function it returns
// errSortedBy.
func sortedCheck(th *Thread, m *Map, k Value) error {
	if !m.isSorted() {
		return nil
	}
	mt := meter{th: th}
	if _, ok := m.get(k, &mt); ok || mt.failed() {
		return mt.done()
	}
	o := m.sorted()
	if !o.goComparable() {
		return errSortedBy
	}
	if err := th.chargeElems(len(o.keys)); err != nil {
		return err
	}
	if len(o.keys) > 0 {
		_, err := o.compare(o.keys[0], k, &mt)
		if err := mt.done(); err != nil {
			return err
		}
		if err != nil {
			return withKind(compile.KindType, err)
		}
	}
	return mt.done()
}

// newSorted returns the sorted map of the key/value pairs kvs in order cmp
// (nil: natural), or errSortedBy when cmp is an RTFS function.
func newSorted(th *Thread, cmp Value, kvs []Value) (*Map, error) {
	o := &sortedOrder{cmp: cmp}
	if !o.goComparable() {
		return nil, errSortedBy
	}
	m := (&Map{}).withOrder(o)
	mt := meter{th: th}
	for i := 0; i+1 < len(kvs); i += 2 {
		if err := sortedCheck(th, m, kvs[i]); err != nil {
			return nil, err
		}
		m = m.assoc(kvs[i], kvs[i+1], &mt)
		if err := mt.tick(); err != nil {
			return nil, err
		}
	}
	if err := mt.done(); err != nil {
		return nil, err
	}
	return m, th.checkSize(m.Len())
}

// sortedOf returns the order of a sorted map or set, or nil.
func sortedOf(v Value) *sortedOrder {
	switch c := v.(type) {
	case *Map:
		return c.sorted()
	case *Set:
		return c.m.sorted()
	}
	return nil
}

// reversible reports whether rseq takes v: a vector or a sorted collection.
func reversible(v Value) bool {
	_, isVec := v.(*Vector)
	return isVec || sortedOf(v) != nil
}

func addSortedBuiltins(t builtinTable) {
	t.add("sorted-map", 0, -1, func(th *Thread, args []Value) (Value, error) {
		if len(args)%2 != 0 {
			return nil, fmt.Errorf("expected key value pairs, got %d arguments", len(args))
		}
		return newSorted(th, nil, args)
	})
	t.add("sorted-map-by", 1, -1, func(th *Thread, args []Value) (Value, error) {
		if len(args)%2 != 1 {
			return nil, fmt.Errorf("expected a comparator and key value pairs, got %d arguments", len(args))
		}
		if !isFn(args[0]) {
			return nil, argTypeError(1, "a comparator function", args[0])
		}
		return newSorted(th, args[0], args[1:])
	})
	t.add("sorted-set", 0, -1, func(th *Thread, args []Value) (Value, error) {
		m, err := newSorted(th, nil, pairsOf(args))
		if err != nil {
			return nil, err
		}
		return &Set{m: m}, nil
	})
	t.add("sorted-set-by", 1, -1, func(th *Thread, args []Value) (Value, error) {
		if !isFn(args[0]) {
			return nil, argTypeError(1, "a comparator function", args[0])
		}
		m, err := newSorted(th, args[0], pairsOf(args[1:]))
		if err != nil {
			return nil, err
		}
		return &Set{m: m}, nil
	})
	t.add("sorted?", 1, 1, func(_ *Thread, args []Value) (Value, error) { return Bool(sortedOf(args[0]) != nil), nil })
}

// pairsOf is x, x, y, y ...: a set's elements as the map it is built on.
func pairsOf(xs []Value) []Value {
	out := make([]Value, 0, 2*len(xs))
	for _, x := range xs {
		out = append(out, x, x)
	}
	return out
}

// The prelude's side of maps and sets sorted by an RTFS function.

// intrSortedEmpty is (%sorted-empty cmp set?): an empty sorted map (or set)
// whatever cmp is.
func intrSortedEmpty(_ *Thread, args []Value) (Value, error) {
	m := (&Map{}).withOrder(&sortedOrder{cmp: args[0]})
	if Truth(args[1]) {
		return &Set{m: m}, nil
	}
	return m, nil
}

// intrSortedInfo is (%sorted-info c): [comparator keys] of a sorted map or
// set (the comparator nil for the natural order), nil for anything else.
func intrSortedInfo(th *Thread, args []Value) (Value, error) {
	o := sortedOf(args[0])
	if o == nil {
		return Nil, nil
	}
	if err := th.build(len(o.keys)); err != nil {
		return nil, err
	}
	cmp := o.cmp
	if cmp == nil {
		cmp = Nil
	}
	return NewVector(cmp, NewVector(o.keys...)), nil
}

// intrSortedPut is (%sorted-put c k v i): c with k mapped to v (for a set,
// holding k), a new key going to position i of the order (-1: k is a key
// already).
func intrSortedPut(th *Thread, args []Value) (Value, error) {
	i, ok := args[3].(Int)
	if !ok {
		return nil, typeError("an int", args[3])
	}
	put := func(m *Map, k, v Value) (*Map, error) {
		o := m.sorted()
		if o == nil || int(i) > len(o.keys) {
			return nil, errors.New("internal: bad sorted insertion")
		}
		mt := meter{th: th}
		if _, has := m.get(k, &mt); has || i < 0 {
			nm := m.assocBase(k, v, &mt)
			if err := mt.done(); err != nil {
				return nil, err
			}
			if nm == m {
				return m, nil
			}
			if nm.n != m.n { // not a key after all: keep the order whole
				o = o.insertAt(k, len(o.keys))
			}
			return nm.withOrder(o), nil
		}
		nm := m.assocBase(k, v, &mt)
		if err := mt.done(); err != nil {
			return nil, err
		}
		return nm.withOrder(o.insertAt(k, int(i))), th.chargeElems(len(o.keys))
	}
	switch c := args[0].(type) {
	case *Map:
		return put(c, args[1], args[2])
	case *Set:
		m, err := put(c.m, args[1], args[1])
		if err != nil {
			return nil, err
		}
		if m == c.m {
			return c, nil
		}
		return &Set{m: m}, nil
	}
	return nil, typeError("a sorted map or set", args[0])
}

// buildSorted rebuilds a decoded sorted map (or set) from its elements as
// they were encoded, in order (k v k v ... for a map), checking the order
// when it is the natural one.
func buildSorted(isSet bool, elems []Value, cmp Value) (Value, error) {
	var keys, kvs []Value
	if isSet {
		keys, kvs = elems, pairsOf(elems)
	} else {
		kvs = elems
		for i := 0; i < len(elems); i += 2 {
			keys = append(keys, elems[i])
		}
	}
	m := MapOf(kvs...)
	if m.Len() != len(keys) {
		return nil, errors.New("a sorted collection repeats a key")
	}
	if cmp == nil && !slices.IsSortedFunc(keys, func(a, b Value) int { c, _ := Compare(a, b); return c }) {
		return nil, errors.New("a sorted collection's keys are out of order")
	}
	sm := (&Map{kvs: m.kvs, root: m.root, n: m.n}).withOrder(&sortedOrder{cmp: cmp, keys: keys})
	if isSet {
		return &Set{m: sm}, nil
	}
	return sm, nil
}

// intrSortedBy is (%sorted-by? c): c is a map or set sorted by an RTFS
// function.
func intrSortedBy(_ *Thread, args []Value) (Value, error) {
	o := sortedOf(args[0])
	return Bool(o != nil && !o.goComparable()), nil
}
