package rtfs

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// randomValue builds a random nested value of bounded depth.
func randomValue(rng *rand.Rand, depth int) Value {
	n := 9
	if depth <= 0 {
		n = 6
	}
	switch rng.IntN(n) {
	case 0:
		return Nil
	case 1:
		return Bool(rng.IntN(2) == 0)
	case 2:
		return Int(rng.IntN(600) - 300)
	case 3:
		return Float(float64(rng.IntN(100)) / 4)
	case 4:
		return String(fmt.Sprint("s", rng.IntN(20)))
	case 5:
		return Keyword(fmt.Sprint("k", rng.IntN(20)))
	case 6:
		elems := make([]Value, rng.IntN(40))
		for i := range elems {
			elems[i] = randomValue(rng, depth-1)
		}
		if rng.IntN(2) == 0 {
			return NewList(elems...)
		}
		return NewVector(elems...)
	case 7:
		kvs := make([]Value, 2*rng.IntN(20))
		for i := range kvs {
			kvs[i] = randomValue(rng, depth-1)
		}
		return MapOf(kvs...)
	}
	elems := make([]Value, rng.IntN(15))
	for i := range elems {
		elems[i] = randomValue(rng, depth-1)
	}
	return NewSet(elems...)
}

// rebuild returns a structurally equal copy of v with a different
// representation: lists and vectors swapped, maps and sets rebuilt in
// reverse order.
func rebuild(v Value) Value {
	switch x := v.(type) {
	case *List, *Vector:
		elems, _ := seqSlice(nil, x)
		for i := range elems {
			elems[i] = rebuild(elems[i])
		}
		if _, ok := v.(*List); ok {
			return NewVector(elems...)
		}
		return NewList(elems...)
	case *Map:
		kvs := x.entries()
		m := MapOf()
		for i := len(kvs) - 2; i >= 0; i -= 2 {
			m = m.Assoc(rebuild(kvs[i]), rebuild(kvs[i+1]))
		}
		return m
	case *Set:
		elems, _ := seqSlice(nil, x)
		slices.Reverse(elems)
		for i := range elems {
			elems[i] = rebuild(elems[i])
		}
		return NewSet(elems...)
	}
	return v
}

func TestEqualHashProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		v := randomValue(rng, 3)
		w := rebuild(v)
		if !Equal(v, w) || !Equal(w, v) {
			t.Fatalf("value and its rebuilt copy differ:\n%v\n%v", v, w)
		}
		if Hash(v) != Hash(w) {
			t.Fatalf("equal values hash differently: %v", v)
		}
		u := randomValue(rng, 3)
		if Equal(u, v) != Equal(v, u) {
			t.Fatalf("Equal is not symmetric for %v and %v", u, v)
		}
		if Equal(u, v) && Hash(u) != Hash(v) {
			t.Fatalf("equal values hash differently: %v and %v", u, v)
		}
		// Codec and JSON keep the value.
		b, err := MarshalValue(v)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := UnmarshalValue(b); err != nil || !Equal(back, v) {
			t.Fatalf("codec round trip of %v = %v, %v", v, back, err)
		}
	}
}

func TestCompareProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	num := func() Value {
		if rng.IntN(2) == 0 {
			return Int(rng.IntN(21) - 10)
		}
		return Float(float64(rng.IntN(41)-20) / 2)
	}
	for i := 0; i < 2000; i++ {
		a, b, c := num(), num(), num()
		ab, _ := Compare(a, b)
		ba, _ := Compare(b, a)
		if ab != -ba {
			t.Fatalf("Compare(%v, %v) = %d but Compare(%v, %v) = %d", a, b, ab, b, a, ba)
		}
		bc, _ := Compare(b, c)
		ac, _ := Compare(a, c)
		if ab <= 0 && bc <= 0 && ac > 0 {
			t.Fatalf("Compare is not transitive on %v %v %v", a, b, c)
		}
		fa, _ := toFloat(1, a)
		fb, _ := toFloat(1, b)
		if want := cmpFloat(fa, fb); ab != want {
			t.Fatalf("Compare(%v, %v) = %d, numerically %d", a, b, ab, want)
		}
	}
}

func TestSetAgainstGoMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	s := NewSet()
	ref := map[string]bool{}
	for op := 0; op < 3000; op++ {
		x := randomKey(rng, 300)
		if rng.IntN(3) == 0 {
			s = s.Disj(x)
			delete(ref, x.String())
		} else {
			s = s.Conj(x)
			ref[x.String()] = true
		}
		if s.Has(x) != ref[x.String()] {
			t.Fatalf("op %d: Has(%v) = %v", op, x, s.Has(x))
		}
	}
	if s.Len() != len(ref) {
		t.Fatalf("Len = %d, want %d", s.Len(), len(ref))
	}
	seen := map[string]bool{}
	for i := 0; i < s.Len(); i++ {
		seen[s.Index(i).String()] = true
	}
	for k := range ref {
		if !seen[k] {
			t.Fatalf("Index never yields %s", k)
		}
	}
}

// TestListBuiltinsAgainstSlices drives rest, drop, take, cons and conj
// on lists (cons cells and vector views) against Go slices.
func TestListBuiltinsAgainstSlices(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var l Value = NewList()
	var ref []Value
	call := func(name string, args ...Value) Value {
		v, err := lookupBuiltin(name).call(nil, args)
		if err != nil {
			t.Fatalf("(%s %v): %v", name, args, err)
		}
		return v
	}
	for op := 0; op < 2000; op++ {
		switch rng.IntN(6) {
		case 0:
			l, ref = call("cons", Int(op), l), append([]Value{Int(op)}, ref...)
		case 1:
			l, ref = call("conj", l, Int(op)), append([]Value{Int(op)}, ref...)
		case 2:
			l = call("rest", l)
			ref = ref[min(1, len(ref)):]
		case 3:
			n := rng.IntN(4)
			l = call("drop", Int(n), l)
			ref = ref[min(n, len(ref)):]
		case 4:
			n := rng.IntN(len(ref) + 2)
			l = call("take", Int(n), l)
			ref = ref[:min(n, len(ref))]
		case 5:
			v := NewVector(ref...)
			l = call("concat", v, NewList())
		}
		if !Equal(l, NewVector(ref...)) {
			t.Fatalf("op %d: list %v, want %v", op, l, ref)
		}
		if got := call("count", l); got != Int(len(ref)) {
			t.Fatalf("op %d: count = %v, want %d", op, got, len(ref))
		}
	}
}

// TestSharedValuesConcurrently reads shared collections from several
// goroutines (lazy hash and set-index caches); run with -race.
func TestSharedValuesConcurrently(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := NewSet()
	for i := 0; i < 500; i++ {
		s = s.Conj(Int(i))
	}
	m := MapOf(Keyword("s"), s, Keyword("v"), vectorOfLen(2000))
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sum := 0
			for i := 0; i < s.Len(); i++ {
				sum += int(s.Index(i).(Int))
			}
			if sum != 499*500/2 || Hash(m) != Hash(rebuild(m)) || !Equal(m, rebuild(m)) {
				errs <- fmt.Sprintf("goroutine saw sum %d or unequal copies", sum)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
