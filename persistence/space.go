package persistence

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Badger writes through memory-mapped files that it extends with ftruncate,
// so they are sparse: on a full disk a write into such a file cannot fail
// with an error, the kernel kills the process with SIGBUS instead (Go cannot
// recover it: the write runs on one of Badger's goroutines). To turn a full
// disk into an error, a BadgerStore refuses commits, value-log GC and
// read-write opens while the free space of its filesystem is below a
// reserve, and keeps that reserve large enough for everything Badger writes
// without being asked: the rest of the write-ahead log and value log files
// it has mapped, a memtable flushed to a table, and the compactions that
// rewrite tables before deleting the old ones (docs/durability.md).
//
// The guard reads statfs again after spaceCheckInterval or once the commits
// since the last reading could have written spaceCheckBytes; in between it
// subtracts what they could have written from the last reading, so a fast
// writer cannot run through the reserve between two readings.

const (
	defaultMinFreeBytes = 128 << 20
	spaceCheckInterval  = 100 * time.Millisecond
	spaceCheckBytes     = 1 << 20
	// writeAmplification bounds the bytes one committed byte costs on disk
	// at once: its write-ahead-log entry and, for a large value, its
	// value-log entry (the table it is flushed to comes later, out of the
	// reserve).
	writeAmplification = 2
	// opOverhead is what one operation adds on disk besides its key and
	// value: entry headers, checksum, version and value pointer.
	opOverhead = 64
)

// spaceGuard refuses writes while the data directory's filesystem is low on
// space, and once the data directory has been removed. It is not safe for
// concurrent use; BadgerStore calls it under its mutex.
type spaceGuard struct {
	dir     string
	dirInfo os.FileInfo                     // the directory at open, to notice its removal; nil: not checked
	min     int64                           // reserve in bytes; 0 disables the space check
	free    func(dir string) (int64, error) // free bytes for an unprivileged user; -1 when unknown
	every   time.Duration

	lastCheck time.Time
	lastFree  int64
	since     int64 // bytes the writes since lastCheck may have written
	removed   bool  // the directory was found removed (for good)
}

// check returns an error wrapping syscall.ENOSPC when the free space, less
// what the writes since the last reading may have used, is below the
// reserve, or an error wrapping ErrDirRemoved once the directory is gone.
// n is what the write about to be made may write. The caller serialises
// calls.
func (g *spaceGuard) check(now time.Time, n int64) error {
	if g.removed {
		return g.removedErr()
	}
	if now.Sub(g.lastCheck) >= g.every || g.since+n >= spaceCheckBytes || g.short(n) {
		if err := g.refresh(now); err != nil {
			return err
		}
	}
	if g.short(n) {
		return g.lowErr(g.lastFree - g.since)
	}
	g.since += n
	return nil
}

// short reports whether a write of n bytes could take the free space of the
// last reading below the reserve.
func (g *spaceGuard) short(n int64) bool {
	return g.min > 0 && g.lastFree >= 0 && g.lastFree-g.since-n < g.min
}

// refresh looks for the directory and reads the free space.
func (g *spaceGuard) refresh(now time.Time) error {
	if g.dirInfo != nil {
		if fi, err := os.Stat(g.dir); err != nil || !os.SameFile(fi, g.dirInfo) {
			g.removed = true
			return g.removedErr()
		}
	}
	if g.min <= 0 {
		g.lastCheck, g.lastFree, g.since = now, -1, 0
		return nil
	}
	free, err := g.free(g.dir)
	if err != nil {
		return fmt.Errorf("check free space: %w", err)
	}
	g.lastCheck, g.lastFree, g.since = now, free, 0
	return nil
}

func (g *spaceGuard) lowErr(free int64) error {
	return &SpaceError{Dir: g.dir, Free: max(free, 0), Reserve: g.min}
}

func (g *spaceGuard) removedErr() error {
	return fmt.Errorf("the data directory %s was removed while the store was open; nothing more can be saved: %w", g.dir, ErrDirRemoved)
}

// ErrDirRemoved is wrapped by the errors of a BadgerStore whose data
// directory was removed while it was open: its commits are refused, and
// its Close does not wait for Badger (which would retry writing its last
// table into the missing directory forever).
var ErrDirRemoved = errors.New("data directory removed")

// A SpaceError reports a write refused because the filesystem of the data
// directory has less free space than the reserve (Options.MinFreeBytes).
// It matches syscall.ENOSPC (errors.Is). Nothing of the refused write was
// applied; once space is freed, writes succeed again.
type SpaceError struct {
	Dir     string // the data directory
	Free    int64  // bytes free (for an unprivileged user), less what writes since the last reading may have used
	Reserve int64  // Options.MinFreeBytes
}

// Error says "no space left", names the directory, the free space and the
// reserve, and what to do.
func (e *SpaceError) Error() string {
	return fmt.Sprintf("no space left: the filesystem of %s has %d MiB free, below the %d MiB that rtfshost keeps in reserve "+
		"(Badger cannot report a full disk, it crashes); free some space", e.Dir, e.Free>>20, e.Reserve>>20)
}

// Is reports syscall.ENOSPC.
func (e *SpaceError) Is(target error) bool { return target == syscall.ENOSPC }

// checkFreeSpace refuses a read-write open of dir on a filesystem with less
// than min bytes free: Badger's open writes new files through sparse
// mappings, and dies of SIGBUS on a full disk.
func checkFreeSpace(dir string, min int64, free func(string) (int64, error)) error {
	if min <= 0 {
		return nil
	}
	f, err := free(dir)
	if err != nil {
		return fmt.Errorf("persistence: check free space of %q: %w", dir, err)
	}
	if f >= 0 && f < min {
		return &SpaceError{Dir: dir, Free: f, Reserve: min}
	}
	return nil
}

// batchCost is what committing b may write on disk at once.
func batchCost(b *Batch) int64 {
	return int64(writeAmplification*b.size() + opOverhead*b.Len())
}
