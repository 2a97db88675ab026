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
