//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The documentation's shell sessions and replies are run by testDocs, so a
// page and the program cannot disagree. A fenced block of README.md or
// docs/*.md that shows a session or a reply (its language is sh, console
// or json, or its first line is a command or a JSON value) says on the
// line before it what the test does with it:
//
//	<!-- doc-test: session -->          lines "$ CMD" run in a scratch
//	                                    directory (a copy of examples/ in it),
//	                                    each followed by the output it must
//	                                    print
//	<!-- doc-test: output of CMD -->    the block is what CMD prints
//	<!-- doc-test: file NAME -->        the block is written to NAME in the
//	                                    page's scratch directory, for the
//	                                    commands after it
//	<!-- doc-test: not run: WHY -->     the block cannot run here
//
// Outputs are compared line by line after normalize (stream ids' random
// suffixes, times, durations, Go versions, the scratch directory); a line
// "..." stands for any number of lines. Other blocks (RTFS, Go, PromQL,
// configuration) are left alone. The test logs how many blocks it ran.

// A docBlock is one fenced block of a page.
type docBlock struct {
	file   string
	line   int    // of the opening fence
	lang   string // the fence's info string
	marker string // the doc-test marker before it, without "<!-- doc-test: " and " -->"
	text   string
}

var docMarker = regexp.MustCompile(`^<!-- doc-test: (.*) -->$`)

// docBlocks returns the fenced blocks of the file at path.
func docBlocks(t *testing.T, path, name string) []docBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []docBlock
	var cur *docBlock
	var body []string
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &docBlock{file: name, line: n, lang: strings.TrimSpace(strings.TrimPrefix(line, "```"))}
			if m := docMarker.FindStringSubmatch(prev); m != nil {
				cur.marker = m[1]
			}
			body = nil
		case cur != nil && strings.HasPrefix(line, "```"):
			cur.text = strings.Join(body, "\n")
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, line)
		}
		prev = line
	}
	return out
}

// isSession reports whether a block shows a shell session or a reply.
func (b docBlock) isSession() bool {
	switch b.lang {
	case "sh", "console", "json", "shell", "bash":
		return true
	case "":
		first := strings.TrimSpace(strings.SplitN(strings.TrimSpace(b.text), "\n", 2)[0])
		for _, p := range []string{"$ ", "{", "curl ", "rtfshost ", "event:", "id:", "HTTP/"} {
			if strings.HasPrefix(first, p) {
				return true
			}
		}
		return docError.MatchString(first)
	}
	return false
}

// docError is the first line of an error a command prints: FILE:LINE:COL.
var docError = regexp.MustCompile(`^\S+\.rtfs:\d+:\d+: `)

func (c *cli) testDocs(t *testing.T) {
	t.Parallel()
	root := filepath.Join(c.examples, "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	// rtfshost on the PATH of the sessions is the binary under test.
	bin := t.TempDir()
	if err := os.Symlink(c.bin, filepath.Join(bin, "rtfshost")); err != nil {
		t.Fatal(err)
	}
	var sessions, outputs, files, notRun, others int
	for _, page := range pages {
		name, _ := filepath.Rel(root, page)
		work := ""
		for _, b := range docBlocks(t, page, name) {
			where := fmt.Sprintf("%s:%d", b.file, b.line)
			if b.marker == "" {
				if b.isSession() {
					t.Errorf("%s: a %q block with no doc-test marker: say before it what the test does with it (session, output of CMD, file NAME, or not run: WHY)", where, b.lang)
				} else {
					others++
				}
				continue
			}
			if work == "" && !strings.HasPrefix(b.marker, "not run:") {
				work = t.TempDir()
				if err := os.CopyFS(filepath.Join(work, "examples"), os.DirFS(c.examples)); err != nil {
					t.Fatal(err)
				}
			}
			switch kind, arg, _ := strings.Cut(b.marker, " "); {
			case kind == "not" && strings.HasPrefix(arg, "run: ") && len(arg) > len("run: "):
				notRun++
			case kind == "session":
				sessions++
				for _, step := range sessionSteps(b.text) {
					got := c.docRun(t, where, work, bin, step.cmd)
					matchDoc(t, where+": $ "+step.cmd, work, got, step.want)
				}
			case kind == "output" && strings.HasPrefix(arg, "of "):
				outputs++
				cmd := strings.TrimPrefix(arg, "of ")
				matchDoc(t, where+": "+cmd, work, c.docRun(t, where, work, bin, cmd), strings.Split(b.text, "\n"))
			case kind == "file" && arg != "" && !strings.ContainsAny(arg, "/ "):
				files++
				if err := os.WriteFile(filepath.Join(work, arg), []byte(b.text+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			default:
				t.Errorf("%s: unknown doc-test marker %q", where, b.marker)
			}
		}
	}
	if sessions+outputs < 4 {
		t.Errorf("only %d blocks ran", sessions+outputs)
	}
	t.Logf("documentation blocks: %d sessions and %d outputs run, %d files written, %d marked not run, %d other blocks (code, configuration)",
		sessions, outputs, files, notRun, others)
}

// A docStep is one command of a session and the lines it must print.
type docStep struct {
	cmd  string
	want []string
}

func sessionSteps(text string) []docStep {
	var steps []docStep
	for _, line := range strings.Split(text, "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			steps = append(steps, docStep{cmd: cmd})
			continue
		}
		if len(steps) > 0 {
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, line)
		}
	}
	return steps
}

// docRun runs a documented command line with sh in work, rtfshost being the
// binary under test, and returns what it printed (stdout, then stderr).
func (c *cli) docRun(t *testing.T, where, work, bin, cmdline string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", cmdline)
	cmd.Dir = work
	cmd.Env = append(childEnv(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); ctx.Err() != nil {
		t.Fatalf("%s: %s: still running after %v (%v)", where, cmdline, childTimeout, err)
	}
	return stdout.String() + stderr.String()
}

// docVolatile are what changes from run to run, with what stands for it.
var docVolatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\b(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d))`), "TIME"},
	{regexp.MustCompile(`-[0-9a-f]{8}\b`), "-XXXXXXXX"},
	{regexp.MustCompile(`\bgo1\.\d+(\.\d+)?`), "goX"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s|m|h)\b`), "DUR"},
	{regexp.MustCompile(`\b[0-9a-f]{40}\b`), "REVISION"},
}

// normalize replaces what changes from run to run in s.
func normalize(s, work string) string {
	if work != "" {
		s = strings.ReplaceAll(s, work, "$WORK")
	}
	for _, v := range docVolatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return strings.TrimRight(s, " \t")
}

// matchDoc fails t unless got's lines match want's, after normalize; a
// want line "..." matches any number of lines.
func matchDoc(t *testing.T, what, work, got string, want []string) {
	t.Helper()
	gl := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if strings.TrimSpace(got) == "" {
		gl = nil
	}
	for i := range gl {
		gl[i] = normalize(gl[i], work)
	}
	for len(want) > 0 && strings.TrimSpace(want[len(want)-1]) == "" {
		want = want[:len(want)-1]
	}
	wl := make([]string, len(want))
	for i, w := range want {
		wl[i] = normalize(w, work)
	}
	if !matchLines(gl, wl) {
		t.Errorf("%s printed (normalized):\n%s\nthe documentation shows:\n%s", what, strings.Join(gl, "\n"), strings.Join(wl, "\n"))
	}
}

func matchLines(got, want []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for i := 0; i <= len(got); i++ {
			if matchLines(got[i:], want[1:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && got[0] == want[0] && matchLines(got[1:], want[1:])
}
