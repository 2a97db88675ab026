package rtfs

import (
	"strings"
	"sync/atomic"

	"github.com/rtfshost/rtfshost/rtfs/types"
)

// A List is an immutable, persistent list: a chain of cons cells with a
// cached count, so Len is O(1), First, Rest and Cons are O(1) and Index(i) is
// O(i). A list may also be a view of a vector from an offset (what rest,
// drop and sort return), in which case Rest is O(1) and Index is O(log n).
// The empty list is a non-nil *List with Len 0. Lists are safe to share
// between goroutines.
type List struct {
	head Value
	tail *List // next cell; nil only in the empty list and in vector views
	n    int
	vec  *Vector // non-nil: this list is vec[off:]
	off  int
	hash atomic.Uint64
}

// emptyList is the shared, immutable empty list.
var emptyList = &List{}

// NewList returns a list of elems (copied, never retained). Cost: one
// cons cell per element.
func NewList(elems ...Value) *List {
	l := emptyList
	for i := len(elems) - 1; i >= 0; i-- {
		l = l.Cons(elems[i])
	}
	return l
}

// listView returns the list of v's elements from off onward, sharing v.
func listView(v *Vector, off int) *List {
	if off >= v.Len() {
		return emptyList
	}
	return &List{vec: v, off: off, n: v.Len() - off}
}

// listOwned returns a list of elems, taking ownership of the slice (the
// caller must not modify it afterwards).
func listOwned(elems []Value) *List {
	switch len(elems) {
	case 0:
		return emptyList
	case 1:
		return emptyList.Cons(elems[0])
	}
	return listView(vectorOwned(elems), 0)
}

// Kind implements Value.
func (*List) Kind() Kind { return types.KindList }

// Len returns the number of elements in O(1).
func (l *List) Len() int { return l.n }

// First returns the first element, or Nil if the list is empty.
func (l *List) First() Value {
	switch {
	case l.n == 0:
		return Nil
	case l.vec != nil:
		return l.vec.Index(l.off)
	}
	return l.head
}

// Rest returns the list without its first element (the empty list for an
// empty or one-element list). O(1); a vector view allocates one cell.
func (l *List) Rest() *List {
	switch {
	case l.n <= 1:
		return emptyList
	case l.vec != nil:
		return &List{vec: l.vec, off: l.off + 1, n: l.n - 1}
	}
	return l.tail
}

// Cons returns a new list with v in front of l. O(1), one allocation.
func (l *List) Cons(v Value) *List {
	return &List{head: v, tail: l, n: l.n + 1}
}

// Index returns element i, 0 <= i < Len(); it panics on a bad index, like a
// slice (callers check the bound). O(i) for cons cells, O(log n) in a
// vector view.
func (l *List) Index(i int) Value {
	if i < 0 || i >= l.n {
		panic("rtfs: List.Index out of range")
	}
	for l.vec == nil {
		if i == 0 {
			return l.head
		}
		l, i = l.tail, i-1
	}
	return l.vec.Index(l.off + i)
}

// String implements Value: (1 2 3).
func (l *List) String() string {
	var b strings.Builder
	writeValue(&b, l)
	return b.String()
}
