//go:build !unix

package main

import "io"

// claimStdout returns w: off Unix, standard output is not redirected, so
// every print path of serve --stdio must keep off it (they do: logs and
// programs' prints go to stderr).
func claimStdout(w io.Writer) (io.WriteCloser, func(), error) {
	return nopWriteCloser{w}, func() {}, nil
}
