package stream

import (
	"context"

	"github.com/rtfshost/rtfshost/transport"
)

// keeper is all that a stream's chunk path asks of persistence: Deliver
// (journal mode), the worker and the lifecycle reach the store through it
// only. *StreamStore implements it; a stream without a store has none.
type keeper interface {
	// journaling reports whether the stream journals its chunks (its
	// source cannot replay).
	journaling() bool
	// journalLocked adds chunk c, numbered seq, to the journal; Deliver
	// calls it, with the stream's mu held, before it queues the chunk.
	journalLocked(ctx context.Context, seq int64, c transport.Chunk) error
	// awaitJournal waits until every journal entry submitted so far is
	// committed (Provider.Deliver's acknowledgement).
	awaitJournal(ctx context.Context) error
	// processedLocked records, under mu, that journaled chunk seq is
	// processed: the delete of its entry goes with a snapshot once every
	// chunk of the entry is.
	processedLocked(seq int64)
	// changed says that the stream changed (a chunk processed, a pause...):
	// a snapshot is taken and submitted now, or, while one is in flight,
	// when it has committed.
	changed()
	// pendingLocked reports, under mu, whether a change waits for a
	// snapshot that can be submitted now (the worker then calls save).
	pendingLocked() bool
	// save takes a snapshot and submits it if a change waits for one.
	save()
	// Flush submits a snapshot of any change not stored yet, in flight or
	// not (the worker is exiting).
	Flush()
	// saveFinal commits the final snapshot of an ended stream, with the
	// deletion of its journal, and waits for it.
	saveFinal()
	// deadLetterLocked records, under mu, a dead letter to store with the
	// next snapshot (whose cursor passes it), and marks the stream changed.
	deadLetterLocked(dl DeadLetter)
	// childLocked records, under mu, the process group the stream's
	// transport started (running), or that it is gone (children.go).
	childLocked(c transport.ChildProcess, running bool)
	// Err returns the first store error, after which nothing is saved.
	Err() error
}
