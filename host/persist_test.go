package host_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// durableHost is a host on a store with a mock transport.
func durableHost(t *testing.T, store persistence.Store) (*host.Host, *mock.Transport) {
	t.Helper()
	mk := &mock.Transport{}
	h, err := host.New(host.Options{
		Store:   store,
		Streams: provider.Options{LookupEnv: env(nil), Transports: transport.NewCatalog(mock.Kind(mk))},
		Stdout:  &syncBuffer{},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, mk
}

const parkedProgram = `
(defn proc [s c m] {:state (+ s (:n c)) :output (+ s (:n c))})
(call :mcp.stream.start {:endpoint "sums" :transport :mock :stream-id "sums" :processor proc :initial-state 0})
(let [total (call :mcp.stream.await {:stream-id "sums"})]
  {:total total :doubled (* 2 total)})`

func countKeys(t testing.TB, store persistence.Store, prefix string) int {
	t.Helper()
	n := 0
	if err := store.Scan(context.Background(), []byte(prefix), func(_, _ []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func send(t *testing.T, mk *mock.Transport, id string, data ...string) {
	t.Helper()
	for _, d := range data {
		if err := mk.Source(id).Send(context.Background(), transport.Chunk{Data: []byte(d)}); err != nil {
			t.Fatalf("send %s: %v", d, err)
		}
	}
}

// A program parked on :mcp.stream.await survives a restart: the first host
// closes while it waits; a new host on the same store recovers the stream
// and the program, which resumes with the stream's result when it ends.
func TestParkedAwaitResumesAfterRestart(t *testing.T) {
	store := persistence.NewMemStore()
	h1, mk1 := durableHost(t, store)
	prog, err := rtfs.Compile("sums.rtfs", []byte(parkedProgram))
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { _, err := h1.Run(context.Background(), prog); runErr <- err }()
	waitUntil(t, "the program to park", func() bool { return countKeys(t, store, "host/parked/") == 1 })
	send(t, mk1, "sums", `{"n":1}`, `{"n":2}`)
	waitUntil(t, "2 chunks", func() bool {
		v, _ := h1.Provider().Inspect("sums", provider.InspectOptions{})
		return get(v, "stats", "processed-chunks") == rtfs.Int(2)
	})
	if err := h1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; !errors.Is(err, host.ErrParkInterrupted) {
		t.Fatalf("Run after Close = %v, want ErrParkInterrupted", err)
	}

	h2, mk2 := durableHost(t, store)
	if err := h2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	send(t, mk2, "sums", `{"n":3}`)
	mk2.Source("sums").Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h2.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := h2.ResumedPrograms(ctx)
	if err != nil || len(res) != 1 {
		t.Fatalf("ResumedPrograms = %v, %v", res, err)
	}
	r := res[0]
	if r.Err != "" || !strings.Contains(r.Value, ":total 6") || !strings.Contains(r.Value, ":doubled 12") || r.StreamID != "sums" || r.Program != "sums.rtfs" {
		t.Fatalf("resumed program = %+v", r)
	}
	if get(r.Result, "total") != rtfs.Int(6) || get(r.Result, "doubled") != rtfs.Int(12) {
		t.Fatalf("resumed program's Result = %v, want the value printed as %s", r.Result, r.Value)
	}
	if n := countKeys(t, store, "host/parked/"); n != 0 {
		t.Fatalf("%d parked records left", n)
	}
	// The stream was the run's first host call: its origin needs none
	// of the journal, which goes when the run ends.
	if n := countKeys(t, store, "journal/"); n != 0 {
		t.Fatalf("%d journal keys left", n)
	}
}

// A run that ends normally leaves no parked record behind.
func TestParkedRecordRemovedAfterRun(t *testing.T) {
	store := persistence.NewMemStore()
	h, mk := durableHost(t, store)
	prog, err := rtfs.Compile("sums.rtfs", []byte(`(println "starting")`+parkedProgram))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan rtfs.Value, 1)
	go func() { v, _ := h.Run(context.Background(), prog); done <- v }()
	waitUntil(t, "the program to park", func() bool { return countKeys(t, store, "host/parked/") == 1 })
	send(t, mk, "sums", `{"n":4}`)
	mk.Source("sums").Close()
	if v := <-done; get(v, "doubled") != rtfs.Int(8) {
		t.Fatalf("value = %v", v)
	}
	if n := countKeys(t, store, "host/parked/"); n != 0 {
		t.Fatalf("%d parked records left", n)
	}
	// The run's journal stays while the stream it started refers to it
	// (its origin: a later compiler replays the run to the stream's
	// start), and goes with the stream: two segments (println's answer,
	// stored with the start; the start's, with the park) and the stream's
	// reference.
	if n := countKeys(t, store, "journal/"); n != 3 {
		t.Fatalf("%d journal keys, want the two segments and the stream's reference", n)
	}
	if _, err := h.Provider().Remove(context.Background(), "sums", false); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, store, "journal/"); n != 0 {
		t.Fatalf("%d journal keys left after the stream was removed", n)
	}
}

// A second host on the same data directory fails at once with a clear
// message; the first keeps working, and after it closes the directory opens
// again and its streams recover.
func TestSecondHostOnSameDirectory(t *testing.T) {
	dir := t.TempDir()
	opts := persistence.Options{GCInterval: -1, MinFreeBytes: -1}
	s1, err := persistence.OpenBadger(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	h1, mk := durableHost(t, s1)
	if _, err := h1.Run(context.Background(), mustCompile(t, `(defn p [s c m] {:state (inc s)})
(call :mcp.stream.start {:endpoint "e" :transport :mock :stream-id "s" :processor p :initial-state 0})`)); err != nil {
		t.Fatal(err)
	}
	_, err = persistence.OpenBadger(dir, opts)
	var le *persistence.LockedError
	abs, _ := filepath.Abs(dir)
	if !errors.As(err, &le) || !strings.Contains(err.Error(), abs) || !strings.Contains(err.Error(), "another rtfshost") {
		t.Fatalf("second open = %v, want a LockedError naming %s", err, abs)
	}
	send(t, mk, "s", `{}`)
	waitUntil(t, "the chunk", func() bool {
		v, _ := h1.Provider().Inspect("s", provider.InspectOptions{})
		return get(v, "current-state") == rtfs.Int(1)
	})
	must(t, h1.Close())
	must(t, s1.Close())

	s2, err := persistence.OpenBadger(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	h2, _ := durableHost(t, s2)
	must(t, h2.Recover(context.Background()))
	v, err := h2.Provider().Inspect("s", provider.InspectOptions{})
	if err != nil || get(v, "current-state") != rtfs.Int(1) {
		t.Fatalf("recovered: %v, %v", v, err)
	}
	must(t, h2.Close())
}

// A parked record of an unknown format version, or a damaged one, is
// reported with its key; Recover still recovers the rest.
func TestBadParkedRecordsReported(t *testing.T) {
	store := persistence.NewMemStore()
	var b persistence.Batch
	b.Put([]byte("host/parked/future"), persistence.EncodeRecord(16, 9, []byte("x")))
	b.Put([]byte("host/parked/broken"), []byte("not a record"))
	must(t, store.Commit(context.Background(), &b))
	h, _ := durableHost(t, store)
	err := h.Recover(context.Background())
	var uv *persistence.UnknownVersionError
	var cr *persistence.CorruptRecordError
	if !errors.As(err, &uv) || !errors.As(err, &cr) || !strings.Contains(err.Error(), `"host/parked/future"`) || !strings.Contains(err.Error(), `"host/parked/broken"`) {
		t.Fatalf("Recover = %v", err)
	}
	noStore, _ := durableHost(t, nil)
	if err := noStore.Recover(context.Background()); err == nil || !strings.Contains(err.Error(), "no store") {
		t.Fatalf("Recover without a store = %v", err)
	}
}

func mustCompile(t *testing.T, src string) *rtfs.Program {
	t.Helper()
	p, err := rtfs.Compile("test.rtfs", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
