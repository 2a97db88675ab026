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
// commits go on; when another program then fills the disk to its last
// block, the store releases its spare file and closes cleanly. It runs on a 64 MiB tmpfs when it can mount one; without
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
		n, lowAt := 0, -1
		for ; n < 100000; n++ {
			if lowAt < 0 && s.CheckSpace() != nil {
				lowAt = n // a writer that holds here has no commit refused
			}
			if err = commit(n); err != nil {
				break
			}
		}
		if lowAt < 0 || lowAt >= n {
			t.Fatalf("CheckSpace reported the low disk at commit %d, the store refused commit %d: it must say so before", lowAt, n)
		}
		if room := int64(n-lowAt) * int64(len(value)); room < opts.MemTableSize {
			t.Errorf("only %d bytes were committed after CheckSpace failed: the headroom is too small", room)
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
		if !mounted {
			return
		}
		// Another program fills the disk to its last block: the spare
		// file gives Badger the room to flush and close.
		spare := filepath.Join(dir, spareFileName)
		if _, err := os.Stat(spare); err != nil {
			t.Fatalf("no spare file: %v", err)
		}
		fillFS(t, filepath.Join(fsDir, "rest"))
		if err := commit(n + 1); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("commit on a disk full to its last block: %v", err)
		}
		if _, err := os.Stat(spare); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the spare file is still there on a full disk: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("close on a full disk: %v", err)
		}
		r, err := OpenBadgerReadOnly(dir, opts)
		if err != nil {
			t.Fatalf("read-only open on a full disk: %v", err)
		}
		defer r.Close()
		if got := countKeys(t, r, "line"); got != n+1 {
			t.Fatalf("%d records after close on a full disk, want %d", got, n+1)
		}
	})
}

// fillFS writes the file path until its filesystem is full.
func fillFS(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 256<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestSpaceGuardReadsBeforeEveryWrite: the guard reads the free space
// before every write and refuses the one that would take it below the
// reserve, so a writer never runs through the reserve, however fast it
// or another program fills the disk.
func TestSpaceGuardReadsBeforeEveryWrite(t *testing.T) {
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
		if n == 10 {
			written += 4 << 20 // another program writes 4 MiB
		}
	}
	if n <= 10 || n == 1000 {
		t.Fatalf("%d commits of 100 KiB went through before the guard refused", n)
	}
	if readings != n+1 {
		t.Errorf("%d readings of the free space for %d writes", readings, n+1)
	}
}

// BenchmarkSpaceGuard measures what the guard adds to every commit of a
// BadgerStore: one fstatfs and one fstat of the data directory.
func BenchmarkSpaceGuard(b *testing.B) {
	s, err := OpenBadger(b.TempDir(), Options{GCInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	for b.Loop() {
		s.mu.Lock()
		err := s.space.check(now, 1000)
		s.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
}
