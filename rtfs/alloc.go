package rtfs

import (
	"sync/atomic"
	"unsafe"
)

// Combined allocations for the hottest small values: an array-map and the
// slice of its entries, or a vector and its tail, live in one allocation
// (one malloc instead of two per map literal, assoc or conj). The slices
// never grow in place, except a Conj tail with room (newVectorRoom), whose
// slots are claimed one by one with an atomic counter so that two vectors
// never write the same slot; every other update copies, so sharing stays
// safe.

type mapBox1 struct {
	m Map
	a [2]Value
}

type mapBox2 struct {
	m Map
	a [4]Value
}

type mapBox3 struct {
	m Map
	a [6]Value
}

type mapBox4 struct {
	m Map
	a [8]Value
}

type mapBox5 struct {
	m Map
	a [10]Value
}

type mapBox6 struct {
	m Map
	a [12]Value
}

type mapBox7 struct {
	m Map
	a [14]Value
}

type mapBox8 struct {
	m Map
	a [16]Value
}

// newArrayMap returns an array-map of 1 <= n <= arrayMapMax entries whose
// entries (kv: 2n slots, as many as its box holds) the caller fills before
// publishing the map. Each size has a box of its own: with a 32-byte
// header and 16-byte entries the boxes fill their malloc size classes
// exactly (64, 96, ..., 288 bytes), so a map pays for no unused slots (a
// 6-entry map took a 320-byte box sized for 8 before).
func newArrayMap(n int) (*Map, []Value) {
	var m *Map
	switch n {
	case 1:
		b := &mapBox1{}
		m = &b.m
		m.kvs, m.slots = &b.a[0], int32(len(b.a))
	case 2:
		b := &mapBox2{}
		m = &b.m
		m.kvs, m.slots = &b.a[0], int32(len(b.a))
	case 3:
		b := &mapBox3{}
		m = &b.m
		m.kvs, m.slots = &b.a[0], int32(len(b.a))
	case 4:
		b := &mapBox4{}
		m = &b.m
		m.kvs, m.slots = &b.a[0], int32(len(b.a))
	case 5:
		b := &mapBox5{}
		m = &b.m
		m.kvs, m.slots = &b.a[0], int32(len(b.a))
	case 6:
		b := &mapBox6{}
		m = &b.m
		m.kvs, m.slots = &b.a[0], int32(len(b.a))
	case 7:
		b := &mapBox7{}
		m = &b.m
		m.kvs, m.slots = &b.a[0], int32(len(b.a))
	default:
		b := &mapBox8{}
		m = &b.m
		m.kvs, m.slots = &b.a[0], int32(len(b.a))
	}
	m.n = int32(n)
	return m, unsafe.Slice(m.kvs, 2*n)
}

type vecBox2 struct {
	v Vector
	a [2]Value
}

type vecBox4 struct {
	v Vector
	a [4]Value
}

type vecBox8 struct {
	v Vector
	a [8]Value
}

type vecBox12 struct {
	v Vector
	a [12]Value
}

type vecBox16 struct {
	v Vector
	a [16]Value
}

type vecBox20 struct {
	v Vector
	a [20]Value
}

type vecBox24 struct {
	v Vector
	a [24]Value
}

type vecBox28 struct {
	v Vector
	a [28]Value
}

type vecBox32 struct {
	v Vector
	a [32]Value
}

// newVectorTail returns a vector header and its tail of length n (1..32),
// allocated together; the caller fills both (the tail, and the header's
// cnt and root) before publishing. The size classes keep the waste under a
// quarter of the tail.
func newVectorTail(n int) (*Vector, []Value) {
	var v *Vector
	var t []Value
	switch {
	case n <= 2:
		b := &vecBox2{}
		v, t = &b.v, b.a[:n:n]
	case n <= 4:
		b := &vecBox4{}
		v, t = &b.v, b.a[:n:n]
	case n <= 8:
		b := &vecBox8{}
		v, t = &b.v, b.a[:n:n]
	case n <= 12:
		b := &vecBox12{}
		v, t = &b.v, b.a[:n:n]
	case n <= 16:
		b := &vecBox16{}
		v, t = &b.v, b.a[:n:n]
	case n <= 20:
		b := &vecBox20{}
		v, t = &b.v, b.a[:n:n]
	case n <= 24:
		b := &vecBox24{}
		v, t = &b.v, b.a[:n:n]
	case n <= 28:
		b := &vecBox28{}
		v, t = &b.v, b.a[:n:n]
	default:
		b := &vecBox32{}
		v, t = &b.v, b.a[:n:n]
	}
	v.tail = &t[0]
	return v, t
}

// A room is what the vectors sharing a tail with room (newVectorRoom)
// share: the count of the tail's slots they have claimed and, when the
// room was made for a vector that Conj keeps growing, the headers of the
// vectors that will claim them, so that a Conj in place allocates nothing.
type room struct {
	claimed atomic.Int32
	slots   int32 // the length of the tail's backing array
	// hdrs, when set, holds a header for each slot still to claim. Conj
	// clears it when it puts the full tail into the trie: the tail stays
	// there, the headers (and the older roots they hold) need not.
	hdrs atomic.Pointer[headers]
}

// headers are the headers a room keeps: h[i] belongs to the one vector
// (a slot is claimed once) whose tail has first+i elements.
type headers struct {
	first int
	h     []Vector
}

// size returns the number of slots of the tail's backing array.
func (r *room) size() int { return int(r.slots) }

// header returns the header for the vector of the room whose tail has l
// elements: the room's, or a new one.
func (r *room) header(l int) *Vector {
	if hs := r.hdrs.Load(); hs != nil {
		if i := l - hs.first; i >= 0 && i < len(hs.h) {
			return &hs.h[i]
		}
	}
	return new(Vector)
}

// The boxes of newVectorRoom: a header and a tail with room to grow in
// place, with its room.
type (
	roomBox4 struct {
		v Vector
		r room
		a [4]Value
	}
	roomBox8 struct {
		v Vector
		r room
		a [8]Value
	}
	roomBox16 struct {
		v Vector
		r room
		a [16]Value
	}
	roomBox32 struct {
		v Vector
		r room
		a [32]Value
	}
)

// The headers of a growing vector's room, for the tails longer than the
// first vector's (the room box's own header) up to a full tail, in one
// allocation each; the box sizes of newVectorRoom decide their sizes,
// which fill their malloc size classes (the one of 23 within 7%).
type (
	headers3 struct { // a box of 4 made for a tail of 1 or 2: tails of 2..4
		hs headers
		h  [3]Vector
	}
	headers5 struct { // 8, for 3 or 4: 4..8
		hs headers
		h  [5]Vector
	}
	headers11 struct { // 16, for 5..8: 6..16
		hs headers
		h  [11]Vector
	}
	headers23 struct { // 32, for 9..16: 10..32
		hs headers
		h  [23]Vector
	}
	headers15 struct { // 32, for 17 or more: 18..32
		hs headers
		h  [15]Vector
	}
)

// newVectorRoom is newVectorTail for Conj: the tail of length n (1..32)
// has room for about as many elements again (up to 32), which later Conjs
// take in place (Vector.room). growing says that the vector was grown by
// Conj already and is likely to be again: its room then keeps the headers
// of the vectors that will take the room too.
func newVectorRoom(n int, growing bool) (*Vector, []Value) {
	var v *Vector
	var r *room
	var tail []Value
	switch {
	case n <= 2:
		b := &roomBox4{}
		v, r, tail = &b.v, &b.r, b.a[:n]
	case n <= 4:
		b := &roomBox8{}
		v, r, tail = &b.v, &b.r, b.a[:n]
	case n <= 8:
		b := &roomBox16{}
		v, r, tail = &b.v, &b.r, b.a[:n]
	default:
		b := &roomBox32{}
		v, r, tail = &b.v, &b.r, b.a[:n]
	}
	r.claimed.Store(int32(n))
	r.slots = int32(cap(tail))
	v.tail, v.room = &tail[0], r
	if growing && n < cap(tail) {
		var hs *headers
		switch {
		case n <= 2:
			b := &headers3{}
			hs = &b.hs
			hs.first, hs.h = 2, b.h[:]
		case n <= 4:
			b := &headers5{}
			hs = &b.hs
			hs.first, hs.h = 4, b.h[:]
		case n <= 8:
			b := &headers11{}
			hs = &b.hs
			hs.first, hs.h = 6, b.h[:]
		case n <= 16:
			b := &headers23{}
			hs = &b.hs
			hs.first, hs.h = 10, b.h[:]
		default:
			b := &headers15{}
			hs = &b.hs
			hs.first, hs.h = 18, b.h[:]
		}
		r.hdrs.Store(hs)
	}
	return v, tail
}

// vectorCopy returns a vector of a copy of elems: one allocation up to 32
// elements.
func vectorCopy(elems []Value) *Vector {
	n := len(elems)
	if n == 0 {
		return emptyVector
	}
	if n > vwidth {
		return vectorOwned(append([]Value(nil), elems...))
	}
	v, t := newVectorTail(n)
	copy(t, elems)
	v.cnt, v.root = n, emptyVNode
	return v
}

// The boxes of newInterior: an interior trie node and its children, sized
// to fill malloc size classes (64, 80, 112, 176 and 320 bytes). A node
// never grows in place (Conj copies the path to a new leaf), so a box
// holds the children it is made for, rounded up: a vector grown by Conj
// copies its root for every 32 elements, and a root of two children took
// the 320 bytes of a box of 32.
type (
	vnodeBox2 struct {
		n vnode
		k [2]*vnode
	}
	vnodeBox4 struct {
		n vnode
		k [4]*vnode
	}
	vnodeBox8 struct {
		n vnode
		k [8]*vnode
	}
	vnodeBox16 struct {
		n vnode
		k [16]*vnode
	}
	vnodeBox32 struct {
		n vnode
		k [vwidth]*vnode
	}
)

// newInterior returns an interior node with n (1..32) children (to fill)
// in one allocation.
func newInterior(n int) *vnode {
	switch {
	case n <= 2:
		b := &vnodeBox2{}
		b.n.kids = b.k[:n:n]
		return &b.n
	case n <= 4:
		b := &vnodeBox4{}
		b.n.kids = b.k[:n:n]
		return &b.n
	case n <= 8:
		b := &vnodeBox8{}
		b.n.kids = b.k[:n:n]
		return &b.n
	case n <= 16:
		b := &vnodeBox16{}
		b.n.kids = b.k[:n:n]
		return &b.n
	}
	b := &vnodeBox32{}
	b.n.kids = b.k[:n:n]
	return &b.n
}

// leafBox holds a trie leaf and its 32 values.
type leafBox struct {
	n vnode
	a [vwidth]Value
}

// newLeafCopy returns a leaf holding a copy of vals in one allocation.
func newLeafCopy(vals []Value) *vnode {
	b := &leafBox{}
	b.n.vals = b.a[:len(vals):len(vals)]
	copy(b.n.vals, vals)
	return &b.n
}

type hnodeBox1 struct {
	n hnode
	e [1]hentry
}

type hnodeBox2 struct {
	n hnode
	e [2]hentry
}

type hnodeBox4 struct {
	n hnode
	e [4]hentry
}

type hnodeBox8 struct {
	n hnode
	e [8]hentry
}

type hnodeBox16 struct {
	n hnode
	e [16]hentry
}

type hnodeBox32 struct {
	n hnode
	e [32]hentry
}

// newHNode returns a trie node with n (1..32 for bitmap nodes, any for
// collision nodes) entries to fill, allocated with its entries.
func newHNode(n int, bitmap uint32, coll bool) *hnode {
	var node *hnode
	switch {
	case n > 32:
		node = &hnode{entries: make([]hentry, n)}
	case n <= 1:
		b := &hnodeBox1{}
		node = &b.n
		node.entries = b.e[:n:n]
	case n <= 2:
		b := &hnodeBox2{}
		node = &b.n
		node.entries = b.e[:n:n]
	case n <= 4:
		b := &hnodeBox4{}
		node = &b.n
		node.entries = b.e[:n:n]
	case n <= 8:
		b := &hnodeBox8{}
		node = &b.n
		node.entries = b.e[:n:n]
	case n <= 16:
		b := &hnodeBox16{}
		node = &b.n
		node.entries = b.e[:n:n]
	default:
		b := &hnodeBox32{}
		node = &b.n
		node.entries = b.e[:n:n]
	}
	node.bitmap, node.coll = bitmap, coll
	return node
}
