package rtfs

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// checkVector compares v with the reference slice want element by element,
// through Index, the iterator and appendTo.
func checkVector(t *testing.T, v *Vector, want []Value) {
	t.Helper()
	if v.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", v.Len(), len(want))
	}
	for i, w := range want {
		if got := v.Index(i); !Equal(got, w) {
			t.Fatalf("Index(%d) = %v, want %v (len %d)", i, got, w, len(want))
		}
	}
	got := v.appendTo(nil, 0)
	if len(got) != len(want) {
		t.Fatalf("appendTo gave %d elements, want %d", len(got), len(want))
	}
	it := newSeqIter(v)
	for i := range want {
		e, ok := it.next()
		if !ok || !Equal(e, want[i]) || !Equal(got[i], want[i]) {
			t.Fatalf("iteration element %d = %v, %v; want %v", i, e, got[i], want[i])
		}
	}
	if _, ok := it.next(); ok {
		t.Fatal("iterator yields past the end")
	}
}

func TestVectorConjIndexAcrossLevels(t *testing.T) {
	// Sizes cross the tail (32), the first root overflow (32*32+32) and a
	// third level (32*32*32+32).
	const n = 32*32*32 + 70
	v := NewVector()
	var ref []Value
	checkpoints := map[int]bool{0: true, 1: true, 8: true, 9: true, 32: true, 33: true, 64: true, 65: true,
		1024: true, 1025: true, 1056: true, 1057: true, 1088: true, 32*32*32 + 32: true, 32*32*32 + 33: true, n: true}
	for i := 0; i <= n; i++ {
		if checkpoints[i] {
			checkVector(t, v, ref)
		}
		v = v.Conj(Int(i))
		ref = append(ref, Int(i))
	}
}

func TestVectorIsPersistent(t *testing.T) {
	base := NewVector()
	for i := 0; i < 100; i++ {
		base = base.Conj(Int(i))
	}
	a := base.Conj(String("a"))
	b := base.Conj(String("b"))
	c, err := base.Assoc(3, Keyword("x"))
	if err != nil {
		t.Fatal(err)
	}
	if base.Len() != 100 || a.Index(100) != String("a") || b.Index(100) != String("b") {
		t.Fatalf("conj modified a shared vector: %v %v", a.Index(100), b.Index(100))
	}
	if base.Index(3) != Int(3) || c.Index(3) != Keyword("x") {
		t.Fatalf("assoc modified the original: base[3]=%v c[3]=%v", base.Index(3), c.Index(3))
	}
}

func TestVectorRandomOpsAgainstSlice(t *testing.T) {
	for _, size := range []int{7, 8, 9, 31, 32, 33, 1023, 1024, 1025, 32*32 + 32, 32*32 + 33, 3000} {
		rng := rand.New(rand.NewPCG(uint64(size), 7))
		var ref []Value
		v := NewVector()
		for i := 0; i < size; i++ {
			v = v.Conj(Int(i))
			ref = append(ref, Int(i))
		}
		for op := 0; op < 600; op++ {
			switch r := rng.IntN(10); {
			case r < 4 && len(ref) > 0:
				i := rng.IntN(len(ref))
				nv, err := v.Assoc(i, Int(-op))
				if err != nil {
					t.Fatal(err)
				}
				v = nv
				ref[i] = Int(-op)
			case r < 7:
				v = v.Conj(Int(op))
				ref = append(ref, Int(op))
			default:
				v = v.Pop()
				if len(ref) > 0 {
					ref = ref[:len(ref)-1]
				}
			}
		}
		checkVector(t, v, ref)
		if !Equal(v, NewVector(ref...)) || Hash(v) != Hash(NewVector(ref...)) {
			t.Fatalf("size %d: vector differs from one built from the reference slice", size)
		}
	}
}

func TestVectorPopToEmpty(t *testing.T) {
	v := NewVector()
	var ref []Value
	for i := 0; i < 1100; i++ {
		v = v.Conj(Int(i))
		ref = append(ref, Int(i))
	}
	for len(ref) > 0 {
		v = v.Pop()
		ref = ref[:len(ref)-1]
		if len(ref)%97 == 0 || len(ref) < 40 {
			checkVector(t, v, ref)
		}
	}
	if v.Pop().Len() != 0 {
		t.Fatal("pop of the empty vector is not empty")
	}
	// The shrunk vector grows again correctly.
	for i := 0; i < 1100; i++ {
		v = v.Conj(Int(i))
		ref = append(ref, Int(i))
	}
	checkVector(t, v, ref)
}

func TestVectorOwnedBulkBuild(t *testing.T) {
	for _, n := range []int{0, 1, 32, 33, 64, 65, 1056, 1057, 33*32 + 1, 40000} {
		elems := make([]Value, n)
		for i := range elems {
			elems[i] = Int(i)
		}
		ref := append([]Value(nil), elems...)
		v := NewVector(elems...)
		checkVector(t, v, ref)
		// Conj after a bulk build keeps the trie shape valid.
		v2 := v.Conj(String("end"))
		checkVector(t, v2, append(ref, String("end")))
		if n > 0 {
			v3, err := v.Assoc(n-1, Nil)
			if err != nil {
				t.Fatal(err)
			}
			if v3.Index(n-1) != Nil || v.Index(n-1) != Int(n-1) {
				t.Fatalf("n=%d: assoc on a bulk-built vector broke persistence", n)
			}
			checkVector(t, v.Pop(), ref[:n-1])
		}
	}
}

func TestVectorAssocOutOfRange(t *testing.T) {
	v := NewVector(Int(1), Int(2))
	for _, i := range []int{-1, 3, 100} {
		if _, err := v.Assoc(i, Nil); err == nil {
			t.Errorf("Assoc(%d) on a 2-vector succeeded", i)
		}
	}
	if w, err := v.Assoc(2, Int(3)); err != nil || w.Len() != 3 {
		t.Errorf("Assoc(len) = %v, %v; want an append", w, err)
	}
}

func TestNewVectorCopies(t *testing.T) {
	elems := []Value{Int(1), Int(2)}
	v := NewVector(elems...)
	elems[0] = Int(99)
	if v.Index(0) != Int(1) {
		t.Fatal("NewVector retained the caller's slice")
	}
}

// Conj appends in place into a tail with room only once per slot: vectors
// that branch from one vector each keep their own elements, from any
// number of goroutines.
func TestVectorConjBranches(t *testing.T) {
	base := NewVector()
	for i := 0; i < 5; i++ {
		base = base.Conj(Int(i))
	}
	a, b := base.Conj(String("a")), base.Conj(String("b"))
	a2 := a.Conj(String("a2"))
	if a.Index(5) != String("a") || b.Index(5) != String("b") || a2.Index(5) != String("a") || a2.Index(6) != String("a2") {
		t.Fatalf("branches mixed up: %v %v %v", a, b, a2)
	}
	if base.Len() != 5 || a.Len() != 6 || b.Len() != 6 {
		t.Fatalf("lengths %d %d %d", base.Len(), a.Len(), b.Len())
	}
	// Concurrent branches from one vector: each sees its own element.
	const n = 8
	got := make([]*Vector, n)
	done := make(chan int)
	for g := 0; g < n; g++ {
		go func(g int) {
			v := base
			for j := 0; j < 40; j++ {
				v = v.Conj(Int(g*1000 + j))
			}
			got[g] = v
			done <- g
		}(g)
	}
	for i := 0; i < n; i++ {
		<-done
	}
	for g, v := range got {
		if v.Len() != 45 {
			t.Fatalf("goroutine %d: length %d", g, v.Len())
		}
		for j := 0; j < 40; j++ {
			if v.Index(5+j) != Int(g*1000+j) {
				t.Fatalf("goroutine %d: element %d is %v", g, 5+j, v.Index(5+j))
			}
		}
	}
}

// A vector that Conj keeps growing takes its headers from the room of its
// tail: every version is a vector of its own (all kept here and checked),
// and a Conj allocates only when a tail starts or fills (three boxes per
// 32 elements, and the trie's nodes), not once per element.
func TestVectorConjGrowingTakesHeadersFromRoom(t *testing.T) {
	const n = 320
	elems := make([]Value, n) // boxed once: an Int over 255 allocates
	for i := range elems {
		elems[i] = Int(i)
	}
	var versions []*Vector
	grow := func() {
		versions = versions[:0]
		v := NewVector()
		for _, e := range elems {
			v = v.Conj(e)
			versions = append(versions, v)
		}
	}
	versions = make([]*Vector, 0, n)
	grow()
	for i, v := range versions {
		if v.Len() != i+1 || v.Index(i) != Int(i) || v.Index(0) != Int(0) {
			t.Fatalf("version %d: length %d, last %v", i, v.Len(), v.Index(v.Len()-1))
		}
		if i > 0 && v == versions[i-1] {
			t.Fatalf("versions %d and %d share a header", i-1, i)
		}
	}
	// One header per element would be n allocations.
	if a := testing.AllocsPerRun(20, grow); a > n/4 {
		t.Errorf("%d Conjs allocate %.0f times, want at most %d", n, a, n/4)
	}
}

// TestVectorOwnedShapes: a vector built from a slice it takes over holds
// every element at its index, and grows and changes like any vector, at
// every size up to three trie levels.
func TestVectorOwnedShapes(t *testing.T) {
	for _, n := range []int{1, 31, 32, 33, 63, 64, 65, 1023, 1024, 1025, 1056, 1057, 32*32*32 + 40} {
		elems := make([]Value, n)
		for i := range elems {
			elems[i] = Int(i)
		}
		v := vectorOwned(elems)
		for i := 0; i < n; i++ {
			if v.Index(i) != Int(i) {
				t.Fatalf("n=%d: Index(%d) = %v", n, i, v.Index(i))
			}
		}
		w := v.Conj(Int(n))
		if w.Len() != n+1 || w.Index(n) != Int(n) || v.Len() != n {
			t.Fatalf("n=%d: Conj gave len %d, last %v", n, w.Len(), w.Index(n))
		}
		u, err := v.Assoc(n/2, String("x"))
		if err != nil {
			t.Fatal(err)
		}
		if u.Index(n/2) != String("x") || v.Index(n/2) != Int(n/2) {
			t.Fatalf("n=%d: Assoc changed the original or missed its index", n)
		}
	}
}

// TestVectorShiftFollowsTheCount: the trie's depth, which the header does
// not store, is the one shiftOf derives from the count, for vectors grown by
// Conj, shrunk by Pop, built whole and updated by Assoc, across the sizes
// where the trie gains and loses a level.
func TestVectorShiftFollowsTheCount(t *testing.T) {
	depth := func(v *Vector) uint {
		d := uint(vbits)
		for n := v.root; len(n.kids) > 0 && n.kids[0].vals == nil; n = n.kids[0] {
			d += vbits
		}
		return d
	}
	check := func(how string, v *Vector) {
		t.Helper()
		if got, want := depth(v), v.shift(); v.root != emptyVNode && got != want {
			t.Fatalf("%s, %d elements: trie of shift %d, header says %d", how, v.Len(), got, want)
		}
		if v.Len() > 0 && v.Index(v.Len()-1) != Int(v.Len()-1) {
			t.Fatalf("%s, %d elements: last element %v", how, v.Len(), v.Index(v.Len()-1))
		}
	}
	const n = 33*32*32 + 70
	v := NewVector()
	elems := make([]Value, 0, n)
	for i := range n {
		v = v.Conj(Int(i))
		elems = append(elems, Int(i))
		if i%32 <= 1 || i%1024 >= 1022 {
			check("Conj", v)
			if i%1024 >= 1022 || i < 100 {
				check("vectorOwned", vectorOwned(append([]Value(nil), elems...)))
			}
			a, err := v.Assoc(i/2, Int(i/2))
			if err != nil {
				t.Fatal(err)
			}
			check("Assoc", a)
		}
	}
	for v.Len() > 0 {
		v = v.Pop()
		if l := v.Len(); l%32 <= 1 || l%1024 >= 1022 {
			check("Pop", v)
		}
	}
}

// TestHeaderSizes: the vector and map headers stay as small as the size
// classes they are chosen for (a growing vector allocates a header per
// element; a one-entry map with its entry fills 64 bytes).
func TestHeaderSizes(t *testing.T) {
	if s := unsafe.Sizeof(Vector{}); s != 40 {
		t.Errorf("Vector header: %d bytes, want 40", s)
	}
	if s := unsafe.Sizeof(mapBox1{}); s != 64 {
		t.Errorf("one-entry map: %d bytes, want 64", s)
	}
}
