//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package main

import "golang.org/x/sys/unix"

// The ioctls that read and set a terminal's modes.
const ioctlGetTermios, ioctlSetTermios = unix.TIOCGETA, unix.TIOCSETA
