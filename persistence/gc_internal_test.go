package persistence

import (
	"context"
	"testing"
	"time"
)

// TestGCTickerStopsBeforeClose runs value-log GC every millisecond and checks
// that Close stops the GC goroutine before closing the database: after Close
// no GC attempt starts, and the goroutine has exited (TestMain's goleak check
// would also catch it).
func TestGCTickerStopsBeforeClose(t *testing.T) {
	s, err := OpenBadger(t.TempDir(), Options{GCInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	b.Put([]byte("k"), make([]byte, 4096))
	if err := s.Commit(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.gcRuns.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("value-log GC did not run within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.gcDone:
	default:
		t.Fatal("Close returned while the GC goroutine was running")
	}
	runs := s.gcRuns.Load()
	time.Sleep(5 * time.Millisecond)
	if s.gcRuns.Load() != runs {
		t.Fatal("GC ran after Close")
	}
}

func TestGCDisabled(t *testing.T) {
	s, err := OpenBadger(t.TempDir(), Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	select {
	case <-s.gcDone:
	default:
		t.Fatal("a negative GCInterval started the GC goroutine")
	}
}
