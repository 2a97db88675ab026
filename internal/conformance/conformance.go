// Package conformance runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, pinned in npm/package.json) against
// rtfshost's MCP server and its MCP client, for the tests of
// host/mcpserver and transport/mcp.
//
// Install installs the suite and the Node.js 22 binary it needs (the npm
// packages node-<os>-<arch>) once per machine; Suite.Server runs the
// server scenarios of a protocol revision against a URL, Suite.Client one
// client scenario against a command. Both return the suite's checks by
// scenario, read from its results files. Nothing is skipped: a machine
// without npm fails the test that asks.
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/internal/npmtest"
)

// Version is the version of the suite the tests run.
const Version = "0.2.0-alpha.12"

// A Suite is the installed conformance suite.
type Suite struct {
	node string // Node.js 22 or later
	cli  string // the suite's dist/index.js
}

// Install installs the suite for t (npm ci, once per machine) and returns
// it.
func Install(t testing.TB) *Suite {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("conformance: cannot locate the package's npm project")
	}
	dir := npmtest.Install(t, filepath.Join(filepath.Dir(file), "npm"), npmtest.Options{})
	return &Suite{
		node: npmtest.Node(t, dir),
		cli:  filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
	}
}

// A Check is one check of a scenario, as the suite reports it.
type Check struct {
	ID      string `json:"id"`
	Status  string `json:"status"` // SUCCESS, FAILURE, WARNING, INFO, SKIPPED
	Message string `json:"errorMessage"`
}

// Failed reports whether the check failed (a WARNING is a SHOULD that was
// not met: it does not fail).
func (c Check) Failed() bool { return c.Status == "FAILURE" }

// guard bounds one run of the suite, so that a hang fails the test.
const guard = 3 * time.Minute

// Server runs the server scenarios that revision rev requires, as the
// suite froze them at the revision's release ("--requirements"), against
// the MCP endpoint url, and returns their checks by scenario.
func (s *Suite) Server(t testing.TB, url, rev string) map[string][]Check {
	t.Helper()
	out := t.TempDir()
	s.run(t, nil, "server", "--url", url, "--requirements", rev, "-o", out)
	return readResults(t, out, "server-")
}

// Scenarios returns the scenarios of kind ("server" or "client") that
// revision rev requires, as the suite lists them.
func (s *Suite) Scenarios(t testing.TB, kind, rev string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.node, s.cli, "list", "--"+kind, "--requirements", rev).CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	heading := strings.ToUpper(kind[:1]) + kind[1:] + " scenarios"
	var names []string
	in := false
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, heading):
			in = true
		case in && strings.HasPrefix(line, "  - "):
			names = append(names, strings.TrimPrefix(line, "  - "))
		case in && strings.TrimSpace(line) != "":
			in = false
		}
	}
	if len(names) == 0 {
		t.Fatalf("conformance list: no %s scenarios for %s in\n%s", kind, rev, out)
	}
	return names
}

// Client runs one client scenario of revision spec: the suite starts its
// test server and runs command with the server's URL appended, and
// MCP_CONFORMANCE_SCENARIO (and the revision) in its environment, which
// env extends. It returns the scenario's checks.
func (s *Suite) Client(t testing.TB, scenario, spec string, command []string, env []string) []Check {
	t.Helper()
	out := t.TempDir()
	quoted := make([]string, len(command))
	for i, a := range command {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	s.run(t, env, "client", "--command", strings.Join(quoted, " "), "--scenario", scenario, "--spec-version", spec, "-o", out)
	res := readResults(t, out, "")
	var checks []Check
	for _, c := range res {
		checks = append(checks, c...)
	}
	if len(checks) == 0 {
		t.Fatalf("conformance client %s (%s): no results", scenario, spec)
	}
	return checks
}

// run runs the suite's command line; its exit status is not looked at
// (it is 1 whenever a check fails): the caller judges the checks.
func (s *Suite) run(t testing.TB, env []string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.node, append([]string{s.cli}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("conformance %s: did not finish within %v\n%s", args[0], guard, out)
	}
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() > 1) {
		t.Fatalf("conformance %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("conformance %s:\n%s", strings.Join(args, " "), tail(out, 4000))
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// stamp is the time stamp the suite appends to a results directory.
var stamp = regexp.MustCompile(`-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// readResults reads the checks.json of every scenario directory in dir:
// the suite names them <prefix><scenario>-<time>.
func readResults(t testing.TB, dir, prefix string) map[string][]Check {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	res := map[string][]Check{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			continue
		}
		var checks []Check
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Fatalf("conformance results %s: %v", e.Name(), err)
		}
		name := stamp.ReplaceAllString(strings.TrimPrefix(e.Name(), prefix), "")
		res[name] = checks
	}
	if len(res) == 0 {
		t.Fatalf("conformance: no results in %s", dir)
	}
	return res
}

// Judge holds results (by scenario) against the list of what does not
// apply: a key "scenario" lets every check of the scenario fail, a key
// "scenario:check" that one check; the value says why. It returns one line
// for each failed check that the list does not excuse, one for each entry
// of the list that excused nothing (a stale entry), and the scenarios that
// passed whole.
func Judge(results map[string][]Check, notApplicable map[string]string) (problems, passed []string) {
	used := map[string]bool{}
	for scenario, checks := range results {
		failed := false
		for _, c := range checks {
			if !c.Failed() {
				continue
			}
			failed = true
			switch key := scenario + ":" + c.ID; {
			case notApplicable[key] != "":
				used[key] = true
			case notApplicable[scenario] != "":
				used[scenario] = true
			default:
				problems = append(problems, fmt.Sprintf("%s: %s: %s", scenario, c.ID, c.Message))
			}
		}
		if !failed {
			passed = append(passed, scenario)
		}
	}
	for key, why := range notApplicable {
		scenario, _, _ := strings.Cut(key, ":")
		if _, ran := results[scenario]; ran && !used[key] {
			problems = append(problems, fmt.Sprintf("%s is listed as not applicable (%s) but nothing of it failed: take it off the list", key, why))
		}
	}
	sort.Strings(problems)
	sort.Strings(passed)
	return problems, passed
}
