// Package persistence stores the bytes that make rtfshost streams durable.
//
// The main types are:
//
//   - Store, the interface every store implements: atomic multi-key commits of a
//     Batch, Get, ordered prefix Scan and Close. It is safe for concurrent use.
//   - BadgerStore, a Store on one Badger database per data directory, tuned for
//     embedding (small memtables and value-log files, no block cache, no
//     compression, no metrics, optional fsync per commit). OpenBadger takes an
//     exclusive lock on the directory: a second host on the same directory fails
//     at once with a *LockedError.
//   - MemStore, an in-memory Store with the same semantics, for tests.
//   - Committer, the group commit in front of a Store: stream workers hand it one
//     Batch per processed chunk; it merges the batches of many chunks and many
//     streams into one store commit, skips writes that a later batch in the same
//     commit replaces, and never splits a caller's batch.
//   - EncodeRecord and DecodeRecord, the framing every stored record carries: a
//     kind, a format version and a checksum. DecodeRecord reports an
//     *UnknownVersionError or a *CorruptRecordError naming the key.
//
// The package stores bytes only; it imports nothing else of rtfshost. The
// sub-package storetest holds a fault-injecting Store wrapper and a conformance
// suite for Store implementations. docs/durability.md states what survives a
// process crash and a power loss.
package persistence
