package provider

import (
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
)

// The flow of a stream: the chunks between its transport and its worker.
// Deliver (deliver.go) decodes each chunk (decode.go) and puts it in the
// queue; the worker (worker.go) takes them in order. Everything here is
// guarded by the stream's mu.
type flow struct {
	queue    ring
	ctrl     []item        // control chunks that arrived while paused with a full queue
	space    chan struct{} // closed when room is made, if a Deliver waits
	wake     chan struct{} // buffered 1: wakes the worker
	idle     bool          // the worker found nothing to do: the next chunk wakes it
	lowWater int           // a Deliver waiting for room is released once the queue is this short
	seq      int64         // seq of the next chunk
	spares   []*rtfs.Map   // maps of processed chunks the processor let go of (reclaimLocked)

	// The source.
	startCursor string // the cursor the transport starts after
	taskPresent bool
	taskActive  bool
	srcDone     bool  // the transport returned
	srcErr      error // its failure, if it failed
	sentCtrl    bool  // the source has sent a control chunk (so it may resume a pause)
	connected   bool  // a chunk arrived since the transport's last failed attempt (circuit.go)
	failCounted bool  // the last failed attempt reached the circuit breaker (circuit.go)
}

// An item is one decoded chunk waiting for, or going through, the
// processor, with what its metadata is built from (by the worker, and only
// for a processor that reads it).
type item struct {
	chunk     rtfs.Value
	event, id string
	fd        string // the file descriptor of a process transport's chunk ("" for others)
	received  time.Time
	seq       int64  // the stream's chunk count before it: from 0 (number gives the :seq users see)
	ctrl      action // the chunk's own directive, or actNone
	journaled bool   // the chunk is in the stream's journal
	shown     bool   // Inspect handed the chunk out: its map is never reused
}

// Chunk maps are reused: a processor whose code never keeps its chunk
// (processor.letGo) leaves the chunk's map free once its call has returned,
// and a later chunk is decoded into it instead of into a new map, which
// spares an allocation and its share of garbage collection per chunk. The
// worker hands such a map to the stream's spare, the one the next decode
// takes (takeSpare), or, while that one waits, keeps it in spares; Deliver
// moves one from spares to spare in the critical section it enters anyway
// (spareLocked), so that neither side takes a lock of its own for it. A
// busy stream's spares hold at most a queue's worth of maps, which the
// queue held a moment before, and are dropped when its worker parks.

// reclaimLocked takes the map of a chunk that the processor let go of, for
// a later chunk to be decoded into.
func (s *stream) reclaimLocked(it *item) {
	m, ok := it.chunk.(*rtfs.Map)
	if !ok || it.shown || m.Len() == 0 {
		return // not a map of its own, or seen outside the stream
	}
	switch {
	case s.spare.Load() == nil:
		s.spare.Store(m)
	case len(s.spares) < s.def.capacity:
		s.spares = append(s.spares, m)
	}
}

// spareLocked hands a reclaimed map to the next decode, if it has none.
func (s *stream) spareLocked() {
	if n := len(s.spares); n > 0 && s.spare.Load() == nil {
		s.spare.Store(s.spares[n-1])
		s.spares[n-1] = nil
		s.spares = s.spares[:n-1]
	}
}

// dropSparesLocked lets go of the maps a stream that waits for chunks keeps
// beyond the next decode's.
func (s *stream) dropSparesLocked() { s.spares = nil }

// takeSpare returns the map the next decode may build its chunk in, or
// nil; the caller holds decMu. Only it empties spare, and the others fill
// it only when it is empty, so a map it loads is its own.
func (s *stream) takeSpare() *rtfs.Map {
	m := s.spare.Load()
	if m != nil {
		s.spare.Store(nil)
	}
	return m
}

// number is the chunk's number in its stream, from 1: its metadata :seq,
// the Seq of its output's Event and the chunk a failure message names, so
// that the first chunk is chunk 1, as sources that number their events
// (the reference server's :seq and SSE ids) count them.
func (it *item) number() int64 { return it.seq + 1 }

// A ring is the FIFO queue of a stream: a growable ring buffer whose size is
// a power of two, so that positions wrap with a mask rather than a division.
// The stream bounds its length; the ring itself never refuses an item. Its
// zero value is an empty queue that allocates on the first push.
type ring struct {
	buf  []item
	head int
	n    int
}

func (r *ring) len() int { return r.n }

// push appends it at the back. hint sizes the first allocation.
func (r *ring) push(it item, hint int) {
	if r.n == len(r.buf) {
		r.grow(hint)
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = it
	r.n++
}

func (r *ring) grow(hint int) {
	size := max(2*len(r.buf), 4)
	for size < hint {
		size *= 2
	}
	buf := make([]item, size)
	for i := 0; i < r.n; i++ {
		buf[i] = *r.at(i)
	}
	r.buf, r.head = buf, 0
}

// at returns the i-th item from the front, 0 <= i < len.
func (r *ring) at(i int) *item { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

// pop removes and returns the front item; the queue must not be empty.
func (r *ring) pop() item {
	it := r.buf[r.head]
	r.buf[r.head] = item{}
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return it
}

// removeAt removes and returns the i-th item, keeping the others in order.
func (r *ring) removeAt(i int) item {
	it := *r.at(i)
	for j := i; j < r.n-1; j++ {
		*r.at(j) = *r.at(j + 1)
	}
	*r.at(r.n - 1) = item{}
	r.n--
	return it
}

// clear empties the queue, releasing its buffer, and returns how many
// items it held.
func (r *ring) clear() int {
	n := r.n
	r.buf, r.head, r.n = nil, 0, 0
	return n
}
