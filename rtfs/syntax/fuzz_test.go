package syntax

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that Parse never panics, that its errors are *Error values
// with a valid position inside the input, and that what it reads prints back
// to source that reads to an equal form. The seed corpus is f.Add below, the
// testdata/*.rtfs files and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "(a b)", "[1 2.5 -3 ##Inf]", `{:a "x\n\u00e9"}`, "'x", "@x", "`(a ~b ~@c)",
		"#(+ % %2 %&)", "#{1 2}", "^:a ^{:b 1} (f)", ":[ :map { :k :int } ]", "#| #| |# |#",
		"(a ; c\n b)", "9223372036854775808", "1e999", `"\uD83D\uDE00"`, "(]", ":a/b", "##NaN",
	} {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob("testdata/*.rtfs")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		nodes, err := Parse("fuzz.rtfs", src)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error %v is %T, not *Error", err, err)
			}
			if !se.Pos.IsValid() || se.Pos.Filename() != "fuzz.rtfs" || int(se.Pos.Line) > len(src)+1 || int(se.Pos.Col) > len(src)+1 {
				t.Fatalf("error %q has an invalid position", err)
			}
			return
		}
		for _, n := range nodes {
			if !n.Pos().IsValid() {
				t.Fatalf("form %s has no position", n)
			}
			back, err := Parse("back.rtfs", []byte(n.String()))
			if err != nil || len(back) != 1 || !equalNode(n, back[0]) {
				t.Fatalf("%q read as %s, which reads back as %v (%v)", src, n, back, err)
			}
		}
	})
}
