package persistence

import (
	"fmt"
	"syscall"
	"time"
)

// Badger writes through memory-mapped files that it extends with ftruncate,
// so they are sparse: on a full disk a write into such a file cannot fail
// with an error, the kernel kills the process with SIGBUS instead. To turn a
// full disk into an error, a BadgerStore refuses commits while the free space
// of its filesystem is below a reserve, checked at most once per
// spaceCheckInterval.

const (
	defaultMinFreeBytes = 128 << 20
	spaceCheckInterval  = time.Second
)

// spaceGuard refuses writes while the data directory's filesystem is low on
// space. It is not safe for concurrent use; BadgerStore calls it under its
// mutex.
type spaceGuard struct {
	dir       string
	min       int64                           // reserve in bytes; 0 disables the guard
	free      func(dir string) (int64, error) // free bytes for an unprivileged user; -1 when unknown
	every     time.Duration
	lastCheck time.Time
	lastFree  int64
}

// check returns an error wrapping syscall.ENOSPC when the free space was
// below the reserve at the last check, refreshing it when it is stale. The
// caller serialises calls.
func (g *spaceGuard) check(now time.Time) error {
	if g.min <= 0 {
		return nil
	}
	if now.Sub(g.lastCheck) >= g.every {
		free, err := g.free(g.dir)
		if err != nil {
			return fmt.Errorf("check free space: %w", err)
		}
		g.lastCheck, g.lastFree = now, free
	}
	if g.lastFree >= 0 && g.lastFree < g.min {
		return fmt.Errorf("the filesystem has %d MiB free, below the %d MiB that rtfshost keeps in reserve (Badger cannot report a full disk, it crashes): %w",
			g.lastFree>>20, g.min>>20, syscall.ENOSPC)
	}
	return nil
}
