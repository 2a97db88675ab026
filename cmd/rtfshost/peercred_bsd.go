//go:build darwin || freebsd

package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerCred returns the uid of the process at the other end of the unix
// socket fd (LOCAL_PEERCRED; the pid is not reported: 0).
func peerCred(fd int) (uid, pid int, err error) {
	cred, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return 0, 0, err
	}
	return int(cred.Uid), 0, nil
}

// fileOwner returns the uid that owns the file fi describes.
func fileOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
