package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// loadProgram reads and compiles an RTFS file. A compile error is printed as
// "file:line:col: message" followed by the offending source line, and comes
// back as exit code 2.
func (a *app) loadProgram(path string) (*rtfs.Program, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, withCode(exitProgramError, fmt.Errorf("reading program: %w", err))
	}
	prog, err := rtfs.Compile(path, src)
	if err != nil {
		reportProgramError(a.stderr, path, src, err)
		return nil, printedWithCode(exitProgramError)
	}
	return prog, nil
}

// reportProgramError prints err (already "file:line:col: message") and, when
// the position is known and in file, the offending source line.
func reportProgramError(w io.Writer, file string, src []byte, err error) {
	fmt.Fprintln(w, err.Error())
	line, _, ok := errorLineCol(err, file)
	if !ok {
		return
	}
	if text, ok := sourceLine(src, line); ok {
		fmt.Fprintf(w, "%5d | %s\n", line, text)
	}
}

// errorLineCol finds the source position of a program error in file.
func errorLineCol(err error, file string) (line, col int, ok bool) {
	var se *syntax.Error
	if errors.As(err, &se) && se.Pos.IsValid() {
		return int(se.Pos.Line), int(se.Pos.Col), se.Pos.Filename() == file
	}
	var ee *rtfs.EvalError
	if errors.As(err, &ee) && ee.Pos.IsValid() {
		return int(ee.Pos.Line), int(ee.Pos.Col), ee.Pos.Filename() == file
	}
	// Compile errors print as "file:line:col: message" too.
	rest, found := strings.CutPrefix(err.Error(), file+":")
	if !found {
		return 0, 0, false
	}
	parts := strings.SplitN(rest, ":", 3)
	if len(parts) < 3 {
		return 0, 0, false
	}
	l, err1 := strconv.Atoi(parts[0])
	c, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return l, c, true
}

// sourceLine returns line n (1-based) of src without its line ending.
func sourceLine(src []byte, n int) (string, bool) {
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(src, '\n')
		if j < 0 {
			return "", false
		}
		src = src[j+1:]
	}
	if j := bytes.IndexByte(src, '\n'); j >= 0 {
		src = src[:j]
	}
	return strings.TrimRight(string(src), "\r"), true
}
