package main

import (
	"errors"
	"fmt"
)

// Exit codes of rtfshost, as docs/cli.md lists them. Scripts test them, so a
// code never changes its meaning.
const (
	exitOK           = 0   // the program and all its streams completed
	exitStreamFailed = 1   // a stream ended in :error (or was cancelled by a failure)
	exitProgramError = 2   // reader, compile or runtime error in the program, or bad usage
	exitInterrupted  = 130 // stopped by Ctrl-C (SIGINT) or SIGTERM; progress is kept
)

// exitError carries an exit code through cobra's error return. Its message has
// already been printed when printed is true.
type exitError struct {
	code    int
	err     error
	printed bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// withCode wraps err so that the command exits with code.
func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// printedWithCode says the failure was already reported; only the code remains.
func printedWithCode(code int) error { return &exitError{code: code, printed: true} }

// exitCodeOf maps an error returned by a command to the process exit code.
func exitCodeOf(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitProgramError
}
