package rtfs

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Collection construction and transformation: vector vec list set hash-set
// hash-map conj cons concat reverse sort distinct frequencies partition
// range subvec into. Functions that return a sequence return a list.

func addCollBuiltins(t builtinTable) {
	t.add("vector", 0, -1, func(th *Thread, args []Value) (Value, error) {
		if err := th.build(len(args)); err != nil {
			return nil, err
		}
		return NewVector(args...), nil
	})
	t.add("list", 0, -1, func(th *Thread, args []Value) (Value, error) {
		if err := th.build(len(args)); err != nil {
			return nil, err
		}
		return NewList(args...), nil
	})
	t.add("hash-set", 0, -1, func(th *Thread, args []Value) (Value, error) {
		s, err := th.setOf(args)
		return s, err
	})
	t.add("hash-map", 0, -1, func(th *Thread, args []Value) (Value, error) {
		if len(args)%2 != 0 {
			return nil, fmt.Errorf("expected an even number of arguments (key value ...), got %d", len(args))
		}
		m, err := th.mapOf(args)
		return m, err
	})
	t.add("vec", 1, 1, builtinVec)
	t.add("set", 1, 1, func(th *Thread, args []Value) (Value, error) {
		if s, ok := args[0].(*Set); ok {
			return s, nil
		}
		var elems []Value
		if err := unpackArgs(th, args, &elems); err != nil {
			return nil, err
		}
		s, err := th.setOf(elems)
		return s, err
	})
	t.add("conj", 0, -1, builtinConj)
	t.add("cons", 2, 2, builtinCons)
	t.add("concat", 0, -1, builtinConcat)
	t.add("reverse", 1, 1, builtinReverse)
	t.add("sort", 1, 1, builtinSort)
	t.add("distinct", 0, 1, xformArity(0, "%xf-distinct", lazyArity(0, "%lazy-distinct", builtinDistinct, emptySet)))
	t.add("frequencies", 1, 1, builtinFrequencies)
	t.add("partition", 2, 4, builtinPartition)
	t.add("range", 0, 3, builtinRange)
	t.add("subvec", 2, 3, builtinSubvec)
	t.add("into", 0, 3, func(th *Thread, args []Value) (Value, error) {
		switch len(args) {
		case 0:
			return emptyVector, nil
		case 1:
			return args[0], nil
		case 3: // (into to xform from): the transducer runs in the prelude
			return nil, th.redirectTo("%into-xf", args[0], args[1], args[2])
		}
		return builtinInto(th, args)
	})
	t.add("list*", 1, -1, builtinListStar)
}

func builtinVec(th *Thread, args []Value) (Value, error) {
	switch x := args[0].(type) {
	case *Vector:
		return x, nil
	case *List:
		if x.vec != nil && x.off == 0 {
			return x.vec, nil
		}
	}
	var elems []Value
	if err := unpackArgs(th, args, &elems); err != nil {
		return nil, err
	}
	return vectorOwned(elems), nil
}

// conjOne adds x to coll the way the collection grows: lists at the front,
// vectors at the end, sets as a member, maps a [k v] entry or a map's
// entries; nil becomes a list. It charges the memory of what it adds, and
// on m the hashing, comparing and copying of a set or map.
func conjOne(th *Thread, coll, x Value, m *meter) (Value, error) {
	switch c := coll.(type) {
	case NilType:
		return emptyList.Cons(x), th.alloc(consBytes + slotBytes(x) - elemBytes)
	case *List:
		if err := th.checkSize(c.n + 1); err != nil {
			return nil, err
		}
		return c.Cons(x), th.alloc(consBytes + slotBytes(x) - elemBytes)
	case *Vector:
		if err := th.checkSize(c.cnt + 1); err != nil {
			return nil, err
		}
		return c.Conj(x), th.alloc(slotBytes(x))
	case *Set:
		return conjSet(th, c, x, m)
	case *Map:
		return conjMap(th, c, x, m)
	case *Lazy:
		return lazyCons(x, c), th.alloc(consBytes + slotBytes(x) - elemBytes)
	}
	return nil, argTypeError(1, "a collection", coll)
}

// conjSet is (conj s x) for a builtin: it checks a sorted set's order,
// charges the memory of a new element, and on m the hashing, comparing and
// copying.
func conjSet(th *Thread, s *Set, x Value, m *meter) (*Set, error) {
	if s.m.isSorted() {
		if err := sortedCheck(th, s.m, x); err != nil {
			return nil, err
		}
	}
	out := s.conj(x, m)
	if out != s {
		if err := th.checkSize(out.Len()); err != nil {
			return nil, err
		}
		return out, th.alloc(entryBytes + slotBytes(x) - elemBytes)
	}
	return out, nil
}

// assocEntry is (assoc m k v) for a builtin: it charges the memory of a new
// entry, and on mt the hashing, comparing and copying.
func assocEntry(th *Thread, m *Map, k, v Value, mt *meter) (*Map, error) {
	out := m.assoc(k, v, mt)
	if out.n > m.n {
		if err := th.checkSize(out.Len()); err != nil {
			return nil, err
		}
		return out, th.alloc(entryBytes + slotBytes(k) + slotBytes(v) - 2*elemBytes)
	}
	return out, nil
}

func conjMap(th *Thread, m *Map, x Value, mt *meter) (Value, error) {
	switch e := x.(type) {
	case *Vector:
		if e.cnt == 2 {
			if err := sortedCheck(th, m, e.Index(0)); err != nil {
				return nil, err
			}
			return assocEntry(th, m, e.Index(0), e.Index(1), mt)
		}
	case *Map:
		var err error
		e.Range(func(k, v Value) bool {
			if err = sortedCheck(th, m, k); err != nil {
				return false
			}
			m, err = assocEntry(th, m, k, v, mt)
			return err == nil && !mt.failed()
		})
		return m, err
	case NilType:
		return m, nil
	}
	return nil, fmt.Errorf("a map conjoins a [key value] vector or a map, got %s", describe(x))
}

func builtinConj(th *Thread, args []Value) (Value, error) {
	if len(args) == 0 {
		return emptyVector, nil
	}
	if v, ok := args[0].(*Vector); ok && len(args) == 2 { // the usual case, with no key to hash
		if err := th.checkSize(v.cnt + 1); err != nil {
			return nil, err
		}
		return v.Conj(args[1]), th.alloc(slotBytes(args[1]))
	}
	coll := args[0]
	m := meter{th: th}
	for _, x := range args[1:] {
		var err error
		if coll, err = conjOne(th, coll, x, &m); err != nil {
			return nil, err
		}
	}
	return coll, m.done()
}

// builtinCons is (cons x coll): a list with x in front of coll's elements.
func builtinCons(th *Thread, args []Value) (Value, error) {
	if err := th.alloc(consBytes + slotBytes(args[0]) - elemBytes); err != nil {
		return nil, err
	}
	switch c := args[1].(type) {
	case NilType:
		return emptyList.Cons(args[0]), nil
	case *List:
		return c.Cons(args[0]), th.checkSize(c.n + 1)
	case *Vector:
		return listView(c, 0).Cons(args[0]), th.checkSize(c.cnt + 1)
	case *Lazy:
		return lazyCons(args[0], c), nil
	}
	elems, err := toElems(th, 2, args[1])
	if err != nil {
		return nil, err
	}
	return listOwned(elems).Cons(args[0]), th.checkSize(len(elems) + 1)
}

// builtinConcat returns a list of the elements of each argument in turn.
func builtinConcat(th *Thread, args []Value) (Value, error) {
	if lazyConcat(args) {
		return concatLazy(th, args)
	}
	total := 0
	for i, a := range args {
		n, err := countOf(th, a)
		if err != nil {
			return nil, argTypeError(i+1, "a collection", a)
		}
		total += n
	}
	if err := th.build(total); err != nil {
		return nil, err
	}
	out := make([]Value, 0, total)
	for _, a := range args {
		elems, err := seqSlice(th, a)
		if err != nil {
			return nil, err
		}
		out = append(out, elems...)
	}
	return listOwned(out), nil
}

func builtinReverse(th *Thread, args []Value) (Value, error) {
	var elems []Value
	if err := unpackArgs(th, args, &elems); err != nil {
		return nil, err
	}
	slices.Reverse(elems)
	return listOwned(elems), nil
}

// builtinSort sorts by Compare (stable); elements that cannot be compared
// are an error naming them.
func builtinSort(th *Thread, args []Value) (Value, error) {
	var elems []Value
	if err := unpackArgs(th, args, &elems); err != nil {
		return nil, err
	}
	if err := sortValues(th, elems); err != nil {
		return nil, err
	}
	return listOwned(elems), nil
}

// valueSet is a scratch hash set of values for one builtin call.
type valueSet map[uint64][]Value

// valueSetSteps is what adding to a valueSet costs, in steps, beyond
// hashing and comparing: a Go map operation and its growth.
const valueSetSteps = 8

// add adds v and reports whether it was new, hashing and comparing on m.
func (s valueSet) add(v Value, m *meter) bool {
	h := m.hash(v)
	for _, x := range s[h] {
		if m.equal(x, v) {
			return false
		}
	}
	s[h] = append(s[h], v)
	return true
}

func builtinDistinct(th *Thread, args []Value) (Value, error) {
	var elems []Value
	if err := unpackArgs(th, args, &elems); err != nil {
		return nil, err
	}
	seen := make(valueSet, len(elems))
	out := elems[:0]
	m := meter{th: th, bytes: entryBytes / valueSetSteps} // the scratch set holds each element
	for _, e := range elems {
		if !m.visit(valueSetSteps) {
			break
		}
		if seen.add(e, &m) {
			out = append(out, e)
		}
	}
	if err := m.done(); err != nil {
		return nil, err
	}
	return listOwned(out), nil
}

// builtinFrequencies maps each distinct element to its number of
// occurrences, in order of first appearance.
func builtinFrequencies(th *Thread, args []Value) (Value, error) {
	var elems []Value
	if err := unpackArgs(th, args, &elems); err != nil {
		return nil, err
	}
	// Count in a scratch index from hash to positions in kvs, then build
	// the map at once.
	index := make(map[uint64][]int, len(elems))
	var kvs []Value
	m := meter{th: th, bytes: entryBytes / valueSetSteps}
	for _, e := range elems {
		if !m.visit(valueSetSteps) {
			break
		}
		h := m.hash(e)
		found := false
		for _, i := range index[h] {
			if m.equal(kvs[i], e) {
				kvs[i+1] = kvs[i+1].(Int) + 1
				found = true
				break
			}
		}
		if !found {
			index[h] = append(index[h], len(kvs))
			kvs = append(kvs, e, Int(1))
		}
	}
	if err := m.done(); err != nil {
		return nil, err
	}
	out, err := th.mapOf(kvs)
	return out, err
}

// builtinPartition is (partition n coll) or (partition n step coll): a list
// of lists of n elements starting every step elements; an incomplete last
// group is dropped.
func builtinPartition(th *Thread, args []Value) (Value, error) { return partitionBy(th, args, false) }

// builtinPartitionAll is partition that keeps the incomplete last groups.
func builtinPartitionAll(th *Thread, args []Value) (Value, error) { return partitionBy(th, args, true) }

func partitionBy(th *Thread, args []Value, all bool) (Value, error) {
	var n, step int64
	var pad []Value
	var collArg Value
	dst := []any{&n, &step, &pad, &collArg}
	switch len(args) {
	case 2: // (partition n coll)
		dst = []any{&n, &collArg}
	case 3: // (partition n step coll)
		dst = []any{&n, &step, &collArg}
	}
	if err := unpackArgs(th, args, dst...); err != nil {
		return nil, err
	}
	if len(args) == 2 {
		step = n
	}
	padded := len(args) == 4 // (partition n step pad coll): the last group is filled from pad
	if n <= 0 || step <= 0 {
		return nil, fmt.Errorf("size and step must be positive, got %d and %d", n, step)
	}
	var padArg Value = Nil
	if padded {
		padArg = args[2]
	}
	if ok, err := th.lazyRedirect(collArg, "%lazy-partition", Int(n), Int(step), padArg, Bool(padded), Bool(all), collArg); ok {
		return nil, err
	}
	elems, err := toElems(th, len(args), collArg)
	if err != nil {
		return nil, err
	}
	var groups []Value
	m := meter{th: th}
	for i := 0; i < len(elems); i += int(min(step, int64(len(elems)))) {
		end := int64(i) + n
		if end > int64(len(elems)) {
			if padded {
				g := append(append([]Value(nil), elems[i:]...), pad[:min(int64(len(pad)), end-int64(len(elems)))]...)
				groups = append(groups, listOwned(g))
				break
			}
			if !all {
				break
			}
			end = int64(len(elems))
		}
		groups = append(groups, listOwned(elems[i:end:end]))
		if err := m.tick(); err != nil {
			return nil, err
		}
	}
	return listOwned(groups), th.checkSize(len(groups))
}

// builtinRange is (range end), (range start end) or (range start end step):
// a list from start (default 0) by step (default 1) while below end (above
// it for a negative step). Each element is the one before plus step, so the
// elements keep the arguments' types as in Clojure: ints stay ints, and a
// float step makes every element after start a float. (range) with no
// arguments would be infinite: an error naming the bounded form.
func builtinRange(th *Thread, args []Value) (Value, error) {
	if len(args) == 0 {
		return newRange(Int(0), Int(1)), nil
	}
	start, end, step := Value(Int(0)), Value(nil), Value(Int(1))
	dst := []any{number(&start), number(&end), number(&step)}
	if len(args) == 1 {
		dst = dst[1:] // (range end)
	}
	if err := unpackArgs(th, args, dst...); err != nil {
		return nil, err
	}
	if s, ok := step.(Int); ok && s == 0 || step == Float(0) {
		return nil, errors.New("step must not be zero")
	}
	if e, ok := end.(Float); ok && math.IsInf(float64(e), 0) {
		if st, _ := toFloat(3, step); (st > 0) == (e > 0) {
			return newRange(start, step), nil // (range start ##Inf) never ends
		}
	}
	out, err := rangeValues(th, start, end, step)
	if err != nil {
		return nil, err
	}
	return listOwned(out), nil
}

func rangeValues(th *Thread, start, end, step Value) ([]Value, error) {
	a, aok := start.(Int)
	b, bok := end.(Int)
	s, sok := step.(Int)
	if aok && bok && sok {
		n := intRangeLen(int64(a), int64(b), int64(s))
		if err := th.build(n); err != nil {
			return nil, err
		}
		if err := th.alloc(int64(n) * boxBytes); err != nil { // each int is boxed
			return nil, err
		}
		out := make([]Value, n)
		for i, x := 0, a; i < n; i, x = i+1, x+s {
			out[i] = x
			if i%pollEvery == pollEvery-1 {
				if err := th.charge(0, 0); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	}
	// Mixed or float arguments: each element is the one before plus step,
	// with Clojure's contagion, so (range 0 1 0.25) starts with the int 0
	// and (range 1.5) is (0 1).
	fa, _ := toFloat(1, start)
	fb, _ := toFloat(2, end)
	fs, _ := toFloat(3, step)
	n := rangeLen(fa, fb, fs)
	if err := th.build(n); err != nil {
		return nil, err
	}
	if err := th.alloc(int64(n) * boxBytes); err != nil { // each number is boxed
		return nil, err
	}
	out := make([]Value, 0, n)
	x := start
	for i := 0; i < n+1; i++ {
		xf, _ := toFloat(1, x)
		if (fs > 0 && !(xf < fb)) || (fs < 0 && !(xf > fb)) {
			break
		}
		out = append(out, x)
		next, err := arith(opAdd, 1, x, step)
		if err != nil {
			return nil, err
		}
		x = next
		if i%pollEvery == pollEvery-1 {
			if err := th.charge(0, 0); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// intRangeLen is the exact number of elements of an int range,
// saturated to maxInt; its last element never overflows.
func intRangeLen(a, b, s int64) int {
	var diff, step uint64
	switch {
	case s > 0 && a < b:
		diff, step = uint64(b)-uint64(a), uint64(s)
	case s < 0 && a > b:
		diff, step = uint64(a)-uint64(b), -uint64(s)
	default:
		return 0
	}
	n := diff / step
	if diff%step != 0 {
		n++
	}
	if n > uint64(maxInt) {
		return maxInt
	}
	return int(n)
}

// rangeLen is the number of elements of a range, saturated to maxInt so
// the size check sees huge or infinite ranges.
func rangeLen(a, b, s float64) int {
	n := (b - a) / s
	switch {
	case n != n || n <= 0:
		return 0
	case n >= float64(maxInt/2):
		return maxInt
	}
	c := int(n)
	if float64(c) < n {
		c++
	}
	return c
}

// builtinSubvec is (subvec v start [end]): a vector of elements start..end-1.
func builtinSubvec(th *Thread, args []Value) (Value, error) {
	var v *Vector
	var start, end int64
	if err := unpackArgs(th, args, &v, &start, &end); err != nil {
		return nil, err
	}
	if len(args) < 3 {
		end = int64(v.cnt)
	}
	if start < 0 || end > int64(v.cnt) || start > end {
		return nil, indexError("range %d..%d out of bounds for vector of length %d", start, end, v.cnt)
	}
	if err := th.build(int(end - start)); err != nil {
		return nil, err
	}
	out := make([]Value, 0, end-start)
	for i := int(start); i < int(end); i++ {
		out = append(out, v.Index(i))
	}
	return vectorOwned(out), nil
}

// builtinInto conjoins every element of from onto to.
func builtinInto(th *Thread, args []Value) (Value, error) {
	to := args[0]
	switch to.(type) {
	case NilType, *List, *Vector, *Set, *Map:
	default:
		return nil, argTypeError(1, "a collection", to)
	}
	elems, err := toElems(th, 2, args[1])
	if err != nil {
		return nil, err
	}
	// Into an empty set or map, the elements are built at once (a sorted
	// one keeps its order: conjOne below).
	switch c := to.(type) {
	case *Set:
		if c.Len() == 0 && !c.m.isSorted() {
			s, err := th.setOf(elems)
			return s, err
		}
	case *Map:
		if c.Len() == 0 && !c.isSorted() {
			if kvs, ok := mapEntries(elems); ok {
				m, err := th.mapOf(kvs)
				return m, err
			}
		}
	}
	m := meter{th: th}
	for _, e := range elems {
		if to, err = conjOne(th, to, e, &m); err != nil {
			return nil, err
		}
		if err := m.tick(); err != nil {
			return nil, err
		}
	}
	return to, m.done()
}

// mapEntries returns the keys and values of elems, which must all be
// [key value] vectors, as a flat k, v, ... slice.
func mapEntries(elems []Value) ([]Value, bool) {
	kvs := make([]Value, 0, 2*len(elems))
	for _, e := range elems {
		v, ok := e.(*Vector)
		if !ok || v.cnt != 2 {
			return nil, false
		}
		kvs = append(kvs, v.Index(0), v.Index(1))
	}
	return kvs, true
}

// sortValues sorts vs in place, stably, in Compare's natural order; the first
// pair that Compare cannot order (mixed kinds) is the error. It charges th
// n log n steps before it starts, and looks at the run's context every
// pollEvery comparisons, so a cancelled run stops mid-sort; comparing
// collections charges their elements too.
func sortValues(th *Thread, vs []Value) error {
	m := meter{th: th}
	if err := sortStable(th, vs, func(a, b Value) (int, error) { return m.compare(a, b) }); err != nil {
		return err
	}
	return m.done()
}

// sortAbort carries a charge's error out of a sort's comparison function.
type sortAbort struct{ err error }

// sortStable sorts xs stably with cmp, charging th as sortValues does. The
// first error cmp returns is the error (the order is then unspecified).
func sortStable[T any](th *Thread, xs []T, cmp func(a, b T) (int, error)) (err error) {
	n := len(xs)
	if n < 2 {
		return nil
	}
	if err := th.charge(int64(n)*int64(bits.Len(uint(n))), 0); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			a, ok := r.(sortAbort)
			if !ok {
				panic(r)
			}
			err = a.err
		}
	}()
	var cmpErr error
	calls := 0
	slices.SortStableFunc(xs, func(a, b T) int {
		if calls++; calls == pollEvery {
			calls = 0
			if err := th.charge(0, 0); err != nil {
				panic(sortAbort{err})
			}
		}
		c, err := cmp(a, b)
		if err != nil && cmpErr == nil {
			cmpErr = err
			if isFatal(err) {
				panic(sortAbort{err}) // a limit or a cancel: stop sorting
			}
		}
		return c
	})
	return cmpErr
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
	elems, err := toElems(th, len(args), last)
	if err != nil {
		return nil, err
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
