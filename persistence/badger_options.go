package persistence

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Options configures OpenBadger. The zero Options is the default: no fsync,
// no logging, value-log GC every five minutes, 8 MiB memtables, a 128 MiB
// free-space reserve.
type Options struct {
	// SyncWrites makes every commit wait for an msync of the write-ahead log,
	// so committed batches survive an OS crash or power loss (the CLI's
	// --sync). Without it commits survive a crash of the process (the data is
	// in the page cache through mmap) but not of the machine.
	SyncWrites bool

	// Logger receives Badger's messages: errors and warnings at their level,
	// Badger's info messages at slog.LevelDebug (it prints a dozen per open and
	// close) and its debug messages below that. Nil discards them all.
	Logger *slog.Logger

	// GCInterval is the period of value-log garbage collection. Zero means
	// five minutes; a negative value turns it off.
	GCInterval time.Duration

	// MinFreeBytes is the free space that the data directory's filesystem
	// must keep: below it, commits and read-write opens fail with a
	// *SpaceError ("no space left", matching syscall.ENOSPC) instead of
	// risking Badger's crash (SIGBUS) on a full disk. The guard reads the
	// free space before every commit (fstatfs, about 1 µs). The reserve
	// must hold what Badger writes unasked (the rest of its mapped log
	// files, a memtable flush, compactions): about 16 memtables. With a
	// reserve, a read-write open also allocates a spare file of 4
	// memtables that the store deletes to let Badger flush and close when
	// the disk fills to its last block. Zero means 128 MiB; a negative
	// value turns the check and the spare file off.
	MinFreeBytes int64

	// MemTableSize is the size in bytes of each of the two memtables, which
	// bounds the size of one commit to about 15% of it. Zero means 8 MiB; it
	// must be between 1 MiB and 256 MiB.
	MemTableSize int64
}

const (
	defaultMemTableSize = 8 << 20
	defaultGCInterval   = 5 * time.Minute
	gcDiscardRatio      = 0.5
	valueLogFileSize    = 32 << 20
	valueThreshold      = 1 << 10
)

func (o Options) withDefaults() (Options, error) {
	if o.MemTableSize == 0 {
		o.MemTableSize = defaultMemTableSize
	}
	if o.MemTableSize < 1<<20 || o.MemTableSize > 256<<20 {
		return o, fmt.Errorf("Options.MemTableSize is %d; it must be between 1 MiB and 256 MiB", o.MemTableSize)
	}
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = defaultMinFreeBytes
	}
	if o.GCInterval == 0 {
		o.GCInterval = defaultGCInterval
	}
	return o, nil
}

// badgerOptions returns the Badger options for an embedded database in dir.
// BlockCacheSize 0 requires Compression None (Badger's Open panics otherwise),
// and ValueThreshold must stay below 15% of MemTableSize (Open fails
// otherwise); 1 KiB is below it for every allowed MemTableSize.
func (o Options) badgerOptions(dir string) badger.Options {
	bo := badger.DefaultOptions(dir).
		WithSyncWrites(o.SyncWrites).
		WithMemTableSize(o.MemTableSize).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBaseTableSize(1 << 20).
		WithValueLogFileSize(valueLogFileSize).
		WithValueThreshold(valueThreshold).
		WithBlockCacheSize(0).
		WithCompression(options.None).
		WithNumCompactors(2).
		WithMetricsEnabled(false).
		WithDetectConflicts(false).
		WithNumVersionsToKeep(1).
		// A damaged file must be an error, never wrong data: verify every
		// table and block checksum when it is read, and every value's.
		WithChecksumVerificationMode(options.OnTableAndBlockRead).
		WithVerifyValueChecksum(true).
		WithLogger(nil)
	if o.Logger != nil {
		bo = bo.WithLogger(slogAdapter{o.Logger.With("component", "badger", "dir", dir)})
	}
	return bo
}

// slogAdapter routes Badger's printf-style logger to slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) log(level slog.Level, format string, args []any) {
	if !a.l.Enabled(context.Background(), level) {
		return
	}
	a.l.Log(context.Background(), level, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (a slogAdapter) Errorf(f string, args ...any)   { a.log(slog.LevelError, f, args) }
func (a slogAdapter) Warningf(f string, args ...any) { a.log(slog.LevelWarn, f, args) }
func (a slogAdapter) Infof(f string, args ...any)    { a.log(slog.LevelDebug, f, args) }
func (a slogAdapter) Debugf(f string, args ...any)   { a.log(slog.LevelDebug-4, f, args) }
