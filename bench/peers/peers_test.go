package peers

import (
	"context"
	"testing"
	"time"
)

// TestBenthosCounts runs 1,000 chunks through the Benthos pipeline and
// checks that the consumer counted every one with the anchor's window.
func TestBenthosCounts(t *testing.T) {
	b, err := NewBenthos()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	for i := 0; i < 10; i++ {
		if err := b.Send(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.Processed(); got != 1000 {
		t.Fatalf("processed %d, want 1000", got)
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestStarlarkWindow checks the Starlark processor's outputs: 1..100, then
// 1 again.
func TestStarlarkWindow(t *testing.T) {
	s, err := NewStarlark()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RunStarlarkPipeline(101); err != nil {
		t.Fatal(err)
	}
	if s.Processed != 101 || s.LastCount != 1 {
		t.Fatalf("processed %d, last output %d; want 101 and 1", s.Processed, s.LastCount)
	}
}
