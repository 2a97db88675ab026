package rtfs

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// Hashing. Hash is deterministic (no per-process seed), so a value hashes the
// same in every process; it is consistent with Equal: Equal(a, b) implies
// Hash(a) == Hash(b). Lists and vectors with equal elements hash alike.

const (
	seedNil     = 0x9e3779b97f4a7c15
	seedTrue    = 0xc2b2ae3d27d4eb4f
	seedFalse   = 0x165667b19e3779f9
	seedInt     = 0x27d4eb2f165667c5
	seedFloat   = 0x85ebca77c2b2ae63
	seedString  = 0xff51afd7ed558ccd
	seedKeyword = 0xc4ceb9fe1a85ec53
	seedSymbol  = 0x94d049bb133111eb
	seedSeq     = 0xbf58476d1ce4e5b9
	seedMap     = 0x2545f4914f6cdd1d
	seedSet     = 0x9fb21c651e98df25
	seedFn      = 0xd6e8feb86659fd93
	seedRegex   = 0x7fb5d329728ea185
	seedLazy    = 0x3c6ef372fe94f82b
)

// mix64 is a 64-bit finalizer (splitmix64) that spreads every input bit.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// strhash hashes s eight bytes at a time. It does not allocate.
func strhash(s string, seed uint64) uint64 {
	h := seed ^ uint64(len(s))*0x9e3779b97f4a7c15
	for len(s) >= 8 {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		h = bits.RotateLeft64(h^mix64(w), 27)*5 + 0x52dce729
		s = s[8:]
	}
	var w uint64
	for i := 0; i < len(s); i++ {
		w |= uint64(s[i]) << (8 * i)
	}
	return mix64(h ^ mix64(w^0x1b873593))
}

// Hash returns a hash of v consistent with Equal. Scalars hash in O(len);
// collections compute their hash once (O(n)) and cache it, race-free, so
// later calls are O(1). Functions hash by kind only unless they implement
// an identity hash. Hash never fails and never allocates for scalars.
func Hash(v Value) uint64 { return (*meter)(nil).hash(v) }

// hash is Hash that counts one unit per element it hashes (a cached hash
// costs nothing) and textStepBytes bytes per unit of long texts. Once m's
// budget is spent it returns 0 and caches nothing; the caller returns m's
// error.
func (m *meter) hash(v Value) uint64 {
	switch x := v.(type) {
	case NilType:
		return seedNil
	case Bool:
		if x {
			return seedTrue
		}
		return seedFalse
	case Int:
		return mix64(uint64(x) ^ seedInt)
	case Float:
		return hashFloat(float64(x))
	case String:
		return m.hashText(string(x), seedString)
	case Keyword:
		return m.hashText(string(x), seedKeyword)
	case Symbol:
		return m.hashText(string(x), seedSymbol)
	case *List:
		return m.cachedHash(&x.hash, x)
	case *Vector:
		return m.cachedHash(&x.hash, x)
	case *Map:
		return m.cachedHash(&x.hash, x)
	case *Set:
		return m.cachedHash(&x.hash, x)
	case *Builtin:
		return strhash(x.name, seedFn)
	case *Regex:
		return m.hashText(x.src, seedRegex)
	case *Lazy:
		if l, ok := m.computedList(x); ok {
			return m.hash(l) // = to a list of the same elements
		}
		if m.failed() {
			return 0
		}
		return seedLazy // equal only to itself (equalLazy)
	}
	if h, ok := v.(interface{ identityHash() uint64 }); ok {
		return h.identityHash()
	}
	return mix64(uint64(v.Kind()) ^ seedFn)
}

// hashText hashes a text, counting the long ones.
func (m *meter) hashText(s string, seed uint64) uint64 {
	if len(s) >= freeText && !m.visit(len(s)/textStepBytes) {
		return 0
	}
	return strhash(s, seed)
}

func hashFloat(f float64) uint64 {
	if f == 0 {
		f = 0 // -0.0 equals 0.0
	}
	return mix64(math.Float64bits(f) ^ seedFloat)
}

// cachedHash returns the hash of collection c stored in slot, computing
// and storing it on first use. Zero means "not yet computed"; a computed
// zero is stored as 1. Concurrent first calls compute the same value, so
// the race is benign and the atomic makes it race-free. A walk that m
// stopped stores nothing.
func (m *meter) cachedHash(slot *atomic.Uint64, c Value) uint64 {
	if h := slot.Load(); h != 0 {
		return h
	}
	var h uint64
	switch x := c.(type) {
	case *Map:
		h = m.hashMap(x)
	case *Set:
		h = m.hashSet(x)
	default:
		h = m.hashSeq(c.(sequential))
	}
	if m.failed() {
		return 0
	}
	if h == 0 {
		h = 1
	}
	slot.Store(h)
	return h
}

// hashSeq hashes a list or vector in order.
func (m *meter) hashSeq(s sequential) uint64 {
	h := uint64(seedSeq)
	it := newSeqIter(s)
	n := 0
	for e, ok := it.next(); ok; e, ok = it.next() {
		if !m.visit(1) {
			return 0
		}
		h = bits.RotateLeft64(h, 7)*31 + m.hash(e)
		n++
	}
	return mix64(h ^ uint64(n))
}

func (m *meter) hashMap(x *Map) uint64 {
	var sum uint64
	x.Range(func(k, v Value) bool {
		sum += mix64(m.hash(k)*31 ^ bits.RotateLeft64(m.hash(v), 32))
		return m.visit(1)
	})
	return mix64(sum ^ seedMap ^ uint64(x.Len()))
}

func (m *meter) hashSet(s *Set) uint64 {
	var sum uint64
	s.m.Range(func(k, _ Value) bool {
		sum += mix64(m.hash(k))
		return m.visit(1)
	})
	return mix64(sum ^ seedSet ^ uint64(s.Len()))
}
