//go:build linux || darwin || freebsd

package persistence

import (
	"os"
	"syscall"
)

// freeSpace returns the bytes available to unprivileged users on the
// filesystem holding dir.
func freeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(uint64(st.Bavail) * uint64(st.Bsize)), nil
}

// allocated returns the bytes fi's file occupies on disk (less than its
// size when it is sparse).
func allocated(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}

// freeSpaceOf returns the free space function of an open directory: the
// bytes available to unprivileged users on its filesystem, read with
// fstatfs (no path lookup, no allocation: about 0.5 µs).
func freeSpaceOf(d *os.File) func(string) (int64, error) {
	fd := int(d.Fd())
	return func(string) (int64, error) {
		var st syscall.Statfs_t
		if err := syscall.Fstatfs(fd, &st); err != nil {
			return 0, err
		}
		return int64(uint64(st.Bavail) * uint64(st.Bsize)), nil
	}
}

// unlinkedOf returns whether the open directory d has been removed (no
// link left to it), read with fstat: about 0.3 µs.
func unlinkedOf(d *os.File) func() bool {
	fd := int(d.Fd())
	return func() bool {
		var st syscall.Stat_t
		return syscall.Fstat(fd, &st) == nil && st.Nlink == 0
	}
}
