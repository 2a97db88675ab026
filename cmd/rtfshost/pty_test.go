//go:build unix

package main

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
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
	bar := regexp.MustCompile(`^agent\.review-[0-9a-f]{8} .* \[(#*)(\.*)\] +(\d+)% eta \d+s`)
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
	// The end line says why the stream ended and what it gave.
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
	out, waitErr := c.ptyRun(t, cmd, size)
	if waitErr != nil {
		t.Fatalf("rtfshost %s on a terminal: %v\n%q", strings.Join(args, " "), waitErr, out)
	}
	return out
}

// ptyOutput runs cmd on a pseudo-terminal of 50x200 and returns all it
// wrote; its exit status does not matter.
func (c *cli) ptyOutput(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, _ := c.ptyRun(t, cmd, &pty.Winsize{Rows: 50, Cols: 200})
	return out
}

// ptyRun runs cmd on a new pseudo-terminal of the given size and returns
// everything it wrote to it and how it exited. The command must end within
// ptyTimeout; otherwise it gets SIGQUIT (a goroutine dump), then SIGKILL.
func (c *cli) ptyRun(t *testing.T, cmd *exec.Cmd, size *pty.Winsize) (string, error) {
	t.Helper()
	args := cmd.Args[1:]
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
	return out.String(), waitErr
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
			// A result that is the stream's last output is not printed again.
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

// vtScreen plays terminal output on an emulated screen and returns its
// lines as they are left: text written at the cursor, CR, LF, backspace,
// and the CSI sequences a progress display uses (cursor up, down, right,
// left, to a column; erase to the end of the screen or line). Other escape
// sequences (colours, cursor shown or hidden) change nothing shown.
func vtScreen(out string) []string {
	lines, _ := vtScreenEcho(out)
	return lines
}

// vtScreenEcho is vtScreen, and also returns the row on which the
// terminal's echo of a Ctrl-C ("^C", which the programs under test never
// print) was drawn, or -1.
func vtScreenEcho(out string) (lines []string, echoRow int) {
	echo := strings.Index(out, "^C")
	echoRow = -1
	var grid [][]rune
	row, col := 0, 0
	line := func() []rune {
		for len(grid) <= row {
			grid = append(grid, nil)
		}
		return grid[row]
	}
	for i := 0; i < len(out); {
		if echoRow < 0 && echo >= 0 && i >= echo {
			echoRow = row // the echo, or the sequence it ended (a CSI's final byte)
		}
		c := out[i]
		switch {
		case c == 0x1b && i+1 < len(out) && out[i+1] == '[':
			j := i + 2
			for j < len(out) && (out[j] >= '0' && out[j] <= '9' || out[j] == ';' || out[j] == '?') {
				j++
			}
			if j >= len(out) {
				i = j
				continue
			}
			n, err := strconv.Atoi(strings.TrimPrefix(out[i+2:j], "?"))
			if err != nil || n == 0 {
				n = 1
			}
			switch out[j] {
			case 'A':
				row = max(0, row-n)
			case 'B':
				row += n
			case 'C':
				col += n
			case 'D':
				col = max(0, col-n)
			case 'G':
				col = n - 1
			case 'J':
				l := line()
				grid[row] = l[:min(col, len(l))]
				grid = grid[:row+1]
			case 'K':
				l := line()
				grid[row] = l[:min(col, len(l))]
			}
			i = j + 1
			continue
		case c == 0x1b:
			i += 2
			continue
		case c == '\r':
			col = 0
		case c == '\n':
			row++
		case c == '\b':
			col = max(0, col-1)
		case c < 0x20:
		default:
			r, size := utf8.DecodeRuneInString(out[i:])
			l := line()
			for len(l) <= col {
				l = append(l, ' ')
			}
			l[col] = r
			grid[row] = l
			col++
			i += size
			continue
		}
		i++
	}
	for _, l := range grid {
		lines = append(lines, strings.TrimRight(string(l), " "))
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines, echoRow
}

// runOnPTYInterrupted runs rtfshost with args on a pseudo-terminal, types
// Ctrl-C once the screen shows after (the terminal then echoes ^C and
// interrupts the process, as a user's would), and returns all it wrote
// and its exit code.
//
// The terminal is set to NOFLSH. Without it the interrupt also discards
// what the program wrote that the test has not read yet: under load, a cut
// line and the rest of the frame mpb was drawing, after which mpb's cursor
// moves, made for the lines it wrote, land off their rows. That loss is the
// kernel's, whatever the program draws; the echo of ^C at the cursor,
// wherever the program's writes leave it, is still the terminal's as a
// user's shows it (ECHO, ECHOCTL and ISIG on).
func (c *cli) runOnPTYInterrupted(t *testing.T, dir, after string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Dir = dir
	cmd.Env = append(childEnv(), "TERM=xterm")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 160})
	if err != nil {
		t.Fatalf("starting rtfshost on a pty: %v", err)
	}
	defer ptmx.Close()
	// Set on the master, the modes are the terminal's (the slave's).
	modes, err := unix.IoctlGetTermios(int(ptmx.Fd()), ioctlGetTermios)
	if err != nil {
		t.Fatalf("reading the pty's modes: %v", err)
	}
	modes.Lflag |= unix.NOFLSH | unix.ECHO | unix.ECHOCTL | unix.ISIG
	if err := unix.IoctlSetTermios(int(ptmx.Fd()), ioctlSetTermios, modes); err != nil {
		t.Fatalf("setting the pty's modes: %v", err)
	}
	var mu sync.Mutex
	var out bytes.Buffer
	copied := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				copied <- err
				return
			}
		}
	}()
	deadline := time.Now().Add(ptyTimeout)
	for {
		mu.Lock()
		seen := strings.Contains(out.String(), after)
		mu.Unlock()
		if seen {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-copied
			_ = cmd.Wait()
			t.Fatalf("the terminal never showed %q:\n%q", after, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := ptmx.Write([]byte{3}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	select {
	case <-copied:
	case <-time.After(ptyTimeout):
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		<-copied
	}
	err = cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	mu.Lock()
	defer mu.Unlock()
	return out.String(), code
}

// testPTYInterrupt: a user's Ctrl-C on a terminal (the terminal echoes
// ^C) while a stream prints fast leaves no stray fragment on the screen
// (such as "cocounter.v1-... | saw 26", the ^C's columns kept in front of
// the line drawn after it), the echo itself apart; the stream's last
// live line counts the chunks the printed lines show; what the processor
// prints is prefixed with its stream.
func (c *cli) testPTYInterrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeProgram(t, dir, "fast.rtfs", `(defn tally [n chunk meta] (println "saw" (inc n)) {:state (inc n) :output {:n (inc n)}})
(call :mcp.stream.start {:endpoint "counter.v1" :config {:limit 1000000 :interval_ms 1} :processor tally :initial-state 0})
`)
	output := regexp.MustCompile(`^counter\.v1-[0-9a-f]{8} #(\d+): `)
	for range 3 {
		out, code := c.runOnPTYInterrupted(t, dir, "#100:", "run", "--server-url", c.serverURL, path)
		screen, echoRow := vtScreenEcho(out)
		shown := strings.Join(screen, "\n")
		if code != exitInterrupted || !hasPrefixLine(screen, "rtfshost: interrupted.") {
			t.Errorf("exit %d, want %d and the interruption told\n%s", code, exitInterrupted, shown)
		}
		var last int64 = -1
		saw := 0
		for _, l := range strayLines(screen, echoRow) {
			t.Errorf("stray line %q\n%s", l, shown)
		}
		for i, l := range screen {
			if i == echoRow {
				l = strings.Replace(l, "^C", "", 1)
			}
			if m := output.FindStringSubmatch(l); m != nil {
				last, _ = strconv.ParseInt(m[1], 10, 64)
			}
			if strings.Contains(l, " | saw ") {
				saw++
			}
		}
		live := liveLines(screen)
		if len(live) != 1 || saw == 0 {
			t.Fatalf("want one live line and the processor's lines prefixed with the stream\n%s", shown)
		}
		for _, ls := range live {
			if final := ls[len(ls)-1]; final.chunks != last {
				t.Errorf("the last live line counts %d chunks, the last output printed is #%d\n%s", final.chunks, last, shown)
			}
		}
	}
}

// interruptLine is a line testPTYInterrupt's program and rtfshost draw:
// what the processor prints and outputs, the live line, rtfshost's own.
var interruptLine = regexp.MustCompile(`^(counter\.v1-[0-9a-f]{8} (\| saw \d+|#\d+: \{:n \d+\}|\s+(active|paused)\s+\d+ chunks\s.*)|rtfshost: .*)$`)

// strayLines returns the lines of screen that are not interruptLines. The
// row of the echo of ^C (echoRow) is taken without the echo: it lands where
// the cursor is, in the middle of a line when it comes between two pieces
// of one of the program's writes, whose rest follows it.
func strayLines(screen []string, echoRow int) []string {
	var stray []string
	for i, l := range screen {
		if i == echoRow {
			if l = strings.Replace(l, "^C", "", 1); l == "" {
				continue
			}
		}
		if !interruptLine.MatchString(l) {
			stray = append(stray, l)
		}
	}
	return stray
}

// TestStrayLines: on the emulated screen, an echo of ^C in the middle of
// a line is the terminal's, and the line around it is whole; a line drawn
// from the column the echo left the cursor at, after the progress display
// moved up to redraw (what drawing each line from its start prevents),
// keeps the echo's columns of the line under it: a stray fragment.
func TestStrayLines(t *testing.T) {
	// As a terminal receives them: the pty turns each LF into CR LF.
	const (
		out    = "\rcounter.v1-0123abcd | saw 1\r\n"
		live   = "\rcounter.v1-0123abcd  active        1 chunks       0.0/s\r\n"
		redraw = "\x1b[1A\x1b[J"
	)
	for _, tc := range []struct {
		name, screen string
		stray        []string
	}{
		{"echo in a line", out + live + redraw + "\rcounter.v1-0123abcd | sa^Cw 2\r\n" + live, nil},
		{"echo before a line", out + live + redraw + "\r^Ccounter.v1-0123abcd | saw 2\r\n" + live, nil},
		{"echo between frames", out + live + "^C" + redraw + "\rcounter.v1-0123abcd | saw 2\r\n" + live, nil},
		{"a line drawn from the echo's column", out + live + "^C" + redraw + "counter.v1-0123abcd | saw 2\r\n" + live,
			[]string{"cocounter.v1-0123abcd | saw 2"}},
	} {
		screen, echoRow := vtScreenEcho(tc.screen)
		if got := strayLines(screen, echoRow); !slices.Equal(got, tc.stray) {
			t.Errorf("%s: stray lines %q, want %q\n%s", tc.name, got, tc.stray, strings.Join(screen, "\n"))
		}
	}
}

// testStuckSlowSource: a processor that pauses for good on a source that
// sends a chunk a second (its queue would take more than a minute to
// fill) is reported stuck at once, and the terminal shows the stream as
// paused meanwhile.
func (c *cli) testStuckSlowSource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeProgram(t, dir, "pauser.rtfs", `(defn stop [n chunk meta] {:state (inc n) :action :pause :output {:n (inc n)}})
(call :mcp.stream.start {:endpoint "counter.v1" :queue-capacity 100
                         :config {:limit 1000000 :interval_ms 1000} :processor stop :initial-state 0})
`)
	r := c.runIn(t, dir, "run", "--server-url", c.serverURL, path)
	wantCode(t, r, exitStreamFailed)
	if !regexp.MustCompile(`counter\.v1-[0-9a-f]{8}: paused with no :resume-after-ms, and its source sends no control chunk that could resume it`).MatchString(r.stderr) {
		t.Errorf("the stuck stream is not reported\n%s", r)
	}
	cmd := exec.Command(c.bin, "run", "--data", "terminal", "--server-url", c.serverURL, path)
	cmd.Dir = dir
	cmd.Env = append(childEnv(), "TERM=xterm")
	screen := vtScreen(c.ptyOutput(t, cmd))
	var live []liveLine
	for _, ls := range liveLines(screen) {
		live = ls
	}
	if len(live) == 0 || live[len(live)-1].state != "paused" || live[len(live)-1].chunks != 1 {
		t.Errorf("the terminal does not show the stream paused after its one chunk\n%s", strings.Join(screen, "\n"))
	}
}
