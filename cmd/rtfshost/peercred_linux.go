package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerCred returns the uid and pid of the process at the other end of the
// unix socket fd (SO_PEERCRED: the credentials at connect or listen time).
func peerCred(fd int) (uid, pid int, err error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0, 0, err
	}
	return int(cred.Uid), int(cred.Pid), nil
}

// fileOwner returns the uid that owns the file fi describes.
func fileOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
