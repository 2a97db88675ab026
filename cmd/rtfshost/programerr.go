package main

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// excerptWidth is the most characters of a source line an error shows.
const excerptWidth = 100

// excerpt returns a source line fit for a terminal: control characters,
// invisible code points and bytes that are not UTF-8 written as escapes
// (\x00, \u00a0), and a long line cut to width characters around col (the
// 1-based column of the error, in bytes), with "…" where it was cut.
func excerpt(line string, col, width int) string {
	type piece struct {
		text string
		at   int // byte offset in line
	}
	var ps []piece
	for i := 0; i < len(line); {
		r, n := utf8.DecodeRuneInString(line[i:])
		var t string
		switch {
		case r == utf8.RuneError && n <= 1:
			t = fmt.Sprintf("\\x%02x", line[i])
		case r == '\t':
			t = " "
		case r < 0x20 || r == 0x7f:
			t = fmt.Sprintf("\\x%02x", r)
		case r >= 0x80 && (unicode.IsSpace(r) || unicode.Is(unicode.Cf, r)):
			t = fmt.Sprintf("\\u%04x", r)
		default:
			t = line[i : i+n]
		}
		ps = append(ps, piece{t, i})
		i += n
	}
	if len(ps) <= width {
		var b strings.Builder
		for _, p := range ps {
			b.WriteString(p.text)
		}
		return b.String()
	}
	at := 0 // the piece at the error's column
	for k, p := range ps {
		if p.at < col-1 {
			at = k
		}
	}
	start := max(0, min(at-width/2, len(ps)-width))
	end := min(len(ps), start+width)
	var b strings.Builder
	if start > 0 {
		b.WriteString("…")
	}
	for _, p := range ps[start:end] {
		b.WriteString(p.text)
	}
	if end < len(ps) {
		b.WriteString("…")
	}
	return b.String()
}

// errorMessage is err's message without its "file:line:col: " position.
func errorMessage(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return se.Msg
	}
	var ee *rtfs.EvalError
	if errors.As(err, &ee) {
		return ee.Msg
	}
	msg := err.Error()
	if parts := strings.SplitN(msg, ": ", 2); len(parts) == 2 && strings.Count(parts[0], ":") >= 2 {
		return parts[1]
	}
	return msg
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
