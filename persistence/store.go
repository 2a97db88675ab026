package persistence

import (
	"context"
	"errors"
	"fmt"
)

// A Store is an ordered key-value store with atomic multi-key commits.
//
// All methods are safe for concurrent use. Keys are compared as bytes; an empty
// key is invalid. After Close every method returns an error wrapping ErrClosed.
type Store interface {
	// Commit applies every operation of b atomically: after Commit returns nil
	// all of them are visible to Get and Scan, and after a crash either all of
	// them or none are present. Operations apply in order, so a later operation
	// on a key replaces an earlier one in the same batch. An empty batch is a
	// no-op. The store reads b's slices only during the call; the caller keeps
	// ownership. Commit returns an error wrapping ErrBatchTooLarge when the store
	// cannot apply b in one transaction, and then applies nothing. ctx is
	// checked before the commit starts; a started commit is not interrupted.
	// Cost: one store transaction, O(total size of b).
	Commit(ctx context.Context, b *Batch) error

	// Get returns a copy of the value stored under key, owned by the caller, or
	// an error wrapping ErrNotFound. Cost: one point lookup.
	Get(ctx context.Context, key []byte) ([]byte, error)

	// Scan calls fn for every key that starts with prefix, in increasing key
	// order, over a consistent snapshot taken when Scan starts; commits made
	// during the scan are not seen. key and value are valid only during the
	// call to fn; fn must copy them to keep them. fn may call other Store
	// methods. If fn returns ErrStopScan, Scan stops and returns nil; any other
	// error stops the scan and is returned wrapped. Scan checks ctx between
	// keys. Cost: O(matching keys and their values).
	Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error

	// Close releases the store. It waits for operations in progress, then
	// returns; later calls return nil. Cost: for BadgerStore, a memtable flush
	// (milliseconds).
	Close() error
}

// Sentinel errors of this package. Errors returned by stores wrap them, so test
// with errors.Is.
var (
	// ErrNotFound reports that a key holds no value.
	ErrNotFound = errors.New("key not found")
	// ErrClosed reports an operation on a closed Store or Committer.
	ErrClosed = errors.New("store is closed")
	// ErrBatchTooLarge reports a batch that does not fit in one transaction.
	ErrBatchTooLarge = errors.New("batch too large for one transaction")
	// ErrStopScan is returned by a Scan callback to end the scan early; Scan
	// then returns nil.
	ErrStopScan = errors.New("stop scan")
	// ErrFenced reports a commit refused because it writes records this
	// process no longer owns: a store shared by several hosts (package
	// cluster) gave them to another host. Nothing of the batch is applied;
	// the writer must stop using those records.
	ErrFenced = errors.New("fenced: another host owns these records now")
)

// A KeyScanner store lists its keys without reading their values, for a
// listing that needs the keys only (package cluster's store, where a Scan
// reads every value over the network). ScanKeys calls fn for every key
// that starts with prefix, in increasing key order; ErrStopScan from fn
// ends it early. A key deleted a moment ago may still be listed (the
// implementation says how long).
type KeyScanner interface {
	ScanKeys(ctx context.Context, prefix []byte, fn func(key []byte) error) error
}

// ScanKeys calls fn for every key of st that starts with prefix, in
// increasing key order: through st's ScanKeys when it is a KeyScanner,
// else through Scan, whose values it drops.
func ScanKeys(ctx context.Context, st Store, prefix []byte, fn func(key []byte) error) error {
	if ks, ok := st.(KeyScanner); ok {
		return ks.ScanKeys(ctx, prefix, fn)
	}
	return st.Scan(ctx, prefix, func(k, _ []byte) error { return fn(k) })
}

// A Limited store knows how much one commit holds; a Committer in front of
// it keeps its group commits within BatchLimits. ops bounds the operations,
// bytes the key and value bytes of one Commit.
type Limited interface {
	BatchLimits() (ops, bytes int)
}

// A SpaceChecker store can tell that its disk is about to refuse writes
// for lack of space, before it does: CheckSpace returns an error matching
// syscall.ENOSPC (a *SpaceError for a BadgerStore) while the free space is
// below the store's reserve plus a headroom, nil otherwise. A writer that
// holds its work while CheckSpace fails (the provider holds its streams as
// failed, "no space left") never has a commit refused halfway: the commits
// of what is already under way fit in the headroom. It is safe for
// concurrent use and cheap (a cached statfs).
type SpaceChecker interface {
	CheckSpace() error
}

// An Op is one operation of a Batch: a put of Value under Key, or, when Delete
// is set, the removal of Key.
type Op struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// A Batch is an ordered list of puts and deletes that a Store applies
// atomically. The zero Batch is empty and ready to use. A Batch references the
// slices passed to Put and Delete without copying them; the caller must not
// modify them until the batch is committed. A Batch is not safe for concurrent
// use.
type Batch struct {
	ops []Op
}

// Put adds a put of value under key. A nil value stores an empty value.
func (b *Batch) Put(key, value []byte) {
	b.ops = append(b.ops, Op{Key: key, Value: value})
}

// Delete adds the removal of key. Deleting a missing key is not an error.
func (b *Batch) Delete(key []byte) {
	b.ops = append(b.ops, Op{Key: key, Delete: true})
}

// Len returns the number of operations in b.
func (b *Batch) Len() int { return len(b.ops) }

// Ops returns b's operations in order. The slice aliases b's storage: it is
// valid until the next change to b, and must not be modified.
func (b *Batch) Ops() []Op { return b.ops }

// Reset empties b, keeping its storage for reuse.
func (b *Batch) Reset() {
	clear(b.ops)
	b.ops = b.ops[:0]
}

// size returns the number of key and value bytes in b.
func (b *Batch) size() int {
	n := 0
	for i := range b.ops {
		n += len(b.ops[i].Key) + len(b.ops[i].Value)
	}
	return n
}

// validate reports the first invalid operation of b.
func (b *Batch) validate() error {
	for i := range b.ops {
		if len(b.ops[i].Key) == 0 {
			return fmt.Errorf("operation %d of %d has an empty key", i, len(b.ops))
		}
	}
	return nil
}
