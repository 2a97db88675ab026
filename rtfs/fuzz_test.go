package rtfs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCompileRun compiles and runs arbitrary source with tight limits,
// answering host calls with nil: whatever the input, the result is a value or
// an error, never a Go panic (which the API would report as an internal
// error) or a hang. The seeds are the language-test chunks (lang_*, and
// clj_*: lazy sequences, regexes, sorted collections, transducers, whose
// builtins hand work to the prelude).
func FuzzCompileRun(f *testing.F) {
	files, _ := filepath.Glob("testdata/lang_*.rtfs")
	more, _ := filepath.Glob("testdata/clj_*.rtfs")
	for _, file := range append(files, more...) {
		src, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, c := range splitChunks(string(src)) {
			f.Add(strings.TrimLeft(c.src, "\n"))
		}
	}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Compile("fuzz.rtfs", []byte(src))
		if err != nil {
			if strings.Contains(err.Error(), "internal compiler error") {
				t.Fatalf("compile: %v", err)
			}
			return
		}
		th := NewThread(Limits{MaxSteps: 20_000, MaxDepth: 200, MaxCollectionSize: 1000})
		ctx := context.Background()
		out, err := th.Run(ctx, p)
		for i := 0; err == nil && out.Call != nil && i < 20; i++ {
			out, err = th.Resume(ctx, out.Continuation, Nil)
		}
		if err != nil && strings.Contains(err.Error(), "internal error") {
			t.Fatalf("run: %v", err)
		}
	})
}
