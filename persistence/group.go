package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"time"
)

// This file holds the Committer's machinery: the pending set that callers
// fill, the flusher goroutine that empties it, and the merge that skips
// replaced operations.

// A request is one caller batch (or, with no operations, a Flush marker) in a
// pendingSet: its operations are ops[start:end] of the set.
type request struct {
	start, end int
	bytes      int
	done       func(error)
	wait       chan error
	late       func() []byte // SubmitLate's: makes the value of the one put, ops[start]
}

// A pendingSet is the batches submitted since the flusher last took the set.
type pendingSet struct {
	ops   []Op
	reqs  []request
	bytes int
}

func (p *pendingSet) add(b *Batch, done func(error), wait chan error) {
	r := request{start: len(p.ops), done: done, wait: wait}
	if b != nil {
		p.ops = append(p.ops, b.ops...)
		r.bytes = b.size()
	}
	r.end = len(p.ops)
	p.bytes += r.bytes
	p.reqs = append(p.reqs, r)
}

// reset empties p, dropping its references to callers' slices.
func (p *pendingSet) reset() {
	clear(p.ops)
	clear(p.reqs)
	p.ops, p.reqs, p.bytes = p.ops[:0], p.reqs[:0], 0
}

func (c *Committer) enqueue(ctx context.Context, b *Batch, done func(error), wait chan error) error {
	return c.enqueueLate(ctx, b, nil, done, wait)
}

// enqueueLate adds a request to the pending set; late, when set, makes the
// value of b's one put when the flusher takes it.
func (c *Committer) enqueueLate(ctx context.Context, b *Batch, late func() []byte, done func(error), wait chan error) error {
	if b != nil {
		if err := b.validate(); err != nil {
			return fmt.Errorf("persistence: submit: %w", err)
		}
	}
	if err := c.lockForRoom(ctx); err != nil {
		return err
	}
	first := len(c.in.reqs) == 0
	if first && c.opts.MaxDelay > 0 {
		c.firstAt = time.Now()
	}
	c.in.add(b, done, wait)
	c.in.reqs[len(c.in.reqs)-1].late = late
	if wait != nil {
		c.waiters++
	}
	kick := first || wait != nil || c.full()
	c.mu.Unlock()
	if kick {
		c.wake()
	}
	return nil
}

// lockForRoom locks c.mu once the pending set has room, or fails.
func (c *Committer) lockForRoom(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("persistence: submit: %w", err)
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return fmt.Errorf("persistence: submit: committer: %w", ErrClosed)
		}
		if len(c.in.ops) < c.opts.MaxPendingOps || len(c.in.reqs) == 0 {
			return nil
		}
		drained := c.drained
		c.mu.Unlock()
		select {
		case <-drained:
		case <-ctx.Done():
			return fmt.Errorf("persistence: submit: waiting for room in the commit queue: %w", ctx.Err())
		}
	}
}

// full reports whether the pending set fills a store commit. c.mu is held.
func (c *Committer) full() bool {
	return len(c.in.ops) >= c.opts.MaxOps || c.in.bytes >= c.opts.MaxBytes
}

// run is the flusher goroutine.
func (c *Committer) run() {
	defer close(c.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		set, wait, stop := c.take()
		switch {
		case stop:
			return
		case set != nil:
			c.flusher.flush(set)
			c.recycle(set)
		case wait <= 0:
			<-c.kick
		default:
			timer.Reset(wait)
			select {
			case <-c.kick:
				timer.Stop()
			case <-timer.C:
			}
		}
	}
}

// take returns the pending set when it is ready to commit; otherwise how long
// to wait for it to become ready (0: until woken), or stop once the Committer
// is closed and empty.
func (c *Committer) take() (set *pendingSet, wait time.Duration, stop bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.in.reqs) == 0 {
		return nil, 0, c.closed
	}
	if !c.closed && c.waiters == 0 && !c.full() && c.opts.MaxDelay > 0 {
		if left := c.opts.MaxDelay - time.Since(c.firstAt); left > 0 {
			return nil, left, false
		}
	}
	taken := c.in
	c.in, c.spare = c.spare, pendingSet{}
	c.waiters = 0
	close(c.drained)
	c.drained = make(chan struct{})
	return &taken, 0, false
}

// recycle keeps a flushed set's storage for a later take.
func (c *Committer) recycle(set *pendingSet) {
	set.reset()
	c.mu.Lock()
	c.spare = *set
	c.mu.Unlock()
}

// flusher commits pending sets. It is used by the flusher goroutine only.
type flusher struct {
	c     *Committer
	merge merger
}

func (f *flusher) init(c *Committer) {
	f.c = c
	f.merge = newMerger()
}

// flush commits set's requests in order, as few store commits as the
// committer's bounds allow, never splitting a request.
func (f *flusher) flush(set *pendingSet) {
	for i := range set.reqs {
		if r := &set.reqs[i]; r.late != nil {
			v := r.late()
			set.ops[r.start].Value = v
			r.bytes += len(v)
		}
	}
	reqs := set.reqs
	for len(reqs) > 0 {
		n := f.chunk(reqs)
		f.commitChunk(set.ops, reqs[:n])
		reqs = reqs[n:]
	}
}

// chunk returns how many of reqs (at least one) fit in one store commit.
func (f *flusher) chunk(reqs []request) int {
	ops, size := 0, 0
	for i, r := range reqs {
		n := r.end - r.start
		if i > 0 && (ops+n > f.c.opts.MaxOps || size+r.bytes > f.c.opts.MaxBytes) {
			return i
		}
		ops += n
		size += r.bytes
	}
	return len(reqs)
}

// commitChunk commits reqs in one store commit and delivers the outcome. When
// the store finds the commit too large, or fenced (it writes records of a
// stream another host took over), it retries each request alone, so one
// oversized or fenced batch fails alone.
func (f *flusher) commitChunk(ops []Op, reqs []request) {
	err := f.commit(ops[reqs[0].start:reqs[len(reqs)-1].end], reqs)
	if err != nil && len(reqs) > 1 && (errors.Is(err, ErrBatchTooLarge) || errors.Is(err, ErrFenced)) {
		for i := range reqs {
			f.commitChunk(ops, reqs[i:i+1])
		}
		return
	}
	f.deliver(reqs, err)
}

func (f *flusher) commit(ops []Op, reqs []request) error {
	b, replaced := f.merge.merge(ops)
	if b.Len() == 0 {
		return nil
	}
	f.c.stats.commits.Add(1)
	f.c.stats.written.Add(uint64(b.Len()))
	f.c.stats.replaced.Add(uint64(replaced))
	start := time.Now()
	err := f.c.store.Commit(context.Background(), b)
	if on := f.c.opts.OnCommit; on != nil {
		on(CommitInfo{Duration: time.Since(start), Batches: countBatches(reqs), Ops: b.Len(), Err: err})
	}
	if err != nil {
		return fmt.Errorf("persistence: group commit of %d batches (%d operations): %w", countBatches(reqs), b.Len(), err)
	}
	return nil
}

// countBatches counts the caller batches in reqs, leaving out Flush markers.
func countBatches(reqs []request) int {
	n := 0
	for _, r := range reqs {
		if r.end > r.start {
			n++
		}
	}
	return n
}

func (f *flusher) deliver(reqs []request, err error) {
	for _, r := range reqs {
		if r.end > r.start {
			f.c.stats.batches.Add(1)
			if err != nil {
				f.c.stats.failed.Add(1)
			}
		}
		if r.done != nil {
			r.done(err)
		}
		if r.wait != nil {
			r.wait <- err
		}
	}
}

// A merger turns a run of operations into one batch with at most one
// operation per key (the last), in first-occurrence order. Keys are indexed
// by hash; on the rare collision of two different keys the second is simply
// not indexed, so both keep all their operations, which the store applies in
// order: still correct, only not merged.
type merger struct {
	hash  func(key []byte) uint64
	index map[uint64]int // key hash → position in out
	out   Batch
}

func newMerger() merger {
	seed := maphash.MakeSeed()
	return merger{
		hash:  func(key []byte) uint64 { return maphash.Bytes(seed, key) },
		index: make(map[uint64]int),
	}
}

func (m *merger) merge(ops []Op) (b *Batch, replaced int) {
	m.out.Reset()
	clear(m.index)
	for _, op := range ops {
		h := m.hash(op.Key)
		i, ok := m.index[h]
		if ok && bytes.Equal(m.out.ops[i].Key, op.Key) {
			m.out.ops[i] = op
			replaced++
			continue
		}
		if !ok {
			m.index[h] = len(m.out.ops)
		}
		m.out.ops = append(m.out.ops, op)
	}
	return &m.out, replaced
}
