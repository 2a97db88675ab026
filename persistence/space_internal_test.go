package persistence

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
)

func setFreeSpace(s *BadgerStore, free int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.space.free = func(string) (int64, error) { return free, nil }
	s.space.every = 0
	s.space.read = false
}

func commitOne(s Store) error {
	var b Batch
	b.Put([]byte("k"), []byte("v"))
	return s.Commit(context.Background(), &b)
}

func TestLowDiskSpaceFailsCommits(t *testing.T) {
	s, err := OpenBadger(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	setFreeSpace(s, 10<<20)
	err = commitOne(s)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "10 MiB free") || !strings.Contains(err.Error(), s.Dir()) {
		t.Fatalf("commit on a nearly full disk: err = %v, want ENOSPC naming the free space and the directory", err)
	}
	if _, err := s.Get(context.Background(), []byte("k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("reads must keep working and the refused commit must not apply: %v", err)
	}
	setFreeSpace(s, 1<<30)
	if err := commitOne(s); err != nil {
		t.Fatalf("commit after space came back: %v", err)
	}
}

func TestLowDiskSpaceGuardOff(t *testing.T) {
	s, err := OpenBadger(t.TempDir(), Options{MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	setFreeSpace(s, 0)
	if err := commitOne(s); err != nil {
		t.Fatalf("with the guard off: %v", err)
	}
}

// TestBadgerLockFallback holds only Badger's own lock (not rtfshost.lock):
// OpenBadger must still report a *LockedError, through Badger's message.
func TestBadgerLockFallback(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = OpenBadger(dir, Options{})
	var le *LockedError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "another rtfshost") {
		t.Fatalf("err = %v, want a *LockedError", err)
	}
	// The failed open must have released rtfshost.lock again.
	l, err := lockDir(dir)
	if err != nil {
		t.Fatalf("rtfshost.lock still held after a failed open: %v", err)
	}
	l.release()
}
