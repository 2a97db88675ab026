package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/persistence/storetest"
)

// recordingStore forwards to a MemStore and records every commit it gets as
// "k=v" and "-k" strings. When gate is set, each commit first waits for a
// receive on it. When maxOps is set, larger commits fail with
// ErrBatchTooLarge.
type recordingStore struct {
	*persistence.MemStore
	gate   chan struct{}
	maxOps int
	fenced string // a commit with this key fails with ErrFenced

	mu      sync.Mutex
	commits [][]string
}

func newRecordingStore() *recordingStore {
	return &recordingStore{MemStore: persistence.NewMemStore()}
}

func (r *recordingStore) Commit(ctx context.Context, b *persistence.Batch) error {
	if r.gate != nil {
		<-r.gate
	}
	if r.maxOps > 0 && b.Len() > r.maxOps {
		return fmt.Errorf("recording store: %d operations: %w", b.Len(), persistence.ErrBatchTooLarge)
	}
	var ops []string
	for _, op := range b.Ops() {
		if r.fenced != "" && string(op.Key) == r.fenced {
			return fmt.Errorf("recording store: %s: %w", op.Key, persistence.ErrFenced)
		}
		if op.Delete {
			ops = append(ops, "-"+string(op.Key))
		} else {
			ops = append(ops, string(op.Key)+"="+string(op.Value))
		}
	}
	r.mu.Lock()
	r.commits = append(r.commits, ops)
	r.mu.Unlock()
	return r.MemStore.Commit(ctx, b)
}

func (r *recordingStore) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.commits {
		out = append(out, strings.Join(c, " "))
	}
	return out
}

func batchOf(kv ...string) *persistence.Batch {
	var b persistence.Batch
	for i := 0; i < len(kv); i++ {
		if strings.HasPrefix(kv[i], "-") {
			b.Delete([]byte(kv[i][1:]))
			continue
		}
		b.Put([]byte(kv[i]), []byte(kv[i+1]))
		i++
	}
	return &b
}

// outcomes collects Submit callbacks in order.
type outcomes struct {
	mu   sync.Mutex
	errs []error
}

func (o *outcomes) cb() func(error) {
	return func(err error) {
		o.mu.Lock()
		o.errs = append(o.errs, err)
		o.mu.Unlock()
	}
}

func (o *outcomes) get() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.errs)
}

// held is a CommitterOptions whose batches wait for Flush.
var held = persistence.CommitterOptions{MaxDelay: time.Hour}

func submit(t *testing.T, c *persistence.Committer, b *persistence.Batch, done func(error)) {
	t.Helper()
	if err := c.Submit(context.Background(), b, done); err != nil {
		t.Fatalf("Submit: %v", err)
	}
}

func flush(t *testing.T, c *persistence.Committer) {
	t.Helper()
	if err := c.Flush(context.Background()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

func TestCommitterCommitIsVisible(t *testing.T) {
	store := persistence.NewMemStore()
	c := persistence.NewCommitter(store, persistence.CommitterOptions{})
	defer c.Close()
	if err := c.Commit(context.Background(), batchOf("s/state", "1", "s/cursor", "c1")); err != nil {
		t.Fatal(err)
	}
	if got := get(t, store, "s/state") + get(t, store, "s/cursor"); got != "1c1" {
		t.Fatalf("after Commit: %q", got)
	}
}

func TestCommitterSkipsReplacedWrites(t *testing.T) {
	store := newRecordingStore()
	c := persistence.NewCommitter(store, held)
	defer c.Close()
	var out outcomes
	submit(t, c, batchOf("a/state", "1", "a/cursor", "1", "a/j/1", "x"), out.cb())
	submit(t, c, batchOf("b/state", "1"), out.cb())
	submit(t, c, batchOf("a/state", "2", "a/cursor", "2", "-a/j/1"), out.cb())
	flush(t, c)
	want := []string{"a/state=2 a/cursor=2 -a/j/1 b/state=1"}
	if got := store.recorded(); !slices.Equal(got, want) {
		t.Fatalf("store commits = %q, want %q", got, want)
	}
	if errs := out.get(); len(errs) != 3 || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("callbacks = %v, want three nils", errs)
	}
	st := c.Stats()
	if st.Batches != 3 || st.Commits != 1 || st.Written != 4 || st.Replaced != 3 || st.Failed != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// A late put's value is made when its commit starts: what the caller added
// before that is in it, in submission order among the other batches, and a
// later delete of its key in the same commit replaces it.
func TestCommitterSubmitLate(t *testing.T) {
	store := newRecordingStore()
	c := persistence.NewCommitter(store, held)
	defer c.Close()
	var (
		out   outcomes
		mu    sync.Mutex
		value = []byte("a")
		calls int
	)
	late := func() []byte {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return value
	}
	submit(t, c, batchOf("s/before", "1"), out.cb())
	if err := c.SubmitLate(context.Background(), []byte("s/j/1"), late, out.cb()); err != nil {
		t.Fatal(err)
	}
	submit(t, c, batchOf("s/after", "2"), out.cb())
	mu.Lock()
	value = append(value, "bc"...) // added while the put waits
	mu.Unlock()
	flush(t, c)
	if err := c.SubmitLate(context.Background(), []byte("s/j/2"), late, out.cb()); err != nil {
		t.Fatal(err)
	}
	submit(t, c, batchOf("-s/j/2"), out.cb())
	flush(t, c)
	want := []string{"s/before=1 s/j/1=abc s/after=2", "-s/j/2"}
	if got := store.recorded(); !slices.Equal(got, want) {
		t.Fatalf("store commits = %q, want %q", got, want)
	}
	if errs := out.get(); len(errs) != 5 || slices.ContainsFunc(errs, func(err error) bool { return err != nil }) {
		t.Fatalf("callbacks = %v, want five nils", errs)
	}
	if calls != 2 {
		t.Fatalf("value made %d times, want once per late put (2)", calls)
	}
}

// TestCommitterNeverSplitsBatch bounds commits to 3 operations: batches of
// two go one per commit, a batch of five goes alone and whole, and a write
// is never skipped in favour of a write in another commit.
func TestCommitterNeverSplitsBatch(t *testing.T) {
	store := newRecordingStore()
	opts := held
	opts.MaxOps = 3
	c := persistence.NewCommitter(store, opts)
	defer c.Close()
	submit(t, c, batchOf("s", "1", "c", "1"), nil)
	submit(t, c, batchOf("s", "2", "c", "2"), nil)
	submit(t, c, batchOf("k1", "v", "k2", "v", "k3", "v", "k4", "v", "k5", "v"), nil)
	submit(t, c, batchOf("x", "1"), nil)
	submit(t, c, batchOf("y", "1"), nil)
	submit(t, c, batchOf("x", "2"), nil)
	flush(t, c)
	// The flusher may take the pending set at any moment while the batches
	// are submitted (the five-operation batch wakes it), so which batches
	// share a commit varies. What may not vary: each commit is a run of
	// whole batches in submission order, with a key written twice in it
	// stored once with its last value, and a run of several batches holds
	// at most MaxOps operations.
	batches := [][]string{{"s=1", "c=1"}, {"s=2", "c=2"}, {"k1=v", "k2=v", "k3=v", "k4=v", "k5=v"}, {"x=1"}, {"y=1"}, {"x=2"}}
	got := store.recorded()
	if !splitsIntoRuns(got, batches, opts.MaxOps) {
		t.Fatalf("store commits = %q: not runs of whole batches %q in order", got, batches)
	}
}

// splitsIntoRuns reports whether commits are batches cut into consecutive
// runs, each run one commit: its operations in the order of their keys'
// first writes, each key with its last value; a run of several batches
// holds at most maxOps operations before merging.
func splitsIntoRuns(commits []string, batches [][]string, maxOps int) bool {
	if len(commits) == 0 {
		return len(batches) == 0
	}
	for n := 1; n <= len(batches); n++ {
		run := batches[:n]
		ops := 0
		for _, b := range run {
			ops += len(b)
		}
		if n > 1 && ops > maxOps {
			break
		}
		if mergedRun(run) == commits[0] && splitsIntoRuns(commits[1:], batches[n:], maxOps) {
			return true
		}
	}
	return false
}

// mergedRun renders a run of batches as the recording store records the
// one commit they make.
func mergedRun(run [][]string) string {
	var keys []string
	val := map[string]string{}
	for _, b := range run {
		for _, op := range b {
			k, v, _ := strings.Cut(op, "=")
			if _, ok := val[k]; !ok {
				keys = append(keys, k)
			}
			val[k] = v
		}
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + val[k]
	}
	return strings.Join(out, " ")
}

func TestCommitterStoreErrorReachesEveryCaller(t *testing.T) {
	store := storetest.NewFaultStore(persistence.NewMemStore())
	c := persistence.NewCommitter(store, held)
	defer c.Close()
	store.FailNext(1, nil)
	var out outcomes
	for s := range 3 {
		submit(t, c, batchOf(fmt.Sprintf("s%d/state", s), "1"), out.cb())
	}
	flush(t, c)
	errs := out.get()
	if len(errs) != 3 {
		t.Fatalf("got %d callbacks, want 3", len(errs))
	}
	for i, err := range errs {
		if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "group commit of 3 batches") {
			t.Fatalf("callback %d: err = %v, want the wrapped disk-full error", i, err)
		}
	}
	if _, err := store.Get(context.Background(), []byte("s0/state")); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a failed commit left data: %v", err)
	}
	// The next commit succeeds, and Commit reports a failure to its caller.
	if err := c.Commit(context.Background(), batchOf("s0/state", "2")); err != nil {
		t.Fatal(err)
	}
	store.FailAfter(0, errors.New("store on fire"))
	if err := c.Commit(context.Background(), batchOf("s0/state", "3")); err == nil || !strings.Contains(err.Error(), "store on fire") {
		t.Fatalf("Commit on a failing store: err = %v", err)
	}
	if got := get(t, store, "s0/state"); got != "2" {
		t.Fatalf("s0/state = %q, want 2", got)
	}
	if st := c.Stats(); st.Failed != 4 || st.Batches != 5 {
		t.Fatalf("stats = %+v, want 4 failed of 5", st)
	}
}

// TestCommitterTooLargeFallsBackToSingleBatches has a store that refuses
// commits of more than 4 operations: the group is retried batch by batch and
// only the oversized batch fails.
func TestCommitterTooLargeFallsBackToSingleBatches(t *testing.T) {
	store := newRecordingStore()
	store.maxOps = 4
	c := persistence.NewCommitter(store, held)
	defer c.Close()
	var out outcomes
	submit(t, c, batchOf("a", "1", "b", "1", "c", "1"), out.cb())
	submit(t, c, batchOf("big1", "x", "big2", "x", "big3", "x", "big4", "x", "big5", "x"), out.cb())
	submit(t, c, batchOf("d", "1"), out.cb())
	flush(t, c)
	errs := out.get()
	if len(errs) != 3 || errs[0] != nil || !errors.Is(errs[1], persistence.ErrBatchTooLarge) || errs[2] != nil {
		t.Fatalf("callbacks = %v, want nil, ErrBatchTooLarge, nil", errs)
	}
	if got, want := store.recorded(), []string{"a=1 b=1 c=1", "d=1"}; !slices.Equal(got, want) {
		t.Fatalf("store commits = %q, want %q", got, want)
	}
}

// TestCommitterFencedFallsBackToSingleBatches: a store shared by hosts
// refuses a group commit that writes a record this host no longer owns;
// the group is retried batch by batch and only the fenced batch fails.
func TestCommitterFencedFallsBackToSingleBatches(t *testing.T) {
	store := newRecordingStore()
	store.fenced = "theirs"
	c := persistence.NewCommitter(store, held)
	defer c.Close()
	var out outcomes
	submit(t, c, batchOf("a", "1"), out.cb())
	submit(t, c, batchOf("theirs", "x", "b", "1"), out.cb())
	submit(t, c, batchOf("c", "1"), out.cb())
	flush(t, c)
	errs := out.get()
	if len(errs) != 3 || errs[0] != nil || !errors.Is(errs[1], persistence.ErrFenced) || errs[2] != nil {
		t.Fatalf("callbacks = %v, want nil, ErrFenced, nil", errs)
	}
	if got, want := store.recorded(), []string{"a=1", "c=1"}; !slices.Equal(got, want) {
		t.Fatalf("store commits = %q, want %q", got, want)
	}
}

func TestCommitterFlushesAfterMaxDelay(t *testing.T) {
	c := persistence.NewCommitter(persistence.NewMemStore(), persistence.CommitterOptions{MaxDelay: 2 * time.Millisecond})
	defer c.Close()
	done := make(chan error, 1)
	submit(t, c, batchOf("k", "v"), func(err error) { done <- err })
	if err := <-done; err != nil { // no Flush: only the delay can trigger it
		t.Fatal(err)
	}
}

func TestCommitterClose(t *testing.T) {
	store := persistence.NewMemStore()
	c := persistence.NewCommitter(store, held)
	var out outcomes
	submit(t, c, batchOf("k", "v"), out.cb())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if errs := out.get(); len(errs) != 1 || errs[0] != nil {
		t.Fatalf("Close did not flush: callbacks %v", errs)
	}
	if got := get(t, store, "k"); got != "v" {
		t.Fatalf("k = %q after Close", got)
	}
	if err := c.Submit(context.Background(), batchOf("k", "w"), nil); !errors.Is(err, persistence.ErrClosed) {
		t.Fatalf("Submit after Close: %v", err)
	}
	if err := c.Commit(context.Background(), batchOf("k", "w")); !errors.Is(err, persistence.ErrClosed) {
		t.Fatalf("Commit after Close: %v", err)
	}
	if err := c.Flush(context.Background()); !errors.Is(err, persistence.ErrClosed) {
		t.Fatalf("Flush after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestCommitterRejectsInvalidBatch(t *testing.T) {
	c := persistence.NewCommitter(persistence.NewMemStore(), held)
	defer c.Close()
	called := false
	err := c.Submit(context.Background(), batchOf("ok", "1", "", "2"), func(error) { called = true })
	if err == nil || !strings.Contains(err.Error(), "empty key") {
		t.Fatalf("Submit with an empty key: err = %v", err)
	}
	flush(t, c)
	if called {
		t.Fatal("the callback of a refused batch was called")
	}
}

// TestCommitterBackpressure blocks the store, fills the queue, and checks
// that a further Submit waits and gives up with its context.
func TestCommitterBackpressure(t *testing.T) {
	store := newRecordingStore()
	store.gate = make(chan struct{})
	c := persistence.NewCommitter(store, persistence.CommitterOptions{MaxDelay: -1, MaxPendingOps: 2})
	defer c.Close()
	submit(t, c, batchOf("a", "1"), nil) // taken by the flusher, which blocks on the gate
	waitFor(t, func() bool { return c.Stats().Commits == 1 })
	submit(t, c, batchOf("b", "1", "c", "1"), nil) // fills the queue
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() {
		result <- c.Submit(ctx, batchOf("d", "1"), func(error) { t.Error("callback of a batch never queued") })
	}()
	select {
	case err := <-result:
		t.Fatalf("Submit on a full queue returned %v before its context ended", err)
	case <-time.After(20 * time.Millisecond):
	}
	cancel()
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Fatalf("Submit on a full queue with a cancelled context: %v", err)
	}
	close(store.gate)
	flush(t, c)
	if got, want := store.recorded(), []string{"a=1", "b=1 c=1"}; !slices.Equal(got, want) {
		t.Fatalf("store commits = %q, want %q", got, want)
	}
}

// TestCommitterConcurrentStreams runs 50 streams that each commit 100
// progress batches (state and cursor) through one Committer, mixing Submit
// and Commit, while readers check that state and cursor always match.
func TestCommitterConcurrentStreams(t *testing.T) {
	for _, name := range []string{"mem", "badger"} {
		t.Run(name, func(t *testing.T) {
			var store persistence.Store = persistence.NewMemStore()
			if name == "badger" {
				store = openBadger(t, t.TempDir(), persistence.Options{})
			}
			c := persistence.NewCommitter(store, persistence.CommitterOptions{})
			runStreams(t, store, c, 50, 100)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			for s := range 50 {
				if got := get(t, store, fmt.Sprintf("s%02d/state", s)); got != "100" {
					t.Fatalf("stream %d state = %q, want 100", s, got)
				}
			}
			if st := c.Stats(); st.Batches != 5000 || st.Failed != 0 {
				t.Fatalf("stats = %+v", st)
			}
		})
	}
}

func runStreams(t *testing.T, store persistence.Store, c *persistence.Committer, streams, rounds int) {
	var wg sync.WaitGroup
	errs := make(chan error, streams+1)
	stop := make(chan struct{})
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- runStream(c, s, rounds)
		}()
	}
	var rg sync.WaitGroup
	rg.Add(1)
	go func() {
		defer rg.Done()
		errs <- checkProgress(store, stop)
	}()
	wg.Wait()
	close(stop)
	rg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func runStream(c *persistence.Committer, s, rounds int) error {
	var b persistence.Batch
	for n := 1; n <= rounds; n++ {
		b.Reset()
		v := []byte(fmt.Sprint(n))
		b.Put(fmt.Appendf(nil, "s%02d/state", s), v)
		b.Put(fmt.Appendf(nil, "s%02d/cursor", s), v)
		var err error
		if n%5 == 0 {
			err = c.Commit(context.Background(), &b)
		} else {
			err = c.Submit(context.Background(), &b, nil)
		}
		if err != nil {
			return fmt.Errorf("stream %d round %d: %w", s, n, err)
		}
	}
	return c.Flush(context.Background())
}

// checkProgress scans all streams until stop and fails on a state whose
// cursor differs: that would be a split batch.
func checkProgress(store persistence.Store, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		var state string
		err := store.Scan(context.Background(), []byte("s"), func(k, v []byte) error {
			switch {
			case strings.HasSuffix(string(k), "/cursor"):
				state = string(v)
			case string(v) != state: // "/state" sorts after "/cursor"
				return fmt.Errorf("%s = %s but its cursor is %s", k, v, state)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 5000 {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("condition not reached in 5 s")
}
