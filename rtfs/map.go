package rtfs

import (
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/rtfshost/rtfshost/rtfs/types"
)

// A Map is an immutable, persistent map with structural keys (Equal and
// Hash). Up to 8 entries it is a flat array-map kept in insertion order:
// lookups are a linear scan (keyword keys compare as strings, no hashing)
// and Assoc costs one allocation. Beyond 8 entries it is a hash array
// mapped trie: Get, Assoc and Dissoc are O(log32 n). Assoc never compares
// values deeply: replacing a value with the identical one (same scalar or
// same pointer) returns the map unchanged. The empty map is a non-nil *Map
// with Len 0. Maps are safe to share between goroutines.
//
// The header is 32 bytes, so that an array-map of one entry, the state of
// many a stream processor, fills a 64-byte allocation with its entry: the
// entries are a pointer to the first (their count is n's), and the counts
// are 32 bits (a map of 2^31 entries would take over 100 GB).
type Map struct {
	// kvs, for an array-map (root == nil), points to the first of its
	// entries k0, v0, k1, v1, ... (2n of them; nil when empty), in a
	// backing array of slots values; see kv. A trie does not use it,
	// unless it is a sorted map's: see sorted.
	kvs   *Value
	root  *hnode // hash trie, when the map has grown beyond arrayMapMax
	n     int32  // entries
	slots int32  // array-map: the length of kvs's backing array (refill)
	hash  atomic.Uint64
}

// kv returns an array-map's entries as a flat k0, v0, k1, v1, ... slice
// (length and capacity 2n), nil for a trie.
func (m *Map) kv() []Value {
	if m.root != nil {
		return nil
	}
	return unsafe.Slice(m.kvs, 2*int(m.n))
}

// setKV makes kvs, an array of entries of which m owns the backing array,
// the entries of m, an array-map.
func (m *Map) setKV(kvs []Value) {
	m.kvs, m.n, m.slots = unsafe.SliceData(kvs), int32(len(kvs)/2), int32(cap(kvs))
}

// sorted returns the order of a sorted map (sorted.go), nil for the
// others. A sorted map is always a trie, whatever its size, and keeps its
// *sortedOrder in the one Value kvs points to, which a trie does not
// otherwise use: the order costs the other maps nothing.
func (m *Map) sorted() *sortedOrder {
	if m.root != nil && m.kvs != nil {
		return (*m.kvs).(*sortedOrder)
	}
	return nil
}

// withOrder returns a sorted map of m's entries (m itself, which must be
// fresh, when it is a trie already) in order o.
func (m *Map) withOrder(o *sortedOrder) *Map {
	if m.root == nil || m == emptyMap {
		root := emptyHNode
		kvs := m.kv()
		for i := 0; i < len(kvs); i += 2 {
			root, _ = root.assoc(kvs[i], kvs[i+1], Hash(kvs[i]), 0, nil)
		}
		m = &Map{root: root, n: m.n}
	}
	order := new(Value)
	*order = o
	m.kvs = order
	return m
}

const arrayMapMax = 8

// emptyMap is the shared, immutable empty map.
var emptyMap = &Map{}

// MapOf returns a map of the key/value pairs in kvs (k1, v1, k2, v2, ...).
// An odd count pairs the last key with Nil; a repeated key keeps its last
// value. kvs is copied, never retained. Cost: O(n) for n <= 8 distinct keys
// (one allocation), O(n) hashing and O(n log32 n) placing beyond, with no
// garbage but a scratch copy of the entries.
func MapOf(kvs ...Value) *Map { return mapOf(kvs, nil) }

// mapOf is MapOf counting its hashing and comparing on m (see buildMap).
func mapOf(kvs []Value, m *meter) *Map {
	if len(kvs)%2 == 1 {
		kvs = append(kvs[:len(kvs):len(kvs)], Nil)
	}
	if len(kvs) <= 2*arrayMapMax && distinctKeys(kvs, m) {
		if len(kvs) == 0 {
			return emptyMap
		}
		nm, nkvs := newArrayMap(len(kvs) / 2)
		copy(nkvs, kvs)
		return nm
	}
	return buildMap(kvs, m)
}

// refill makes m, an array-map that nothing else refers to (the caller
// guarantees it), hold the entries of the flat k, v, ... slice kvs instead
// of its own, in its own storage: the reuse of a map whose life has ended
// (a processor's result, a chunk the processor let go of). It returns
// false, leaving m as it was, when kvs is empty or odd, holds more entries
// than m's storage or repeats a key. kvs is copied, never retained. mt
// charges the comparing of computed keys (nil: no budget).
func (m *Map) refill(kvs []Value, mt *meter) bool {
	if m.root != nil || len(kvs) == 0 || len(kvs)%2 != 0 || len(kvs) > int(m.slots) || !distinctKeys(kvs, mt) {
		return false
	}
	// No stale values kept alive: the slots past m's length are nil (the
	// maps refilled, a thread's result box and the maps a JSONDecoder
	// returns, are built so, and refill keeps them so), so only those of
	// m's old entries past the new ones are cleared; a result of the same
	// size as the last clears nothing, where clearing the whole spare
	// capacity cost a write barrier per slot while the collector marks.
	// For the same reason a slot that holds the very value (the same
	// words) already is not written: a processor's result has the same
	// keys, and often the same :action, every time.
	all := unsafe.Slice(m.kvs, m.slots)
	dst, src := asWords(all[:len(kvs)]), asWords(kvs)
	for i := range src {
		if dst[i] != src[i] {
			all[i] = kvs[i]
		}
	}
	if old := 2 * int(m.n); old > len(kvs) {
		clear(all[len(kvs):old])
	}
	m.n = int32(len(kvs) / 2)
	if m.hash.Load() != 0 {
		m.hash.Store(0)
	}
	return true
}

// mapOwned is MapOf taking ownership of an even-length kvs slice.
func mapOwned(kvs []Value) *Map {
	if len(kvs) <= 2*arrayMapMax && distinctKeys(kvs, nil) {
		if len(kvs) == 0 {
			return emptyMap
		}
		m := new(Map)
		m.setKV(kvs[:len(kvs):len(kvs)]) // the slots past kvs may not be nil (refill)
		return m
	}
	return MapOf(kvs...)
}

// distinctKeys reports whether the keys of the flat k, v, ... slice kvs are
// pairwise distinct (not Equal), comparing on m. Keyword keys, the usual
// case, are compared inline without a call to Equal: a keyword equals only
// the same keyword.
func distinctKeys(kvs []Value, m *meter) bool {
	for i := 2; i < len(kvs); i += 2 {
		kw, isKw := kvs[i].(Keyword)
		for j := 0; j < i; j += 2 {
			if isKw {
				if y, ok := kvs[j].(Keyword); ok && y == kw {
					return false
				}
			} else if m.equal(kvs[i], kvs[j]) || m.failed() {
				return false
			}
		}
	}
	return true
}

// Kind implements Value.
func (*Map) Kind() Kind { return types.KindMap }

// Len returns the number of entries in O(1).
func (m *Map) Len() int { return int(m.n) }

// Get returns the value stored under key k. O(n) up to 8 entries, O(log n)
// beyond; no allocation. A collection key costs a hash (cached) and an
// Equal with the key found.
func (m *Map) Get(k Value) (Value, bool) { return m.get(k, nil) }

// get is Get counting its hashing and comparing on mt.
func (m *Map) get(k Value, mt *meter) (Value, bool) {
	if m.root != nil {
		return m.root.get(k, mt.hash(k), 0, mt)
	}
	if kw, ok := k.(Keyword); ok {
		return m.GetKeyword(string(kw))
	}
	kvs := m.kv()
	for i := 0; i < len(kvs); i += 2 {
		if mt.equal(kvs[i], k) {
			return kvs[i+1], true
		}
	}
	return nil, false
}

// GetKeyword returns the value stored under the keyword whose name is name
// (implements types.Mapping). It does not allocate.
func (m *Map) GetKeyword(name string) (Value, bool) {
	if m.root != nil {
		return m.root.getKeyword(name, strhash(name, seedKeyword))
	}
	kvs := m.kv()
	for i := 0; i < len(kvs); i += 2 {
		if kw, ok := kvs[i].(Keyword); ok && string(kw) == name {
			return kvs[i+1], true
		}
	}
	return nil, false
}

// Has reports whether m holds key k.
func (m *Map) Has(k Value) bool {
	_, ok := m.get(k, nil)
	return ok
}

// arrayIndex returns the position of k's key slot in kvs, an array-map's
// entries, or -1.
func arrayIndex(kvs []Value, k Value, mt *meter) int {
	if kw, ok := k.(Keyword); ok {
		for i := 0; i < len(kvs); i += 2 {
			if x, ok := kvs[i].(Keyword); ok && x == kw {
				return i
			}
		}
		return -1
	}
	for i := 0; i < len(kvs); i += 2 {
		if mt.equal(kvs[i], k) {
			return i
		}
	}
	return -1
}

// Assoc returns a map with k mapped to v. O(n) up to 8 entries (one
// allocation), O(log32 n) beyond; a sorted map also inserts a new key in
// its order, O(n).
func (m *Map) Assoc(k, v Value) *Map { return m.assoc(k, v, nil) }

// assoc is Assoc counting on mt its hashing, comparing and the entries of
// the trie nodes it copies (a sorted map's order is charged by the builtin
// that adds to it: sortedCheck).
func (m *Map) assoc(k, v Value, mt *meter) *Map {
	if m.isSorted() {
		return m.assocSorted(k, v, mt)
	}
	return m.assocBase(k, v, mt)
}

// isSorted reports whether m is a sorted map (Map.sorted), cheaply.
func (m *Map) isSorted() bool { return m.root != nil && m.kvs != nil }

func (m *Map) assocSorted(k, v Value, mt *meter) *Map {
	nm := m.assocBase(k, v, mt)
	if nm == m {
		return m
	}
	o := m.sorted()
	if nm.n != m.n {
		o = o.insert(k, mt)
	}
	return nm.withOrder(o)
}

func (m *Map) assocBase(k, v Value, mt *meter) *Map {
	if m.root != nil {
		root, added := m.root.assoc(k, v, mt.hash(k), 0, mt)
		if root == m.root {
			return m
		}
		n := m.n
		if added {
			n++
		}
		return &Map{root: root, n: n}
	}
	kvs := m.kv()
	if i := arrayIndex(kvs, k, mt); i >= 0 {
		if identical(kvs[i+1], v) {
			return m
		}
		nm, nkvs := newArrayMap(len(kvs) / 2)
		copy(nkvs, kvs)
		nkvs[i+1] = v
		return nm
	}
	if m.n < arrayMapMax {
		nm, nkvs := newArrayMap(len(kvs)/2 + 1)
		copy(nkvs, kvs)
		nkvs[len(kvs)], nkvs[len(kvs)+1] = k, v
		return nm
	}
	var root *hnode = emptyHNode
	for i := 0; i < len(kvs); i += 2 {
		root, _ = root.assoc(kvs[i], kvs[i+1], mt.hash(kvs[i]), 0, mt)
	}
	root, _ = root.assoc(k, v, mt.hash(k), 0, mt)
	return &Map{root: root, n: m.n + 1}
}

// Dissoc returns a map without key k (m itself if k is absent).
func (m *Map) Dissoc(k Value) *Map { return m.dissoc(k, nil) }

// dissoc is Dissoc counting on mt as assoc does.
func (m *Map) dissoc(k Value, mt *meter) *Map {
	if !m.isSorted() {
		return m.dissocBase(k, mt)
	}
	nm := m.dissocBase(k, mt)
	if nm == m {
		return m
	}
	if nm == emptyMap {
		nm = &Map{}
	}
	return nm.withOrder(m.sorted().remove(k, mt))
}

func (m *Map) dissocBase(k Value, mt *meter) *Map {
	if m.root != nil {
		root, removed := m.root.dissoc(k, mt.hash(k), 0, mt)
		if !removed {
			return m
		}
		if m.n == 1 {
			return emptyMap
		}
		return &Map{root: root, n: m.n - 1}
	}
	kvs := m.kv()
	i := arrayIndex(kvs, k, mt)
	if i < 0 {
		return m
	}
	if m.n == 1 {
		return emptyMap
	}
	nm, nkvs := newArrayMap(len(kvs)/2 - 1)
	copy(nkvs, kvs[:i])
	copy(nkvs[i:], kvs[i+2:])
	return nm
}

// Range calls f for each entry until f returns false. The order is
// insertion order for maps of up to 8 entries and trie order beyond; it is
// stable for one map value. A sorted map ranges in its order.
func (m *Map) Range(f func(k, v Value) bool) {
	if m.isSorted() {
		for _, k := range m.sorted().keys {
			v, _ := m.Get(k)
			if !f(k, v) {
				return
			}
		}
		return
	}
	if m.root != nil {
		m.root.rangeEntries(f)
		return
	}
	kvs := m.kv()
	for i := 0; i < len(kvs); i += 2 {
		if !f(kvs[i], kvs[i+1]) {
			return
		}
	}
}

// entries returns the map's keys and values as a flat k, v, ... slice in
// Range order. The slice is fresh (the caller may keep it).
func (m *Map) entries() []Value {
	out := make([]Value, 0, 2*m.n)
	m.Range(func(k, v Value) bool {
		out = append(out, k, v)
		return true
	})
	return out
}

// String implements Value: {:a 1 :b 2}.
func (m *Map) String() string {
	var b strings.Builder
	writeValue(&b, m)
	return b.String()
}

// identical reports whether a and b are the same value without a deep walk:
// equal scalars (NaN is never identical), or the same collection or
// function pointer. Every value type is comparable, so == cannot panic.
func identical(a, b Value) bool { return a == b }
