package mock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gateSink records chunks; while gate is non-nil, each Deliver waits for a
// token from it.
type gateSink struct {
	mu     sync.Mutex
	chunks []transport.Chunk
	gate   chan struct{}
	err    error
}

func (s *gateSink) Deliver(ctx context.Context, c transport.Chunk) error {
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.chunks = append(s.chunks, c)
	return nil
}

func (s *gateSink) got() []transport.Chunk {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]transport.Chunk(nil), s.chunks...)
}

func runAsync(t *testing.T, tr *Transport, id string, sink transport.Sink) (context.CancelFunc, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, transport.Spec{StreamID: id}, "", sink) }()
	return cancel, done
}

func TestSendBeforeRunThenCleanClose(t *testing.T) {
	tr := &Transport{Buffer: 4}
	src := tr.Source("s1") // the producer side comes first
	ctx := context.Background()
	for _, d := range []string{`{"a":1}`, "plain"} {
		if err := src.Send(ctx, transport.Chunk{Data: []byte(d)}); err != nil {
			t.Fatal(err)
		}
	}
	src.Close()
	sink := &gateSink{}
	if err := tr.Run(ctx, transport.Spec{StreamID: "s1"}, "", sink); err != nil {
		t.Fatalf("Run after clean close = %v, want nil", err)
	}
	got := sink.got()
	if len(got) != 2 || string(got[0].Data) != `{"a":1}` || string(got[1].Data) != "plain" {
		t.Fatalf("delivered %q", got)
	}
	if got[0].ID != "0" || got[1].ID != "1" {
		t.Errorf("ids = %q, %q; want 0, 1", got[0].ID, got[1].ID)
	}
	if got[0].ReceivedAt.IsZero() {
		t.Error("ReceivedAt not set")
	}
	if err := src.Send(ctx, transport.Chunk{Data: []byte("x")}); !errors.Is(err, ErrEnded) {
		t.Errorf("Send after close = %v, want ErrEnded", err)
	}
}

func TestRunFirstKeepsExplicitIDs(t *testing.T) {
	tr := &Transport{}
	sink := &gateSink{}
	cancel, done := runAsync(t, tr, "s2", sink)
	defer cancel()
	src := tr.Source("s2") // same Source as the running Run
	if err := src.SendJSON(context.Background(), "chunk", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if err := src.Send(context.Background(), transport.Chunk{Data: []byte("y"), ID: "cursor-9"}); err != nil {
		t.Fatal(err)
	}
	src.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	got := sink.got()
	if len(got) != 2 || got[0].Event != "chunk" || string(got[0].Data) != `{"n":1}` || got[1].ID != "cursor-9" {
		t.Fatalf("delivered %+v", got)
	}
	<-src.Ended()
}

func TestSendBlocksWhileSinkBlocks(t *testing.T) {
	tr := &Transport{}
	sink := &gateSink{gate: make(chan struct{})}
	cancel, done := runAsync(t, tr, "bp", sink)
	defer cancel()
	src := tr.Source("bp")
	ctx := context.Background()
	// Run takes the first chunk and blocks in Deliver.
	if err := src.Send(ctx, transport.Chunk{Data: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	// The second Send cannot complete while Deliver is blocked.
	short, stop := context.WithTimeout(ctx, 30*time.Millisecond)
	defer stop()
	if err := src.Send(short, transport.Chunk{Data: []byte("2")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send while the sink blocks = %v, want deadline exceeded", err)
	}
	sink.gate <- struct{}{} // release chunk 1
	sent := make(chan error, 1)
	go func() { sent <- src.Send(ctx, transport.Chunk{Data: []byte("3")}) }()
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	sink.gate <- struct{}{} // release chunk 3
	src.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := sink.got()
	if len(got) != 2 || string(got[0].Data) != "1" || string(got[1].Data) != "3" {
		t.Fatalf("delivered %q", got)
	}
}

func TestFailEndsWithPermanentError(t *testing.T) {
	tr := &Transport{Buffer: 1}
	src := tr.Source("f")
	if err := src.Send(context.Background(), transport.Chunk{Data: []byte("last")}); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("upstream exploded")
	src.Fail(cause)
	src.Close() // no effect after Fail
	sink := &gateSink{}
	err := tr.Run(context.Background(), transport.Spec{StreamID: "f"}, "", sink)
	if !errors.Is(err, cause) || !transport.IsPermanent(err) {
		t.Fatalf("Run = %v, want a permanent error wrapping the cause", err)
	}
	if len(sink.got()) != 1 {
		t.Errorf("the chunk sent before Fail was not delivered")
	}
}

func TestRunStopsOnContextAndSinkError(t *testing.T) {
	tr := &Transport{}
	cancel, done := runAsync(t, tr, "c", &gateSink{})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel = %v", err)
	}
	refuse := errors.New("stream completed")
	sink := &gateSink{err: refuse}
	cancel2, done2 := runAsync(t, tr, "c", sink)
	defer cancel2()
	src := tr.Source("c")
	if err := src.Send(context.Background(), transport.Chunk{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := <-done2; !errors.Is(err, refuse) {
		t.Fatalf("Run with a refusing sink = %v", err)
	}
	if err := src.Send(context.Background(), transport.Chunk{Data: []byte("y")}); !errors.Is(err, ErrEnded) {
		t.Fatalf("Send after the stream ended = %v, want ErrEnded", err)
	}
	if tr.Source("c") == src {
		t.Error("a new Run must get a fresh Source after the old one ended")
	}
}

// A mock cannot replay; Run records its cursor for the producer, who reads it
// once the Run has started.
func TestCursorForProducer(t *testing.T) {
	var tr Transport
	if tr.Replayable() {
		t.Fatal("a mock claims to replay")
	}
	src := tr.Source("s")
	if c := src.Cursor(); c != "" {
		t.Fatalf("cursor before Run = %q", c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, transport.Spec{StreamID: "s"}, "41", &gateSink{}) }()
	select {
	case <-src.Started():
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not start")
	}
	if c := src.Cursor(); c != "41" {
		t.Fatalf("cursor = %q, want 41", c)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
}

// stuckSink holds the first chunk's Deliver until release is closed, as a
// host's sink may hold a stopping Run for a while, then refuses it.
type stuckSink struct {
	entered, release chan struct{}
}

func (s *stuckSink) Deliver(ctx context.Context, _ transport.Chunk) error {
	close(s.entered)
	<-s.release
	return ctx.Err()
}

// TestSourceOfAStoppingRun: once a Run's context has ended, the Run is
// stopping (here it is still inside its sink's Deliver); a producer that
// asks for the stream's Source then gets a fresh one, so that what it
// sends goes to the next Run, not to the stopping one, which would lose
// it.
func TestSourceOfAStoppingRun(t *testing.T) {
	tr := &Transport{}
	old := tr.Source("s")
	sink := &stuckSink{entered: make(chan struct{}), release: make(chan struct{})}
	cancel, done := runAsync(t, tr, "s", sink)
	if err := old.Send(context.Background(), transport.Chunk{Data: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	<-sink.entered
	if tr.Source("s") != old {
		t.Fatal("a running Run's Source was replaced")
	}
	cancel() // the Run is stopping; it has not returned
	fresh := tr.Source("s")
	if fresh == old {
		t.Fatal("the Source of a stopping Run was handed out again")
	}
	if tr.Source("s") != fresh {
		t.Fatal("two fresh Sources for one stream")
	}
	sent := make(chan error, 1)
	go func() { sent <- fresh.Send(context.Background(), transport.Chunk{Data: []byte("second")}) }()
	close(sink.release)
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the stopped Run = %v", err)
	}
	if tr.Source("s") != fresh {
		t.Fatal("the stopped Run's return dropped the fresh Source")
	}
	next := &gateSink{}
	cancel2, done2 := runAsync(t, tr, "s", next)
	if err := <-sent; err != nil {
		t.Fatalf("Send to the fresh Source = %v", err)
	}
	fresh.Close()
	if err := <-done2; err != nil {
		t.Fatalf("the next Run = %v", err)
	}
	cancel2()
	if got := next.got(); len(got) != 1 || string(got[0].Data) != "second" {
		t.Fatalf("the next Run delivered %q, want the chunk sent after the stop", got)
	}
}
