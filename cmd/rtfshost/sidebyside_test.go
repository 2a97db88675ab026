//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// counterProgram is a program that starts stream id on the reference
// server's counter.v1 (limit chunks, one every interval ms), whose
// processor counts them.
func counterProgram(id string, limit, interval int) string {
	return fmt.Sprintf(`(defn tally [n chunk meta] {:state (inc n) :output {:n (inc n)}})
(call :mcp.stream.start {:endpoint "counter.v1" :stream-id %q :config {:limit %d :interval_ms %d}
                         :processor tally :initial-state 0})
`, id, limit, interval)
}

// writeProgram writes src to dir/name and returns its path.
func writeProgram(t *testing.T, dir, name, src string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// testSideBySide: runs side by side in one directory, on its default data
// directory (.rtfshost). Three runs started at once all succeed, each
// printing its own stream's lines only. While a run holds the directory, a
// second one joins it, and from a third shell streams, inspect, pause and
// resume see and act on both live streams (a run with other budgets is
// refused, saying so); the second run's Ctrl-C stops
// its own stream only (interrupted, where it was), the first goes on until
// a cancel from the third shell ends it; then the directory, no longer
// held, shows the same.
func (c *cli) testSideBySide(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var runs []*started
	ids := []string{"side-1", "side-2", "side-3"}
	for _, id := range ids {
		path := writeProgram(t, dir, id+".rtfs", counterProgram(id, 20, 20))
		runs = append(runs, c.start(t, dir, "run", "--json", "--server-url", c.serverURL, path))
	}
	for i, s := range runs {
		r := s.wait(t)
		wantCode(t, r, exitOK)
		if r.stderr != "" && !strings.Contains(r.stderr, "joined .rtfshost and run here") {
			t.Errorf("run %d printed on stderr\n%s", i+1, r)
		}
		lines := parseJSONLines(t, r)
		runs := checkLines(t, r, lines, map[string]streamWant{"side": {outputs: 20, state: "completed", endReason: "source-ended"}})
		if got := runs["side"].status.Stream; got != ids[i] {
			t.Errorf("run %d printed the lines of %s, want %s\n%s", i+1, got, ids[i], r)
		}
	}

	holder := c.start(t, dir, "run", "--json", "--server-url", c.serverURL, writeProgram(t, dir, "h.rtfs", counterProgram("side-h", 1000000, 40)))
	holder.waitForOutput(t)
	guest := c.start(t, dir, "run", "--json", "--server-url", c.serverURL, writeProgram(t, dir, "g.rtfs", counterProgram("side-g", 1000000, 40)))
	guest.waitForOutput(t)
	row := func(r result, id, state string) {
		t.Helper()
		if !regexp.MustCompile(`(?m)^` + id + `\s+` + state + `\s+\d+`).MatchString(r.stdout) {
			t.Errorf("no row of %s %s\n%s", id, state, r)
		}
	}
	// A run whose program would not run there as here is refused.
	other := c.runIn(t, dir, "run", "--max-steps", "5000", "--server-url", c.serverURL, writeProgram(t, dir, "o.rtfs", counterProgram("side-o", 5, 1)))
	wantCode(t, other, exitStreamFailed)
	if !strings.Contains(other.stderr, "this run cannot join it: its programs would not run there as here: --max-steps differs (5000 here, the default there): leave --max-steps out, or use another --data") ||
		strings.Contains(other.stderr, "--max-memory") {
		t.Errorf("a run with other budgets:\n%s", other)
	}
	table := c.runIn(t, dir, "streams")
	wantCode(t, table, exitOK)
	row(table, "side-h", "active")
	row(table, "side-g", "active")
	row(table, "side-1", "completed")
	for _, step := range []struct{ args, out string }{
		{"pause side-g", "side-g: paused (was active)\n"},
		{"resume side-g", "side-g: active (was paused)\n"},
		{"rm side-h", ""},
	} {
		r := c.runIn(t, dir, strings.Fields(step.args)...)
		if step.out == "" {
			wantCode(t, r, exitStreamFailed)
			if r.stderr != "rtfshost: stream \"side-h\" is active, not ended: cancel it first, or remove it with --force (its progress is lost)\n" {
				t.Errorf("%s:\n%s", step.args, r)
			}
			continue
		}
		wantCode(t, r, exitOK)
		if r.stdout != step.out {
			t.Errorf("%s: want %q\n%s", step.args, step.out, r)
		}
	}
	processed := func(id string) (string, int) {
		t.Helper()
		r := c.runIn(t, dir, "inspect", "--json", "--no-state", "--no-queue", "--stream", id)
		wantCode(t, r, exitOK)
		var in struct {
			Status struct{ State string } `json:"status"`
			Stats  struct {
				Processed int `json:"processed-chunks"`
			} `json:"stats"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
			t.Fatalf("inspect --stream %s: %v\n%s", id, err, r)
		}
		return in.Status.State, in.Stats.Processed
	}

	if err := guest.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	g := guest.wait(t)
	wantCode(t, g, exitInterrupted)
	lines := parseJSONLines(t, g)
	if last := lines[len(lines)-1]; last.Type != "error" || !strings.Contains(last.Message, `run "rtfshost resume --data .rtfshost" to carry on`) {
		t.Errorf("the interrupted run's last line %+v\n%s", last, g)
	}
	for _, l := range lines {
		if l.Stream != "" && l.Stream != "side-g" {
			t.Fatalf("the joined run printed a line of %s\n%s", l.Stream, g)
		}
	}
	state, n := processed("side-g")
	if state != "interrupted" {
		t.Errorf("side-g after its run's Ctrl-C: %s, want interrupted", state)
	}
	_, h1 := processed("side-h")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if state, h2 := processed("side-h"); state == "active" && h2 > h1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("side-h stopped with side-g's Ctrl-C")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, again := processed("side-g"); again != n {
		t.Errorf("side-g went on after its run's Ctrl-C: %d then %d chunks", n, again)
	}
	rm := c.runIn(t, dir, "rm", "side-g")
	wantCode(t, rm, exitStreamFailed)
	if !strings.Contains(rm.stderr, `stream "side-g" is interrupted, not ended`) {
		t.Errorf("rm of the interrupted stream while the directory is held:\n%s", rm)
	}

	// A joined run whose stream fails tells its own failure, once, and
	// exits 1; the run that holds the directory is not touched by it.
	failing := writeProgram(t, dir, "f.rtfs", `(defn boom [n chunk meta] (if (= n 2) (throw (ex-info "bad chunk" {:n n})) {:state (inc n)}))
(call :mcp.stream.start {:endpoint "counter.v1" :stream-id "side-f" :config {:limit 5 :interval_ms 1} :processor boom :initial-state 0 :on-error {:then :end}})
`)
	f := c.runIn(t, dir, "run", "--server-url", c.serverURL, failing)
	wantCode(t, f, exitStreamFailed)
	wantStory(t, f, []string{failing + ":1:39: bad chunk {:n 2}", `    1 | (defn boom [n chunk meta] (if (= n 2) (throw (ex-info "bad chunk" {:n n})) {:state (inc n)}))`, "  in processor boom, on chunk 3 of stream side-f"})

	cancel := c.runIn(t, dir, "cancel", "side-h")
	wantCode(t, cancel, exitOK)
	if cancel.stdout != "side-h: cancelled (was active)\n" {
		t.Errorf("cancel side-h:\n%s", cancel)
	}
	h := holder.wait(t)
	wantCode(t, h, exitOK)
	hl := parseJSONLines(t, h)
	checkLines(t, h, hl, map[string]streamWant{"side": {outputs: -1, state: "cancelled", endReason: "request"}})

	// Nothing holds the directory now: it says the same of side-g.
	if state, again := processed("side-g"); state != "interrupted" || again != n {
		t.Errorf("side-g in the directory: %s with %d chunks, want interrupted with %d", state, again, n)
	}
	rm = c.runIn(t, dir, "rm", "side-g")
	if !strings.Contains(rm.stderr, `stream "side-g" is interrupted, not ended`) {
		t.Errorf("rm of the interrupted stream in the directory:\n%s", rm)
	}
}
