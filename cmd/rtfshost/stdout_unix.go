//go:build unix

package main

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// claimStdout makes w, when it is this process's standard output, the MCP
// connection's alone: the connection gets a duplicate of file descriptor
// 1, and descriptor 1 then points at standard error, so a stray print of
// any part of the process (a library, the Go runtime, a child that
// inherits it) lands on stderr instead of breaking the client's stream.
// Any other w is returned as it is. The returned function puts
// descriptor 1 back.
func claimStdout(w io.Writer) (io.WriteCloser, func(), error) {
	f, ok := w.(*os.File)
	if !ok || f.Fd() != 1 {
		return nopWriteCloser{w}, func() {}, nil
	}
	fd, err := unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, nil, fmt.Errorf("keeping stdout for MCP: %w", err)
	}
	if err := unix.Dup2(2, 1); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("pointing stdout at stderr: %w", err)
	}
	proto := os.NewFile(uintptr(fd), "mcp-stdout")
	return nopWriteCloser{proto}, func() {
		_ = unix.Dup2(fd, 1)
		proto.Close()
	}, nil
}
