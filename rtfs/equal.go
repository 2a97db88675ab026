package rtfs

import (
	"fmt"
	"math"
	"strings"
)

// sequential is implemented by *List and *Vector, the kinds that compare
// equal to each other element by element.
type sequential interface {
	Value
	Len() int
}

// seqIter walks a list or vector (or a list that ends in a vector view)
// without allocating.
type seqIter struct {
	cell *List   // current cons cell (cons mode)
	vec  *Vector // vector mode
	i    int
	leaf []Value
}

func newSeqIter(s Value) seqIter {
	switch x := s.(type) {
	case *List:
		if x.vec != nil {
			return seqIter{vec: x.vec, i: x.off}
		}
		return seqIter{cell: x}
	case *Vector:
		return seqIter{vec: x}
	}
	return seqIter{}
}

// next returns the next element, or false at the end.
func (it *seqIter) next() (Value, bool) {
	if it.cell != nil {
		c := it.cell
		if c.n == 0 {
			it.cell = nil
			return nil, false
		}
		if c.vec != nil {
			it.cell, it.vec, it.i = nil, c.vec, c.off
			return it.next()
		}
		it.cell = c.tail
		return c.head, true
	}
	if it.vec == nil || it.i >= it.vec.cnt {
		return nil, false
	}
	if it.i&vmask == 0 || it.leaf == nil {
		it.leaf = it.vec.leafFor(it.i)
	}
	v := it.leaf[it.i&vmask]
	it.i++
	return v, true
}

// Equal reports whether a and b are structurally equal, as RTFS = does:
// lists and vectors with equal elements are equal; maps and sets compare
// by contents; Int and Float are never equal to each other (1 and 1.0
// differ; == compares numerically); floats compare with IEEE ==, so NaN is
// not equal to itself; functions are equal only to themselves. Cost: O(1)
// for scalars and identical pointers, O(n) otherwise (mismatched cached
// hashes exit early); a value that shares structure costs what its printed
// form would, which may be far more than its memory. Builtins use the
// metered form (meter.equal), which a budget stops.
func Equal(a, b Value) bool { return (*meter)(nil).equal(a, b) }

// equal is Equal that counts one unit per element pair it compares and
// textStepBytes bytes per unit of long strings. Once m's budget is spent it
// returns false at once; the caller returns m's error.
func (m *meter) equal(a, b Value) bool {
	switch x := a.(type) {
	case Keyword:
		y, ok := b.(Keyword)
		return ok && x == y
	case Int:
		y, ok := b.(Int)
		return ok && x == y
	case String:
		y, ok := b.(String)
		if ok && len(x) == len(y) && len(x) >= freeText && !m.visit(len(x)/textStepBytes) {
			return false
		}
		return ok && x == y
	case Float:
		y, ok := b.(Float)
		return ok && x == y
	case NilType, Bool, Symbol:
		return a == b
	case *Regex:
		y, ok := b.(*Regex)
		if ok && len(x.src) == len(y.src) && len(x.src) >= freeText && !m.visit(len(x.src)/textStepBytes) {
			return false
		}
		return ok && x.src == y.src
	case *List:
		if l, ok := b.(*Lazy); ok {
			return m.equalLazy(l, x)
		}
		return m.equalSeq(x, &x.hash, b)
	case *Vector:
		if l, ok := b.(*Lazy); ok {
			return m.equalLazy(l, x)
		}
		return m.equalSeq(x, &x.hash, b)
	case *Lazy:
		return m.equalLazy(x, b)
	case *Map:
		y, ok := b.(*Map)
		return ok && m.equalMap(x, y)
	case *Set:
		y, ok := b.(*Set)
		return ok && m.equalSet(x, y)
	}
	return a == b
}

type hashSlot interface{ Load() uint64 }

func (m *meter) equalSeq(x sequential, xh hashSlot, b Value) bool {
	var yh hashSlot
	switch y := b.(type) {
	case *List:
		yh = &y.hash
	case *Vector:
		yh = &y.hash
	default:
		return false
	}
	y := b.(sequential)
	if x == y {
		return true
	}
	if x.Len() != y.Len() {
		return false
	}
	if h1, h2 := xh.Load(), yh.Load(); h1 != 0 && h2 != 0 && h1 != h2 {
		return false
	}
	ix, iy := newSeqIter(x), newSeqIter(y)
	for {
		ex, ok := ix.next()
		if !ok {
			return true
		}
		ey, _ := iy.next()
		if !m.visit(1) || !m.equal(ex, ey) {
			return false
		}
	}
}

func (m *meter) equalMap(x, y *Map) bool {
	if x == y {
		return true
	}
	if x.n != y.n {
		return false
	}
	if h1, h2 := x.hash.Load(), y.hash.Load(); h1 != 0 && h2 != 0 && h1 != h2 {
		return false
	}
	eq := true
	x.Range(func(k, v Value) bool {
		w, ok := y.get(k, m)
		eq = ok && m.visit(1) && m.equal(v, w)
		return eq
	})
	return eq && !m.failed()
}

func (m *meter) equalSet(x, y *Set) bool {
	if x == y {
		return true
	}
	if x.Len() != y.Len() {
		return false
	}
	if h1, h2 := x.hash.Load(), y.hash.Load(); h1 != 0 && h2 != 0 && h1 != h2 {
		return false
	}
	eq := true
	x.Range(func(e Value) bool {
		_, eq = y.m.get(e, m)
		eq = eq && m.visit(1)
		return eq
	})
	return eq && !m.failed()
}

// Compare orders a and b for sorting: it returns -1, 0 or +1. Numbers
// (ints and floats, mixed) compare numerically, NaN after every number;
// strings, keywords and symbols compare by bytes; false sorts before true;
// nil sorts before every value; lists and vectors compare by length
// first, then element by element, as Clojure's vectors compare. Any other
// pair (mixed kinds, maps, sets, functions) is an error naming both
// values. Cost: as Equal.
func Compare(a, b Value) (int, error) { return (*meter)(nil).compare(a, b) }

// compare is Compare that counts its work as equal does; once m's budget is
// spent it returns m's error.
func (m *meter) compare(a, b Value) (int, error) {
	if a == Nil || b == Nil {
		return boolCmp(b == Nil, a == Nil), nil
	}
	switch x := a.(type) {
	case Int:
		switch y := b.(type) {
		case Int:
			return cmpOrdered(x, y), nil
		case Float:
			return cmpIntFloat(x, float64(y)), nil
		}
	case Float:
		switch y := b.(type) {
		case Int:
			return -cmpIntFloat(y, float64(x)), nil
		case Float:
			return cmpFloat(float64(x), float64(y)), nil
		}
	case String:
		if y, ok := b.(String); ok {
			return m.compareText(string(x), string(y))
		}
	case Keyword:
		if y, ok := b.(Keyword); ok {
			return m.compareText(string(x), string(y))
		}
	case Symbol:
		if y, ok := b.(Symbol); ok {
			return m.compareText(string(x), string(y))
		}
	case Bool:
		if y, ok := b.(Bool); ok {
			return boolCmp(bool(x), bool(y)), nil
		}
	case *List, *Vector:
		if y, ok := b.(sequential); ok {
			return m.compareSeq(x.(sequential), y)
		}
		if l, ok := b.(*Lazy); ok {
			if y, ok := m.computedList(l); ok {
				return m.compareSeq(x.(sequential), y)
			}
			if m.failed() {
				return 0, m.err
			}
		}
	case *Lazy:
		if xs, ok := m.computedList(x); ok {
			return m.compare(xs, b)
		}
		if m.failed() {
			return 0, m.err
		}
	}
	return 0, fmt.Errorf("cannot compare %s with %s", describe(a), describe(b))
}

// compareText orders two texts by bytes, counting the long ones.
func (m *meter) compareText(x, y string) (int, error) {
	if n := min(len(x), len(y)); n >= freeText && !m.visit(n/textStepBytes) {
		return 0, m.err
	}
	return strings.Compare(x, y), nil
}

func boolCmp(x, y bool) int {
	switch {
	case x == y:
		return 0
	case x:
		return 1
	}
	return -1
}

func cmpOrdered[T Int | string](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// cmpFloat orders floats with NaN after everything and equal to itself.
func cmpFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	case x == y:
		return 0
	}
	return boolCmp(math.IsNaN(x), math.IsNaN(y))
}

// cmpIntFloat compares an int with a float exactly (no rounding of large
// ints).
func cmpIntFloat(i Int, f float64) int {
	switch {
	case math.IsNaN(f):
		return -1
	case f >= 9.3e18:
		return -1
	case f <= -9.3e18:
		return 1
	}
	t := math.Trunc(f)
	if c := cmpOrdered(i, Int(t)); c != 0 {
		return c
	}
	return cmpFloat(0, f-t)
}

func (m *meter) compareSeq(x, y sequential) (int, error) {
	if nx, ny := x.Len(), y.Len(); nx != ny {
		return boolCmp(nx > ny, nx < ny), nil
	}
	ix, iy := newSeqIter(x), newSeqIter(y)
	for {
		ex, okx := ix.next()
		ey, oky := iy.next()
		if !okx || !oky {
			return boolCmp(okx, oky), nil
		}
		if !m.visit(1) {
			return 0, m.err
		}
		c, err := m.compare(ex, ey)
		if err != nil || c != 0 {
			return c, err
		}
	}
}
