//go:build unix

package main

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ptyTimeout bounds the terminal run; multiplex.rtfs takes about 1.5 s.
const ptyTimeout = 30 * time.Second

// testLiveLines runs multiplex.rtfs on a pseudo-terminal: rtfshost must draw
// one live line per stream (state, chunks, rate, queue) while the streams run,
// and leave each line in its final state.
func (c *cli) testLiveLines(t *testing.T) {
	t.Parallel()
	screen := c.runOnPTY(t, "run", "--server-url", c.serverURL, filepath.Join(c.examples, "multiplex.rtfs"))
	if !strings.Contains(screen, "\x1b[") {
		t.Fatalf("no escape codes on a terminal: the live lines are not drawn\n%q", screen)
	}
	lines := screenLines(screen)
	live := liveLines(lines)
	want := map[string]int64{"weather.monitor.v1": 12, "docs.search.v1": 6, "news.digest.v1": 9}
	if len(live) != len(want) {
		t.Fatalf("live lines for %d streams, want %d\n%s", len(live), len(want), strings.Join(lines, "\n"))
	}
	for id, ls := range live {
		chunks, ok := want[endpointOf(id)]
		if !ok {
			t.Fatalf("live line for an unexpected stream %s", id)
		}
		checkLiveLines(t, id, ls, chunks, lines)
	}
	if !hasPrefixLine(lines, "result: {:total 3 :streams [") {
		t.Errorf("no result line on the terminal\n%s", strings.Join(lines, "\n"))
	}
	// The result comes under the streams' final lines, not above them.
	lastLive, resultAt := -1, -1
	for i, l := range lines {
		if strings.Contains(l, " completed ") && strings.Contains(l, " chunks ") {
			lastLive = i
		}
		if strings.HasPrefix(l, "result: ") {
			resultAt = i
		}
	}
	if resultAt < lastLive {
		t.Errorf("the result line (%d) is above the final live lines (%d)\n%s", resultAt, lastLive, strings.Join(lines, "\n"))
	}

	// A stream with milestones draws its progress: a bar, the percentage,
	// the ETA and the phase, to 100% at the end (examples/cli-agent.rtfs
	// replays its transcript from the repository's root).
	agent := screenLines(c.runOnPTYAt(t, filepath.Dir(c.examples), &pty.Winsize{Rows: 50, Cols: 200},
		"run", "--data", filepath.Join(t.TempDir(), "data"), filepath.Join(c.examples, "cli-agent.rtfs")))
	bar := regexp.MustCompile(`^agent\.review .* \[(#*)(\.*)\] +(\d+)% eta \d+s`)
	var percents []string
	for _, l := range agent {
		if m := bar.FindStringSubmatch(l); m != nil && len(m[1])+len(m[2]) == 20 {
			percents = append(percents, m[3])
		}
	}
	if len(percents) == 0 || percents[len(percents)-1] != "100" {
		t.Errorf("the live line of cli-agent.rtfs shows no progress bar ending at 100%%: %v\n%s", percents, strings.Join(agent, "\n"))
	}

	// A terminal that reports no size gets plain lines, all of them.
	plain := screenLines(c.runOnPTYSized(t, &pty.Winsize{}, "run", "--server-url", c.serverURL, filepath.Join(c.examples, "multiplex.rtfs")))
	if !hasPrefixLine(plain, "result: {:total 3 :streams [") || len(liveLines(plain)) != 0 {
		t.Errorf("on a terminal with no size:\n%s", strings.Join(plain, "\n"))
	}
	for _, endpoint := range []string{"weather.monitor.v1", "docs.search.v1", "news.digest.v1"} {
		if !anyMatch(plain, regexp.MustCompile(`^`+regexp.QuoteMeta(endpoint)+`-[0-9a-f]{8} completed \(source-ended\)`)) {
			t.Errorf("on a terminal with no size, no end line for %s\n%s", endpoint, strings.Join(plain, "\n"))
		}
	}
}

// checkLiveLines checks the successive renderings of one stream's line: some
// drawn while it ran show the queue, the counts never go down, and the last
// one shows it completed with all its chunks.
func checkLiveLines(t *testing.T, id string, ls []liveLine, chunks int64, screen []string) {
	t.Helper()
	sawQueue := false
	var prev int64
	for _, l := range ls {
		if l.queue != "" {
			sawQueue = true
			if _, capacity, _ := strings.Cut(l.queue, "/"); capacity != "32" {
				t.Errorf("%s: queue %s, want a capacity of 32", id, l.queue)
			}
		}
		if l.chunks < prev {
			t.Errorf("%s: chunk count went down from %d to %d", id, prev, l.chunks)
		}
		prev = l.chunks
	}
	last := ls[len(ls)-1]
	if last.state != "completed" || last.chunks != chunks {
		t.Errorf("%s: last live line %q, want completed with %d chunks\n%s", id, last.text, chunks, strings.Join(screen, "\n"))
	}
	// The end line says why the stream ended and what it gave (issue 14
	// item 11).
	if !strings.Contains(last.text, "(source-ended)") || !strings.Contains(last.text, "  result ") {
		t.Errorf("%s: the end line %q has no end reason or result", id, last.text)
	}
	if !sawQueue {
		t.Errorf("%s: no live line showed the queue\n%s", id, strings.Join(screen, "\n"))
	}
}

// runOnPTY runs rtfshost with args on a new pseudo-terminal of 50x200 and
// returns everything it wrote to it. The command must exit 0 within
// ptyTimeout; otherwise it gets SIGQUIT (a goroutine dump), then SIGKILL.
func (c *cli) runOnPTY(t *testing.T, args ...string) string {
	t.Helper()
	return c.runOnPTYSized(t, &pty.Winsize{Rows: 50, Cols: 200}, args...)
}

// runOnPTYSized is runOnPTY on a terminal of the given size (0x0: a
// terminal that reports no size).
func (c *cli) runOnPTYSized(t *testing.T, size *pty.Winsize, args ...string) string {
	t.Helper()
	return c.runOnPTYAt(t, t.TempDir(), size, args...)
}

// runOnPTYAt is runOnPTYSized in the working directory dir.
func (c *cli) runOnPTYAt(t *testing.T, dir string, size *pty.Winsize, args ...string) string {
	t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Dir = dir
	cmd.Env = append(childEnv(), "TERM=xterm")
	ptmx, err := pty.StartWithSize(cmd, size)
	if err != nil {
		t.Fatalf("starting rtfshost on a pty: %v", err)
	}
	defer ptmx.Close()
	var out bytes.Buffer
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(&out, ptmx)
		copied <- err
	}()
	timedOut := false
	select {
	case err = <-copied:
	case <-time.After(ptyTimeout):
		timedOut = true
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case err = <-copied:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			err = <-copied
		}
	}
	// Reading the master ends with EIO once the child and its terminal are gone.
	if err != nil && !errors.Is(err, syscall.EIO) {
		t.Errorf("reading the pty: %v", err)
	}
	waitErr := cmd.Wait()
	if timedOut {
		t.Fatalf("rtfshost %s still running after %v on a terminal; its output:\n%s", strings.Join(args, " "), ptyTimeout, out.String())
	}
	if waitErr != nil {
		t.Fatalf("rtfshost %s on a terminal: %v\n%q", strings.Join(args, " "), waitErr, out.String())
	}
	return out.String()
}

// ansiEscape matches the escape sequences a progress display writes: CSI
// sequences (cursor moves, erases, colours) and the two-byte ones.
var ansiEscape = regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|[@-Z\\-_])`)

// screenLines splits terminal output into the lines as drawn: escape
// sequences removed, split at CR and LF, blank pieces dropped.
func screenLines(screen string) []string {
	plain := ansiEscape.ReplaceAllString(screen, "\n")
	var lines []string
	for _, l := range strings.FieldsFunc(plain, func(r rune) bool { return r == '\r' || r == '\n' }) {
		if l = strings.TrimRight(l, " "); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// liveLine is one rendering of a stream's live line.
type liveLine struct {
	text   string
	state  string
	chunks int64
	queue  string // "depth/capacity", or "" when not shown
}

// liveLineRE matches a live line: the stream id, its state, the chunks
// processed, the rate, and while it runs the queue.
var liveLineRE = regexp.MustCompile(`^([a-z0-9.]+-[0-9a-f]{8})\s+(active|paused|completed|cancelled|error)\s+(\d+) chunks\s+\d+(?:\.\d+)?/s(?:\s+queue (\d+/\d+))?`)

// liveLines returns the renderings of each stream's live line, in order.
func liveLines(lines []string) map[string][]liveLine {
	live := map[string][]liveLine{}
	for _, l := range lines {
		m := liveLineRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n, _ := strconv.ParseInt(m[3], 10, 64)
		live[m[1]] = append(live[m[1]], liveLine{text: l, state: m[2], chunks: n, queue: m[4]})
	}
	return live
}

// testNoEscapes: on a pipe, plain and --json output carry no escape codes,
// and the plain format still reports every stream's end and the result.
func (c *cli) testNoEscapes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(c.examples, "multiplex.rtfs")
	for _, args := range [][]string{
		{"run", "--server-url", c.serverURL, path},
		{"run", "--json", "--server-url", c.serverURL, path},
	} {
		r := c.run(t, args...)
		wantCode(t, r, exitOK)
		if strings.ContainsAny(r.stdout+r.stderr, "\x1b\r") {
			t.Errorf("escape codes or carriage returns on a pipe\n%q", r.stdout+r.stderr)
		}
		if args[1] == "--json" {
			parseJSONLines(t, r)
			continue
		}
		lines := strings.Split(r.stdout, "\n")
		for _, endpoint := range []string{"weather.monitor.v1", "docs.search.v1", "news.digest.v1"} {
			// A result that is the stream's last output is not printed again
			// (issue 14 item 11).
			re := regexp.MustCompile(`^` + regexp.QuoteMeta(endpoint) + `-[0-9a-f]{8} completed \(source-ended\) \(result: its last output\)$`)
			if !anyMatch(lines, re) {
				t.Errorf("no end line for %s\n%s", endpoint, r)
			}
		}
		if !hasPrefixLine(lines, "result: {:total 3 :streams [") {
			t.Errorf("no result line\n%s", r)
		}
	}
}

func anyMatch(lines []string, re *regexp.Regexp) bool {
	for _, l := range lines {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

func hasPrefixLine(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
