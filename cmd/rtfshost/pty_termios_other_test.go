//go:build unix && !(darwin || dragonfly || freebsd || netbsd || openbsd)

package main

import "golang.org/x/sys/unix"

// The ioctls that read and set a terminal's modes.
const ioctlGetTermios, ioctlSetTermios = unix.TCGETS, unix.TCSETS
