package persistence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/skl"
)

// BadgerStore is a Store on a Badger database in one data directory. It is
// safe for concurrent use. One BadgerStore owns its directory: OpenBadger
// fails with a *LockedError while another one, in any process, is open on it.
// A value-log GC goroutine runs while the store is open; Close stops it before
// closing the database.
type BadgerStore struct {
	dir    string
	db     *badger.DB
	lock   *dirLock
	logger *slog.Logger

	memTableSize int64
	dirFile      *os.File // the data directory, open for fstatfs; nil if it could not be opened
	readOnly     bool     // opened by OpenBadgerReadOnly: every write is refused
	scratch      string   // the copy a read-only store reads, removed by Close; "" when it reads dir itself

	mu     sync.Mutex
	idle   *sync.Cond // signalled when active drops to zero
	active int        // operations in progress
	closed bool
	space  spaceGuard // guarded by mu

	stopGC chan struct{}
	gcDone chan struct{}
	gcRuns atomic.Int64 // value-log GC attempts, for tests
}

// OpenBadger opens (creating if needed) the Badger database in dir with the
// embedding profile described on Options. It fails at once with a
// *LockedError when another store holds dir, in this process or another.
// Cost: milliseconds, more after a crash (write-ahead-log replay).
func OpenBadger(dir string, opts Options) (*BadgerStore, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("persistence: open %q: %w", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("persistence: open %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("persistence: create data directory: %w", err)
	}
	lock, err := lockDir(abs)
	if err != nil {
		return nil, err
	}
	if err := removeTornFiles(abs, opts.Logger); err != nil {
		lock.release()
		return nil, err
	}
	if err := checkIntact(abs); err != nil {
		lock.release()
		return nil, err
	}
	if err := checkFreeSpace(abs, opts.MinFreeBytes, freeSpace); err != nil {
		lock.release()
		return nil, fmt.Errorf("persistence: open %q: %w", abs, err)
	}
	spare := ""
	if opts.MinFreeBytes > 0 {
		spare = filepath.Join(abs, spareFileName)
		if ok, err := allocateSpare(spare, 4*opts.MemTableSize); !ok {
			spare = ""
			if err != nil && opts.Logger != nil {
				opts.Logger.Warn("persistence: no spare file for a full disk", "dir", abs, "err", err)
			}
		}
	}
	db, err := openDB(opts.badgerOptions(abs))
	if err != nil {
		if spare != "" {
			os.Remove(spare)
		}
		lock.release()
		if isBadgerLockError(err) {
			return nil, &LockedError{Dir: abs, Err: err}
		}
		return nil, &DamagedError{Dir: abs, Problem: "Badger cannot open it", Err: err}
	}
	s := newBadgerStore(abs, db, lock, opts)
	if spare != "" {
		s.space.spare, s.space.spareSize = spare, 4*opts.MemTableSize
	}
	return s, nil
}

// newBadgerStore wraps an open database and starts its GC goroutine.
func newBadgerStore(dir string, db *badger.DB, lock *dirLock, opts Options) *BadgerStore {
	s := &BadgerStore{
		dir:          dir,
		db:           db,
		lock:         lock,
		logger:       opts.Logger,
		memTableSize: opts.MemTableSize,
		space:        spaceGuard{dir: dir, min: max(opts.MinFreeBytes, 0), free: freeSpace, every: dirCheckInterval},
		stopGC:       make(chan struct{}),
		gcDone:       make(chan struct{}),
	}
	s.idle = sync.NewCond(&s.mu)
	if fi, err := os.Stat(dir); err == nil {
		s.space.dirInfo = fi
	}
	if d, err := os.Open(dir); err == nil {
		s.dirFile, s.space.free, s.space.unlinked = d, freeSpaceOf(d), unlinkedOf(d)
	}
	if opts.GCInterval > 0 {
		go s.runGC(opts.GCInterval)
	} else {
		close(s.gcDone)
	}
	return s
}

// openDB opens Badger, turning a panic inside it (it asserts on some corrupt
// files) into an error.
func openDB(o badger.Options) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("badger panicked during open: %v", r)
		}
	}()
	return badger.Open(o)
}

// removeTornFiles deletes the empty memtable (.mem) and value-log (.vlog)
// files that a kill between Badger's creation of such a file and its sizing
// leaves behind. Badger's open fails on one ("Create a new file",
// dgraph-io/badger#2207), leaking the goroutines it had started. An empty file
// holds no entries and nothing points into it (Badger itself deletes value-log
// files that hold only their header), so removing it loses nothing.
func removeTornFiles(dir string, logger *slog.Logger) error {
	for _, pattern := range []string{"*.mem", "*.vlog"} {
		files, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return fmt.Errorf("persistence: listing %s files in %q: %w", pattern, dir, err)
		}
		for _, f := range files {
			fi, err := os.Stat(f)
			if err != nil || fi.Size() != 0 {
				continue
			}
			if err := os.Remove(f); err != nil {
				return fmt.Errorf("persistence: removing the empty file %q: %w", f, err)
			}
			if logger != nil {
				logger.Warn("persistence: removed an empty file left by a crash", "file", f)
			}
		}
	}
	return nil
}

// Dir returns the absolute path of the store's data directory.
func (s *BadgerStore) Dir() string { return s.dir }

// enter registers an operation; it fails once Close has begun, and for a
// write (cost >= 0: what it may write, in bytes) while the disk is low on
// space or on a store opened for reading.
func (s *BadgerStore) enter(cost int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if cost >= 0 {
		if s.readOnly {
			return ErrReadOnly
		}
		if err := s.space.check(time.Now(), cost); err != nil {
			return err
		}
	}
	s.active++
	return nil
}

func (s *BadgerStore) exit() {
	s.mu.Lock()
	s.active--
	if s.active == 0 && s.closed {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
}

// Commit implements Store with one Badger transaction. With
// Options.SyncWrites it returns after the write-ahead log is synced. While
// the filesystem has less than Options.MinFreeBytes free, it applies nothing
// and returns an error wrapping syscall.ENOSPC. Cost: about 10 µs plus O(size
// of b) without sync; one msync more with it.
func (s *BadgerStore) Commit(ctx context.Context, b *Batch) error {
	if err := s.commit(ctx, b); err != nil {
		return fmt.Errorf("persistence: commit of %d operations in %q: %w", b.Len(), s.dir, err)
	}
	return nil
}

func (s *BadgerStore) commit(ctx context.Context, b *Batch) (err error) {
	if err := b.validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.Len() == 0 {
		return nil
	}
	if err := s.enter(batchCost(b)); err != nil {
		return err
	}
	defer s.exit()
	defer s.recoverDamage("a commit", &err)
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	for i := range b.ops {
		op := &b.ops[i]
		var err error
		if op.Delete {
			err = txn.Delete(op.Key)
		} else {
			err = txn.Set(op.Key, op.Value)
		}
		if errors.Is(err, badger.ErrTxnTooBig) {
			return fmt.Errorf("%w (at operation %d): %w", ErrBatchTooLarge, i, err)
		}
		if err != nil {
			return fmt.Errorf("operation %d on key %q: %w", i, op.Key, err)
		}
	}
	return txn.Commit()
}

// Get implements Store.
func (s *BadgerStore) Get(ctx context.Context, key []byte) ([]byte, error) {
	v, err := s.get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("persistence: get %q in %q: %w", key, s.dir, err)
	}
	return v, nil
}

func (s *BadgerStore) get(ctx context.Context, key []byte) (v []byte, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.enter(-1); err != nil {
		return nil, err
	}
	defer s.exit()
	defer s.recoverDamage("a read", &err)
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	return v, s.damaged("a read", err)
}

// Scan implements Store with one read-only Badger transaction; values are
// read lazily, so fn sees the value slice only while it runs.
func (s *BadgerStore) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) (err error) {
	if err := s.enter(-1); err != nil {
		return fmt.Errorf("persistence: scan %q in %q: %w", prefix, s.dir, err)
	}
	defer s.exit()
	defer s.recoverDamage(fmt.Sprintf("a scan of %q", prefix), &err)
	var stoppedAt []byte
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			item := it.Item()
			key := item.Key()
			if err := item.Value(func(v []byte) error { return fn(key, v) }); err != nil {
				stoppedAt = item.KeyCopy(nil)
				return err
			}
		}
		return nil
	})
	switch {
	case err == nil || errors.Is(err, ErrStopScan):
		return nil
	case errors.Is(s.damaged("", err), ErrDamaged):
		return s.damaged(fmt.Sprintf("a scan of %q", prefix), err)
	case stoppedAt != nil:
		return fmt.Errorf("persistence: scan %q in %q stopped at key %q: %w", prefix, s.dir, stoppedAt, err)
	default:
		return fmt.Errorf("persistence: scan %q in %q: %w", prefix, s.dir, err)
	}
}

// Sync flushes every commit that returned before the call to stable storage,
// making it survive power loss even without Options.SyncWrites. Cost: one
// msync of the write-ahead log and value log.
func (s *BadgerStore) Sync() error {
	if err := s.enter(-1); err != nil {
		return fmt.Errorf("persistence: sync %q: %w", s.dir, err)
	}
	defer s.exit()
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("persistence: sync %q: %w", s.dir, err)
	}
	return nil
}

// Close implements Store. It refuses new operations, waits for those in
// progress, stops the GC goroutine, closes the database (flushing the
// memtable) and releases the directory lock. A second Close returns nil.
// When the data directory has been removed while the store was open,
// Close returns an error wrapping ErrDirRemoved without waiting for Badger,
// which retries writing its last table into the missing directory forever:
// nothing can be saved, and Badger's goroutines end with the process.
func (s *BadgerStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for s.active > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()

	close(s.stopGC)
	<-s.gcDone
	s.space.releaseSpare() // room for the last flush, however full the disk is
	err := s.closeDB()
	if lerr := s.lock.release(); err == nil {
		err = lerr
	}
	if s.dirFile != nil {
		s.dirFile.Close()
	}
	if s.scratch != "" && !errors.Is(err, ErrDirRemoved) {
		if rerr := os.RemoveAll(s.scratch); err == nil && rerr != nil {
			err = fmt.Errorf("removing the copy it was read from: %w", rerr)
		}
	}
	if err != nil {
		return fmt.Errorf("persistence: close %q: %w", s.dir, err)
	}
	return nil
}

// closeDB closes the database, giving up when the data directory is gone.
func (s *BadgerStore) closeDB() error {
	if s.dirRemoved() {
		go s.db.Close() //nolint:errcheck // it never returns; see Close
		return s.space.removedErr()
	}
	done := make(chan error, 1)
	go func() { done <- s.db.Close() }()
	t := time.NewTicker(dirRemovedCheck)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			if s.dirRemoved() {
				return s.space.removedErr()
			}
		}
	}
}

// dirRemovedCheck is how often a Close that waits for Badger looks whether
// the data directory is still there.
const dirRemovedCheck = 250 * time.Millisecond

// dirRemoved reports whether the directory the store was opened on is gone
// (removed, or replaced by another one).
func (s *BadgerStore) dirRemoved() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.space.dirGone()
}

// runGC collects the value log every interval until Close.
func (s *BadgerStore) runGC(interval time.Duration) {
	defer close(s.gcDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stopGC:
			return
		case <-t.C:
			s.collect()
		}
	}
}

// collect rewrites value-log files while Badger finds one worth rewriting,
// stopping early when Close begins.
func (s *BadgerStore) collect() {
	for range 16 {
		select {
		case <-s.stopGC:
			return
		default:
		}
		if !s.roomForGC() {
			return
		}
		err := s.db.RunValueLogGC(gcDiscardRatio)
		s.gcRuns.Add(1)
		if err == nil {
			continue
		}
		if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) && s.logger != nil {
			s.logger.Warn("value-log GC failed", "dir", s.dir, "err", err)
		}
		return
	}
}

// CheckSpace implements SpaceChecker: it fails with a *SpaceError while
// the free space is below Options.MinFreeBytes plus a headroom of two
// memtables, for writes to stop before commits are refused. It uses the
// free space read for the last commit (commits read it each), and reads it
// again when that reading is low (space may have been freed since) or
// missing. It is nil on a store opened for reading
// (nothing is written) and without a reserve.
func (s *BadgerStore) CheckSpace() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.readOnly || s.closed || s.space.min <= 0 {
		return nil
	}
	limit := s.space.min + 2*s.memTableSize
	low := func() bool { return s.space.read && s.space.lastFree >= 0 && s.space.lastFree < limit }
	if !s.space.read || low() {
		// No reading yet, or a low one, which may be old: space may have
		// been freed while nothing was written.
		free, err := s.space.free(s.space.dir)
		if err != nil {
			return fmt.Errorf("persistence: check free space of %q: %w", s.dir, err)
		}
		s.space.lastFree, s.space.read = free, true
	}
	if low() {
		return &SpaceError{Dir: s.dir, Free: s.space.lastFree, Reserve: limit}
	}
	return nil
}

var _ SpaceChecker = (*BadgerStore)(nil)

// roomForGC reports whether the filesystem has room for a value-log GC
// run, which rewrites up to a value-log file through Badger's write path.
func (s *BadgerStore) roomForGC() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.readOnly && s.space.check(time.Now(), 2*valueLogFileSize) == nil
}

// BatchLimits returns half of what one Badger transaction holds: Badger
// refuses a transaction beyond 15% of the memtable size or that many bytes
// divided by the skiplist node size in entries. It is safe for concurrent
// use and costs nothing.
func (s *BadgerStore) BatchLimits() (ops, bytes int) {
	maxBytes := int(s.memTableSize * 15 / 100)
	return maxBytes / skl.MaxNodeSize / 2, maxBytes / 2
}
