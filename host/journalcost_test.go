package host_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// The cost of a durable run per stream it starts and awaits must not grow
// with how many it started before: a run's journal is appended to, never
// copied whole into a stream's origin record or a parked program's record
// (docs/durability.md, "The journal of a program run"). The bounds below
// are the documented ones (docs/performance.md):
const (
	// maxJournalBytesPerStream bounds what the journal adds to the store
	// per stream a run starts and awaits (its origin record, the segments
	// of the two answers, the references, the parked program's head).
	maxJournalBytesPerStream = 1024
	// journalGrowthSlack is how much more journal bytes per stream a run
	// of 4× the streams may write: a few bytes of longer ids and varints.
	journalGrowthSlack = 16
	// maxAllocGrowth bounds the heap allocated per started stream of a run
	// of 4× the streams, over the smaller run's (a copy of the journal per
	// start made it 4× at least).
	maxAllocGrowth = 1.5
	// maxLiveHeapPerStream bounds the live heap a started stream adds,
	// its worker and transport goroutines included, while the program
	// that started it is parked.
	maxLiveHeapPerStream = 64 << 10
)

// manyStreamsProgram is bench/manystreams/manystreams.rtfs with its numbers
// set and its streams on the mock transport, which the test feeds.
func manyStreamsProgram(t testing.TB, streams, chunks int) *rtfs.Program {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "bench", "manystreams", "manystreams.rtfs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ re, to string }{
		{`\(def streams \d+\)`, fmt.Sprintf("(def streams %d)", streams)},
		{`\(def chunks \d+\)`, fmt.Sprintf("(def chunks %d)", chunks)},
		{`:endpoint "counter.v1"`, `:endpoint "counter.v1" :transport :mock`},
	} {
		re := regexp.MustCompile(r.re)
		if !re.Match(src) {
			t.Fatalf("manystreams.rtfs has no %s", r.re)
		}
		src = re.ReplaceAll(src, []byte(r.to))
	}
	prog, err := rtfs.Compile("manystreams.rtfs", src)
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

// A writeCounter is a store that counts the bytes of the puts committed
// to it (keys and values), by key prefix, and the parks.
type writeCounter struct {
	persistence.Store
	mu     sync.Mutex
	bytes  map[string]int
	parks  int
	parked chan struct{} // a value per park
}

// journalPrefixes are the keys a run's journal writes.
var journalPrefixes = []string{"origin/", "journal/", "host/journal/"}

func (w *writeCounter) Commit(ctx context.Context, b *persistence.Batch) error {
	if err := w.Store.Commit(ctx, b); err != nil {
		return err
	}
	w.mu.Lock()
	parks := 0
	for _, op := range b.Ops() {
		if op.Delete {
			continue
		}
		n := len(op.Key) + len(op.Value)
		w.bytes[""] += n
		for _, p := range journalPrefixes {
			if bytes.HasPrefix(op.Key, []byte(p)) {
				w.bytes[p] += n
			}
		}
		if bytes.HasPrefix(op.Key, []byte("host/parked/")) {
			parks++
		}
	}
	w.parks += parks
	w.mu.Unlock()
	for ; parks > 0; parks-- {
		w.parked <- struct{}{}
	}
	return nil
}

func (w *writeCounter) journalBytes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, p := range journalPrefixes {
		n += w.bytes[p]
	}
	return n
}

// A manyStreamsCost is what one run of the program cost, per stream.
type manyStreamsCost struct {
	journalBytes float64 // journal bytes written per stream (start and park)
	storeBytes   float64 // all bytes written per stream
	allocs       float64 // heap bytes allocated per start
	liveHeap     float64 // live heap per started stream, the program parked
	parks        int
}

// runManyStreams runs the program with streams streams on a durable host
// over a MemStore: once every stream has started and the program parks on
// the first await, it reads the live heap; then it feeds each stream in turn
// once the program has parked on it.
func runManyStreams(t testing.TB, streams, chunks int, removeAll bool) manyStreamsCost {
	t.Helper()
	store := &writeCounter{Store: persistence.NewMemStore(), bytes: map[string]int{}, parked: make(chan struct{}, streams+1)}
	mk := &mock.Transport{}
	h, err := host.New(host.Options{Store: store, Stdout: &syncBuffer{},
		Streams: provider.Options{LookupEnv: env(nil), Transports: transport.NewCatalog(mock.Kind(mk))}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	prog := manyStreamsProgram(t, streams, chunks)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	heapBefore, allocsBefore := heapFigures()
	type result struct {
		v   rtfs.Value
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := h.Run(ctx, prog)
		done <- result{v, err}
	}()
	var cost manyStreamsCost
	for i := 0; i < streams; i++ {
		select {
		case <-store.parked:
		case r := <-done:
			t.Fatalf("the program ended before it parked on stream %d: %v, %v", i, r.v, r.err)
		case <-ctx.Done():
			t.Fatalf("the program did not park on stream %d", i)
		}
		if i == 0 {
			heap, allocs := heapFigures()
			cost.liveHeap = float64(heap-heapBefore) / float64(streams)
			cost.allocs = float64(allocs-allocsBefore) / float64(streams)
		}
		src := mk.Source("count-" + strconv.Itoa(i))
		for n := 1; n <= chunks; n++ {
			if err := src.Send(ctx, transport.Chunk{Data: []byte(`{"chunk":{"n":` + strconv.Itoa(n) + `}}`), ID: strconv.Itoa(n)}); err != nil {
				t.Fatal(err)
			}
		}
		src.Close()
	}
	r := <-done
	if r.err != nil || get(r.v, "exact") != rtfs.True {
		t.Fatalf("the program ended with %v, %v", r.v, r.err)
	}
	cost.journalBytes = float64(store.journalBytes()) / float64(streams)
	store.mu.Lock()
	cost.storeBytes = float64(store.bytes[""]) / float64(streams)
	cost.parks = store.parks
	store.mu.Unlock()
	if removeAll {
		// The journal stays while a stream refers to it, and goes with
		// the last (its segments deleted in several batches).
		for i := 0; i < streams; i++ {
			if n := countKeys(t, store, "journal/"); n == 0 {
				t.Fatalf("no journal left with %d of %d streams removed", i, streams)
			}
			if _, err := h.Provider().Remove(ctx, "count-"+strconv.Itoa(i), false); err != nil {
				t.Fatal(err)
			}
		}
		if n := countKeys(t, store, "journal/"); n != 0 {
			t.Fatalf("%d journal keys left after every stream was removed", n)
		}
	}
	return cost
}

// heapFigures returns the live heap after two collections and the bytes
// allocated so far.
func heapFigures() (live, allocs uint64) {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// TestJournalCostPerStream: a run that starts 4× the streams writes the
// same journal bytes per stream, allocates about the same per start, and
// each live stream holds a bounded heap (the bounds above).
func TestJournalCostPerStream(t *testing.T) {
	const chunks = 2
	small := runManyStreams(t, 50, chunks, false)
	large := runManyStreams(t, 200, chunks, true)
	t.Logf("per stream, 50 / 200 streams: journal %.0f / %.0f B, store %.0f / %.0f B, allocated per start %.0f / %.0f B, live heap %.0f / %.0f B",
		small.journalBytes, large.journalBytes, small.storeBytes, large.storeBytes, small.allocs, large.allocs, small.liveHeap, large.liveHeap)
	if small.parks != 50 || large.parks != 200 {
		t.Fatalf("%d and %d parks, want one per stream", small.parks, large.parks)
	}
	if large.journalBytes > maxJournalBytesPerStream {
		t.Errorf("the journal writes %.0f bytes per stream, more than %d", large.journalBytes, maxJournalBytesPerStream)
	}
	if large.journalBytes > small.journalBytes+journalGrowthSlack {
		t.Errorf("the journal writes %.0f bytes per stream with 200 streams, %.0f with 50: it grows with the streams started before", large.journalBytes, small.journalBytes)
	}
	if large.allocs > maxAllocGrowth*small.allocs {
		t.Errorf("a start allocates %.0f bytes with 200 streams, %.0f with 50: it grows with the streams started before", large.allocs, small.allocs)
	}
	if large.liveHeap > maxLiveHeapPerStream {
		t.Errorf("a live stream holds %.0f bytes of heap, more than %d", large.liveHeap, maxLiveHeapPerStream)
	}
}

// BenchmarkManyStreams runs the program with 1,000 streams of 4 chunks per
// op and reports the cost per stream: journal-B/stream and store-B/stream
// written, alloc-B/start and live-B/stream (TestJournalCostPerStream holds
// them to the bounds above).
func BenchmarkManyStreams(b *testing.B) {
	var c manyStreamsCost
	for i := 0; i < b.N; i++ {
		c = runManyStreams(b, 1000, 4, false)
	}
	b.ReportMetric(c.journalBytes, "journal-B/stream")
	b.ReportMetric(c.storeBytes, "store-B/stream")
	b.ReportMetric(c.allocs, "alloc-B/start")
	b.ReportMetric(c.liveHeap, "live-B/stream")
}
