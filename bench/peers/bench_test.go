package peers

import (
	"context"
	"testing"
	"time"
)

// BenchmarkBenthosPipeline: b.N chunks through Benthos (batched producer
// func → mapping → batched consumer func keeping the readings), in batches
// of 64. One op is one chunk; it reports chunks/s as the provider's
// pipeline benchmarks do.
func BenchmarkBenthosPipeline(b *testing.B) {
	const batch = 64
	p, err := NewBenthos()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; sent += batch {
		if err := p.Send(ctx, min(batch, b.N-sent)); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if got := p.Processed(); got != b.N {
		b.Fatalf("processed %d, want %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "chunks/s")
	stopCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := p.Stop(stopCtx); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStarlarkPipeline: b.N chunks through the minimal Starlark host
// (channel queue, worker: json.decode, metadata dict, processor call).
func BenchmarkStarlarkPipeline(b *testing.B) {
	s, err := NewStarlark()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	if err := s.RunStarlarkPipeline(b.N); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if s.Processed != b.N {
		b.Fatalf("processed %d, want %d", s.Processed, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "chunks/s")
}

// BenchmarkStarlarkCall: the Starlark processor call alone, with the chunk
// decoded and the metadata built once, threading the state, as the
// provider's BenchmarkProcessorCall calls the RTFS processor.
func BenchmarkStarlarkCall(b *testing.B) {
	s, err := NewStarlark()
	if err != nil {
		b.Fatal(err)
	}
	chunk, err := s.Decode(Chunk)
	if err != nil {
		b.Fatal(err)
	}
	meta := Meta("bench", 0, "x", 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Call(chunk, meta); err != nil {
			b.Fatal(err)
		}
	}
}

// Streams is how many streams the multi-stream benchmarks run at once, as
// provider.BenchmarkPipelinePersist's 100-streams case does.
const Streams = 100

// BenchmarkBenthosStreams: b.N chunks in all through Streams Benthos
// pipelines at once (each built as BenchmarkBenthosPipeline's, fed by a
// goroutine of its own in batches of 64). One op is one chunk; chunks/s is
// over all streams. Run at -cpu 1 and 2, it says how the engine scales.
func BenchmarkBenthosStreams(b *testing.B) {
	const batch = 64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ps := make([]*Benthos, Streams)
	done := make(chan error, Streams)
	for i := range ps {
		p, err := NewBenthos()
		if err != nil {
			b.Fatal(err)
		}
		ps[i] = p
		go func() { done <- p.Run(ctx) }()
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	errs := make(chan error, Streams)
	for i, p := range ps {
		go func(p *Benthos, n int) {
			for sent := 0; sent < n; sent += batch {
				if err := p.Send(ctx, min(batch, n-sent)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(p, share(b.N, i))
	}
	for range ps {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	total := 0
	for _, p := range ps {
		total += p.Processed()
	}
	if total != b.N {
		b.Fatalf("processed %d, want %d", total, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "chunks/s")
	stopCtx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	for _, p := range ps {
		if err := p.Stop(stopCtx); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStarlarkStreams: b.N chunks in all through Streams minimal
// Starlark hosts at once (each BenchmarkStarlarkPipeline's producer and
// worker goroutines, with a processor of its own).
func BenchmarkStarlarkStreams(b *testing.B) {
	ss := make([]*Starlark, Streams)
	for i := range ss {
		s, err := NewStarlark()
		if err != nil {
			b.Fatal(err)
		}
		ss[i] = s
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	errs := make(chan error, Streams)
	for i, s := range ss {
		go func(s *Starlark, n int) { errs <- s.RunStarlarkPipeline(n) }(s, share(b.N, i))
	}
	for range ss {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	total := 0
	for _, s := range ss {
		total += s.Processed
	}
	if total != b.N {
		b.Fatalf("processed %d, want %d", total, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "chunks/s")
}

// share is stream i's part of n chunks spread evenly over Streams.
func share(n, i int) int {
	if i < n%Streams {
		return n/Streams + 1
	}
	return n / Streams
}
