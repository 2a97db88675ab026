//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package persistence

// dirLock is a no-op where flock is unavailable; Badger's own directory lock
// still refuses a second open, and OpenBadger turns its error into a
// *LockedError.
type dirLock struct{}

func lockDir(dir string) (*dirLock, error) { return &dirLock{}, nil }

func (l *dirLock) release() error { return nil }

func lockDirShared(dir string) (*dirLock, error) { return &dirLock{}, nil }
