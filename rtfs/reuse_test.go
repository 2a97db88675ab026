package rtfs

import (
	"context"
	"testing"
)

// callMap calls name in g on th and returns its result, which must be a map.
func callMap(t *testing.T, th *Thread, g *Globals, name string, args ...Value) *Map {
	t.Helper()
	fn, ok := g.Get(name)
	if !ok {
		t.Fatalf("%s is not defined", name)
	}
	out, err := th.Call(context.Background(), g, fn, args...)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := out.Value.(*Map)
	if !ok {
		t.Fatalf("%s returned %v, want a map", name, out.Value)
	}
	return m
}

// With ReuseResults, a map literal the called function returns is built in
// the thread's box (the same *Map on every call, with the entries of the
// last); every other map is built on the heap as before, so values kept
// from an earlier result stay as they were.
func TestReuseResults(t *testing.T) {
	p := mustCompile(t, `
(defn mk [x] {:v x})
(defn proc [s c] (if (> c 0) {:state (+ s c) :output (mk c)} {:state s :output nil}))
(defn kept [x] (let [m {:v x}] (assoc m :w x)))
(defn wide [x] {:a x :b x :c x :d x :e x :f x :g x :h x :i x})`)
	th := NewThread(Limits{})
	g := mustRun(t, th, p).Globals
	th.ReuseResults(true)

	r1 := callMap(t, th, g, "proc", Int(1), Int(2))
	out1, _ := r1.GetKeyword("output")
	if st, _ := r1.GetKeyword("state"); st != Int(3) || out1.String() != "{:v 2}" {
		t.Fatalf("first result %v", r1)
	}
	r2 := callMap(t, th, g, "proc", Int(3), Int(10))
	if r2 != r1 {
		t.Error("the second result map is not the thread's box")
	}
	if r2.String() != "{:state 13 :output {:v 10}}" {
		t.Errorf("second result %v", r2)
	}
	if out1.String() != "{:v 2}" {
		t.Errorf("the first result's :output (a map built by a nested call) changed to %v", out1)
	}
	if r3 := callMap(t, th, g, "proc", Int(5), Int(0)); r3 != r1 || r3.String() != "{:state 5 :output nil}" || r3.Len() != 2 {
		t.Errorf("the else branch's literal: %v (box %v)", r3, r3 == r1)
	}
	if h := Hash(r1); h != Hash(MapOf(Keyword("state"), Int(5), Keyword("output"), Nil)) {
		t.Error("the box's hash is not its current entries'")
	}

	// Not the literal returned: built on the heap.
	k1 := callMap(t, th, g, "kept", Int(1))
	k2 := callMap(t, th, g, "kept", Int(2))
	if k1 == k2 || k1 == r1 || k1.String() != "{:v 1 :w 1}" {
		t.Errorf("a map assoc'ed from a literal was reused: %v %v", k1, k2)
	}
	// More entries than an array-map holds: on the heap.
	w1 := callMap(t, th, g, "wide", Int(1))
	w2 := callMap(t, th, g, "wide", Int(2))
	if w1 == w2 || w1.Len() != 9 || w2.Len() != 9 {
		t.Errorf("a 9-entry literal was reused: %v %v", w1, w2)
	}

	// Off (the default): every result is a map of its own.
	th.ReuseResults(false)
	o1 := callMap(t, th, g, "proc", Int(1), Int(2))
	o2 := callMap(t, th, g, "proc", Int(1), Int(2))
	if o1 == o2 || o1 == r1 {
		t.Error("results are reused with ReuseResults off")
	}
}

// A run that suspends at a host call and is resumed returns its literal in
// the box of the thread that resumed it.
func TestReuseResultsAfterResume(t *testing.T) {
	ctx := context.Background()
	p := mustCompile(t, `(defn proc [x] (let [y (call :get)] {:sum (+ x y)}))`)
	th := NewThread(Limits{})
	g := mustRun(t, th, p).Globals
	th.ReuseResults(true)
	fn, _ := g.Get("proc")
	out, err := th.Call(ctx, g, fn, Int(1))
	if err != nil || out.Call == nil {
		t.Fatalf("Call = %v, %v; want a suspension", out, err)
	}
	k := out.Continuation
	a, err := th.Resume(ctx, k, Int(10))
	if err != nil {
		t.Fatal(err)
	}
	first := a.Value.(*Map)
	if first.String() != "{:sum 11}" {
		t.Fatalf("resumed result %v", first)
	}
	other := NewThread(Limits{}) // a thread without ReuseResults
	b, err := other.Resume(ctx, k, Int(20))
	if err != nil || b.Value.(*Map) == first || b.Value.String() != "{:sum 21}" {
		t.Fatalf("resumed on another thread: %v, %v", b.Value, err)
	}
	c, err := th.Resume(ctx, k, Int(30))
	if err != nil || c.Value.(*Map) != first || first.String() != "{:sum 31}" {
		t.Fatalf("resumed again: %v, %v", c.Value, err)
	}
}

// A warm thread that reuses results calls a processor returning a map
// literal of values it is given without allocating.
func TestReuseResultsAllocates(t *testing.T) {
	ctx := context.Background()
	p := mustCompile(t, `(defn proc [s c] {:state s :output c :action :continue})`)
	th := NewThread(Limits{})
	g := mustRun(t, th, p).Globals
	fn, _ := g.Get("proc")
	state, chunk := Value(NewVector(Int(1))), Value(String("x"))
	call := func() {
		if _, err := th.Call(ctx, g, fn, state, chunk); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(100, call); n != 1 {
		t.Errorf("%v allocations per call without ReuseResults, want 1 (the map)", n)
	}
	th.ReuseResults(true)
	if n := testing.AllocsPerRun(100, call); n != 0 {
		t.Errorf("%v allocations per call with ReuseResults, want 0", n)
	}
}
