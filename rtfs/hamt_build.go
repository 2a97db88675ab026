package rtfs

import "math/bits"

// Building a hash trie at once. Adding n keys one Assoc at a time copies
// the path from the root to each key: about log32(n) nodes of up to 32
// entries, kilobytes of garbage per key once the map is large, which made
// (set (range 1000000)) take seconds. buildMap instead hashes every key,
// partitions the entries five hash bits at a time (a stable radix pass per
// level) and allocates each node once, at its final size. The trie it
// builds is the one the Assocs would have built: a key sits at the
// shallowest level where its hash bits are its own, keys with one full
// hash share a collision node in the order they first came, and a
// repeated key keeps the place and the key of its first occurrence and
// the value of its last.

// trieScratchBytes is the memory buildMap takes for a while per entry
// beyond the entry itself: the entries with their hashes and the radix
// pass's second buffer.
const trieScratchBytes = 96

// buildMap returns the map of the key/value pairs of the even-length kvs,
// counting on m one unit per key placed per level, the hashing of the keys
// and the comparing of keys with one hash. A repeated key keeps its first
// key and place and its last value, as Assoc does. When m's budget runs out it
// returns the empty map; the caller returns m's error.
func buildMap(kvs []Value, m *meter) *Map {
	n := len(kvs) / 2
	if n == 0 {
		return emptyMap
	}
	es := make([]hentry, n)
	for i := range es {
		k := kvs[2*i]
		es[i] = hentry{key: k, val: kvs[2*i+1], hash: m.hash(k)}
		if !m.visit(1) {
			return emptyMap
		}
	}
	root, count := buildTrie(es, make([]hentry, n), 0, m)
	if m.failed() {
		return emptyMap
	}
	if count <= arrayMapMax {
		// So few distinct keys make an array map, in the order the keys
		// first came, as Assoc builds it: a few cheap steps per pair.
		out := emptyMap
		for i := 0; i < len(kvs) && !m.failed(); i += 2 {
			out = out.assoc(kvs[i], kvs[i+1], m)
		}
		return out
	}
	return &Map{root: root, n: int32(count)}
}

// buildTrie returns the trie node at shift holding the entries es (whose
// hashes agree below shift) and the number of distinct keys among them;
// tmp is scratch of the same length.
func buildTrie(es, tmp []hentry, shift uint, m *meter) (*hnode, int) {
	var start [33]int // entries under bit b are tmp[start[b]:start[b+1]]
	for i := range es {
		start[(es[i].hash>>shift)&31+1]++
	}
	var bitmap uint32
	for b := range 32 {
		if start[b+1] > 0 {
			bitmap |= 1 << b
		}
		start[b+1] += start[b]
	}
	next := start
	for i := range es {
		b := (es[i].hash >> shift) & 31
		tmp[next[b]] = es[i]
		next[b]++
	}
	m.visit(len(es))
	node := newHNode(bits.OnesCount32(bitmap), bitmap, false)
	count, j := 0, 0
	for b := range 32 {
		lo, hi := start[b], start[b+1]
		if lo == hi {
			continue
		}
		e, c := buildEntry(tmp[lo:hi], es[lo:hi], shift+hbits, m)
		node.entries[j] = e
		count += c
		j++
	}
	return node, count
}

// buildEntry returns the entry that holds es, the entries under one bit of
// a node whose children are at shift: a pair, or a sub-node.
func buildEntry(es, tmp []hentry, shift uint, m *meter) (hentry, int) {
	if len(es) == 1 {
		return es[0], 1
	}
	if !sameHash(es) {
		sub, c := buildTrie(es, tmp, shift, m)
		return hentry{sub: sub}, c
	}
	kept := dedupeEntries(es, m)
	if len(kept) == 1 {
		return kept[0], 1
	}
	return hentry{sub: collisionPath(kept, shift)}, len(kept)
}

func sameHash(es []hentry) bool {
	for i := 1; i < len(es); i++ {
		if es[i].hash != es[0].hash {
			return false
		}
	}
	return true
}

// dedupeEntries collapses entries with equal keys, in place: the first
// occurrence keeps its place and its key, and takes the value of the last.
func dedupeEntries(es []hentry, m *meter) []hentry {
	out := es[:0]
	for _, e := range es {
		dup := false
		for i := range out {
			if !m.visit(1) {
				return out
			}
			if m.equal(out[i].key, e.key) {
				out[i].val = e.val
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, e)
		}
	}
	return out
}

// collisionPath returns the node at shift for distinct keys that share
// their whole hash: one-entry nodes down to a collision node, as
// mergeEntries makes them.
func collisionPath(es []hentry, shift uint) *hnode {
	if shift >= 64 {
		return &hnode{coll: true, entries: append([]hentry(nil), es...)}
	}
	bit := hbit(es[0].hash, shift)
	return &hnode{bitmap: bit, entries: []hentry{{sub: collisionPath(es, shift+hbits)}}}
}
