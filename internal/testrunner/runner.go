// Package testrunner runs RTFS test files: `rtfshost test`. A test file
// (name_test.rtfs) loads a program's definitions, defines tests with
// deftest, asserts with is (inside testing contexts), and drives
// processors over chunks with run-processor, a dry run that applies every
// result as a stream does (provider.DryRun). rewrite.go expands the test
// forms; this file runs a compiled file's tests one by one, each on a
// thread of its own under a step and a time budget.
package testrunner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/rtfs"
)

// Options say which tests run and under what budgets. The zero value runs
// every test with the defaults.
type Options struct {
	// Run selects the tests whose names it matches; nil runs all.
	Run *regexp.Regexp
	// Steps bounds the VM instructions of each test's own code, and of
	// each processor call a run-processor makes (default 10,000,000).
	Steps int64
	// Timeout bounds each test's wall time, processors included (default
	// 10 s).
	Timeout time.Duration
	// Log receives what the tests print (println, log); nil discards it.
	Log io.Writer
}

func (o Options) steps() int64 {
	if o.Steps > 0 {
		return o.Steps
	}
	return 10_000_000
}

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return 10 * time.Second
}

// A Failure is one assertion that failed, or an error an assertion (or a
// test outside any assertion) met.
type Failure struct {
	File     string   `json:"file"`
	Line     int      `json:"line"`
	Col      int      `json:"col,omitempty"`
	Test     string   `json:"test"`
	Testing  []string `json:"testing,omitempty"` // the testing contexts, outermost first
	Message  string   `json:"message,omitempty"` // the is message; for an error, the error
	Form     string   `json:"form,omitempty"`    // the asserted form as written
	Expected string   `json:"expected,omitempty"`
	Actual   string   `json:"actual,omitempty"` // printed values; empty for an error
	Diff     string   `json:"diff,omitempty"`   // for collections: "- only-expected + only-actual"
	Error    bool     `json:"error,omitempty"`  // an error, not a failed assertion
}

// String is the failure on one line: "file:line: FAIL in (test) ...".
func (f Failure) String() string {
	var b strings.Builder
	kind := "FAIL"
	if f.Error {
		kind = "ERROR"
	}
	fmt.Fprintf(&b, "%s:%d: %s in (%s)", f.File, f.Line, kind, f.Test)
	for _, t := range f.Testing {
		b.WriteString(" " + t)
	}
	if f.Form != "" {
		b.WriteString(": " + f.Form)
	}
	if f.Error {
		b.WriteString(": " + f.Message)
		return b.String()
	}
	if f.Message != "" {
		b.WriteString(": " + f.Message)
	}
	fmt.Fprintf(&b, ": expected %s, actual %s", f.Expected, f.Actual)
	if f.Diff != "" {
		b.WriteString(", diff " + f.Diff)
	}
	return b.String()
}

// A Test is how one deftest went.
type Test struct {
	File     string
	Name     string
	Line     int
	Passed   int // assertions that held
	Failures []Failure
	Duration time.Duration
}

// OK reports whether the test passed: every assertion held and nothing
// failed outside them.
func (t *Test) OK() bool { return len(t.Failures) == 0 }

// A File is how one test file went: its tests in the order it defines
// them, or the error that kept it from compiling (or from loading).
type File struct {
	Path       string
	CompileErr error
	Tests      []*Test
}

// Find returns the test files named by args: files as given, and the
// *_test.rtfs files under directories, sorted. No args means ".".
func Find(args []string) ([]string, error) {
	if len(args) == 0 {
		args = []string{"."}
	}
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		// A directory named through a symbolic link is walked through it
		// (WalkDir does not follow a root that is a link); the paths found
		// keep the name given.
		root := a
		if lst, err := os.Lstat(a); err == nil && lst.Mode()&fs.ModeSymlink != 0 {
			root = a + string(filepath.Separator)
		}
		var found []string
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), "_test.rtfs") {
				found = append(found, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}

// run is the state of one file's run that its builtins and host calls
// share: the test running and its testing contexts.
type run struct {
	o       Options
	file    string
	cur     *Test
	testing []string
	caps    *capabilities.Registry
}

// RunFile compiles the test file at path and runs its tests (those o.Run
// selects) in order. It never panics on bad input: a file that does not
// compile has CompileErr set.
func RunFile(ctx context.Context, path string, o Options) *File {
	res := &File{Path: path}
	src, err := os.ReadFile(path)
	if err != nil {
		res.CompileErr = err
		return res
	}
	r := &run{o: o, file: path}
	rw := newRewriter(path)
	prog, err := rtfs.CompileWith(path, src, rtfs.CompileOptions{Builtins: r.builtins(), Rewrite: rw.rewrite})
	if err != nil {
		res.CompileErr = err
		return res
	}
	r.caps = r.capabilities()
	// The top level: the definitions, and any assertion outside a test.
	top := &Test{File: path, Name: "top level", Line: 1}
	r.cur = top
	globals, err := r.drive(ctx, func(ctx context.Context, th *rtfs.Thread) (rtfs.Outcome, error) {
		return th.Run(ctx, prog)
	})
	if err != nil {
		res.CompileErr = fmt.Errorf("running the top level: %w", err)
		return res
	}
	if top.Passed > 0 || len(top.Failures) > 0 {
		res.Tests = append(res.Tests, top)
	}
	for _, t := range rw.tests {
		if o.Run != nil && !o.Run.MatchString(t.name) {
			continue
		}
		tr := &Test{File: path, Name: t.name, Line: int(t.pos.Line)}
		res.Tests = append(res.Tests, tr)
		fn, ok := globals.Get(t.name)
		if !ok {
			tr.Failures = append(tr.Failures, Failure{File: path, Line: tr.Line, Test: t.name, Error: true, Message: "the test was redefined as something else"})
			continue
		}
		r.cur, r.testing = tr, nil
		start := time.Now()
		_, err := r.drive(ctx, func(ctx context.Context, th *rtfs.Thread) (rtfs.Outcome, error) {
			return th.Call(ctx, globals, fn)
		})
		tr.Duration = time.Since(start)
		if err != nil {
			tr.Failures = append(tr.Failures, r.testError(tr, err))
		}
	}
	return res
}

// drive runs one piece of the file (its top level, or a test) on a thread
// of its own under the step and time budgets, serving its host calls.
func (r *run) drive(ctx context.Context, start func(context.Context, *rtfs.Thread) (rtfs.Outcome, error)) (*rtfs.Globals, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, r.o.timeout(), fmt.Errorf("the test ran past its time budget of %s", r.o.timeout()))
	defer cancel()
	th := rtfs.NewThread(rtfs.Limits{MaxSteps: r.o.steps()})
	out, err := start(ctx, th)
	out, err = capabilities.Drive(ctx, th, out, err, func(ctx context.Context, out rtfs.Outcome) (rtfs.Value, error) {
		hc := out.Call
		return r.caps.Call(ctx, &capabilities.Call{ID: hc.Capability, Args: hc.Args, Pos: hc.Pos, Globals: out.Globals})
	})
	if err != nil {
		if ctx.Err() != nil && context.Cause(ctx) != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	return out.Globals, nil
}

// testError is the failure of a test that stopped outside any assertion.
func (r *run) testError(t *Test, err error) Failure {
	f := Failure{File: r.file, Line: t.Line, Test: t.Name, Testing: r.testing, Error: true, Message: err.Error()}
	var le *rtfs.LimitError
	if errors.As(err, &le) && le.Limit == rtfs.LimitSteps {
		f.Message = fmt.Sprintf("the test ran past its step budget of %d steps (--steps)", le.Max)
	}
	var ee *rtfs.EvalError
	if errors.As(err, &ee) && ee.Pos.IsValid() && ee.Pos.Filename() == r.file {
		f.Line, f.Col = int(ee.Pos.Line), int(ee.Pos.Col)
		if le == nil {
			f.Message = ee.Msg
		}
	}
	return f
}

// IsTestFile reports whether path names a test file (NAME_test.rtfs).
func IsTestFile(path string) bool { return strings.HasSuffix(path, "_test.rtfs") }

// CompileOptions are the options a test file at path compiles with: its
// test forms expanded, the runner's builtins defined. `rtfshost check`
// compiles test files with them; running needs RunFile.
func CompileOptions(path string) rtfs.CompileOptions {
	r := &run{file: path}
	return rtfs.CompileOptions{Builtins: r.builtins(), Rewrite: newRewriter(path).rewrite}
}
