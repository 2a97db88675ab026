package rtfs

import (
	"bytes"
	"context"
	"testing"
)

// TestContinuationGlobalsEncodedOnce: the globals section of a continuation
// is encoded once per Globals and copied afterwards; a later continuation
// encodes byte for byte as a fresh encoding would, back-references into the
// globals included (a global collection also on the stack), and decodes
// and resumes to the same result.
func TestContinuationGlobalsEncodedOnce(t *testing.T) {
	p, err := Compile("globals.rtfs", []byte(`
(def cfg {:limits [1 2 3] :name "x"})
(defn proc [n] (let [v (call :echo cfg)] (+ n (count (:limits v)))))`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	th := NewThread(Limits{})
	top, err := th.Run(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	proc, _ := top.Globals.Get("proc")
	park := func(n int64) *Continuation {
		out, err := th.Call(ctx, top.Globals, proc, Int(n))
		if err != nil || out.Continuation == nil {
			t.Fatalf("call: %v, %v", out, err)
		}
		return out.Continuation
	}
	k1, k2 := park(1), park(2)
	if k1.globals != k2.globals {
		t.Fatal("the two continuations do not share their Globals")
	}
	first, err := k1.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if top.Globals.enc.Load() == nil && k1.globals.enc.Load() == nil {
		t.Fatal("the globals section was not kept")
	}
	again, _ := k1.MarshalBinary()
	second, _ := k2.MarshalBinary()
	fresh := &encoder{}
	fresh.globalsSection(k2.globals)
	if !bytes.Equal(first, again) || !bytes.Contains(second, fresh.buf) {
		t.Fatal("a continuation encoded from the kept globals section differs from a fresh encoding")
	}
	for i, data := range [][]byte{first, second} {
		k, err := UnmarshalContinuation(p, data)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := k.call.Args[0].(*Map)
		out, err := NewThread(Limits{}).Resume(ctx, k, v)
		if err != nil || out.Value != Int(int64(i+1)+3) {
			t.Fatalf("continuation %d resumed: %v, %v; want %d", i+1, out.Value, err, i+4)
		}
	}
}

// TestContinuationKeywordsByPosition: the decoder looks a continuation's
// keywords up by position in the program's previous one first; a
// continuation whose keys differ at the same positions still decodes its
// own keys, whatever was decoded before it.
func TestContinuationKeywordsByPosition(t *testing.T) {
	p, err := Compile("kws.rtfs", []byte(`(defn proc [c] (call :echo c))`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	th := NewThread(Limits{})
	top, err := th.Run(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	proc, _ := top.Globals.Get("proc")
	chunks := []*Map{
		MapOf(Keyword("a"), Int(1), Keyword("b"), Int(2)),
		MapOf(Keyword("x"), Int(1), Keyword("b"), Int(2)),
		MapOf(Keyword("x"), Int(1), Keyword("b"), Int(2), Keyword("c"), Keyword("d")),
		MapOf(Keyword("a"), Keyword("a")),
	}
	data := make([][]byte, len(chunks))
	for i, c := range chunks {
		out, err := th.Call(ctx, top.Globals, proc, c)
		if err != nil || out.Continuation == nil {
			t.Fatalf("call: %v, %v", out, err)
		}
		if data[i], err = out.Continuation.MarshalBinary(); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{0, 1, 1, 2, 0, 3, 2, 3, 1} {
		k, err := UnmarshalContinuation(p, data[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := k.call.Args[0]; !Equal(got, chunks[i]) {
			t.Fatalf("continuation %d decoded %v, want %v", i, got, chunks[i])
		}
	}
}
