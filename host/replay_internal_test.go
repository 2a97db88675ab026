package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// replayHost is a host on store with a mock transport; extra capabilities
// are registered on it (the first process's, which a replay must not need).
func replayHost(t *testing.T, store persistence.Store, extra ...capabilities.Capability) (*Host, *mock.Transport) {
	t.Helper()
	mk := &mock.Transport{}
	h, err := New(Options{Store: store, Stdout: io.Discard,
		Streams: provider.Options{LookupEnv: func(string) (string, bool) { return "", false }, Transports: transport.NewCatalog(mock.Kind(mk))}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range extra {
		if err := h.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { h.Close() })
	return h, mk
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// parkSums runs src on a first host until it parks on its await with two
// chunks of stream "sums" processed, and closes that host. It returns the
// parked program's run id.
func parkSums(t *testing.T, store persistence.Store, src string) string {
	t.Helper()
	h, mk := replayHost(t, store, capabilities.Capability{ID: "test.answer", Handler: func(context.Context, *capabilities.Call) (capabilities.Answer, error) {
		return capabilities.Now(rtfs.Int(100)), nil
	}})
	prog, err := rtfs.Compile("sums.rtfs", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { _, err := h.Run(context.Background(), prog); runErr <- err }()
	var run string
	waitFor(t, "the program to park", func() bool {
		_ = store.Scan(context.Background(), []byte(parkedPrefix), func(k, _ []byte) error {
			run = strings.TrimPrefix(string(k), parkedPrefix)
			return nil
		})
		return run != ""
	})
	for _, d := range []string{`{"n":1}`, `{"n":2}`} {
		if err := mk.Source("sums").Send(context.Background(), transport.Chunk{Data: []byte(d)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "2 chunks", func() bool {
		in, err := h.Provider().Info("sums", provider.InspectOptions{})
		return err == nil && in.Stats.ProcessedChunks == 2
	})
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; !errors.Is(err, ErrParkInterrupted) {
		t.Fatalf("Run = %v", err)
	}
	return run
}

// asIfOtherCompiler rewrites parked program run's record as a build with
// another compiler would have stored it: under a hash this build does not
// give its source, so its continuation is not this build's to decode.
func asIfOtherCompiler(t *testing.T, store persistence.Store, run string) {
	t.Helper()
	ctx := context.Background()
	key := []byte(parkedPrefix + run)
	data, err := store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var rec parkedRecord
	if err := rec.decode(key, data); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("another compiler " + rec.hash))
	rec.hash = hex.EncodeToString(sum[:])
	var b persistence.Batch
	b.Put(key, rec.encode())
	if err := store.Commit(ctx, &b); err != nil {
		t.Fatal(err)
	}
}

// finishSums recovers on a new host, ends stream "sums" with a third chunk
// and returns the resumed program's outcome.
func finishSums(t *testing.T, store persistence.Store) (ResumedProgram, error) {
	t.Helper()
	h, mk := replayHost(t, store)
	if err := h.Recover(context.Background()); err != nil {
		return ResumedProgram{}, err
	}
	if err := mk.Source("sums").Send(context.Background(), transport.Chunk{Data: []byte(`{"n":3}`)}); err != nil {
		t.Fatal(err)
	}
	mk.Source("sums").Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := h.ResumedPrograms(ctx)
	if err != nil || len(res) != 1 {
		t.Fatalf("ResumedPrograms = %v, %v", res, err)
	}
	return res[0], nil
}

// recordedSrc makes host calls whose answers its value depends on before
// it starts the stream it awaits.
const recordedSrc = `
(println "summing")
(def base (call :test.answer))
(defn proc [s c m] {:state (+ s (:n c)) :output (+ s (:n c))})
(def h (call :mcp.stream.start {:endpoint "sums" :transport :mock :stream-id "sums" :processor proc :initial-state 0}))
(def total (call :mcp.stream.await {:stream-id (:stream-id h)}))
{:total total :plus-base (+ base total)}`

// A program parked under another compiler is replayed from its source,
// its host calls answered from its journal (the capability that answered
// is not registered on the new host), and finishes with its value.
func TestParkedReplayedUnderOtherCompiler(t *testing.T) {
	store := persistence.NewMemStore()
	run := parkSums(t, store, recordedSrc)
	asIfOtherCompiler(t, store, run)
	r, err := finishSums(t, store)
	if err != nil {
		t.Fatal(err)
	}
	if r.Err != "" || r.Value != "{:total 6 :plus-base 106}" {
		t.Fatalf("resumed program = %+v", r)
	}
	for _, prefix := range []string{parkedPrefix, journalPrefix} {
		_ = store.Scan(context.Background(), []byte(prefix), func(k, _ []byte) error {
			t.Errorf("%q left after the program finished", k)
			return nil
		})
	}
}

// A program parked by a release that kept no journal comes back under
// another compiler when what it called before its await is known (println,
// the start of the stream it awaits); one that called anything else stays
// parked, with an error that says which call.
func TestParkedLegacyReplay(t *testing.T) {
	legacySrc := strings.Replace(recordedSrc, "(call :test.answer)", "100", 1)
	store := persistence.NewMemStore()
	run := parkSums(t, store, legacySrc)
	asIfOtherCompiler(t, store, run)
	var b persistence.Batch
	b.Delete([]byte(journalPrefix + run))
	if err := store.Commit(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	r, err := finishSums(t, store)
	if err != nil || r.Err != "" || r.Value != "{:total 6 :plus-base 106}" {
		t.Fatalf("resumed program = %+v, %v", r, err)
	}

	store = persistence.NewMemStore()
	run = parkSums(t, store, recordedSrc)
	asIfOtherCompiler(t, store, run)
	b = persistence.Batch{}
	b.Delete([]byte(journalPrefix + run))
	if err := store.Commit(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	h, _ := replayHost(t, store)
	err = h.Recover(context.Background())
	if !errors.Is(err, provider.ErrUnknownAnswer) || !strings.Contains(err.Error(), "host call 2, :test.answer at sums.rtfs:3:11") {
		t.Fatalf("Recover = %v", err)
	}
	if n, _ := store.Get(context.Background(), []byte(parkedPrefix+run)); n == nil {
		t.Fatal("the parked record was removed")
	}
}

// A replay that goes another way than the journal (here: a journal whose
// await had other arguments) stops with a non-determinism error; the
// program stays parked, untouched.
func TestParkedReplayNondeterminism(t *testing.T) {
	store := persistence.NewMemStore()
	run := parkSums(t, store, recordedSrc)
	asIfOtherCompiler(t, store, run)
	ctx := context.Background()
	key := []byte(journalPrefix + run)
	j, err := store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	j[len(j)-2] ^= 0xff // the pending await's digest ends just before the empty broken reason
	var b persistence.Batch
	b.Put(key, j)
	if err := store.Commit(ctx, &b); err != nil {
		t.Fatal(err)
	}
	before, _ := store.Get(ctx, []byte(parkedPrefix+run))
	h, _ := replayHost(t, store)
	err = h.Recover(ctx)
	var ne *capabilities.NondeterminismError
	if !errors.As(err, &ne) || !strings.Contains(err.Error(), "host call 4, :mcp.stream.await at sums.rtfs:6:12, has other arguments") {
		t.Fatalf("Recover = %v", err)
	}
	after, _ := store.Get(ctx, []byte(parkedPrefix+run))
	if string(after) != string(before) {
		t.Fatal("the parked record changed")
	}
}

// A program parked on the await of a stream that cannot be recovered stays
// parked (its stream may be mended, by rtfshost upgrade), instead of ending
// with the stream's absence as its error.
func TestParkedOnUnrecoverableStreamStaysParked(t *testing.T) {
	store := persistence.NewMemStore()
	run := parkSums(t, store, recordedSrc)
	ctx := context.Background()
	var b persistence.Batch
	if err := store.Scan(ctx, []byte("prog/"), func(k, _ []byte) error {
		b.Delete(append([]byte(nil), k...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := store.Commit(ctx, &b); err != nil {
		t.Fatal(err)
	}
	h, _ := replayHost(t, store)
	if err := h.Recover(ctx); err == nil || !strings.Contains(err.Error(), `recover stream "sums"`) {
		t.Fatalf("Recover = %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = h.Wait(wctx) // the stream is unrecoverable: Wait reports it
	if !h.programs.idleNow() {
		t.Fatal("the resumed program still runs")
	}
	if v, err := store.Get(ctx, []byte(parkedPrefix+run)); err != nil || v == nil {
		t.Fatalf("the parked record is gone: %v", err)
	}
	if res, _ := h.ResumedPrograms(ctx); len(res) != 0 {
		t.Fatalf("the program ended: %+v", res)
	}
}
