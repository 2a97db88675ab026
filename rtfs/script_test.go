package rtfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// The language tests: every rtfs/testdata/*.rtfs file is split into chunks at
// lines that are exactly ";; ---"; each chunk is compiled and run as its own
// program with the helpers (assert= actual expected), (assert x) and
// (assert-fails thunk "regexp"). A line ending in ;; ### "regexp" says the
// chunk must fail with an error reported at that line whose message matches.
//
// The driver is also a small host: (call :test.echo x) and
// (call :mcp.stream.start request) return their argument,
// (call :test.fail "msg") fails with msg, :ccos.io.log returns nil. At every
// host call it marshals the continuation, unmarshals it and resumes the copy,
// so every language test also exercises continuation round trips.

const chunkSep = ";; ---"

var errorAnnotation = regexp.MustCompile(`;; ### "((?:[^"\\]|\\.)*)"\s*$`)

// minAssertions is the number of assertions the language tests must reach.
const minAssertions = 300

func TestLanguage(t *testing.T) {
	files, err := filepath.Glob("testdata/*.rtfs")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no language tests in testdata/*.rtfs")
	}
	total := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			for _, c := range splitChunks(string(src)) {
				total += runChunk(t, file, c)
			}
		})
	}
	t.Logf("%d assertions in %d files", total, len(files))
	if total < minAssertions && !testing.Short() && flagRunAll() {
		t.Errorf("the language tests hold %d assertions, want at least %d", total, minAssertions)
	}
}

// flagRunAll reports whether no -run filter restricts the tests.
func flagRunAll() bool {
	for _, a := range os.Args {
		if strings.HasPrefix(a, "-test.run") {
			return false
		}
	}
	return true
}

type chunk struct {
	src       string // with the lines before the chunk blanked, so positions match the file
	firstLine int
	wantLine  int    // line of the ;; ### annotation, 0 if none
	wantErr   string // its regexp
}

func splitChunks(src string) []chunk {
	lines := strings.Split(src, "\n")
	var out []chunk
	start := 0
	flush := func(end int) {
		c := chunk{firstLine: start + 1}
		var b strings.Builder
		for i := 0; i < start; i++ {
			b.WriteByte('\n')
		}
		for i := start; i < end; i++ {
			b.WriteString(lines[i])
			b.WriteByte('\n')
			if m := errorAnnotation.FindStringSubmatch(lines[i]); m != nil && c.wantLine == 0 {
				c.wantLine = i + 1
				c.wantErr, _ = strconv.Unquote(`"` + m[1] + `"`)
			}
		}
		c.src = b.String()
		if strings.TrimSpace(c.src) != "" {
			out = append(out, c)
		}
	}
	for i, l := range lines {
		if l == chunkSep {
			flush(i)
			start = i + 1
		}
	}
	flush(len(lines))
	return out
}

// testHelpers is compiled before every chunk.
const testHelpers = `
(defn assert-fails [thunk pattern]
  (%check-fails (try (thunk) [:no-error] (catch e [:error e])) pattern))
`

func runChunk(t *testing.T, file string, c chunk) (asserts int) {
	t.Helper()
	builtins := map[string]*Builtin{
		"assert=": NewBuiltin("assert=", func(th *Thread, args []Value) (Value, error) {
			if len(args) != 2 {
				return nil, fmt.Errorf("expected 2 arguments, got %d", len(args))
			}
			// As =, it computes the elements of a lazy sequence first.
			if err := realizeLazyArgs(th, args, false); err != nil {
				return nil, err
			}
			asserts++
			if !Equal(args[0], args[1]) {
				return nil, fmt.Errorf("assertion failed: got %s, want %s", args[0], args[1])
			}
			return Nil, nil
		}),
		// (assert x msg?) expands to (%assert x msg form); the tests count it.
		"%assert": {name: "%assert", minArgs: 3, maxArgs: 3, bare: true, impl: func(th *Thread, args []Value) (Value, error) {
			asserts++
			return builtinAssert(th, args)
		}},
		"%check-fails": NewBuiltin("assert-fails", func(_ *Thread, args []Value) (Value, error) {
			asserts++
			return checkFails(args)
		}),
	}
	helpers, err := syntax.Parse("<test-helpers>", []byte(testHelpers))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &compileConfig{units: []compile.Unit{{Nodes: helpers, Internal: true}}, builtins: builtins}
	err = runTestProgram(t, file, c, cfg)
	checkChunkError(t, file, c, err)
	return asserts
}

func checkFails(args []Value) (Value, error) {
	res, ok := args[0].(*Vector)
	re, ok2 := args[1].(String)
	if !ok || !ok2 {
		return nil, fmt.Errorf("usage: (assert-fails thunk \"regexp\")")
	}
	if res.Index(0) == Keyword("no-error") {
		return nil, fmt.Errorf("assertion failed: expected an error matching %q, got none", string(re))
	}
	v := res.Index(1)
	msg := throwMessage(v)
	if !regexp.MustCompile(string(re)).MatchString(msg) {
		return nil, fmt.Errorf("assertion failed: error %q does not match %q", msg, string(re))
	}
	return Nil, nil
}

func runTestProgram(t *testing.T, file string, c chunk, cfg *compileConfig) error {
	p, err := compileUnits(file, []byte(c.src), cfg)
	if err != nil {
		return err
	}
	th := NewThread(Limits{MaxSteps: 5_000_000})
	ctx := context.Background()
	out, err := th.Run(ctx, p)
	for err == nil && out.Call != nil {
		k := roundTrip(t, p, out.Continuation)
		switch out.Call.Capability {
		case "test.echo", "mcp.stream.start", "mcp.stream.inspect":
			var v Value = Nil
			if len(out.Call.Args) > 0 {
				v = out.Call.Args[0]
			}
			out, err = th.Resume(ctx, k, v)
		case "test.fail":
			out, err = th.ResumeError(ctx, k, fmt.Errorf("%s", throwMessage(out.Call.Args[0])))
		case "ccos.io.log":
			out, err = th.Resume(ctx, k, Nil)
		default:
			out, err = th.ResumeError(ctx, k, fmt.Errorf("unknown capability %q", out.Call.Capability))
		}
	}
	return err
}

// roundTrip marshals and unmarshals a continuation.
func roundTrip(t *testing.T, p *Program, k *Continuation) *Continuation {
	t.Helper()
	b, err := k.MarshalBinary()
	if err != nil {
		t.Fatalf("marshal continuation: %v", err)
	}
	k2, err := UnmarshalContinuation(p, b)
	if err != nil {
		t.Fatalf("unmarshal continuation: %v", err)
	}
	return k2
}

func checkChunkError(t *testing.T, file string, c chunk, err error) {
	t.Helper()
	if c.wantLine == 0 {
		if err != nil {
			t.Errorf("%s (chunk at line %d): %v", file, c.firstLine, err)
		}
		return
	}
	if err == nil {
		t.Errorf("%s:%d: expected an error matching %q, got none", file, c.wantLine, c.wantErr)
		return
	}
	line := errorLine(err)
	re, rerr := regexp.Compile(c.wantErr)
	if rerr != nil {
		t.Errorf("%s:%d: bad regexp: %v", file, c.wantLine, rerr)
		return
	}
	if line != c.wantLine || !re.MatchString(err.Error()) {
		t.Errorf("%s:%d: expected an error matching %q at line %d, got (line %d) %v", file, c.wantLine, c.wantErr, c.wantLine, line, err)
	}
}

// errorLine returns the line an error is reported at.
func errorLine(err error) int {
	var se *syntax.Error
	var ee *EvalError
	switch {
	case errors.As(err, &ee):
		return int(ee.Pos.Line)
	case errors.As(err, &se):
		return int(se.Pos.Line)
	}
	return 0
}
