// Package storetest helps test code that uses a persistence.Store.
//
// FaultStore wraps a Store and makes chosen commits fail, to simulate a full
// disk or a failing store. TestStore is a conformance suite that checks a
// Store implementation against the contract of persistence.Store; the
// persistence package runs it on MemStore and BadgerStore. TestNoSpace
// checks what a store does on a full disk.
package storetest

import (
	"context"
	"fmt"
	"sync"
	"syscall"

	"github.com/rtfshost/rtfshost/persistence"
)

// ErrDiskFull is the error FaultStore injects when given a nil error. It wraps
// syscall.ENOSPC, as a real full disk would.
var ErrDiskFull = fmt.Errorf("storetest: injected failure: %w", syscall.ENOSPC)

// FaultStore is a persistence.Store that forwards to another Store but fails
// the commits it is told to fail. A failed commit applies nothing. Get, Scan
// and Close are forwarded unchanged. It is safe for concurrent use.
type FaultStore struct {
	persistence.Store

	mu       sync.Mutex
	failNext int   // commits still to fail
	okLeft   int   // commits still to let through before failing all; -1: no limit
	err      error // error to inject
	commits  int   // commits attempted
	failures int   // commits failed
	low      bool  // CheckSpace reports a nearly full disk
}

// NewFaultStore returns a FaultStore in front of s that injects no faults yet.
func NewFaultStore(s persistence.Store) *FaultStore {
	return &FaultStore{Store: s, okLeft: -1}
}

// FailNext makes the next n commits fail with err (ErrDiskFull if nil); the
// ones after them succeed again.
func (f *FaultStore) FailNext(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext, f.err = n, orDiskFull(err)
}

// FailAfter lets n more commits succeed, then fails every commit with err
// (ErrDiskFull if nil) until Heal.
func (f *FaultStore) FailAfter(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.okLeft, f.err = n, orDiskFull(err)
}

// Heal cancels every injected fault, a low disk included.
func (f *FaultStore) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext, f.okLeft, f.low = 0, -1, false
}

// SetLowSpace makes CheckSpace report a nearly full disk (ErrDiskFull)
// while low is true; commits are not affected.
func (f *FaultStore) SetLowSpace(low bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.low = low
}

// CheckSpace implements persistence.SpaceChecker: ErrDiskFull while
// SetLowSpace(true) holds, else what the wrapped store says, if it is a
// SpaceChecker.
func (f *FaultStore) CheckSpace() error {
	f.mu.Lock()
	low := f.low
	f.mu.Unlock()
	if low {
		return fmt.Errorf("storetest: injected low disk: %w", ErrDiskFull)
	}
	if sc, ok := f.Store.(persistence.SpaceChecker); ok {
		return sc.CheckSpace()
	}
	return nil
}

// Counts returns how many commits were attempted and how many were failed by
// injection.
func (f *FaultStore) Counts() (commits, failures int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.commits, f.failures
}

// Commit fails with the injected error when a fault is due, applying nothing;
// otherwise it forwards to the wrapped Store.
func (f *FaultStore) Commit(ctx context.Context, b *persistence.Batch) error {
	if err := f.fault(); err != nil {
		return fmt.Errorf("storetest: commit of %d operations: %w", b.Len(), err)
	}
	return f.Store.Commit(ctx, b)
}

func (f *FaultStore) fault() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits++
	switch {
	case f.failNext > 0:
		f.failNext--
	case f.okLeft == 0:
	case f.okLeft > 0:
		f.okLeft--
		return nil
	default:
		return nil
	}
	f.failures++
	return f.err
}

func orDiskFull(err error) error {
	if err == nil {
		return ErrDiskFull
	}
	return err
}

var (
	_ persistence.Store        = (*FaultStore)(nil)
	_ persistence.SpaceChecker = (*FaultStore)(nil)
)
