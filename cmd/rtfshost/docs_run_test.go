//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The documentation's shell sessions and replies are run by testDocs, so a
// page and the program cannot disagree. A fenced block of README.md or
// docs/*.md that shows a session or a reply (its language is sh, console
// or json, or its first line is a command or a JSON value) says on the
// line before it what the test does with it:
//
//	<!-- doc-test: session -->          lines "$ CMD" run in the page's
//	                                    shell, each followed by the output
//	                                    it must print
//	<!-- doc-test: output of CMD -->    the block is what CMD prints
//	<!-- doc-test: file NAME -->        the block is written to NAME in the
//	                                    page's scratch directory, for the
//	                                    commands after it
//	<!-- doc-test: not run: WHY -->     the block cannot run here
//
// A page's commands run one after another in one bash (docShell), in a
// scratch directory with a copy of examples/ in it, rtfshost being the
// binary under test: variables and the working directory carry over from
// one block of a page to the next, as in a reader's terminal. A command
// goes on over the next lines while a quote is open or the line ends with
// a backslash. A command ending with "&" starts a server (docServer): the
// test starts it itself, on 127.0.0.1 port 0 in place of the port it
// names, checks its first lines against the ones shown and stops it when
// the page ends; in the page's later commands and outputs the address the
// page shows stands for the one it listens on.
//
// Outputs are compared line by line (docPattern): a line "..." stands for
// any number of lines, "..." within a line for any text, a line ending
// with a backslash goes on at the next line's first non-blank character,
// and what changes from run to run (docVolatile: stream ids' random
// suffixes, session and event ids, times, epoch milliseconds, durations,
// Go versions, short program hashes, the scratch directory) matches any value of its kind. Such a value shown in
// an output stands, in the page's later commands, for the value the
// program printed in its place: a session id copied from a reply works
// as it would for the reader. Other blocks (RTFS, Go, PromQL,
// configuration) are left alone. The test logs how many blocks it ran and
// how many it did not.

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

// docError is the first line of an error a command prints, FILE:LINE:COL,
// or of a failed test, FILE:LINE.
var docError = regexp.MustCompile(`^\S+\.rtfs:\d+(:\d+)?: `)

// docCounts is what testDocs did with the blocks.
type docCounts struct {
	sessions, outputs, files, notRun, others int
	commands, servers                        int
	notRunWhy                                []string
}

func (c *cli) testDocs(t *testing.T) {
	t.Parallel()
	// The sessions run in bash, and the MCP server's pages show curl; CI
	// installs curl (.ci/run) as it installs chromium and node.
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the documentation's sessions need %s on the PATH: %v", tool, err)
		}
	}
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
	var n docCounts
	for _, page := range pages {
		name, _ := filepath.Rel(root, page)
		p := &docPage{t: t, c: c, bin: bin}
		p.run(docBlocks(t, page, name), &n)
		p.close()
	}
	if n.sessions+n.outputs < 10 {
		t.Errorf("only %d blocks ran", n.sessions+n.outputs)
	}
	t.Logf("documentation blocks: %d sessions and %d outputs run (%d commands, %d servers), %d files written, %d marked not run, %d other blocks (code, configuration)",
		n.sessions, n.outputs, n.commands, n.servers, n.files, n.notRun, n.others)
	t.Logf("not run:\n\t%s", strings.Join(n.notRunWhy, "\n\t"))
}

// A docPage runs the blocks of one page: its scratch directory, its shell
// and its servers, and the values its outputs showed for volatile ones.
type docPage struct {
	t       *testing.T
	c       *cli
	bin     string // the directory of the rtfshost on the sessions' PATH
	work    string // the scratch directory; "" until a block needs it
	sh      *docShell
	servers []*docServer
	// shown pairs a value the page shows (an address, an id) with the one
	// this run has in its place.
	shown []docValue
}

type docValue struct{ doc, real string }

func (p *docPage) run(blocks []docBlock, n *docCounts) {
	t := p.t
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d", b.file, b.line)
		if b.marker == "" {
			if b.isSession() {
				t.Errorf("%s: a %q block with no doc-test marker: say before it what the test does with it (session, output of CMD, file NAME, or not run: WHY)", where, b.lang)
			} else {
				n.others++
			}
			continue
		}
		kind, arg, _ := strings.Cut(b.marker, " ")
		if kind == "not" && strings.HasPrefix(arg, "run: ") && len(arg) > len("run: ") {
			n.notRun++
			n.notRunWhy = append(n.notRunWhy, where+": "+strings.TrimPrefix(arg, "run: "))
			continue
		}
		p.scratch()
		switch {
		case kind == "session":
			n.sessions++
			steps, err := sessionSteps(b.text)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			for _, step := range steps {
				n.commands++
				if srv, ok := strings.CutSuffix(strings.TrimSpace(step.cmd), "&"); ok {
					n.servers++
					p.startServer(where, srv, step.want)
					continue
				}
				p.match(where+": $ "+step.cmd, p.shell(where, step.cmd), step.want)
			}
		case kind == "output" && strings.HasPrefix(arg, "of "):
			n.outputs++
			n.commands++
			cmd := strings.TrimPrefix(arg, "of ")
			p.match(where+": "+cmd, p.shell(where, cmd), strings.Split(b.text, "\n"))
		case kind == "file" && arg != "" && !strings.ContainsAny(arg, "/ "):
			n.files++
			if err := os.WriteFile(filepath.Join(p.work, arg), []byte(b.text+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("%s: unknown doc-test marker %q", where, b.marker)
		}
	}
}

// scratch makes the page's scratch directory, a copy of examples/ in it.
func (p *docPage) scratch() {
	if p.work != "" {
		return
	}
	p.work = p.t.TempDir()
	if err := os.CopyFS(filepath.Join(p.work, "examples"), os.DirFS(p.c.examples)); err != nil {
		p.t.Fatal(err)
	}
}

// close stops the page's shell, then its servers, the last started first
// (a cluster's hosts before the NATS they use).
func (p *docPage) close() {
	if p.sh != nil {
		p.sh.close(p.t)
	}
	for _, s := range slices.Backward(p.servers) {
		s.stop(p.t)
	}
}

// shell runs cmdline in the page's shell, the values the page showed
// replaced by this run's, and returns what it printed.
func (p *docPage) shell(where, cmdline string) string {
	if p.sh == nil {
		p.sh = startDocShell(p.t, where, p.work, p.env())
	}
	for _, v := range p.shown {
		cmdline = strings.ReplaceAll(cmdline, v.doc, v.real)
	}
	return p.sh.run(p.t, where, cmdline)
}

func (p *docPage) env() []string {
	return append(childEnv(), "PATH="+p.bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// docAddr is an address on the loopback interface in an output, and
// docListen the address a server's command line gives it.
var (
	docAddr   = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	docListen = regexp.MustCompile(`--listen[= ](127\.0\.0\.1:\d+)`)
)

// startServer starts the server cmdline (a session's command that ended
// with "&") on port 0 in place of the one its --listen names, and checks
// its first lines against want; the first address they show is where it
// listens.
func (p *docPage) startServer(where, cmdline string, want []string) {
	t := p.t
	m := docListen.FindStringSubmatch(cmdline)
	if m == nil {
		t.Errorf("%s: %s: a server the documentation starts names its address (--listen 127.0.0.1:PORT), so that the page's commands can reach it", where, cmdline)
		return
	}
	shownAddr := m[1]
	cmdline = strings.Replace(cmdline, m[0], "--listen 127.0.0.1:0", 1)
	for _, v := range p.shown {
		cmdline = strings.ReplaceAll(cmdline, v.doc, v.real)
	}
	s := startDocServer(t, where, p.work, p.env(), cmdline, len(want))
	p.servers = append(p.servers, s)
	real := docAddr.FindString(strings.Join(s.first, "\n"))
	if real == "" {
		t.Errorf("%s: %s printed no address in its first lines:\n%s", where, cmdline, strings.Join(s.first, "\n"))
		return
	}
	p.shown = append(p.shown, docValue{doc: shownAddr, real: real})
	p.match(where+": $ "+cmdline+" &", strings.Join(s.first, "\n"), want)
}

// match fails the test unless got's lines match want's (docPattern), and
// records the volatile values want shows with the ones got has in their
// place.
func (p *docPage) match(what, got string, want []string) {
	t := p.t
	t.Helper()
	real := make([]string, 0, 2*len(p.shown)+2)
	for _, v := range p.shown {
		real = append(real, v.real, v.doc)
	}
	if p.work != "" {
		real = append(real, p.work, "$WORK")
	}
	unreal := strings.NewReplacer(real...)
	got = strings.ReplaceAll(got, "\r\n", "\n")
	gl := strings.Split(strings.TrimRight(got, "\n"), "\n")
	if strings.TrimSpace(got) == "" {
		gl = nil
	}
	for i := range gl {
		gl[i] = strings.TrimRight(unreal.Replace(gl[i]), " \t")
	}
	wl := joinWrapped(want)
	for len(wl) > 0 && strings.TrimSpace(wl[len(wl)-1]) == "" {
		wl = wl[:len(wl)-1]
	}
	pats := make([]*docPat, len(wl))
	for i, w := range wl {
		pats[i] = docPattern(strings.TrimRight(w, " \t"))
	}
	var seen []docValue
	if !matchLines(gl, pats, &seen) {
		t.Errorf("%s printed:\n%s\nthe documentation shows:\n%s", what, strings.Join(gl, "\n"), strings.Join(wl, "\n"))
		return
	}
	for _, v := range seen {
		if v.doc != v.real && !slices.Contains(p.shown, v) {
			p.shown = append(p.shown, v)
		}
	}
}

// joinWrapped joins the lines that end with a backslash to the next one,
// from its first non-blank character.
func joinWrapped(lines []string) []string {
	var out []string
	cont := false
	for _, l := range lines {
		if cont {
			l = out[len(out)-1] + strings.TrimLeft(l, " \t")
			out = out[:len(out)-1]
		}
		l, cont = strings.CutSuffix(l, `\`)
		out = append(out, l)
	}
	return out
}

// A docStep is one command of a session and the lines it must print.
type docStep struct {
	cmd  string
	want []string
}

// sessionSteps splits a session into its commands, each with the lines
// after it.
func sessionSteps(text string) ([]docStep, error) {
	var steps []docStep
	open := false // the last command goes on
	for _, line := range strings.Split(text, "\n") {
		if open {
			s := &steps[len(steps)-1]
			s.cmd += "\n" + line
			open = !shellComplete(s.cmd)
			continue
		}
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			steps = append(steps, docStep{cmd: cmd})
			open = !shellComplete(cmd)
			continue
		}
		if len(steps) == 0 {
			if strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("a session begins with a command (\"$ CMD\"), not %q", line)
			}
			continue
		}
		steps[len(steps)-1].want = append(steps[len(steps)-1].want, line)
	}
	if open {
		return nil, fmt.Errorf("the command %q does not end: a quote is left open", steps[len(steps)-1].cmd)
	}
	return steps, nil
}

// shellComplete reports whether cmd is a whole command line to the shell:
// no quote is open and it does not end with a backslash.
func shellComplete(cmd string) bool {
	var quote rune // ' or " while one is open
	escaped, comment := false, false
	prev := ' '
	for _, r := range cmd {
		switch {
		case comment:
			comment = r != '\n'
		case escaped:
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			}
		case r == '\\':
			escaped = true
		case quote == '"':
			if r == '"' {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t' || prev == '\n'):
			comment = true
		}
		prev = r
	}
	return quote == 0 && !escaped
}

// docVolatile are what changes from run to run, each matching any value of
// its kind in an output.
var docVolatile = []*regexp.Regexp{
	regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), // times
	regexp.MustCompile(`-[0-9a-f]{8}\b`),                                            // random suffixes of ids
	regexp.MustCompile(`\bgo1\.\d+(\.\d+)?`),                                        // Go versions
	regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s|m|h)\b`),                           // durations
	regexp.MustCompile(`\b[0-9a-f]{40}\b`),                                          // revisions
	regexp.MustCompile(`\b[0-9A-Z]{26}(_|\b)`),                                      // MCP session and SSE stream ids
	regexp.MustCompile(`\b1\d{12}\b`),                                               // epoch milliseconds
	regexp.MustCompile(`\([0-9a-f]{12}\)`),                                          // short program hashes (they follow the compiler and prelude)
}

// A docPat is a line of an output as a pattern: its "..."s match any
// text and its volatile values any value of their kind.
type docPat struct {
	text   string
	any    bool           // the line is "...": any number of lines
	re     *regexp.Regexp // the line
	values []string       // the volatile values shown, by group vN of re
}

func docPattern(want string) *docPat {
	if strings.TrimSpace(want) == "..." {
		return &docPat{text: want, any: true}
	}
	type span struct {
		start, end int
		re         *regexp.Regexp // nil for "..."
	}
	var spans []span
	for _, re := range docVolatile {
		for _, loc := range re.FindAllStringIndex(want, -1) {
			spans = append(spans, span{loc[0], loc[1], re})
		}
	}
	for i := 0; ; {
		j := strings.Index(want[i:], "...")
		if j < 0 {
			break
		}
		spans = append(spans, span{i + j, i + j + 3, nil})
		i += j + 3
	}
	slices.SortStableFunc(spans, func(a, b span) int { return a.start - b.start })
	l := &docPat{text: want}
	var b strings.Builder
	b.WriteString("^")
	at := 0
	for _, s := range spans {
		if s.start < at {
			continue // within an earlier one
		}
		b.WriteString(regexp.QuoteMeta(want[at:s.start]))
		if s.re == nil {
			b.WriteString(".*")
		} else {
			fmt.Fprintf(&b, "(?P<v%d>%s)", len(l.values), s.re)
			l.values = append(l.values, want[s.start:s.end])
		}
		at = s.end
	}
	b.WriteString(regexp.QuoteMeta(want[at:]))
	b.WriteString("$")
	l.re = regexp.MustCompile(b.String())
	return l
}

// matchLines reports whether got's lines match the patterns want; on a
// match it appends to seen the volatile values want shows with got's.
func matchLines(got []string, want []*docPat, seen *[]docValue) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0].any {
		for i := 0; i <= len(got); i++ {
			if matchLines(got[i:], want[1:], seen) {
				return true
			}
		}
		return false
	}
	if len(got) == 0 {
		return false
	}
	m := want[0].re.FindStringSubmatch(got[0])
	if m == nil || !matchLines(got[1:], want[1:], seen) {
		return false
	}
	for i, name := range want[0].re.SubexpNames() {
		var k int
		if _, err := fmt.Sscanf(name, "v%d", &k); err == nil && k < len(want[0].values) {
			*seen = append(*seen, docValue{doc: want[0].values[k], real: m[i]})
		}
	}
	return true
}

// docShell is the bash of one page. Each command runs in it with stdin
// from /dev/null and stderr on stdout; a NUL-framed marker after it says
// where its output ends.
type docShell struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	outs chan docOut // one per command, in order
}

type docOut struct {
	text string
	err  error
}

const docStepEnd = "\x00doc-step-end\x00"

func startDocShell(t *testing.T, where, dir string, env []string) *docShell {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: starting bash: %v", where, err)
	}
	w.Close()
	sh := &docShell{cmd: cmd, in: in, outs: make(chan docOut)}
	go func() {
		defer r.Close()
		defer close(sh.outs)
		br := bufio.NewReader(r)
		var buf []byte
		for {
			b, err := br.ReadBytes(0)
			buf = append(buf, b...)
			if text, ok := bytes.CutSuffix(buf, []byte(docStepEnd)); ok {
				sh.outs <- docOut{text: string(text)}
				buf = nil
				continue
			}
			if err != nil {
				if len(buf) > 0 {
					sh.outs <- docOut{text: string(buf), err: err}
				}
				return
			}
		}
	}()
	return sh
}

// run runs cmdline and returns what it printed.
func (sh *docShell) run(t *testing.T, where, cmdline string) string {
	t.Helper()
	script := "{ " + cmdline + "\n} </dev/null 2>&1; printf '\\0doc-step-end\\0'\n"
	if _, err := io.WriteString(sh.in, script); err != nil {
		t.Fatalf("%s: %s: the shell has gone: %v", where, cmdline, err)
	}
	select {
	case out, ok := <-sh.outs:
		if !ok || out.err != nil {
			t.Fatalf("%s: %s: the shell ended (%v):\n%s", where, cmdline, out.err, out.text)
		}
		return out.text
	case <-time.After(childTimeout):
		sh.kill()
		t.Fatalf("%s: %s: still running after %v", where, cmdline, childTimeout)
		return ""
	}
}

func (sh *docShell) kill() {
	_ = syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGKILL)
	_ = sh.cmd.Wait()
	for range sh.outs {
	}
}

// close ends the shell: its stdin closes and it exits.
func (sh *docShell) close(t *testing.T) {
	sh.in.Close()
	done := make(chan error, 1)
	go func() {
		for range sh.outs {
		}
		done <- sh.cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the documentation's shell exited with %v", err)
		}
	case <-time.After(childTimeout):
		_ = syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Errorf("the documentation's shell was still running after its stdin closed")
	}
}

// docServer is a server a page starts: a session's command ending with
// "&".
type docServer struct {
	cmdline string
	cmd     *exec.Cmd
	first   []string      // its first lines
	rest    *lockedWriter // its stderr and later stdout
	drained chan struct{} // closed when its stdout is read to the end
}

// startDocServer starts cmdline with sh in dir and waits for its first n
// lines on stdout.
func startDocServer(t *testing.T, where, dir string, env []string, cmdline string, n int) *docServer {
	t.Helper()
	s := &docServer{cmdline: cmdline, rest: &lockedWriter{}, drained: make(chan struct{})}
	s.cmd = exec.Command("sh", "-c", "exec "+cmdline)
	s.cmd.Dir, s.cmd.Env = dir, env
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.cmd.Stderr = s.rest
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("%s: %s: %v", where, cmdline, err)
	}
	lines := make(chan string, n)
	go func() {
		defer close(s.drained)
		sc := bufio.NewScanner(out)
		for i := 0; i < n && sc.Scan(); i++ {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(s.rest, out)
	}()
	deadline := time.After(childTimeout)
	for len(s.first) < n {
		select {
		case l, ok := <-lines:
			if !ok {
				s.stop(t)
				t.Fatalf("%s: %s ended after printing:\n%s\n%s", where, cmdline, strings.Join(s.first, "\n"), s.rest)
			}
			s.first = append(s.first, l)
		case <-deadline:
			s.stop(t)
			t.Fatalf("%s: %s printed %d lines in %v, not %d:\n%s\n%s", where, cmdline, len(s.first), childTimeout, n, strings.Join(s.first, "\n"), s.rest)
		}
	}
	return s
}

// stop ends the server with SIGTERM, as Ctrl-C or a service manager
// would, and checks that it exits with 0.
func (s *docServer) stop(t *testing.T) {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() {
		<-s.drained
		done <- s.cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("%s exited with %v after SIGTERM:\n%s", s.cmdline, err, s.rest)
		}
	case <-time.After(childTimeout):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Errorf("%s was still running %v after SIGTERM:\n%s", s.cmdline, childTimeout, s.rest)
	}
}

// TestDocMatching pins the rules testDocs compares outputs by and splits
// sessions by.
func TestDocMatching(t *testing.T) {
	pats := func(want ...string) []*docPat {
		var ps []*docPat
		for _, w := range joinWrapped(want) {
			ps = append(ps, docPattern(w))
		}
		return ps
	}
	for _, tc := range []struct {
		got  []string
		want []string
		ok   bool
		seen []docValue
	}{
		{[]string{"Mcp-Session-Id: GZAETSAJU6XGFT3TM4G22Z724H"}, []string{"Mcp-Session-Id: 4WMGBD6BML3F2NR2MCKXPJGTXX"}, true,
			[]docValue{{"4WMGBD6BML3F2NR2MCKXPJGTXX", "GZAETSAJU6XGFT3TM4G22Z724H"}}},
		{[]string{`{"id":2,"t":1,"s":"w-be9f664c","n":3}`}, []string{`{"id":2,...,"s":"w-68a87abb",...}`}, true,
			[]docValue{{"-68a87abb", "-be9f664c"}}},
		{[]string{`{"id":2,"n":3}`}, []string{`{"id":2,...,"n":4}`}, false, nil},
		{[]string{`{"a":1,`, `"b":2}`}, []string{`{"a":1,"b":2}`}, false, nil},
		{[]string{`{"a":1,"b":2}`}, []string{`{"a":1,\`, `     "b":2}`}, true, nil},
		{[]string{"a", "x", "y", "b"}, []string{"a", "...", "b"}, true, nil},
		{[]string{"a", "b"}, []string{"a", "...", "b"}, true, nil},
		{[]string{"a", "x"}, []string{"a", "...", "b"}, false, nil},
		{[]string{"took 1.5ms at 2026-01-02T03:04:05Z"}, []string{"took 3s at 2025-12-31T23:59:59.5Z"}, true,
			[]docValue{{"3s", "1.5ms"}, {"2025-12-31T23:59:59.5Z", "2026-01-02T03:04:05Z"}}},
		{[]string{"a.b"}, []string{"a*b"}, false, nil},
	} {
		var seen []docValue
		ok := matchLines(tc.got, pats(tc.want...), &seen)
		if ok != tc.ok || (ok && !slices.Equal(seen, tc.seen)) {
			t.Errorf("%q against %q: %v %v, want %v %v", tc.got, tc.want, ok, seen, tc.ok, tc.seen)
		}
	}
	for cmd, whole := range map[string]bool{
		`curl -d '{"a":1}'`:               true,
		"curl -d '{\n  \"a\":1}'":         true,
		`curl -d '{`:                      false,
		`echo "it's"`:                     true,
		`true # the server's reply`:       true,
		`echo a\`:                         false,
		`echo 'a\'`:                       true,
		`printf '%s' "$(echo ")")"`:       true,
		`H+=(-H "Mcp-Session-Id: $SID" \`: false,
	} {
		if shellComplete(cmd) != whole {
			t.Errorf("shellComplete(%q) = %v", cmd, !whole)
		}
	}
	steps, err := sessionSteps("$ curl -d '{\n  \"a\":1}'\nout 1\n$ echo b\nb")
	if err != nil || len(steps) != 2 || steps[0].cmd != "curl -d '{\n  \"a\":1}'" || !slices.Equal(steps[0].want, []string{"out 1"}) || steps[1].cmd != "echo b" {
		t.Errorf("sessionSteps: %q, %v", steps, err)
	}
	if _, err := sessionSteps("$ echo '\nno end"); err == nil {
		t.Errorf("sessionSteps of an open quote: no error")
	}
}
