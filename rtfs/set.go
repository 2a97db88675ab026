package rtfs

import (
	"strings"
	"sync/atomic"

	"github.com/rtfshost/rtfshost/rtfs/types"
)

// A Set is an immutable, persistent set with structural membership (Equal
// and Hash), built on a Map from each element to itself: Has, Conj and Disj
// cost what Map.Get, Assoc and Dissoc cost. Index(i) is O(1) after the
// first call builds (once, race-free) an element slice. Iteration order is
// insertion order up to 8 elements and trie order beyond. The empty set is a
// non-nil *Set with Len 0. Sets are safe to share between goroutines.
type Set struct {
	m     *Map
	elems atomic.Pointer[[]Value] // lazily built for Index
	hash  atomic.Uint64
}

var emptySet = &Set{m: emptyMap}

// NewSet returns a set of elems (duplicates collapse). elems is not
// retained. Cost: as MapOf.
func NewSet(elems ...Value) *Set { return setOf(elems, nil) }

// setOf is NewSet counting its hashing and comparing on m.
func setOf(elems []Value, m *meter) *Set {
	kvs := make([]Value, 2*len(elems))
	for i, e := range elems {
		kvs[2*i], kvs[2*i+1] = e, e
	}
	nm := mapOf(kvs, m)
	if nm.n == 0 {
		return emptySet
	}
	return &Set{m: nm}
}

// Kind implements Value.
func (*Set) Kind() Kind { return types.KindSet }

// Len returns the number of elements in O(1).
func (s *Set) Len() int { return s.m.Len() }

// Has reports whether s holds an element equal to x.
func (s *Set) Has(x Value) bool { return s.has(x, nil) }

// has is Has counting its hashing and comparing on m.
func (s *Set) has(x Value, m *meter) bool {
	_, ok := s.m.get(x, m)
	return ok
}

// Conj returns a set that also holds x (s itself if it already does).
func (s *Set) Conj(x Value) *Set { return s.conj(x, nil) }

// conj is Conj counting its work on m, as Map.assoc does.
func (s *Set) conj(x Value, m *meter) *Set {
	if s.has(x, m) {
		return s
	}
	return &Set{m: s.m.assoc(x, x, m)}
}

// Disj returns a set without x (s itself if x is absent).
func (s *Set) Disj(x Value) *Set { return s.disj(x, nil) }

// disj is Disj counting its work on m.
func (s *Set) disj(x Value, m *meter) *Set {
	nm := s.m.dissoc(x, m)
	if nm == s.m {
		return s
	}
	if nm.n == 0 {
		return emptySet
	}
	return &Set{m: nm}
}

// Index returns element i, 0 <= i < Len(), in the set's stable order; it
// panics on a bad index, like a slice. The first call costs O(n).
func (s *Set) Index(i int) Value {
	if i < 0 || i >= s.m.Len() {
		panic("rtfs: Set.Index out of range")
	}
	if o := s.m.sorted(); o != nil {
		return o.keys[i]
	}
	if s.m.root == nil {
		return s.m.kv()[2*i]
	}
	p := s.elems.Load()
	if p == nil {
		elems := make([]Value, 0, s.m.Len())
		s.m.Range(func(k, _ Value) bool {
			elems = append(elems, k)
			return true
		})
		p = &elems
		s.elems.Store(p)
	}
	return (*p)[i]
}

// Range calls f for each element until f returns false.
func (s *Set) Range(f func(x Value) bool) {
	s.m.Range(func(k, _ Value) bool { return f(k) })
}

// String implements Value: #{1 2 3}.
func (s *Set) String() string {
	var b strings.Builder
	writeValue(&b, s)
	return b.String()
}
