package observe_test

import (
	"context"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/host/observe"
	"github.com/rtfshost/rtfshost/provider"
)

// BenchmarkChunk measures what the observer adds to one chunk: its
// reception and its processor call (metrics only, no tracer).
func BenchmarkChunk(b *testing.B) {
	o, err := observe.New(observe.Options{})
	if err != nil {
		b.Fatal(err)
	}
	so := o.StreamStarted(context.Background(), provider.StreamDesc{ID: "s", Endpoint: "e.v1", Transport: "sse", Processor: "p"})
	t0 := time.Now()
	var seq int64
	for b.Loop() {
		so.ChunkReceived(128)
		so.ProcessorCalled(seq, t0, time.Microsecond, nil)
		seq++
	}
}
