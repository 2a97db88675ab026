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
