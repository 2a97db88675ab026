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
// Other programs may fill the disk too, past the reserve, and then a
// flush or compaction that Badger starts on its own (or at Close) would
// fault. So a read-write open also allocates a spare file (spareFileName,
// 4 memtables, without holes), which the guard deletes when it finds less
// free space than that, and Close deletes before it closes the database:
// Badger then has that room to flush and close, unless another program
// takes it first. The next open allocates it again.
//
// The guard reads statfs before every write (about 1 µs): a reading that
// is any older lets a fast writer, or another program, run through the
// reserve in between (a 200 MB tmpfs fills in about a second). It asks
// whether the open directory was removed before every write as well
// (fstat, about 0.3 µs), and looks for it by its path (replaced by
// another?) at most every dirCheckInterval.

const (
	defaultMinFreeBytes = 128 << 20
	dirCheckInterval    = 100 * time.Millisecond
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
	every   time.Duration                   // how often to look for the directory by its path
	// unlinked, when set, says at once whether the open directory was
	// removed; it is asked before every write.
	unlinked func() bool

	spare     string // the spare file while it is held; "" once released (or never allocated)
	spareSize int64

	lastDirCheck time.Time
	removed      bool  // the directory was found removed (for good)
	read         bool  // lastFree holds a reading
	lastFree     int64 // the free space read for the last write
}

// check returns an error wrapping syscall.ENOSPC when a write of n bytes
// would take the free space below the reserve, or an error wrapping
// ErrDirRemoved once the directory is gone. The caller serialises calls.
func (g *spaceGuard) check(now time.Time, n int64) error {
	if g.removed {
		return g.removedErr()
	}
	if g.unlinked != nil && g.unlinked() {
		g.removed = true
	}
	if g.removed || now.Sub(g.lastDirCheck) >= g.every && g.dirGone() {
		return g.removedErr()
	}
	g.lastDirCheck = now
	if g.min <= 0 {
		return nil
	}
	free, err := g.free(g.dir)
	if err != nil {
		if g.dirGone() {
			return g.removedErr()
		}
		return fmt.Errorf("check free space: %w", err)
	}
	g.lastFree, g.read = free, true
	if free < 0 {
		return nil // unknown
	}
	if free < g.spareSize {
		g.releaseSpare() // the disk is full to its last blocks: Badger's own writes need room
	}
	if free-n < g.min {
		return &SpaceError{Dir: g.dir, Free: free, Reserve: g.min}
	}
	return nil
}

// dirGone looks whether the directory is still the one opened, and
// remembers when it is not.
func (g *spaceGuard) dirGone() bool {
	if g.dirInfo == nil {
		return false
	}
	if fi, err := os.Stat(g.dir); err != nil || !os.SameFile(fi, g.dirInfo) {
		g.removed = true
	}
	return g.removed
}

// releaseSpare deletes the spare file, if it is held.
func (g *spaceGuard) releaseSpare() {
	if g.spare != "" {
		os.Remove(g.spare)
		g.spare = ""
	}
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
	Free    int64  // bytes free (for an unprivileged user)
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

// spareFileName is the spare file in a data directory (see above).
const spareFileName = "rtfshost.spare"

// batchCost is what committing b may write on disk at once.
func batchCost(b *Batch) int64 {
	return int64(writeAmplification*b.size() + opOverhead*b.Len())
}
