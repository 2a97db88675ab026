//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// testJSONEverywhere: with --json every command's errors are JSON lines on
// stdout, and stderr stays empty: check (one line per file), inspect of an
// unknown stream, of a missing or a locked data directory, a bad flag.
func (c *cli) testJSONEverywhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(c.examples, "weather.rtfs")
	broken := filepath.Join(c.testdata, "broken_syntax.rtfs")
	missing := filepath.Join(dir, "missing.rtfs")
	r := c.runIn(t, dir, "check", "--json", good, broken, missing)
	wantCode(t, r, exitProgramError)
	lines := parseJSONLines(t, r)
	if len(lines) != 3 || r.stderr != "" {
		t.Fatalf("want three lines and nothing on stderr\n%s", r)
	}
	if l := lines[0]; l.Type != "ok" || l.File != good {
		t.Errorf("line 1: %+v", l)
	}
	if l := lines[1]; l.Type != "error" || l.File != broken || l.Line != 6 || l.Col != 1 || l.Message != "unterminated list: missing ')'" {
		t.Errorf("line 2: %+v", l)
	}
	if l := lines[2]; l.Type != "error" || l.File != missing || !strings.Contains(l.Message, "no such file") {
		t.Errorf("line 3: %+v", l)
	}

	data := filepath.Join(dir, "data")
	if r := c.runIn(t, dir, "run", "--data", data, "--server-url", c.serverURL, filepath.Join(c.examples, "await.rtfs")); r.code != exitOK {
		t.Fatalf("a run to fill the directory:\n%s", r)
	}
	f, err := os.OpenFile(filepath.Join(data, "rtfshost.lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"inspect", "--json", "--data", data, "--stream", "nope"}, exitStreamFailed, `stream "nope": no such stream in the data directory ` + data},
		{[]string{"streams", "--json", "--data", filepath.Join(dir, "none")}, exitStreamFailed, "no data directory at " + filepath.Join(dir, "none")},
		{[]string{"run", "--json", "--bogus", good}, exitProgramError, "unknown flag: --bogus"},
		{[]string{"cancel", "--json", "--data", data, "nope"}, exitStreamFailed, `stream "nope": no such stream`},
	} {
		r := c.runIn(t, dir, tc.args...)
		wantCode(t, r, tc.code)
		lines := parseJSONLines(t, r)
		if len(lines) != 1 || lines[0].Type != "error" || !strings.Contains(lines[0].Message, tc.msg) || r.stderr != "" {
			t.Errorf("%v: want one error line with %q, nothing on stderr\n%s", tc.args, tc.msg, r)
		}
	}
	// A directory another process holds without a control socket.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	r = c.runIn(t, dir, "inspect", "--json", "--data", data)
	wantCode(t, r, exitStreamFailed)
	if lines := parseJSONLines(t, r); len(lines) != 1 || lines[0].Type != "error" || !strings.Contains(lines[0].Message, "is in use by") || r.stderr != "" {
		t.Errorf("inspect --json of a locked directory: want one error line\n%s", r)
	}
}

// testChunkShape: the README's walkthrough shows the reference server's
// chunk as a processor gets it, and run's #N, the chunk's own :seq and the
// metadata's :seq are the same number.
func (c *cli) testChunkShape(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeProgram(t, dir, "shape.rtfs", `(defn look [n chunk meta]
  (when (= n 0) (println (dissoc chunk :generated_at)))
  (println "seqs" (:seq chunk) (:seq meta))
  {:state (inc n) :output (:seq chunk)})
(call :mcp.stream.start {:endpoint "weather.monitor.v1" :config {:limit 3 :interval_ms 0} :processor look :initial-state 0})
`)
	r := c.runIn(t, dir, "run", "--server-url", c.serverURL, path)
	wantCode(t, r, exitOK)
	id := regexp.MustCompile(`weather\.monitor\.v1-[0-9a-f]{8}`).FindString(r.stdout)
	for n := 1; n <= 3; n++ {
		for _, want := range []string{fmt.Sprintf("%s | seqs %d %d\n", id, n, n), fmt.Sprintf("%s #%d: %d\n", id, n, n)} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("no line %q\n%s", want, r)
			}
		}
	}
	first := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(id) + ` \| (\{:endpoint .*)$`).FindStringSubmatch(r.stdout)
	if first == nil {
		t.Fatalf("the first chunk is not printed\n%s", r)
	}
	readme, err := os.ReadFile(filepath.Join(c.examples, "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	shown := strings.Join(strings.Fields(string(readme)), " ")
	for _, part := range []string{`{:endpoint "weather.monitor.v1" :seq 1`, `:chunk {:city "Paris" :temperature_c 18.4 :humidity_pct 62 :conditions "cloudy"}`, `:trace {:source "rtfshost-localserver" :version "1"}`, "#1: ..."} {
		if !strings.Contains(shown, part) {
			t.Errorf("the README's walkthrough does not show %q", part)
		}
		if part != "#1: ..." && !strings.Contains(first[1], part) {
			t.Errorf("the server's first chunk %s has no %q", first[1], part)
		}
	}
}

// testProgressLines: run --json prints a progress line for a stream whose
// :progress changed, after the outputs of the batch that changed it, with
// done rising to the total, and the stream's status line carries the last
// progress.
func (c *cli) testProgressLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeProgram(t, dir, "progress.rtfs", `(defn step [n chunk meta]
  {:state (inc n) :output (inc n) :progress {:done (inc n) :total 4 :message (str "line " (inc n))}})
(call :mcp.stream.start {:transport :exec :command "printf" :args ["a\\nb\\nc\\nd\\n"] :processor step :initial-state 0})
`)
	r := c.runIn(t, dir, "run", "--json", path)
	wantCode(t, r, exitOK)
	var done []float64
	outputs, ended := 0, false
	for _, l := range parseJSONLines(t, r) {
		switch l.Type {
		case "output":
			outputs++
		case "progress":
			if ended || l.Progress == nil || l.Progress.Total == nil || *l.Progress.Total != 4 {
				t.Fatalf("progress line %+v (after the status line: %v)\n%s", l, ended, r)
			}
			if float64(outputs) < l.Progress.Done {
				t.Errorf("a progress of %v before the output that made it (%d outputs so far)\n%s", l.Progress.Done, outputs, r)
			}
			done = append(done, l.Progress.Done)
		case "status":
			ended = true
			if l.Progress == nil || l.Progress.Done != 4 || l.Progress.Message != "line 4" || l.Progress.Fraction == nil || *l.Progress.Fraction != 1 {
				t.Errorf("the status line's progress: %+v\n%s", l.Progress, r)
			}
		}
	}
	if len(done) == 0 || done[len(done)-1] != 4 || !slices.IsSorted(done) {
		t.Errorf("progress lines with done %v, want rising to 4\n%s", done, r)
	}
}
