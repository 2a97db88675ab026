package rtfs

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/rtfshost/rtfshost/rtfs/types"
)

// checkMap compares m with the reference Go map (keys by printed form).
func checkMap(t *testing.T, m *Map, ref map[string][2]Value) {
	t.Helper()
	if m.Len() != len(ref) {
		t.Fatalf("Len = %d, want %d", m.Len(), len(ref))
	}
	for _, kv := range ref {
		got, ok := m.Get(kv[0])
		if !ok || !Equal(got, kv[1]) {
			t.Fatalf("Get(%v) = %v, %v; want %v", kv[0], got, ok, kv[1])
		}
		if kw, isKw := kv[0].(Keyword); isKw {
			if got, ok := m.GetKeyword(string(kw)); !ok || !Equal(got, kv[1]) {
				t.Fatalf("GetKeyword(%q) = %v, %v; want %v", kw, got, ok, kv[1])
			}
		}
	}
	seen := 0
	m.Range(func(k, v Value) bool {
		kv, ok := ref[k.String()]
		if !ok || !Equal(kv[1], v) {
			t.Fatalf("Range yields %v %v, not in the reference", k, v)
		}
		seen++
		return true
	})
	if seen != len(ref) {
		t.Fatalf("Range yielded %d entries, want %d", seen, len(ref))
	}
}

func randomKey(rng *rand.Rand, space int) Value {
	i := rng.IntN(space)
	switch i % 3 {
	case 0:
		return Keyword(fmt.Sprintf("k%d", i))
	case 1:
		return Int(i)
	}
	return String(fmt.Sprintf("s%d", i))
}

func TestMapRandomOpsAgainstGoMap(t *testing.T) {
	for _, space := range []int{6, 8, 9, 12, 40, 1100, 5000} {
		rng := rand.New(rand.NewPCG(uint64(space), 3))
		m := MapOf()
		ref := map[string][2]Value{}
		for op := 0; op < 4*space+50; op++ {
			k := randomKey(rng, space)
			if rng.IntN(4) == 0 {
				m = m.Dissoc(k)
				delete(ref, k.String())
			} else {
				v := Int(op)
				m = m.Assoc(k, v)
				ref[k.String()] = [2]Value{k, v}
			}
			if op%97 == 0 {
				checkMap(t, m, ref)
			}
			if _, ok := m.Get(String("absent")); ok {
				t.Fatal("Get of an absent key succeeded")
			}
		}
		checkMap(t, m, ref)
		// Delete everything: the map shrinks to empty.
		for _, kv := range ref {
			m = m.Dissoc(kv[0])
		}
		if m.Len() != 0 {
			t.Fatalf("space %d: %d entries left after deleting all", space, m.Len())
		}
	}
}

func TestMapPersistence(t *testing.T) {
	m := MapOf()
	for i := 0; i < 20; i++ {
		m = m.Assoc(Int(i), Int(i))
		before := m
		_ = before.Assoc(Int(i), String("changed"))
		_ = before.Dissoc(Int(0))
		if v, _ := before.Get(Int(i)); v != Int(i) {
			t.Fatalf("size %d: Assoc on a copy changed the original", i+1)
		}
		if !before.Has(Int(0)) {
			t.Fatalf("size %d: Dissoc on a copy changed the original", i+1)
		}
	}
}

func TestMapOfOddAndDuplicates(t *testing.T) {
	m := MapOf(Keyword("a"), Int(1), Keyword("b"))
	if v, ok := m.Get(Keyword("b")); !ok || v != Nil {
		t.Errorf("odd MapOf: :b = %v, %v; want nil, true", v, ok)
	}
	m = MapOf(Keyword("a"), Int(1), Keyword("a"), Int(2))
	if m.Len() != 1 {
		t.Fatalf("duplicate keys: Len = %d, want 1", m.Len())
	}
	if v, _ := m.Get(Keyword("a")); v != Int(2) {
		t.Errorf("duplicate keys: :a = %v, want the last value 2", v)
	}
}

func TestMapAssocSameValueReturnsSameMap(t *testing.T) {
	vec := NewVector(Int(1))
	small := MapOf(Keyword("v"), vec)
	if small.Assoc(Keyword("v"), vec) != small {
		t.Error("array-map: assoc of the identical value allocated a new map")
	}
	if small.Assoc(Keyword("v"), NewVector(Int(1))) == small {
		t.Error("array-map: assoc of an equal but distinct vector must replace the value (no deep compare)")
	}
	big := MapOf()
	for i := 0; i < 20; i++ {
		big = big.Assoc(Int(i), vec)
	}
	if big.Assoc(Int(5), vec) != big {
		t.Error("hash map: assoc of the identical value allocated a new map")
	}
}

func TestMapStructuralKeys(t *testing.T) {
	for _, n := range []int{2, 20} {
		m := MapOf()
		for i := 0; i < n; i++ {
			m = m.Assoc(NewVector(Int(i), String("x")), Int(i))
		}
		// A list with the same elements is an equal key.
		if v, ok := m.Get(NewList(Int(1), String("x"))); !ok || v != Int(1) {
			t.Errorf("n=%d: lookup by an equal list = %v, %v", n, v, ok)
		}
		if _, ok := m.Get(Int(1)); ok {
			t.Errorf("n=%d: found a key that is not there", n)
		}
		// 1 and 1.0 are different keys.
		m2 := m.Assoc(Int(1), String("int")).Assoc(Float(1), String("float"))
		if a, _ := m2.Get(Int(1)); a != String("int") {
			t.Errorf("n=%d: 1 and 1.0 collided: %v", n, a)
		}
	}
}

// collider is a test value whose hash is fixed, to force hash collisions
// deep in the trie.
type collider struct {
	id   int
	hash uint64
}

func (*collider) Kind() Kind             { return types.KindFn }
func (c *collider) String() string       { return fmt.Sprintf("#<collider %d>", c.id) }
func (c *collider) identityHash() uint64 { return c.hash }

func TestMapHashCollisions(t *testing.T) {
	var keys []*collider
	for i := 0; i < 40; i++ {
		// Groups of keys share all 64 hash bits; groups share low bits.
		keys = append(keys, &collider{id: i, hash: uint64(i%4)<<60 | 0x5})
	}
	m := MapOf()
	for i, k := range keys {
		m = m.Assoc(k, Int(i))
	}
	if m.Len() != len(keys) {
		t.Fatalf("Len = %d, want %d", m.Len(), len(keys))
	}
	for i, k := range keys {
		if v, ok := m.Get(k); !ok || v != Int(i) {
			t.Fatalf("Get(%v) = %v, %v", k, v, ok)
		}
	}
	m2 := m.Assoc(keys[3], String("new"))
	if v, _ := m2.Get(keys[3]); v != String("new") || m2.Len() != len(keys) {
		t.Fatalf("replace in a collision node: %v, len %d", v, m2.Len())
	}
	for i, k := range keys {
		m = m.Dissoc(k)
		if m.Len() != len(keys)-i-1 {
			t.Fatalf("after %d dissocs Len = %d", i+1, m.Len())
		}
		for _, k2 := range keys[i+1:] {
			if !m.Has(k2) {
				t.Fatalf("after dissoc of %v, lost %v", k, k2)
			}
		}
	}
}

func TestMapRangeStopsAndOrder(t *testing.T) {
	m := MapOf(Keyword("z"), Int(1), Keyword("a"), Int(2), Keyword("m"), Int(3))
	var keys []string
	m.Range(func(k, _ Value) bool {
		keys = append(keys, k.String())
		return len(keys) < 2
	})
	if fmt.Sprint(keys) != "[:z :a]" {
		t.Errorf("Range order/stop = %v, want insertion order stopped after 2", keys)
	}
	big := MapOf()
	for i := 0; i < 100; i++ {
		big = big.Assoc(Int(i), Nil)
	}
	var got []int
	big.Range(func(k, _ Value) bool { got = append(got, int(k.(Int))); return true })
	sort.Ints(got)
	for i, k := range got {
		if k != i {
			t.Fatalf("Range over a large map missed key %d", i)
		}
	}
}

func TestSetOps(t *testing.T) {
	for _, n := range []int{3, 8, 9, 100} {
		s := NewSet()
		for i := 0; i < n; i++ {
			s = s.Conj(Int(i)).Conj(Int(i))
		}
		if s.Len() != n {
			t.Fatalf("Len = %d, want %d", s.Len(), n)
		}
		seen := map[Value]bool{}
		for i := 0; i < n; i++ {
			seen[s.Index(i)] = true
		}
		if len(seen) != n {
			t.Fatalf("Index yields %d distinct elements, want %d", len(seen), n)
		}
		d := s.Disj(Int(0))
		if d.Has(Int(0)) || !s.Has(Int(0)) || d.Len() != n-1 {
			t.Fatal("Disj is not persistent or did not remove")
		}
		if s.Disj(String("absent")) != s || s.Conj(Int(1)) != s {
			t.Fatal("no-op Disj/Conj allocated a new set")
		}
		if !Equal(s, NewSet(s.m.entries()...)) {
			t.Fatal("set not equal to a rebuilt copy")
		}
	}
}

func TestListOps(t *testing.T) {
	l := NewList(Int(1), Int(2), Int(3))
	if l.Len() != 3 || l.First() != Int(1) || l.Rest().First() != Int(2) || l.Index(2) != Int(3) {
		t.Fatalf("list basics broken: %v", l)
	}
	if e := NewList(); e.Len() != 0 || e.First() != Nil || e.Rest().Len() != 0 {
		t.Fatal("empty list basics broken")
	}
	c := l.Cons(Int(0))
	if c.Len() != 4 || l.Len() != 3 || c.String() != "(0 1 2 3)" {
		t.Fatalf("Cons = %v", c)
	}
	// A vector view behaves like a list.
	v := NewVector(Int(1), Int(2), Int(3), Int(4))
	view := listView(v, 1)
	if view.Len() != 3 || view.First() != Int(2) || view.Index(2) != Int(4) || view.String() != "(2 3 4)" {
		t.Fatalf("view = %v", view)
	}
	if r := view.Rest().Rest(); r.Len() != 1 || r.First() != Int(4) || r.Rest().Len() != 0 {
		t.Fatalf("view rest = %v", r)
	}
	cv := view.Cons(Int(9))
	if cv.String() != "(9 2 3 4)" || cv.Index(3) != Int(4) || !Equal(cv, NewVector(Int(9), Int(2), Int(3), Int(4))) {
		t.Fatalf("cons onto a view = %v", cv)
	}
}

// BenchmarkMapOfMeta builds a map shaped like a chunk's metadata, six
// keyword keys as the provider builds them with MapOf.
func BenchmarkMapOfMeta(b *testing.B) {
	id, ev, cur := Value(String("s")), Value(String("chunk")), Value(String("17"))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkValue = MapOf(Keyword("stream-id"), id, Keyword("seq"), Int(i&127), Keyword("event"), ev,
			Keyword("id"), cur, Keyword("received-at-ms"), Int(7), Keyword("endpoint"), id)
	}
}
