package rtfs

import (
	"math/bits"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/rtfshost/rtfshost/rtfs/types"
)

// A Vector is an immutable, persistent vector: a 32-way trie plus a tail of up
// to 32 elements. Len is O(1); Index, Assoc and Conj are O(log32 n) (at most
// 7 levels for 2^31 elements), and Conj onto a vector with a non-full tail
// costs one small allocation whatever the size. The empty vector is a
// non-nil *Vector with Len 0. Vectors are safe to share between goroutines.
//
// The header is 40 bytes (a growing vector allocates one per element, so
// its size is most of what Conj costs): the tail is a pointer to its first
// element, its length follows from cnt (tailLen), and so does the trie's
// depth (shift).
type Vector struct {
	cnt  int
	root *vnode // never nil; an empty interior node when cnt <= 32
	tail *Value // the first of the last 1..32 elements (nil only when empty)
	// room, when set, counts the slots of tail's backing array that
	// vectors sharing it have taken: Conj appends in place, without
	// copying the tail, when it can take the slot after its own elements
	// (no other vector has); otherwise it copies. Slots past a vector's
	// length are never read through it. Without a room, Conj copies the
	// tail.
	room *room
	hash atomic.Uint64
}

// vnode is a trie node: interior nodes use kids, leaves hold 32 vals.
type vnode struct {
	kids []*vnode
	vals []Value
}

const (
	vbits  = 5
	vwidth = 1 << vbits
	vmask  = vwidth - 1
)

var emptyVNode = &vnode{}

// emptyVector is the shared, immutable empty vector.
var emptyVector = &Vector{root: emptyVNode}

// tailoffOf returns the index of the first tail element of a vector of
// cnt elements: every tail but the empty vector's holds 1 to 32.
func tailoffOf(cnt int) int { return max((cnt-1)&^vmask, 0) }

// shiftOf returns the shift of the root of a vector of cnt elements: its
// trie is as shallow as its leaves allow (Conj deepens it only when the
// root is full, Pop makes it shallower as soon as the root has one child,
// vectorOwned builds it so), 5 bits a level, one level at least.
func shiftOf(cnt int) uint {
	leaves := tailoffOf(cnt) >> vbits
	if leaves <= vwidth {
		return vbits
	}
	return uint((bits.Len(uint(leaves-1)) + vbits - 1) / vbits * vbits)
}

// shift returns the shift of v's root: the bits of an index below the
// root's level.
func (v *Vector) shift() uint { return shiftOf(v.cnt) }

// tailLen returns the number of elements in v's tail.
func (v *Vector) tailLen() int { return v.cnt - tailoffOf(v.cnt) }

// tailSlice returns v's tail, its length and capacity the tail's length.
func (v *Vector) tailSlice() []Value { return unsafe.Slice(v.tail, v.tailLen()) }

// NewVector returns a vector holding a copy of elems. Cost: O(n), one
// allocation up to 32 elements, about n/32 beyond.
func NewVector(elems ...Value) *Vector {
	return vectorCopy(elems)
}

// vectorOwned builds a vector from elems, taking ownership of the slice: its
// chunks become the trie's leaves and tail (no copy).
func vectorOwned(elems []Value) *Vector {
	n := len(elems)
	if n == 0 {
		return emptyVector
	}
	tailoff := (n - 1) &^ vmask
	if tailoff == 0 {
		return &Vector{cnt: n, root: emptyVNode, tail: &elems[0]}
	}
	// The trie's nodes, and the pointers to them that their parents hold,
	// come from two allocations, whatever the size: the leaves, then each
	// level of parents up to the root.
	total := 0
	for width := tailoff / vwidth; ; width = (width + vmask) / vwidth {
		total += width
		if width == 1 && total > tailoff/vwidth {
			break
		}
	}
	var v *Vector
	var nodes []vnode
	var ptrs []*vnode
	if total == 2 { // 33 to 64 elements: a leaf and the root, with v
		b := &vecBoxTwoNodes{}
		v, nodes, ptrs = &b.v, b.nodes[:], b.ptrs[:]
	} else {
		v = new(Vector)
		nodes = make([]vnode, total)
		ptrs = make([]*vnode, total)
	}
	v.cnt, v.root, v.tail = n, emptyVNode, &elems[tailoff]
	next := 0 // the next free node and pointer
	for i := 0; i < tailoff; i += vwidth {
		nodes[next].vals = elems[i : i+vwidth : i+vwidth]
		ptrs[next] = &nodes[next]
		next++
	}
	level := ptrs[:next:next]
	for {
		start := next
		for i := 0; i < len(level); i += vwidth {
			j := min(i+vwidth, len(level))
			nodes[next].kids = level[i:j:j]
			ptrs[next] = &nodes[next]
			next++
		}
		if next-start == 1 {
			v.root = ptrs[start]
			return v
		}
		level = ptrs[start:next:next]
	}
}

// vecBoxTwoNodes is a vector of 33 to 64 elements with its two trie nodes
// (a leaf and the root) and the root's pointer to the leaf: one
// allocation instead of three.
type vecBoxTwoNodes struct {
	v     Vector
	nodes [2]vnode
	ptrs  [2]*vnode
}

// Kind implements Value.
func (*Vector) Kind() Kind { return types.KindVector }

// Len returns the number of elements in O(1).
func (v *Vector) Len() int { return v.cnt }

func (v *Vector) tailoff() int { return tailoffOf(v.cnt) }

// leafFor returns the 32-element (or tail) array holding element i.
func (v *Vector) leafFor(i int) []Value {
	if i >= v.tailoff() {
		return v.tailSlice()
	}
	node := v.root
	for level := v.shift(); level > 0; level -= vbits {
		node = node.kids[(i>>level)&vmask]
	}
	return node.vals
}

// Index returns element i, 0 <= i < Len(); it panics on a bad index, like a
// slice (callers check the bound). O(log32 n), no allocation.
func (v *Vector) Index(i int) Value {
	if i < 0 || i >= v.cnt {
		panic("rtfs: Vector.Index out of range")
	}
	return v.leafFor(i)[i&vmask]
}

// Conj returns a new vector with x appended. O(log32 n). When x can go in
// place into the tail's backing array (the usual case of a vector grown by
// Conj and conj'ed once), the new vector's header is the one the tail's
// room keeps for it, if the room was made for a growing vector (no
// allocation), else a new one; otherwise one allocation holds the header
// and a copy of the tail with room to grow: a vector that Conj keeps
// growing allocates three tails and their headers per 32 elements, and its
// trie's nodes.
func (v *Vector) Conj(x Value) *Vector {
	if n := v.tailLen(); n < vwidth {
		var nv *Vector
		var t []Value
		switch {
		case v.room == nil:
			nv, t = newVectorRoom(n+1, false)
		case n < v.room.size() && v.room.claimed.CompareAndSwap(int32(n), int32(n+1)):
			unsafe.Slice(v.tail, n+1)[n] = x
			// The slot is this vector's alone, and so is the header
			// the room keeps for it (if it keeps one).
			nv = v.room.header(n + 1)
			nv.cnt, nv.root, nv.tail, nv.room = v.cnt+1, v.root, v.tail, v.room
			return nv
		case n < v.room.size():
			// Another vector took the slot: this one branches, and
			// branches are copied at their size, as before room existed.
			nv, t = newVectorTail(n + 1)
		default:
			nv, t = newVectorRoom(n+1, true) // grown by Conj and growing
		}
		copy(t, v.tailSlice())
		t[n] = x
		nv.cnt, nv.root = v.cnt+1, v.root
		return nv
	}
	if v.room != nil {
		v.room.hdrs.Store(nil) // no slot left to claim (room.hdrs)
	}
	full := &vnode{vals: v.tailSlice()}
	var root *vnode
	if shift := v.shift(); (v.cnt >> vbits) > (1 << shift) {
		root = newInterior(2)
		root.kids[0], root.kids[1] = v.root, newPath(shift, full)
	} else {
		root = v.pushTail(shift, v.root, full)
	}
	nv, t := newVectorRoom(1, v.room != nil)
	t[0] = x
	nv.cnt, nv.root = v.cnt+1, root
	return nv
}

func newPath(level uint, node *vnode) *vnode {
	if level == 0 {
		return node
	}
	n := newInterior(1)
	n.kids[0] = newPath(level-vbits, node)
	return n
}

// pushTail returns a copy of parent with the full tail leaf added.
func (v *Vector) pushTail(level uint, parent, leaf *vnode) *vnode {
	sub := ((v.cnt - 1) >> level) & vmask
	node := newInterior(max(len(parent.kids), sub+1))
	kids := node.kids
	copy(kids, parent.kids)
	if level == vbits {
		kids[sub] = leaf
	} else if sub < len(parent.kids) {
		kids[sub] = v.pushTail(level-vbits, parent.kids[sub], leaf)
	} else {
		kids[sub] = newPath(level-vbits, leaf)
	}
	return node
}

// Assoc returns a new vector with element i replaced by x; i == Len()
// appends. Any other index is an error. O(log32 n).
func (v *Vector) Assoc(i int, x Value) (*Vector, error) {
	switch {
	case i == v.cnt:
		return v.Conj(x), nil
	case i < 0 || i > v.cnt:
		return nil, indexError("index %d out of bounds for vector of length %d", i, v.cnt)
	case i >= v.tailoff():
		nv, t := newVectorTail(v.tailLen())
		copy(t, v.tailSlice())
		t[i&vmask] = x
		nv.cnt, nv.root = v.cnt, v.root
		return nv, nil
	}
	root := assocNode(v.shift(), v.root, i, x)
	return &Vector{cnt: v.cnt, root: root, tail: v.tail}, nil
}

func assocNode(level uint, node *vnode, i int, x Value) *vnode {
	if level == 0 {
		leaf := newLeafCopy(node.vals)
		leaf.vals[i&vmask] = x
		return leaf
	}
	n := newInterior(len(node.kids))
	copy(n.kids, node.kids)
	sub := (i >> level) & vmask
	n.kids[sub] = assocNode(level-vbits, node.kids[sub], i, x)
	return n
}

// Pop returns the vector without its last element (the empty vector stays
// empty). O(log32 n).
func (v *Vector) Pop() *Vector {
	switch {
	case v.cnt <= 1:
		return emptyVector
	case v.tailLen() > 1:
		return &Vector{cnt: v.cnt - 1, root: v.root, tail: v.tail}
	}
	tail := v.leafFor(v.cnt - 2)
	shift := v.shift()
	root := v.popTail(shift, v.root)
	if root == nil {
		root = emptyVNode
	}
	if shift > vbits && len(root.kids) == 1 {
		root = root.kids[0] // one level fewer: shiftOf(v.cnt - 1)
	}
	return &Vector{cnt: v.cnt - 1, root: root, tail: &tail[0]}
}

// popTail returns node without its last leaf, or nil if that empties it.
func (v *Vector) popTail(level uint, node *vnode) *vnode {
	sub := ((v.cnt - 2) >> level) & vmask
	if level > vbits {
		child := v.popTail(level-vbits, node.kids[sub])
		if child == nil && sub == 0 {
			return nil
		}
		kids := append([]*vnode(nil), node.kids[:sub+1]...)
		if child == nil {
			kids = kids[:sub]
		} else {
			kids[sub] = child
		}
		return &vnode{kids: kids}
	}
	if sub == 0 {
		return nil
	}
	return &vnode{kids: append([]*vnode(nil), node.kids[:sub]...)}
}

// appendTo appends the vector's elements from off onward to dst.
func (v *Vector) appendTo(dst []Value, off int) []Value {
	for i := off; i < v.cnt; {
		leaf := v.leafFor(i)
		dst = append(dst, leaf[i&vmask:]...)
		i = (i | vmask) + 1
	}
	return dst
}

// String implements Value: [1 2 3].
func (v *Vector) String() string {
	var b strings.Builder
	writeValue(&b, v)
	return b.String()
}
