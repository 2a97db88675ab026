package rtfs

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// assocAll builds the map of kvs one Assoc at a time, the reference for
// buildMap.
func assocAll(kvs []Value) *Map {
	m := emptyMap
	for i := 0; i < len(kvs); i += 2 {
		m = m.Assoc(kvs[i], kvs[i+1])
	}
	return m
}

// sameTrie reports where two tries differ in shape or content ("" if
// nowhere): buildMap must build the very trie the Assocs build, so that a
// map's order does not depend on how it was made.
func sameTrie(a, b *hnode, path string) string {
	if a.bitmap != b.bitmap || a.coll != b.coll || len(a.entries) != len(b.entries) {
		return fmt.Sprintf("%s: node bitmap %x/%x coll %v/%v entries %d/%d", path, a.bitmap, b.bitmap, a.coll, b.coll, len(a.entries), len(b.entries))
	}
	for i := range a.entries {
		x, y := a.entries[i], b.entries[i]
		p := fmt.Sprintf("%s/%d", path, i)
		switch {
		case (x.sub == nil) != (y.sub == nil):
			return p + ": a pair against a sub-node"
		case x.sub != nil:
			if d := sameTrie(x.sub, y.sub, p); d != "" {
				return d
			}
		case x.key != y.key || x.val != y.val || x.hash != y.hash:
			return fmt.Sprintf("%s: %v %v against %v %v", p, x.key, x.val, y.key, y.val)
		}
	}
	return ""
}

func TestBuildMapBuildsWhatAssocBuilds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	colliders := make([]*collider, 30)
	for i := range colliders {
		// Groups share all 64 bits of their hash, and groups their low bits.
		colliders[i] = &collider{id: i, hash: uint64(i%3)<<61 | 0x1f}
	}
	key := func(space int) Value {
		i := rng.IntN(space)
		switch i % 5 {
		case 0:
			return Keyword(fmt.Sprintf("k%d", i))
		case 1:
			return Int(i)
		case 2:
			return String(fmt.Sprintf("s%d", i))
		case 3:
			return colliders[i%len(colliders)]
		}
		return NewVector(Int(i), Keyword("v")) // equal keys, distinct pointers
	}
	for _, n := range []int{0, 1, 8, 9, 10, 17, 40, 300, 5000} {
		for _, space := range []int{3, 9, n + 1, 4 * n} {
			kvs := make([]Value, 0, 2*n)
			for i := 0; i < n; i++ {
				kvs = append(kvs, key(max(space, 1)), Int(i))
			}
			got, want := buildMap(kvs, nil), assocAll(kvs)
			if got.Len() != want.Len() {
				t.Fatalf("n=%d space=%d: Len %d, want %d", n, space, got.Len(), want.Len())
			}
			if (got.root == nil) != (want.root == nil) {
				t.Fatalf("n=%d space=%d: array map %v, want %v", n, space, got.root == nil, want.root == nil)
			}
			if got.root == nil {
				if fmt.Sprint(got.kv()) != fmt.Sprint(want.kv()) {
					t.Fatalf("n=%d space=%d: array map %v, want %v", n, space, got.kv(), want.kv())
				}
				continue
			}
			if d := sameTrie(got.root, want.root, "root"); d != "" {
				t.Fatalf("n=%d space=%d: tries differ at %s", n, space, d)
			}
		}
	}
}

func TestBuildMapStopsAtTheBudget(t *testing.T) {
	// Keys that are large vectors, equal but distinct: building a set of
	// them compares each with the first, a million elements a time.
	big := make([]Value, 1<<20)
	for i := range big {
		big[i] = Int(i)
	}
	keys := make([]Value, 100)
	for i := range keys {
		keys[i] = vectorOwned(append([]Value(nil), big...))
	}
	th := NewThread(Limits{MaxSteps: 5_000_000, MaxMemory: -1})
	_, err := th.setOf(keys)
	wantLimit(t, err, LimitSteps)
}
