package stream

import (
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
)

// The flow of a stream: the chunks between its transport and its worker.
// Deliver (deliver.go) decodes each chunk (decode.go) and puts it in the
// queue; the worker (worker.go) takes them in order. Everything here is
// guarded by the stream's mu.
type flow struct {
	Queue    Ring
	ctrl     []Item        // control chunks that arrived while paused with a full queue
	Space    chan struct{} // closed when room is made, if a Deliver waits
	wake     chan struct{} // buffered 1: wakes the worker
	idle     bool          // the worker found nothing to do: the next chunk wakes it
	lowWater int           // a Deliver waiting for room is released once the queue is this short
	seq      int64         // seq of the next chunk
	spares   []*rtfs.Map   // maps of processed chunks the processor let go of (reclaimLocked)

	// The source.
	StartCursor string // the cursor the transport starts after
	taskPresent bool
	taskActive  bool
	srcDone     bool  // the transport returned
	srcErr      error // its failure, if it failed
	sentCtrl    bool  // the source has sent a control chunk (so it may resume a pause)
	connected   bool  // a chunk arrived since the transport's last failed attempt (circuit.go)
	failCounted bool  // the last failed attempt reached the circuit breaker (circuit.go)
}

// An Item is one decoded chunk waiting for, or going through, the
// processor, with what its metadata is built from (by the worker, and only
// for a processor that reads it).
type Item struct {
	Chunk     rtfs.Value
	Event, ID string
	Fd        string // the file descriptor of a process transport's chunk ("" for others)
	Received  time.Time
	Seq       int64  // the stream's chunk count before it: from 0 (number gives the :seq users see)
	Ctrl      Action // the chunk's own directive, or ActNone
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
func (s *Stream) reclaimLocked(it *Item) {
	m, ok := it.Chunk.(*rtfs.Map)
	if !ok || it.shown || m.Len() == 0 {
		return // not a map of its own, or seen outside the stream
	}
	switch {
	case s.Spare.Load() == nil:
		s.Spare.Store(m)
	case len(s.spares) < s.Def.Capacity:
		s.spares = append(s.spares, m)
	}
}

// spareLocked hands a reclaimed map to the next decode, if it has none.
func (s *Stream) spareLocked() {
	if n := len(s.spares); n > 0 && s.Spare.Load() == nil {
		s.Spare.Store(s.spares[n-1])
		s.spares[n-1] = nil
		s.spares = s.spares[:n-1]
	}
}

// dropSparesLocked lets go of the maps a stream that waits for chunks keeps
// beyond the next decode's.
func (s *Stream) dropSparesLocked() { s.spares = nil }

// takeSpare returns the map the next decode may build its chunk in, or
// nil; the caller holds decMu. Only it empties spare, and the others fill
// it only when it is empty, so a map it loads is its own.
func (s *Stream) takeSpare() *rtfs.Map {
	m := s.Spare.Load()
	if m != nil {
		s.Spare.Store(nil)
	}
	return m
}

// Number is the chunk's number in its stream, from 1: its metadata :seq,
// the Seq of its output's Event and the chunk a failure message names, so
// that the first chunk is chunk 1, as sources that number their events
// (the reference server's :seq and SSE ids) count them.
func (it *Item) Number() int64 { return it.Seq + 1 }

// A Ring is the FIFO queue of a stream: a growable ring buffer whose size is
// a power of two, so that positions wrap with a mask rather than a division.
// The stream bounds its length; the ring itself never refuses an item. Its
// zero value is an empty queue that allocates on the first push.
type Ring struct {
	Buf  []Item
	head int
	n    int
}

func (r *Ring) Len() int { return r.n }

// Push appends it at the back. hint sizes the first allocation.
func (r *Ring) Push(it Item, hint int) {
	if r.n == len(r.Buf) {
		r.grow(hint)
	}
	r.Buf[(r.head+r.n)&(len(r.Buf)-1)] = it
	r.n++
}

func (r *Ring) grow(hint int) {
	size := max(2*len(r.Buf), 4)
	for size < hint {
		size *= 2
	}
	buf := make([]Item, size)
	for i := 0; i < r.n; i++ {
		buf[i] = *r.At(i)
	}
	r.Buf, r.head = buf, 0
}

// At returns the i-th item from the front, 0 <= i < len.
func (r *Ring) At(i int) *Item { return &r.Buf[(r.head+i)&(len(r.Buf)-1)] }

// Pop removes and returns the front item; the queue must not be empty.
func (r *Ring) Pop() Item {
	it := r.Buf[r.head]
	r.Buf[r.head] = Item{}
	r.head = (r.head + 1) & (len(r.Buf) - 1)
	r.n--
	return it
}

// RemoveAt removes and returns the i-th item, keeping the others in order.
func (r *Ring) RemoveAt(i int) Item {
	it := *r.At(i)
	for j := i; j < r.n-1; j++ {
		*r.At(j) = *r.At(j + 1)
	}
	*r.At(r.n - 1) = Item{}
	r.n--
	return it
}

// Clear empties the queue, releasing its buffer, and returns how many
// items it held.
func (r *Ring) Clear() int {
	n := r.n
	r.Buf, r.head, r.n = nil, 0, 0
	return n
}
