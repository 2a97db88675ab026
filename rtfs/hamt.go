package rtfs

import "math/bits"

// hnode is a node of the hash array mapped trie behind large maps. A
// bitmap node holds up to 32 entries indexed by 5 bits of the key's hash at
// its depth; an entry is either a key/value pair (with the key's full hash)
// or a sub-node. Once the 64 hash bits are spent, a collision node holds
// its entries in a plain list. Nodes are never mutated after construction.
type hnode struct {
	bitmap  uint32
	coll    bool
	entries []hentry
}

type hentry struct {
	key, val Value
	hash     uint64
	sub      *hnode
}

const hbits = 5

var emptyHNode = &hnode{}

func hbit(h uint64, shift uint) uint32 { return 1 << ((h >> shift) & 31) }

func (n *hnode) index(bit uint32) int { return bits.OnesCount32(n.bitmap & (bit - 1)) }

// get returns the value under k, whose hash is h, comparing keys on m.
func (n *hnode) get(k Value, h uint64, shift uint, m *meter) (Value, bool) {
	for {
		if n.coll {
			for i := range n.entries {
				if m.equal(n.entries[i].key, k) {
					return n.entries[i].val, true
				}
			}
			return nil, false
		}
		bit := hbit(h, shift)
		if n.bitmap&bit == 0 {
			return nil, false
		}
		e := &n.entries[n.index(bit)]
		if e.sub == nil {
			if e.hash == h && m.equal(e.key, k) {
				return e.val, true
			}
			return nil, false
		}
		n, shift = e.sub, shift+hbits
	}
}

// getKeyword is get for the key Keyword(name), without boxing the key.
func (n *hnode) getKeyword(name string, h uint64) (Value, bool) {
	for shift := uint(0); ; shift += hbits {
		if n.coll {
			for i := range n.entries {
				if k, ok := n.entries[i].key.(Keyword); ok && string(k) == name {
					return n.entries[i].val, true
				}
			}
			return nil, false
		}
		bit := hbit(h, shift)
		if n.bitmap&bit == 0 {
			return nil, false
		}
		e := &n.entries[n.index(bit)]
		if e.sub == nil {
			if k, ok := e.key.(Keyword); ok && e.hash == h && string(k) == name {
				return e.val, true
			}
			return nil, false
		}
		n = e.sub
	}
}

// copyCost is the work, in units of a meter, of copying a node of n
// entries: a unit per entry (48 bytes allocated and copied), and one for
// the node. Measured against the VM's steps (BenchmarkStepCost), a path
// copy then costs about what as many instructions do.
func copyCost(n int) int { return n + 1 }

// with returns a copy of n with entry i replaced by e, counted on m.
func (n *hnode) with(i int, e hentry, m *meter) *hnode {
	m.visit(copyCost(len(n.entries)))
	node := newHNode(len(n.entries), n.bitmap, n.coll)
	copy(node.entries, n.entries)
	node.entries[i] = e
	return node
}

// inserted returns a copy of n with e inserted at position i under bit,
// counted on m.
func (n *hnode) inserted(i int, bit uint32, e hentry, m *meter) *hnode {
	m.visit(copyCost(len(n.entries)))
	node := newHNode(len(n.entries)+1, n.bitmap|bit, n.coll)
	copy(node.entries, n.entries[:i])
	node.entries[i] = e
	copy(node.entries[i+1:], n.entries[i:])
	return node
}

// removed returns a copy of n without entry i (and its bit), or nil if
// that leaves n empty; counted on m.
func (n *hnode) removed(i int, bit uint32, m *meter) *hnode {
	if len(n.entries) == 1 {
		return nil
	}
	m.visit(copyCost(len(n.entries)))
	node := newHNode(len(n.entries)-1, n.bitmap&^bit, n.coll)
	copy(node.entries, n.entries[:i])
	copy(node.entries[i:], n.entries[i+1:])
	return node
}

// assoc returns n with k mapped to v, and whether a new key was added. A
// key already there stays (as in an array map, and in Clojure): only its
// value changes. It returns n itself when v is identical to the value
// already there. It
// counts on m its comparisons and the entries it copies.
func (n *hnode) assoc(k, v Value, h uint64, shift uint, m *meter) (*hnode, bool) {
	if n.coll {
		for i := range n.entries {
			if m.equal(n.entries[i].key, k) {
				if identical(n.entries[i].val, v) {
					return n, false
				}
				return n.with(i, hentry{key: n.entries[i].key, val: v, hash: h}, m), false
			}
		}
		return n.inserted(len(n.entries), 0, hentry{key: k, val: v, hash: h}, m), true
	}
	bit := hbit(h, shift)
	i := n.index(bit)
	if n.bitmap&bit == 0 {
		return n.inserted(i, bit, hentry{key: k, val: v, hash: h}, m), true
	}
	e := n.entries[i]
	if e.sub != nil {
		sub, added := e.sub.assoc(k, v, h, shift+hbits, m)
		if sub == e.sub {
			return n, false
		}
		return n.with(i, hentry{sub: sub}, m), added
	}
	if e.hash == h && m.equal(e.key, k) {
		if identical(e.val, v) {
			return n, false
		}
		return n.with(i, hentry{key: e.key, val: v, hash: h}, m), false
	}
	sub := mergeEntries(e, hentry{key: k, val: v, hash: h}, shift+hbits)
	return n.with(i, hentry{sub: sub}, m), true
}

// mergeEntries returns a node at shift holding the two distinct-key entries.
func mergeEntries(a, b hentry, shift uint) *hnode {
	if shift >= 64 {
		return &hnode{coll: true, entries: []hentry{a, b}}
	}
	ba, bb := hbit(a.hash, shift), hbit(b.hash, shift)
	switch {
	case ba == bb:
		return &hnode{bitmap: ba, entries: []hentry{{sub: mergeEntries(a, b, shift+hbits)}}}
	case ba < bb:
		return &hnode{bitmap: ba | bb, entries: []hentry{a, b}}
	}
	return &hnode{bitmap: ba | bb, entries: []hentry{b, a}}
}

// dissoc returns n without key k (nil if n becomes empty) and whether k
// was there, counting on m as assoc does.
func (n *hnode) dissoc(k Value, h uint64, shift uint, m *meter) (*hnode, bool) {
	if n.coll {
		for i := range n.entries {
			if m.equal(n.entries[i].key, k) {
				return n.removed(i, 0, m), true
			}
		}
		return n, false
	}
	bit := hbit(h, shift)
	if n.bitmap&bit == 0 {
		return n, false
	}
	i := n.index(bit)
	e := n.entries[i]
	if e.sub == nil {
		if e.hash == h && m.equal(e.key, k) {
			return n.removed(i, bit, m), true
		}
		return n, false
	}
	sub, removed := e.sub.dissoc(k, h, shift+hbits, m)
	switch {
	case !removed:
		return n, false
	case sub == nil:
		return n.removed(i, bit, m), true
	case len(sub.entries) == 1 && sub.entries[0].sub == nil:
		return n.with(i, sub.entries[0], m), true // pull a lone pair up
	}
	return n.with(i, hentry{sub: sub}, m), true
}

// rangeEntries calls f on each pair in trie order; false means f stopped.
func (n *hnode) rangeEntries(f func(k, v Value) bool) bool {
	for i := range n.entries {
		e := &n.entries[i]
		if e.sub != nil {
			if !e.sub.rangeEntries(f) {
				return false
			}
		} else if !f(e.key, e.val) {
			return false
		}
	}
	return true
}
