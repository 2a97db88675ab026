package testrunner

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPassingFile: the directives of run-processor, recorded chunks, load
// and thrown? all hold in testdata/pass_test.rtfs.
func TestPassingFile(t *testing.T) {
	res := RunFile(context.Background(), "testdata/pass_test.rtfs", Options{})
	if res.CompileErr != nil {
		t.Fatal(res.CompileErr)
	}
	var names []string
	for _, tr := range res.Tests {
		names = append(names, tr.Name)
		if !tr.OK() {
			for _, f := range tr.Failures {
				t.Error(f)
			}
		}
		if tr.Passed == 0 {
			t.Errorf("%s: no assertion ran", tr.Name)
		}
	}
	if got := strings.Join(names, " "); got != "sums directives recorded-chunks thrown" {
		t.Errorf("tests %q", got)
	}
}

// TestFailures: each failing assertion is one line with the file and line,
// the test and its testing contexts, the form, the expected and actual
// values and a diff for collections; an error outside any assertion and a
// test past its step budget fail with their messages.
func TestFailures(t *testing.T) {
	res := RunFile(context.Background(), "testdata/fail_test.rtfs", Options{Steps: 100_000})
	if res.CompileErr != nil {
		t.Fatal(res.CompileErr)
	}
	var got []string
	passed := 0
	for _, tr := range res.Tests {
		for _, f := range tr.Failures {
			got = append(got, f.String())
		}
		passed += tr.Passed
	}
	const file = "testdata/fail_test.rtfs"
	want := []string{
		file + `:6: FAIL in (fails) maps nested: (= {:a 1 :b [1 2 3]} {:a 2 :b [1 2 4] :c 3}): they differ: expected {:a 1 :b [1 2 3]}, actual {:a 2 :b [1 2 4] :c 3}, diff - {:a 1 :b [nil nil 3]} + {:a 2 :b [nil nil 4] :c 3}`,
		file + `:7: FAIL in (fails): (< 3 2): expected (< 3 2), actual (not (< 3 2))`,
		file + `:8: FAIL in (fails): (= 1 (count [1 2])): expected 1, actual 2`,
		file + `:9: FAIL in (fails): (thrown? Exception (+ 1 1)): expected an error, actual none`,
		file + `:10: FAIL in (fails): (thrown-with-msg? Exception #"boom" (throw (ex-info "bang" {}))): expected an error whose message matches #"boom", actual "bang"`,
		file + `:11: ERROR in (fails): (= 1 (/ 1 0)): threw /: divide by zero`,
		file + `:12: FAIL in (fails): nil: expected a truthy value, actual nil`,
		file + `:16: ERROR in (loops): the test ran past its step budget of 100000 steps (--steps)`,
		file + `:19: ERROR in (throws): outside`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d failures:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("failure %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	if passed != 1 {
		t.Errorf("%d assertions passed, want 1", passed)
	}
}

// TestRunSelects: Options.Run picks tests by name.
func TestRunSelects(t *testing.T) {
	res := RunFile(context.Background(), "testdata/fail_test.rtfs", Options{Run: regexp.MustCompile("^pass")})
	if len(res.Tests) != 1 || res.Tests[0].Name != "passes" || !res.Tests[0].OK() {
		t.Fatalf("%+v", res.Tests)
	}
}

// TestTimeBudget: a processor that never returns (its step budget is
// large) stops the test at its time budget with a clear message.
func TestTimeBudget(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "slow_test.rtfs")
	src := "(defn spin [s c] (loop [i 0] (recur (inc i))))\n(deftest slow (run-processor spin {} [1]))\n"
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := RunFile(context.Background(), f, Options{Steps: 1 << 60, Timeout: 300 * time.Millisecond})
	if res.CompileErr != nil {
		t.Fatal(res.CompileErr)
	}
	if len(res.Tests) != 1 || len(res.Tests[0].Failures) != 1 {
		t.Fatalf("%+v", res.Tests)
	}
	if msg := res.Tests[0].Failures[0].Message; !strings.Contains(msg, "the test ran past its time budget of 300ms") {
		t.Errorf("message %q", msg)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the budget of 300ms stopped the test after %s", d)
	}
}

// TestCompileErrors: a file that does not compile, or loads a missing
// program, is a compile error with its position; no test runs.
func TestCompileErrors(t *testing.T) {
	res := RunFile(context.Background(), "testdata/broken_test.rtfs", Options{})
	if res.CompileErr == nil || !strings.Contains(res.CompileErr.Error(), "broken_test.rtfs:1:27: undefined symbol undefined-fn") {
		t.Errorf("%v", res.CompileErr)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "x_test.rtfs")
	if err := os.WriteFile(f, []byte(`(load "nope.rtfs")`), 0o600); err != nil {
		t.Fatal(err)
	}
	res = RunFile(context.Background(), f, Options{})
	if res.CompileErr == nil || !strings.Contains(res.CompileErr.Error(), "x_test.rtfs:1:7: load: open") {
		t.Errorf("%v", res.CompileErr)
	}
}

// TestFind: directories give their *_test.rtfs files, sorted, testdata
// directories left out; files are taken as named.
func TestFind(t *testing.T) {
	got, err := Find([]string{"testdata/fail_test.rtfs", "../../examples"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 3 || got[0] != "testdata/fail_test.rtfs" || !strings.HasSuffix(got[1], "_test.rtfs") {
		t.Errorf("%q", got)
	}
	for _, f := range got[1:] {
		if strings.Contains(f, "testdata") {
			t.Errorf("%s is under testdata", f)
		}
	}

	// A directory named through a symbolic link is searched, and its
	// files are named through the link.
	link := filepath.Join(t.TempDir(), "examples")
	abs, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, link); err != nil {
		t.Fatal(err)
	}
	linked, err := Find([]string{link})
	if err != nil {
		t.Fatal(err)
	}
	if len(linked) != len(got)-1 {
		t.Fatalf("through a link Find found %q, want the %d files of %q", linked, len(got)-1, got[1:])
	}
	for i, f := range linked {
		if filepath.Base(f) != filepath.Base(got[i+1]) || !strings.HasPrefix(f, link+string(filepath.Separator)) {
			t.Errorf("through a link: %s, want %s under %s", f, filepath.Base(got[i+1]), link)
		}
	}
}
