//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// dirLock is an exclusive flock on the lock file of a data directory. The
// kernel releases it when the process dies, so a crashed host never leaves a
// stale lock behind.
type dirLock struct{ f *os.File }

func lockDir(dir string) (*dirLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("persistence: open lock file in %q: %w", dir, err)
	}
	// flock locks belong to the open file description, so a second
	// descriptor in the same process conflicts like another process does.
	if err := lockExclusive(f, readersWait); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &LockedError{Dir: dir, Holder: readHolder(dir), Err: err}
		}
		return nil, fmt.Errorf("persistence: lock %q: %w", dir, err)
	}
	writeHolder(f)
	return &dirLock{f: f}, nil
}

// readersWait bounds how long a writer waits for the readers of a data
// directory (OpenBadgerReadOnly: a command that lists or inspects the
// streams) to finish.
const readersWait = 10 * time.Second

// lockExclusive takes an exclusive flock on f. While only readers hold
// their shared lock (a shared lock can still be taken), it waits for them,
// up to wait; a writer fails it at once.
func lockExclusive(f *os.File, wait time.Duration) error {
	fd := int(f.Fd())
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		// Readers only? A shared lock is granted beside theirs, not beside
		// a writer's. (Taking it converts nothing: this descriptor holds no
		// lock yet; it is dropped again at once.)
		if serr := syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB); serr != nil {
			return err
		}
		if uerr := syscall.Flock(fd, syscall.LOCK_UN); uerr != nil {
			return uerr
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lockDirShared takes a shared flock on the lock file of dir, as a reader:
// it fails with a *LockedError while a store holds dir, and keeps one from
// opening it meanwhile; readers do not exclude each other. It neither
// creates nor writes the lock file; without one (a directory no store has
// opened) it locks nothing, and Badger's own lock still guards the
// directory.
func lockDirShared(dir string) (*dirLock, error) {
	f, err := os.Open(filepath.Join(dir, lockFileName))
	if errors.Is(err, os.ErrNotExist) {
		return &dirLock{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("persistence: open lock file in %q: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &LockedError{Dir: dir, Holder: readHolder(dir), Err: err}
		}
		return nil, fmt.Errorf("persistence: lock %q: %w", dir, err)
	}
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() error {
	if l.f == nil {
		return nil
	}
	// Closing the descriptor drops the flock.
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("persistence: release lock file: %w", err)
	}
	return nil
}
