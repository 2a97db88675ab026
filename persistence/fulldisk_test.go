package persistence

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory and unmounts
// it when the test ends; it reports false when this process may not mount
// (not root).
func mountTmpfs(t *testing.T, size int64) (string, bool) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Logf("cannot mount a tmpfs (%v): running the injected variant", err)
		return "", false
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir, true
}

// TestFullDisk fills a filesystem through the store: the commit that would
// take it below the reserve fails with a *SpaceError (ENOSPC) instead of
// Badger's SIGBUS, nothing is lost, reads go on, and once space is freed
// commits go on. It runs on a 64 MiB tmpfs when it can mount one; without
// the privilege it runs the "injected" variant, where the free space the
// store sees is made to fall as it writes.
func TestFullDisk(t *testing.T) {
	fsDir, mounted := mountTmpfs(t, 64<<20)
	name := "tmpfs"
	if !mounted {
		name = "injected"
	}
	t.Run(name, func(t *testing.T) {
		dir := t.TempDir()
		var filler string
		if mounted {
			dir = filepath.Join(fsDir, "data")
			filler = filepath.Join(fsDir, "filler")
			if err := os.WriteFile(filler, make([]byte, 8<<20), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		opts := Options{GCInterval: -1, MemTableSize: 1 << 20, MinFreeBytes: 24 << 20}
		s, err := OpenBadger(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		}()
		freed, used := false, int64(0)
		if !mounted {
			// 40 MiB free at first, less what has been committed.
			s.mu.Lock()
			s.space.free = func(string) (int64, error) {
				if freed {
					return 1 << 30, nil
				}
				return 40<<20 - used, nil
			}
			s.mu.Unlock()
		}
		ctx := context.Background()
		value := make([]byte, 10<<10)
		commit := func(i int) error {
			var b Batch
			b.Put(fmt.Appendf(nil, "line%06d", i), value)
			err := s.Commit(ctx, &b)
			if err == nil {
				used += int64(len(value))
			}
			return err
		}
		n := 0
		for ; n < 100000; n++ {
			if err = commit(n); err != nil {
				break
			}
		}
		var se *SpaceError
		if !errors.As(err, &se) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("after %d commits of 10 KiB: %v, want a *SpaceError", n, err)
		}
		t.Logf("%d commits of 10 KiB, then: %v", n, err)
		if n == 0 {
			t.Fatal("not one commit fitted")
		}
		if mounted {
			free, err := freeSpace(fsDir)
			if err != nil {
				t.Fatal(err)
			}
			if free <= 0 {
				t.Fatalf("the filesystem is full (%d bytes free): the reserve was run through", free)
			}
		}
		if got := countKeys(t, s, "line"); got != n {
			t.Fatalf("%d records readable, want the %d committed", got, n)
		}
		if err := commit(n); err == nil {
			t.Fatal("a commit went through while the disk is still full")
		}
		if mounted {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		} else {
			freed = true
		}
		// The guard reads the free space again on the next refused try.
		deadline := time.Now().Add(10 * time.Second)
		for commit(n) != nil {
			if time.Now().After(deadline) {
				t.Fatal("commits still refused 10 s after space was freed")
			}
		}
		if got := countKeys(t, s, "line"); got != n+1 {
			t.Fatalf("%d records after space was freed, want %d", got, n+1)
		}
	})
}

// TestSpaceGuardCountsEveryCommit: between two readings of the free space,
// the guard subtracts what the commits may have written, so a writer that
// fills the disk faster than the readings come never takes it below the
// reserve.
func TestSpaceGuardCountsEveryCommit(t *testing.T) {
	const reserve = 32 << 20
	var written int64
	readings := 0
	g := spaceGuard{dir: "d", min: reserve, every: time.Hour, free: func(string) (int64, error) {
		readings++
		return reserve + 5<<20 - written, nil
	}}
	now := time.Now()
	var b Batch
	b.Put([]byte("k"), make([]byte, 100<<10))
	n := 0
	for ; n < 1000; n++ {
		if err := g.check(now, batchCost(&b)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
		written += int64(2 * b.size()) // what the commit really wrote, at most
		if free := reserve + 5<<20 - written; free < reserve {
			t.Fatalf("commit %d took the free space to %d, below the reserve %d", n, free, reserve)
		}
	}
	if n == 0 || n == 1000 {
		t.Fatalf("%d commits of 100 KiB went through before the guard refused", n)
	}
	if readings > n/3+2 {
		t.Errorf("%d readings of the free space for %d commits: it should read at most once a MiB", readings, n)
	}
}
