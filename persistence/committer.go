package persistence

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// CommitterOptions configures NewCommitter. The zero value selects the
// defaults given on each field.
type CommitterOptions struct {
	// MaxDelay is how long a batch submitted with Submit may wait for more
	// batches to join its store commit. Zero means 1 ms; a negative value
	// means no wait (a commit starts as soon as the previous one ends).
	// Batches that a caller waits for (Commit, Flush) never wait for it.
	MaxDelay time.Duration

	// MaxOps and MaxBytes bound one store commit: the operations and key plus
	// value bytes of the caller batches grouped into it. A caller batch larger
	// than the bounds is committed alone. Zero means a bound derived from the
	// store (for a BadgerStore, half of what one Badger transaction holds) or
	// 4096 operations and 512 KiB.
	MaxOps   int
	MaxBytes int

	// MaxPendingOps bounds the operations waiting for a commit; Submit and
	// Commit block while it is exceeded. Zero means 8 × MaxOps.
	MaxPendingOps int

	// OnCommit, when set, is called after each store commit the Committer
	// makes, on the Committer's goroutine, with what it committed and how
	// long the store took (for metrics). It must return quickly and must not
	// call the Committer.
	OnCommit func(CommitInfo)
}

// CommitInfo describes one store commit of a Committer, for
// CommitterOptions.OnCommit.
type CommitInfo struct {
	Duration time.Duration // how long Store.Commit took
	Batches  int           // caller batches grouped into the commit
	Ops      int           // operations sent to the store (after merging)
	Err      error         // the store's error; nil when the commit succeeded
}

// CommitterStats counts the work of a Committer since it was created.
type CommitterStats struct {
	Batches  uint64 // caller batches processed (committed or failed)
	Failed   uint64 // caller batches whose commit failed
	Commits  uint64 // store commits attempted
	Written  uint64 // operations sent to the store
	Replaced uint64 // operations skipped because a later one in the same commit replaced them
}

// A Committer groups the batches of many callers into few store commits
// (group commit). Stream workers call it once per processed chunk with that
// chunk's writes; the Committer merges the batches waiting when the store is
// free into one Store.Commit, in submission order, and skips an operation that
// a later operation on the same key in the same commit replaces.
//
// Atomicity per caller batch: the operations of one batch always go to the
// store in one commit, so after a crash either all of them are present or
// none. Skipping replaced operations never breaks this: an operation is
// skipped only when the commit that replaces it is the one it would have gone
// into, and the store applies that commit atomically; the result is the state
// after applying the merged batches one by one.
//
// Store commits run one at a time in submission order, so the batches
// committed at any instant (a crash included) are a prefix of those submitted,
// leaving out failed ones. A failed store commit fails every batch in it, none
// of which is applied, and each caller gets the error (through Commit's result
// or Submit's callback). When the store refuses a commit as too large, its
// batches are retried one by one, so only an oversized batch fails. Batches
// submitted after a failed one may still be committed, so a caller that needs
// its batches applied as a prefix must stop submitting after an error.
//
// A Committer is safe for concurrent use. Close flushes it and stops its
// goroutine; the caller owns the Store and closes it after the Committer.
type Committer struct {
	store Store
	opts  CommitterOptions

	mu       sync.Mutex
	in       pendingSet    // batches waiting for the flusher
	spare    pendingSet    // storage recycled from the last flush
	firstAt  time.Time     // when in became non-empty
	waiters  int           // requests in `in` that a caller waits on
	drained  chan struct{} // closed when the flusher takes `in`
	closed   bool
	waitPool sync.Pool // of chan error with capacity 1

	kick chan struct{} // wakes the flusher; capacity 1
	done chan struct{} // closed when the flusher has exited

	flusher flusher
	stats   struct{ batches, failed, commits, written, replaced atomic.Uint64 }
}

// NewCommitter returns a Committer in front of store and starts its goroutine,
// which runs until Close.
func NewCommitter(store Store, opts CommitterOptions) *Committer {
	opts = opts.withDefaults(store)
	c := &Committer{
		store:   store,
		opts:    opts,
		drained: make(chan struct{}),
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	c.waitPool.New = func() any { return make(chan error, 1) }
	c.flusher.init(c)
	go c.run()
	return c
}

func (o CommitterOptions) withDefaults(store Store) CommitterOptions {
	ops, bytes := 4096, 512<<10
	if ls, ok := store.(Limited); ok {
		ops, bytes = ls.BatchLimits()
	}
	if o.MaxDelay == 0 {
		o.MaxDelay = time.Millisecond
	}
	if o.MaxOps <= 0 {
		o.MaxOps = ops
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = bytes
	}
	if o.MaxPendingOps <= 0 {
		o.MaxPendingOps = 8 * o.MaxOps
	}
	return o
}

// Submit queues b for commit without waiting for it, and calls done with the
// outcome once the commit has finished: nil when b's operations are in the
// store (as durable as the store makes commits), or an error wrapping the
// store's error when none of them is. Submit copies b's operation list, so
// the caller may reuse b at once, but the key and value slices must stay
// unmodified until done is called (with a nil done, until a later Flush or
// Close returns). Callbacks run on the
// Committer's goroutine in submission order; they must return quickly and
// must not call the Committer. Submit blocks while MaxPendingOps operations
// wait; it returns ctx's error if ctx ends first, or an error wrapping
// ErrClosed after Close, and then done is never called. Cost: a copy of b's
// operation list, no allocation in the steady state.
func (c *Committer) Submit(ctx context.Context, b *Batch, done func(error)) error {
	return c.enqueue(ctx, b, done, nil)
}

// SubmitLate queues a put of key whose value is made when its commit
// starts: the flusher calls value once, as it takes the pending batches for
// a store commit, and writes what it returns under key. A caller that adds
// to a record until the last moment (a stream's journal entry, which the
// chunks arriving while earlier commits run all join) submits it once and
// appends meanwhile; what it appends after value was called goes in a
// record of its own. value runs on the Committer's goroutine: it must
// return quickly, must not call the Committer, and its result must stay
// unmodified until done is called. Otherwise SubmitLate is Submit of a
// one-put batch: the put keeps its place in submission order, a later
// operation on key in the same commit replaces it, and done gets the
// outcome. The put's bytes count towards MaxBytes only once it is made.
func (c *Committer) SubmitLate(ctx context.Context, key []byte, value func() []byte, done func(error)) error {
	b := Batch{ops: []Op{{Key: key}}}
	return c.enqueueLate(ctx, &b, value, done, nil)
}

// Commit submits b and waits until its commit has finished, returning nil
// when b's operations are in the store, or the error that made the whole
// batch fail. ctx bounds only the wait for room in the queue; once queued,
// Commit waits for the outcome (a store commit takes microseconds to
// milliseconds). The caller may reuse b and its slices after Commit returns.
func (c *Committer) Commit(ctx context.Context, b *Batch) error {
	ch := c.waitPool.Get().(chan error)
	if err := c.enqueue(ctx, b, nil, ch); err != nil {
		c.waitPool.Put(ch)
		return err
	}
	err := <-ch
	c.waitPool.Put(ch)
	return err
}

// Flush starts a commit of every batch submitted before the call and waits
// until it has finished. The outcome of each batch goes to its own caller;
// Flush returns nil then, ctx's error if ctx ends first, or an error wrapping
// ErrClosed after Close.
func (c *Committer) Flush(ctx context.Context) error {
	ch := c.waitPool.Get().(chan error)
	if err := c.enqueue(ctx, nil, nil, ch); err != nil {
		c.waitPool.Put(ch)
		return err
	}
	select {
	case <-ch:
		c.waitPool.Put(ch)
		return nil
	case <-ctx.Done():
		// The flusher still sends to ch (it has room for that): ch is not
		// reused.
		return fmt.Errorf("persistence: flush: %w", ctx.Err())
	}
}

// Close commits every batch submitted before it, stops the Committer's
// goroutine and returns. Later calls to Submit, Commit and Flush fail with
// ErrClosed; a second Close returns nil. Close does not close the store.
func (c *Committer) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wake()
	<-c.done
	return nil
}

// Stats returns the Committer's counters. It is safe to call at any time.
func (c *Committer) Stats() CommitterStats {
	return CommitterStats{
		Batches:  c.stats.batches.Load(),
		Failed:   c.stats.failed.Load(),
		Commits:  c.stats.commits.Load(),
		Written:  c.stats.written.Load(),
		Replaced: c.stats.replaced.Load(),
	}
}

// wake makes the flusher look at the pending set.
func (c *Committer) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}
