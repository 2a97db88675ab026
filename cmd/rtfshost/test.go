package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/internal/testrunner"
)

func (a *app) testCmd() *cobra.Command {
	var (
		asJSON  bool
		runExpr string
		steps   int64
		timeout time.Duration
		verbose bool
	)
	cmd := &cobra.Command{
		Use:   "test [FILES or DIRS]",
		Short: "Run RTFS tests (*_test.rtfs): deftest, is, testing, run-processor",
		Long: `test runs RTFS test files: the files named, and the *_test.rtfs files under
the directories named (default "."). A test file loads a program's
definitions with (load "program.rtfs"), defines tests with deftest, asserts
with is (=, thrown?, thrown-with-msg?, any predicate) inside testing
contexts, and drives a processor over chunks without a server with
(run-processor p initial-state chunks), chunks a vector or a recording's file
name (docs/testing-processors.md).

Each failing assertion is one line: file:line, the test, its testing
contexts, the form, the expected and actual values and, for collections, a
diff. The last line is "N passed, N failed". Exit code 0 when every test
passed, 1 when one failed, 2 when a file does not compile. Each test runs
under a step budget (--steps) and a time budget (--timeout) and fails with
a message saying which it ran past.`,
		Example: `  rtfshost test examples
  rtfshost test --run 'stats|pause' examples/weather_test.rtfs
  rtfshost test --json examples`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o := testrunner.Options{Steps: steps, Timeout: timeout}
			if runExpr != "" {
				re, err := regexp.Compile(runExpr)
				if err != nil {
					return withCode(exitProgramError, fmt.Errorf("--run: %w", err))
				}
				o.Run = re
			}
			if verbose {
				o.Log = a.stderr
			}
			files, err := testrunner.Find(args)
			if err != nil {
				return withCode(exitProgramError, fmt.Errorf("test: %w", err))
			}
			return a.runTests(cmd.Context(), files, o, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per test (and per file that does not compile)")
	cmd.Flags().StringVar(&runExpr, "run", "", "run only the tests whose names match this regular expression")
	cmd.Flags().Int64Var(&steps, "steps", 10_000_000, "each test's step budget (its own code, and each processor call)")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "each test's time budget")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print what the tests print (println), on stderr")
	return cmd
}

// testLine is one JSON line of test --json.
type testLine struct {
	Type       string               `json:"type"` // "test", "compile-error", "summary"
	File       string               `json:"file,omitempty"`
	Test       string               `json:"test,omitempty"`
	Line       int                  `json:"line,omitempty"`
	Col        int                  `json:"col,omitempty"`
	Pass       *bool                `json:"pass,omitempty"`
	Assertions int                  `json:"assertions,omitempty"`
	Failures   []testrunner.Failure `json:"failures,omitempty"`
	DurationMS int64                `json:"duration-ms,omitempty"`
	Message    string               `json:"message,omitempty"`
	Passed     *int                 `json:"passed,omitempty"`
	Failed     *int                 `json:"failed,omitempty"`
}

func (a *app) runTests(ctx context.Context, files []string, o testrunner.Options, asJSON bool) error {
	if ctx == nil {
		ctx = context.Background()
	}
	passed, failed, broken := 0, 0, 0
	enc := json.NewEncoder(a.stdout)
	for _, f := range files {
		res := testrunner.RunFile(ctx, f, o)
		if res.CompileErr != nil {
			broken++
			if asJSON {
				l := testLine{Type: "compile-error", File: f, Message: res.CompileErr.Error()}
				if line, col, ok := errorLineCol(res.CompileErr, f); ok {
					l.Line, l.Col, l.Message = line, col, errorMessage(res.CompileErr)
				}
				enc.Encode(l)
			} else {
				fmt.Fprintf(a.stdout, "%s: does not compile: %v\n", f, res.CompileErr)
			}
			continue
		}
		for _, t := range res.Tests {
			ok := t.OK()
			if ok {
				passed++
			} else {
				failed++
			}
			if asJSON {
				enc.Encode(testLine{Type: "test", File: f, Test: t.Name, Line: t.Line, Pass: &ok,
					Assertions: t.Passed + len(t.Failures), Failures: t.Failures, DurationMS: t.Duration.Milliseconds()})
				continue
			}
			for _, fl := range t.Failures {
				fmt.Fprintln(a.stdout, fl.String())
			}
		}
	}
	if asJSON {
		enc.Encode(testLine{Type: "summary", Passed: &passed, Failed: &failed})
	} else {
		fmt.Fprintf(a.stdout, "%d passed, %d failed\n", passed, failed)
	}
	switch {
	case broken > 0:
		return printedWithCode(exitProgramError)
	case failed > 0:
		return printedWithCode(exitStreamFailed)
	}
	return nil
}
