package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleTests: every example's test file passes under rtfshost test,
// in seconds, through the command's own code.
func TestExampleTests(t *testing.T) {
	var stdout, stderr bytes.Buffer
	a := newApp(strings.NewReader(""), &stdout, &stderr)
	if code := a.execute(context.Background(), []string{"test", "../../examples"}); code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.HasSuffix(stdout.String(), " passed, 0 failed\n") || strings.HasPrefix(stdout.String(), "0 passed") {
		t.Errorf("stdout %q", stdout.String())
	}
	programs, err := filepath.Glob("../../examples/*.rtfs")
	if err != nil || len(programs) == 0 {
		t.Fatalf("examples: %v %v", programs, err)
	}
	for _, p := range programs {
		if strings.HasSuffix(p, "_test.rtfs") {
			continue
		}
		if _, err := os.Stat(strings.TrimSuffix(p, ".rtfs") + "_test.rtfs"); err != nil {
			t.Errorf("example %s has no test file: %v", p, err)
		}
	}
}

// TestTestCommand: failing assertions are printed one per line and exit 1;
// a file that does not compile exits 2; --run selects; --json prints one
// object per test and a summary.
func TestTestCommand(t *testing.T) {
	const dir = "../../internal/testrunner/testdata/"
	run := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		a := newApp(strings.NewReader(""), &stdout, &stderr)
		code := a.execute(context.Background(), append([]string{"test"}, args...))
		return code, stdout.String() + stderr.String()
	}
	code, out := run("--steps", "100000", dir+"fail_test.rtfs")
	if code != exitStreamFailed || !strings.Contains(out, dir+"fail_test.rtfs:8: FAIL in (fails): (= 1 (count [1 2])): expected 1, actual 2\n") ||
		!strings.HasSuffix(out, "1 passed, 3 failed\n") {
		t.Errorf("failing file: exit %d\n%s", code, out)
	}
	if code, out := run(dir + "broken_test.rtfs"); code != exitProgramError || !strings.Contains(out, "undefined symbol undefined-fn") {
		t.Errorf("broken file: exit %d\n%s", code, out)
	}
	if code, out := run("--run", "^passes$", dir+"fail_test.rtfs"); code != exitOK || out != "1 passed, 0 failed\n" {
		t.Errorf("--run: exit %d\n%s", code, out)
	}
	code, out = run("--json", "--run", "^(passes|throws)$", dir+"fail_test.rtfs")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitStreamFailed || len(lines) != 3 {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
	var first, second, summary map[string]any
	for i, p := range []*map[string]any{&first, &second, &summary} {
		if err := json.Unmarshal([]byte(lines[i]), p); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	if first["test"] != "passes" || first["pass"] != true || second["test"] != "throws" || second["pass"] != false ||
		summary["type"] != "summary" || summary["passed"] != 1.0 || summary["failed"] != 1.0 {
		t.Errorf("--json lines:\n%s", out)
	}
}
