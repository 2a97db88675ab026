package mock

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// A Send whose context has ended, or whose stream has ended, fails every
// time, even when the buffer has room, and its chunk is never delivered.
func TestSendFailsDeterministically(t *testing.T) {
	tr := &Transport{Buffer: 8}
	src := tr.Source("d")
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 50; i++ {
		if err := src.Send(done, transport.Chunk{Data: []byte("lost")}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Send %d with an ended context = %v, want context.Canceled", i, err)
		}
	}
	refuse := errors.New("refused")
	ctx := context.Background()
	if err := src.Send(ctx, transport.Chunk{Data: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	sink := &gateSink{err: refuse}
	if err := tr.Run(ctx, transport.Spec{StreamID: "d"}, "", sink); !errors.Is(err, refuse) {
		t.Fatalf("Run = %v, want the sink's error", err)
	}
	for i := 0; i < 50; i++ { // the buffer has room again, but the stream ended
		if err := src.Send(ctx, transport.Chunk{Data: []byte("late")}); !errors.Is(err, ErrEnded) {
			t.Fatalf("Send %d after the stream ended = %v, want ErrEnded", i, err)
		}
	}
	if n := len(src.ch); n != 0 {
		t.Fatalf("%d chunks queued after failed Sends", n)
	}
}

// A clock's stamps lie between time.Now readings taken around them, carry the
// same elapsed time on the wall and monotonic readings, and come from a fresh
// time.Now once clockResync has passed since the last one.
func TestClockStamps(t *testing.T) {
	var c clock
	prev := time.Time{}
	for i := 0; i < 1000; i++ {
		before := time.Now()
		got := c.now()
		after := time.Now()
		if got.Before(before) || got.After(after) || got.Before(prev) {
			t.Fatalf("stamp %d = %v, not within [%v, %v] or before the previous %v", i, got, before, after, prev)
		}
		if wall, mono := got.Round(0).Sub(c.base.Round(0)), got.Sub(c.base); wall != mono {
			t.Fatalf("stamp %d: %v after its base on the wall clock, %v on the monotonic clock", i, wall, mono)
		}
		if d := got.Round(0).Sub(after.Round(0)); d > time.Second || d < -time.Second {
			t.Fatalf("stamp %d is %v off the wall clock", i, d)
		}
		prev = got
	}
	c.base = time.Now().Add(-2 * clockResync)
	stale := c.base
	before := time.Now()
	got := c.now()
	if c.base.Equal(stale) || !got.Equal(c.base) || got.Before(before) {
		t.Fatalf("after %v, stamp %v base %v: want a fresh time.Now reading", 2*clockResync, got, c.base)
	}
}

// Run stamps chunks without a ReceivedAt with the time it took them, and
// keeps a ReceivedAt the producer set.
func TestReceivedAtStamped(t *testing.T) {
	tr := &Transport{Buffer: 4}
	src := tr.Source("r")
	ctx := context.Background()
	set := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []transport.Chunk{{Data: []byte("a")}, {Data: []byte("b"), ReceivedAt: set}, {Data: []byte("c")}} {
		if err := src.Send(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	src.Close()
	sink := &gateSink{}
	before := time.Now()
	if err := tr.Run(ctx, transport.Spec{StreamID: "r"}, "", sink); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	got := sink.got()
	if len(got) != 3 || !got[1].ReceivedAt.Equal(set) {
		t.Fatalf("delivered %+v", got)
	}
	for _, i := range []int{0, 2} {
		if r := got[i].ReceivedAt; r.Before(before) || r.After(after) {
			t.Errorf("chunk %d received at %v, not within the Run [%v, %v]", i, r, before, after)
		}
	}
}

type nopSink struct{}

func (nopSink) Deliver(context.Context, transport.Chunk) error { return nil }

// BenchmarkSendRun: one chunk from Send through Run to a sink that does
// nothing, unbuffered (Send hands each chunk to Run) and buffered.
func BenchmarkSendRun(b *testing.B) {
	for _, buf := range []int{0, 256} {
		b.Run("buffer="+strconv.Itoa(buf), func(b *testing.B) {
			tr := &Transport{Buffer: buf}
			src := tr.Source("bench")
			done := make(chan error, 1)
			go func() { done <- tr.Run(context.Background(), transport.Spec{StreamID: "bench"}, "", nopSink{}) }()
			ctx := context.Background()
			c := transport.Chunk{Data: []byte(`{"n":1}`), ID: "x"}
			b.ReportAllocs()
			for b.Loop() {
				if err := src.Send(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
			src.Close()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
