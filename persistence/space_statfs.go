//go:build linux || darwin || freebsd

package persistence

import "syscall"

// freeSpace returns the bytes available to unprivileged users on the
// filesystem holding dir.
func freeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(uint64(st.Bavail) * uint64(st.Bsize)), nil
}
