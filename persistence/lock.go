package persistence

import (
	"fmt"
	"strings"
)

// lockFileName is the file in a data directory that the store holding the
// directory keeps locked, next to Badger's own LOCK file.
const lockFileName = "rtfshost.lock"

// A LockedError reports that another store, in this process or another one,
// holds the data directory. Dir is the directory's absolute path.
type LockedError struct {
	Dir string
	Err error
}

// Error names the directory and says that another rtfshost holds it.
func (e *LockedError) Error() string {
	return fmt.Sprintf("persistence: data directory %q is in use by another rtfshost (process or store in this process); stop it or use another data directory: %v", e.Dir, e.Err)
}

// Unwrap returns the underlying lock error.
func (e *LockedError) Unwrap() error { return e.Err }

// isBadgerLockError recognises Badger's directory-lock failure, which it
// reports as text only. It is the fallback on systems without flock.
func isBadgerLockError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Another process is using this Badger database")
}
