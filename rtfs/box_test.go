package rtfs

import (
	"context"
	"math"
	"runtime"
	"testing"
)

// TestBoxFloats: floats boxed from a shared backing array behave exactly as
// ordinarily boxed ones (type switches, ==, Equal, Hash, printing, Go map
// keys) and stay valid after the backing slice is dropped and collected.
func TestBoxFloats(t *testing.T) {
	src := []float64{0, math.Copysign(0, -1), 1.5, -2.25e300, math.Inf(1), math.Inf(-1), math.NaN(), 20.1}
	out := func() []Value {
		fs := make([]Float, len(src))
		for i, f := range src {
			fs[i] = Float(f)
		}
		vs := make([]Value, len(fs))
		boxFloats(vs, fs)
		return vs
	}()
	runtime.GC() // only out references the backing array now
	runtime.GC()
	seen := map[Value]int{}
	for i, v := range out {
		want := Value(Float(src[i]))
		f, ok := v.(Float)
		if !ok || math.Float64bits(float64(f)) != math.Float64bits(src[i]) {
			t.Fatalf("out[%d] = %#v, want Float %v", i, v, src[i])
		}
		if math.IsNaN(src[i]) {
			if v == want || Equal(v, want) {
				t.Errorf("NaN compares equal")
			}
		} else if v != want || !Equal(v, want) {
			t.Errorf("out[%d] = %v is not == / Equal to %v", i, v, want)
		}
		if Hash(v) != Hash(want) || v.String() != want.String() || v.Kind() != want.Kind() {
			t.Errorf("out[%d]: hash, printing or kind differ from %v", i, want)
		}
		seen[v] = i
	}
	if seen[Float(1.5)] != 2 || seen[Float(20.1)] != 7 {
		t.Errorf("boxed floats as Go map keys: %v", seen)
	}
}

// TestContinuationFloatVectorSurvivesGC: a vector of floats parked in a
// continuation (encoded in the packed float form, decoded with boxFloats)
// keeps its values once the encoded bytes are gone.
func TestContinuationFloatVectorSurvivesGC(t *testing.T) {
	p, err := Compile("park.rtfs", []byte(`(defn f [v] (call :test.park) v)`))
	if err != nil {
		t.Fatal(err)
	}
	th := NewThread(Limits{})
	ctx := context.Background()
	top, err := th.Run(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := top.Globals.Get("f")
	v := NewVector()
	for i := 0; i < 100; i++ {
		v = v.Conj(Float(float64(i) + 0.5))
	}
	out, err := th.Call(ctx, top.Globals, f, v)
	if err != nil || out.Continuation == nil {
		t.Fatalf("call: %+v %v", out, err)
	}
	b, err := out.Continuation.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	k, err := UnmarshalContinuation(p, b)
	if err != nil {
		t.Fatal(err)
	}
	clear(b)
	runtime.GC()
	runtime.GC()
	res, err := NewThread(Limits{}).Resume(ctx, k, Nil)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := res.Value.(*Vector)
	if !ok || got == v || !Equal(got, v) {
		t.Fatalf("resumed with %v, want a decoded copy equal to %v", res.Value, v)
	}
	for i := 0; i < 100; i++ {
		if got.Index(i) != Float(float64(i)+0.5) {
			t.Fatalf("element %d = %v", i, got.Index(i))
		}
	}
}
