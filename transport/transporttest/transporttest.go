// Package transporttest is the conformance suite every
// transport.StreamTransport runs, as persistence/storetest is for stores:
// chunks arrive in the source's order, a clean end of the source ends Run
// with nil, a cancelled context ends Run (BenchmarkCancel reports how
// promptly), a blocked Sink stops
// the source (backpressure), a failing source ends Run with a
// *transport.Error, and nothing is left behind: no goroutine (goleak) and,
// for transports that start programs, no process.
//
// A transport's test supplies a Harness: sources of three shapes (finite,
// endless, failing) built on whatever the transport reads (a loopback HTTP
// server, a child process built from the test binary, a mock source), and
// the function that reads a chunk's index back. The main types are Harness
// and Source.
//
// The suite asserts behaviour, never speed: each wait is bounded by a hang
// guard (hangGuard) that turns a transport that never returns into a
// failure naming what it waited for.
package transporttest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/transport"
)

// A Source is one stream source a Harness built for a test: the transport,
// the Spec and cursor to run it with, and the source's own view of how far
// it got.
type Source struct {
	Transport transport.StreamTransport
	Spec      transport.Spec
	Cursor    string
	// Produced reports how many chunks the source has written so far
	// (into a socket, a pipe, a channel), whether or not the transport has
	// read them. Required for Endless sources: the backpressure check
	// watches it stop growing.
	Produced func() int
	// Marker, for a source that starts processes, is an environment
	// assignment NAME=VALUE that every process it starts carries (in
	// :env). The suite checks that no process carrying it survives Run.
	Marker string
}

// A Harness builds sources for one transport. Each function may register
// cleanups with t (servers, temporary files); they run before the suite's
// leak checks. t is a *testing.T in Run, a *testing.B in BenchmarkCancel.
type Harness struct {
	// Finite returns a source of n chunks, whose indexes 0..n-1 Index reads
	// back, that then ends cleanly. Chunks Index does not recognise (an MCP
	// result after the progress) may follow.
	Finite func(t testing.TB, n int) Source
	// Endless returns a source that writes chunks as fast as it is allowed
	// to until the transport stops reading.
	Endless func(t testing.TB) Source
	// Failing returns a source that fails for good (a 404, a tool error, a
	// program that exits with status 3).
	Failing func(t testing.TB) Source
	// Index reads a chunk's index; false for a chunk that carries none.
	Index func(c transport.Chunk) (int, bool)
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	t.Run("Order", func(t *testing.T) { testOrder(t, h) })
	t.Run("Cancel", func(t *testing.T) { testCancel(t, h) })
	t.Run("Backpressure", func(t *testing.T) { testBackpressure(t, h) })
	t.Run("Error", func(t *testing.T) { testError(t, h) })
}

// checkNothingLeft registers, before the harness's own cleanups (cleanups
// run last-in first-out), the checks that run after them: no goroutine
// started during the test survives, and no process carrying the marker
// does.
func checkNothingLeft(t *testing.T, src func() Source) Source {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	var marker string
	t.Cleanup(func() {
		if err := goleak.Find(ignore); err != nil {
			t.Errorf("goroutines left behind: %v", err)
		}
		if marker == "" {
			return
		}
		if pids := ProcessesWith(marker, time.Second); len(pids) > 0 {
			t.Errorf("processes left behind carrying %s: %v", marker, pids)
		}
	})
	s := src()
	marker = s.Marker
	return s
}

// ProcessesWith lists the processes (as /proc names them: Linux) whose
// environment holds the entry kv ("NAME=value"), after giving exiting ones
// up to wait to go. Tests mark the programs they start with such an entry
// and check that none is left.
func ProcessesWith(kv string, wait time.Duration) []string {
	var pids []string
	for deadline := time.Now().Add(wait); ; {
		pids = pids[:0]
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			env, err := os.ReadFile(filepath.Join(d, "environ"))
			if err != nil {
				continue
			}
			for _, e := range bytes.Split(env, []byte{0}) {
				if string(e) == kv {
					pids = append(pids, filepath.Base(d))
					break
				}
			}
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recorder is a Sink that records chunks and can block.
type recorder struct {
	mu     sync.Mutex
	chunks []transport.Chunk
	first  chan struct{} // closed at the first chunk
	once   sync.Once
	block  bool // Deliver blocks until its ctx ends
}

func newRecorder(block bool) *recorder {
	return &recorder{first: make(chan struct{}), block: block}
}

func (r *recorder) Deliver(ctx context.Context, c transport.Chunk) error {
	c.Data = bytes.Clone(c.Data)
	r.mu.Lock()
	r.chunks = append(r.chunks, c)
	r.mu.Unlock()
	r.once.Do(func() { close(r.first) })
	if r.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (r *recorder) got() []transport.Chunk {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]transport.Chunk(nil), r.chunks...)
}

// runAsync runs s in a goroutine and returns its result channel.
func runAsync(ctx context.Context, s Source, sink transport.Sink) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.Transport.Run(ctx, s.Spec, s.Cursor, sink) }()
	return done
}

// testOrder: n chunks arrive in order, each once, with distinct IDs, and
// the clean end of the source ends Run with nil.
func testOrder(t *testing.T, h Harness) {
	const n = 50
	s := checkNothingLeft(t, func() Source { return h.Finite(t, n) })
	rec := newRecorder(false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Transport.Run(ctx, s.Spec, s.Cursor, rec); err != nil {
		t.Fatalf("Run over a finite source = %v, want nil at its end", err)
	}
	next := 0
	ids := map[string]bool{}
	for _, c := range rec.got() {
		if c.ID != "" {
			if ids[c.ID] {
				t.Errorf("chunk ID %q delivered twice", c.ID)
			}
			ids[c.ID] = true
		}
		i, ok := h.Index(c)
		if !ok {
			continue
		}
		if i != next {
			t.Fatalf("chunk %d has index %d (data %q): out of order or lost", next, i, c.Data)
		}
		next++
	}
	if next != n {
		t.Fatalf("got %d indexed chunks, want %d", next, n)
	}
}

// hangGuard bounds each wait of the suite: a transport that has not done
// what the suite waits for by then never will (a hang), and the test
// fails saying what it waited for. It is no measure of speed.
const hangGuard = 10 * time.Second

// testCancel: Run returns ctx's error after the cancel, with the source
// still writing.
func testCancel(t *testing.T, h Harness) {
	s := checkNothingLeft(t, func() Source { return h.Endless(t) })
	rec := newRecorder(false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(ctx, s, rec)
	CancelEnds(t, cancel, rec.first, func() error { return <-done })
}

// CancelEnds waits for ready (the transport reached the point to cancel
// at: a first chunk, a backoff, a connection, a read, a delivery), calls
// cancel, and checks that Run, whose result wait returns, then ends with
// context.Canceled, within hangGuard: at the cancel, not at the end of what
// it was waiting for, when that is longer (an hour-long backoff, a server
// that never answers).
func CancelEnds(t *testing.T, cancel context.CancelFunc, ready <-chan struct{}, wait func() error) {
	t.Helper()
	if err := cancelAt(t, nil, cancel, ready, wait); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel() = %v, want context.Canceled", err)
	}
}

// cancelAt is CancelEnds' wait: it returns Run's result, after failing tb
// when Run ends before ready or does not return within hangGuard of the
// cancel. A non-nil b times the cancel and the return alone.
func cancelAt(tb testing.TB, b *testing.B, cancel context.CancelFunc, ready <-chan struct{}, wait func() error) error {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case <-ready:
	case err := <-done:
		tb.Fatalf("Run ended before the point to cancel at: %v", err)
	case <-time.After(hangGuard):
		cancel()
		<-done
		tb.Fatalf("the transport did not reach the point to cancel at within %v", hangGuard)
	}
	if b != nil {
		b.StartTimer()
		defer b.StopTimer()
	}
	cancel()
	select {
	case err := <-done:
		return err
	case <-time.After(hangGuard):
		tb.Fatalf("Run did not return within %v of cancel()", hangGuard)
	}
	return nil
}

// BenchmarkCancel reports how long Run takes to return once its context
// is cancelled, its Endless source still writing: the time per op is from
// the cancel to Run's return (the source's start and first chunk are not
// timed). A provider waits that long to stop a stream, and to start the
// next run of a stream it stopped. A transport's test calls it with its
// Harness.
func BenchmarkCancel(b *testing.B, h Harness) {
	b.StopTimer()
	for range b.N {
		s := h.Endless(b)
		rec := newRecorder(false)
		ctx, cancel := context.WithCancel(context.Background())
		done := runAsync(ctx, s, rec)
		_ = cancelAt(b, b, cancel, rec.first, func() error { return <-done })
	}
}

// testBackpressure: while the Sink blocks, the source stops: its produced
// count settles, bounded by the buffers between it and the transport.
func testBackpressure(t *testing.T, h Harness) {
	s := checkNothingLeft(t, func() Source { return h.Endless(t) })
	if s.Produced == nil {
		t.Fatal("the harness's Endless source has no Produced count")
	}
	rec := newRecorder(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, s, rec)
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-rec.first:
	case err := <-done:
		t.Fatalf("Run ended before the first chunk: %v", err)
	case <-time.After(hangGuard):
		t.Fatalf("no chunk within %v", hangGuard)
	}
	// The source fills the buffers on its way (a socket, a pipe), then
	// must stop.
	n, settled := Settle(func() int64 { return int64(s.Produced()) })
	if !settled {
		t.Fatalf("the source kept writing while the sink was blocked: %d chunks and counting", s.Produced())
	}
	if got := len(rec.got()); got != 1 {
		t.Errorf("the blocked sink got %d chunks, want 1", got)
	}
	t.Logf("the source stopped after %d chunks", n)
}

// Settle waits until count has held still for 300 ms (a source that
// backpressure holds back, once the buffers on its way are full) and
// returns it; settled is false when it still moved after the hang guard.
// It polls every 50 ms.
func Settle(count func() int64) (n int64, settled bool) {
	last, same := count(), 0
	for deadline := time.Now().Add(hangGuard); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if cur := count(); cur != last {
			last, same = cur, 0
		} else if same++; same == 6 {
			return last, true
		}
	}
	return last, false
}

// testError: a failing source ends Run with an error that errors.As
// reaches as a *transport.Error.
func testError(t *testing.T, h Harness) {
	s := checkNothingLeft(t, func() Source { return h.Failing(t) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := s.Transport.Run(ctx, s.Spec, s.Cursor, newRecorder(false))
	var te *transport.Error
	if !errors.As(err, &te) {
		t.Fatalf("Run over a failing source = %v (%T), want a *transport.Error", err, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Run failed only at the test's deadline: %v", err)
	}
	if te.Error() == "" || fmt.Sprint(err) == "" {
		t.Fatal("the error says nothing")
	}
}

// A CountFile lets a source in another process (a program a process
// transport starts) report how many chunks it produced: the program calls
// Counter with the file's path, and the test reads Produced. The count is
// 8 bytes, little endian, rewritten in place.
type CountFile struct {
	// Path is the file's path, to hand to the program.
	Path string
}

// NewCountFile returns a CountFile in t's temporary directory.
func NewCountFile(t testing.TB) CountFile {
	return CountFile{Path: filepath.Join(t.TempDir(), "produced")}
}

// Produced returns the count the program wrote last (0 before its first).
func (c CountFile) Produced() int {
	b, err := os.ReadFile(c.Path)
	if err != nil || len(b) < 8 {
		return 0
	}
	return int(binary.LittleEndian.Uint64(b))
}

// Counter is the program's side: it returns a function that adds one to
// the count in the file at path, creating it.
func Counter(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("count file: %w", err)
	}
	var n uint64
	var b [8]byte
	return func() {
		n++
		binary.LittleEndian.PutUint64(b[:], n)
		_, _ = f.WriteAt(b[:], 0)
	}, nil
}
