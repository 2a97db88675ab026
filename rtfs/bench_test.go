package rtfs

import (
	"context"
	"fmt"
	"testing"
)

// benchProcessorSrc is the reference processor of rtfshost's figures
// (docs/performance.md): add the chunk's temp to the readings kept in the
// state, output their count, and complete at 100 readings.
const benchProcessorSrc = `
(defn proc [state chunk meta]
  (let [rs (conj (get state :readings) (get chunk :temp))]
    (if (< (count rs) 100)
      {:state (assoc state :readings rs) :action :continue :output (count rs)}
      {:state (assoc state :readings []) :action :complete :output (count rs)})))
(defn noop [s c m] s)
`

func benchSetup(b testing.TB) (*Thread, *Globals, Value, Value) {
	p, err := Compile("bench.rtfs", []byte(benchProcessorSrc))
	if err != nil {
		b.Fatal(err)
	}
	th := NewThread(Limits{})
	out, err := th.Run(context.Background(), p)
	if err != nil {
		b.Fatal(err)
	}
	proc, _ := out.Globals.Get("proc")
	noop, _ := out.Globals.Get("noop")
	return th, out.Globals, proc, noop
}

func benchChunk() (Value, Value) {
	chunk := MapOf(Keyword("temp"), Float(21.5), Keyword("ts"), Int(12345), Keyword("sensor"), String("a"))
	meta := MapOf(Keyword("stream"), String("s1"))
	return chunk, meta
}

// BenchmarkProcessor threads the processor's :state through successive calls.
func BenchmarkProcessor(b *testing.B) {
	th, g, proc, _ := benchSetup(b)
	chunk, meta := benchChunk()
	var state Value = MapOf(Keyword("readings"), NewVector())
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := th.Call(ctx, g, proc, state, chunk, meta)
		if err != nil {
			b.Fatal(err)
		}
		state, _ = out.Value.(*Map).GetKeyword("state")
	}
}

// BenchmarkProcessorParallel makes BenchmarkProcessor's call on every P at
// once, each goroutine with a thread (reusing its results, as a stream's
// does) and a state of its own: ns/op at -cpu 1 over ns/op at -cpu 2 is how
// well the call scales, the garbage collection it causes included.
func BenchmarkProcessorParallel(b *testing.B) {
	_, g, proc, _ := benchSetup(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		th := NewThread(Limits{})
		th.ReuseResults(true)
		chunk, meta := benchChunk()
		var state Value = MapOf(Keyword("readings"), NewVector())
		ctx := context.Background()
		for pb.Next() {
			out, err := th.Call(ctx, g, proc, state, chunk, meta)
			if err != nil {
				b.Error(err) // not Fatal: this is not the benchmark's goroutine
				return
			}
			state, _ = out.Value.(*Map).GetKeyword("state")
		}
	})
}

// BenchmarkEmptyCall measures the floor cost of calling (fn [s c m] s).
func BenchmarkEmptyCall(b *testing.B) {
	th, g, _, noop := benchSetup(b)
	chunk, meta := benchChunk()
	state := MapOf()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := th.Call(ctx, g, noop, state, chunk, meta); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkContinuationRoundTrip encodes and decodes a processor parked in a
// host call two RTFS calls deep, with 0 and 50 float readings in its state
// (the reference processor's state holds 50 on average).
func BenchmarkContinuationRoundTrip(b *testing.B) {
	p, err := Compile("park.rtfs", []byte(`
(defn enrich [c] (assoc c :geo (call :geo.lookup (:sensor c))))
(defn proc [state chunk meta]
  (let [c (enrich chunk)
        rs (conj (:readings state) (:temp c))]
    {:state (assoc state :readings rs) :action :continue :output c}))`))
	if err != nil {
		b.Fatal(err)
	}
	th := NewThread(Limits{})
	ctx := context.Background()
	top, err := th.Run(ctx, p)
	if err != nil {
		b.Fatal(err)
	}
	proc, _ := top.Globals.Get("proc")
	for _, n := range []int{0, 50} {
		b.Run(fmt.Sprintf("readings=%d", n), func(b *testing.B) {
			readings := NewVector()
			for i := 0; i < n; i++ {
				readings = readings.Conj(Float(20 + float64(i)/10))
			}
			chunk, meta := benchChunk()
			out, err := th.Call(ctx, top.Globals, proc, MapOf(Keyword("readings"), readings), chunk, meta)
			if err != nil || out.Continuation == nil {
				b.Fatal(out, err)
			}
			k := out.Continuation
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				data, err := k.MarshalBinary()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := UnmarshalContinuation(p, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
