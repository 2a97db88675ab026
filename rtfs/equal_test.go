package rtfs

import (
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
	"go.uber.org/goleak"
)

func TestEqualAndHash(t *testing.T) {
	big := func(n int) *Map {
		m := MapOf()
		for i := 0; i < n; i++ {
			m = m.Assoc(Keyword(strings.Repeat("k", i+1)), Int(i))
		}
		return m
	}
	bigRev := func(n int) *Map {
		m := MapOf()
		for i := n - 1; i >= 0; i-- {
			m = m.Assoc(Keyword(strings.Repeat("k", i+1)), Int(i))
		}
		return m
	}
	equal := [][2]Value{
		{Nil, Nil},
		{Int(1), Int(1)},
		{Float(0), Float(math.Copysign(0, -1))},
		{String("a"), String("a")},
		{Keyword("my.ns/k"), Keyword("my.ns/k")},
		{NewList(Int(1), Int(2)), NewVector(Int(1), Int(2))},
		{NewList(), NewVector()},
		{listView(NewVector(Int(0), Int(1), Int(2)), 1), NewList(Int(1), Int(2))},
		{MapOf(Keyword("a"), Int(1), Keyword("b"), Int(2)), MapOf(Keyword("b"), Int(2), Keyword("a"), Int(1))},
		{big(30), bigRev(30)},
		{big(9).Dissoc(Keyword("kkkkkkkkk")), big(8)}, // a trie map equals an array-map
		{NewSet(Int(1), Int(2), Int(3)), NewSet(Int(3), Int(2), Int(1))},
		{MapOf(NewVector(Int(1)), NewSet(Keyword("x"))), MapOf(NewList(Int(1)), NewSet(Keyword("x")))},
	}
	for _, p := range equal {
		if !Equal(p[0], p[1]) || !Equal(p[1], p[0]) {
			t.Errorf("Equal(%v, %v) = false, want true", p[0], p[1])
		}
		if Hash(p[0]) != Hash(p[1]) {
			t.Errorf("Hash(%v) != Hash(%v) although they are equal", p[0], p[1])
		}
	}
	differ := [][2]Value{
		{Int(1), Float(1)},
		{Nil, False},
		{String("a"), Keyword("a")},
		{Keyword("a"), Symbol("a")},
		{NewVector(Int(1)), NewVector(Int(1), Int(2))},
		{NewVector(Int(1), Int(2)), NewVector(Int(2), Int(1))},
		{NewVector(), MapOf()},
		{MapOf(Keyword("a"), Int(1)), MapOf(Keyword("a"), Int(2))},
		{MapOf(Keyword("a"), Int(1)), MapOf(Keyword("b"), Int(1))},
		{NewSet(Int(1)), NewVector(Int(1))},
		{Float(math.NaN()), Float(math.NaN())},
		{big(30), big(30).Assoc(Keyword("k"), Int(99))},
	}
	for _, p := range differ {
		if Equal(p[0], p[1]) || Equal(p[1], p[0]) {
			t.Errorf("Equal(%v, %v) = true, want false", p[0], p[1])
		}
	}
	if Hash(Keyword("a")) == Hash(String("a")) || Hash(Int(1)) == Hash(Float(1)) {
		t.Error("scalars of different kinds with the same text hash alike")
	}
}

func TestHashCachedConcurrently(t *testing.T) {
	defer goleak.VerifyNone(t)
	v := NewVector()
	for i := 0; i < 1000; i++ {
		v = v.Conj(MapOf(Keyword("i"), Int(i)))
	}
	want := (*meter)(nil).hashSeq(v)
	var wg sync.WaitGroup
	hashes := make([]uint64, 8)
	for g := range hashes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hashes[g] = Hash(v)
		}()
	}
	wg.Wait()
	for _, h := range hashes {
		if h != want {
			t.Fatalf("concurrent Hash = %x, want %x", h, want)
		}
	}
	if v.hash.Load() != want {
		t.Fatal("hash was not cached")
	}
}

func TestCompare(t *testing.T) {
	nan := Float(math.NaN())
	cases := []struct {
		a, b Value
		want int
	}{
		{Int(1), Int(2), -1},
		{Int(2), Float(1.5), 1},
		{Float(1.5), Int(2), -1},
		{Int(3), Float(3), 0},
		{Int(math.MaxInt64), Float(9.3e18), -1},
		{Int(math.MinInt64), Float(-1e300), 1},
		{nan, Float(math.Inf(1)), 1},
		{nan, nan, 0},
		{Int(1), nan, -1},
		{String("abc"), String("abd"), -1},
		{Keyword("b"), Keyword("a"), 1},
		{Symbol("a"), Symbol("a"), 0},
		{False, True, -1},
		{Nil, Int(0), -1},
		{String("x"), Nil, 1},
		{NewVector(Int(1), Int(2)), NewVector(Int(1), Int(3)), -1},
		{NewVector(Int(1)), NewList(Int(1), Int(0)), -1},
		{NewList(Int(2)), NewVector(Int(1), Int(9)), -1}, // length first, as Clojure's vectors
		{NewVector(Int(2), Int(0)), NewVector(Int(1), Int(9)), 1},
		{NewVector(), NewVector(), 0},
	}
	for _, c := range cases {
		got, err := Compare(c.a, c.b)
		if err != nil || got != c.want {
			t.Errorf("Compare(%v, %v) = %d, %v; want %d", c.a, c.b, got, err, c.want)
		}
	}
	for _, p := range [][2]Value{{Int(1), String("a")}, {MapOf(), MapOf()}, {Keyword("a"), String("a")},
		{NewVector(Int(1)), NewVector(String("a"))}, {NewSet(), NewSet()}} {
		_, err := Compare(p[0], p[1])
		if err == nil || !strings.Contains(err.Error(), "cannot compare") {
			t.Errorf("Compare(%v, %v) error = %v, want 'cannot compare'", p[0], p[1], err)
		}
	}
}

func TestPrinting(t *testing.T) {
	cases := []struct {
		v    Value
		want string
	}{
		{Nil, "nil"},
		{True, "true"},
		{Int(-5), "-5"},
		{Float(2), "2.0"},
		{Float(1.5e300), "1.5e+300"},
		{Float(math.Inf(-1)), "##-Inf"},
		{String("a\"b\n"), `"a\"b\n"`},
		{Keyword("my.ns/k"), ":my.ns/k"},
		{Symbol("foo"), "foo"},
		{NewList(Int(1), String("x")), `(1 "x")`},
		{NewVector(), "[]"},
		{NewVector(Keyword("a"), NewList()), "[:a ()]"},
		{MapOf(Keyword("a"), Int(1), String("b"), NewVector(Nil)), `{:a 1 "b" [nil]}`},
		{NewSet(Int(1), Int(2)), "#{1 2}"},
		{lookupBuiltin("count"), "#<builtin count>"},
	}
	for _, c := range cases {
		if got := c.v.String(); got != c.want {
			t.Errorf("String() = %s, want %s", got, c.want)
		}
	}
}

func TestDescribeTruncates(t *testing.T) {
	v := NewVector()
	for i := 0; i < 100; i++ {
		v = v.Conj(Int(i))
	}
	d := describe(v)
	if !strings.HasPrefix(d, "vector [0 1 2") || !strings.HasSuffix(d, "...") || len(d) > maxDescribe+20 {
		t.Errorf("describe = %q", d)
	}
	if describe(Nil) != "nil" || describe(Int(5)) != "int 5" {
		t.Errorf("describe scalars = %q %q", describe(Nil), describe(Int(5)))
	}
}

// nodeValue converts a data form read by the reader into a value.
func nodeValue(t *testing.T, n syntax.Node) Value {
	t.Helper()
	elems := func(ns []syntax.Node) []Value {
		out := make([]Value, len(ns))
		for i, e := range ns {
			out[i] = nodeValue(t, e)
		}
		return out
	}
	switch x := n.(type) {
	case *syntax.Nil:
		return Nil
	case *syntax.Bool:
		return Bool(x.Value)
	case *syntax.Int:
		return Int(x.Value)
	case *syntax.Float:
		return Float(x.Value)
	case *syntax.String:
		return String(x.Value)
	case *syntax.Keyword:
		return Keyword(x.Name)
	case *syntax.Symbol:
		return Symbol(x.Name)
	case *syntax.List:
		return NewList(elems(x.Elems)...)
	case *syntax.Vector:
		return NewVector(elems(x.Elems)...)
	case *syntax.Map:
		return MapOf(elems(x.Elems)...)
	case *syntax.Set:
		return NewSet(elems(x.Elems)...)
	}
	t.Fatalf("unexpected form %T %s", n, n)
	return nil
}

// TestPrintedFormReadsBack checks that every data value prints in a form
// the reader reads back as an equal value of the same kind.
func TestPrintedFormReadsBack(t *testing.T) {
	values := append(sampleValues()[:len(sampleValues())-1], // all but the builtin
		String("tab\there \"q\" \\ \x01 \u2028 😀"), Float(1e-300), Float(123456789.125),
		Keyword("a.b/c-d?"), MapOf(Int(1), NewSet(Keyword("x"), String("y")), String("k"), NewList()))
	for _, v := range values {
		nodes, err := syntax.Parse("print.rtfs", []byte(v.String()))
		if err != nil {
			t.Errorf("printed form %s does not read: %v", v, err)
			continue
		}
		if len(nodes) != 1 {
			t.Errorf("printed form %s reads as %d forms", v, len(nodes))
			continue
		}
		got := nodeValue(t, nodes[0])
		if !Equal(got, v) || got.Kind() != v.Kind() {
			t.Errorf("printed form %s reads back as %s", v, got)
		}
	}
}
