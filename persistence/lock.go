package persistence

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// lockFileName is the file in a data directory that the store holding the
// directory keeps locked, next to Badger's own LOCK file.
const lockFileName = "rtfshost.lock"

// A LockedError reports that another store, in this process or another one,
// holds the data directory. Dir is the directory's absolute path.
type LockedError struct {
	Dir    string
	Holder string // "process 1234 (rtfshost run x.rtfs)", when the lock file says
	Err    error
}

// Error names the directory, the process that holds it when known, and what
// to do. The system's word for it (EWOULDBLOCK, "resource temporarily
// unavailable") says nothing more and is left out; Unwrap gives it.
func (e *LockedError) Error() string {
	holder := "another rtfshost (process or store in this process)"
	if e.Holder != "" {
		holder = "another rtfshost, " + e.Holder
	}
	return fmt.Sprintf("persistence: data directory %q is in use by %s; stop it or use another data directory (--data)", e.Dir, holder)
}

// writeHolder records in the held lock file which process holds it, for the
// message of the next one that finds it locked. It is best effort: the lock
// itself is the flock, not this text.
func writeHolder(f *os.File) {
	if err := f.Truncate(0); err != nil {
		return
	}
	cmd := strings.Join(os.Args, " ")
	if len(cmd) > 200 {
		cmd = cmd[:200] + "…"
	}
	_, _ = f.WriteAt([]byte(fmt.Sprintf("process %d (%s)\n", os.Getpid(), cmd)), 0)
}

// readHolder returns what the lock file of dir says of its holder, or "".
func readHolder(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, lockFileName))
	if err != nil || len(b) > 512 {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if !strings.HasPrefix(s, "process ") || strings.ContainsAny(s, "\n\r\x00") {
		return ""
	}
	return s
}

// Unwrap returns the underlying lock error.
func (e *LockedError) Unwrap() error { return e.Err }

// isBadgerLockError recognises Badger's directory-lock failure, which it
// reports as text only. It is the fallback on systems without flock.
func isBadgerLockError(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Another process is using this Badger database")
}
