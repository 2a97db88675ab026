//go:build unix

package main

// End-to-end tests of the rtfshost command line: TestCLI builds the binary
// once and runs it as a child process, the way a user does. The subtests live
// in this file (exit codes, program errors, the embedded reference server),
// examples_test.go (every example under ../../examples with --json) and
// pty_test.go (no escape codes on a pipe).
//
// Children run in a temporary directory (so the default data directory lands
// there), with the CCOS_* variables removed from their environment. Tests
// that need the default server address 127.0.0.1:2025 run one at a time;
// every other test points --server-url at the reference server this process
// starts on a port of its own.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/internal/localserver"
)

// childTimeout bounds every child process; the examples finish in a second or
// two, so reaching it means the command hung.
const childTimeout = 60 * time.Second

// cli is the rtfshost binary under test and the reference server that the
// tests which do not need the default address use.
type cli struct {
	bin       string // absolute path of the built binary
	examples  string // absolute path of the examples directory
	testdata  string // absolute path of cmd/rtfshost/testdata
	serverURL string // --server-url for raw SSE on the test's own server
}

// TestCLI builds rtfshost and runs the end-to-end subtests against it.
func TestCLI(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	c := buildCLI(t)
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("starting the reference server: %v", err)
	}
	defer srv.Close()
	c.serverURL = srv.URL() + "/sse"

	// Subtests on the test's own server run in parallel with each other.
	t.Run("own-server", func(t *testing.T) {
		t.Run("help", c.testHelp)
		t.Run("check", c.testCheck)
		t.Run("program-error", c.testProgramError)
		t.Run("stream-error", c.testStreamError)
		t.Run("awaited-error", c.testAwaitedError)
		t.Run("side-by-side", c.testSideBySide)
		t.Run("agree", c.testAgree)
		t.Run("agree-failed", c.testAgreeFailed)
		t.Run("json", c.testJSONEverywhere)
		t.Run("pty-interrupt", c.testPTYInterrupt)
		t.Run("stuck-slow-source", c.testStuckSlowSource)
		t.Run("chunk-shape", c.testChunkShape)
		t.Run("progress-lines", c.testProgressLines)
		t.Run("stuck", c.testStuck)
		t.Run("unreachable", c.testUnreachable)
		t.Run("interrupt", c.testInterrupt)
		t.Run("inspect", c.testInspect)
		t.Run("env-endpoint", c.testEnvEndpoint)
		t.Run("resume", c.testResume)
		t.Run("resume-truth", c.testResumeTruth)
		t.Run("recovery-held", c.testRecoveryHeld)
		t.Run("recovery-exec", c.testRecoveryExec)
		t.Run("recovery-skip", c.testRecoverySkip)
		t.Run("recovery-skip-held", c.testRecoverySkipHeld)
		t.Run("examples", c.testExamples)
		t.Run("docs", c.testDocs)
		t.Run("record-replay", c.testRecordReplay)
		t.Run("replay-resume", c.testReplayResume)
		t.Run("no-escapes", c.testNoEscapes)
		t.Run("pty", c.testLiveLines)
	})
	// Subtests on the default address 127.0.0.1:2025 run one at a time, and
	// hold a lock that other test processes on this machine respect.
	t.Run("default-address", func(t *testing.T) {
		defer lockDefaultAddr(t)()
		t.Run("embedded-server", c.testEmbeddedServer)
		t.Run("concurrent-runs", c.testConcurrentRuns)
		t.Run("mcp-tool", c.testMCPToolExample)
	})
}

// buildCLI compiles the command into a temporary directory, with -race when
// this test binary has it, so that the build reuses the cached packages.
func buildCLI(t testing.TB) *cli {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "rtfshost")
	args := []string{"build", "-o", bin}
	if raceEnabled() {
		args = append(args, "-race")
	}
	args = append(args, ".")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir = wd
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return &cli{
		bin:      bin,
		examples: filepath.Join(wd, "..", "..", "examples"),
		testdata: filepath.Join(wd, "testdata"),
	}
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// goTool finds the go command that runs this test: go test puts its own
// GOROOT/bin first on the PATH of the tests it runs. Without one on PATH
// it returns "go", and running it fails with an error naming it.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// childEnv is this process's environment without the CCOS_* variables, which
// would redirect the streams or add credentials.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CCOS_") {
			env = append(env, kv)
		}
	}
	return env
}

// result is what a finished child produced.
type result struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("rtfshost %s: exit %d\n--- stdout:\n%s--- stderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// run runs rtfshost with args in a fresh temporary directory and waits for it.
// A child that outlives childTimeout is killed and fails the test.
func (c *cli) run(t testing.TB, args ...string) result {
	t.Helper()
	return c.runEnv(t, nil, args...)
}

// runEnv is run with extra environment variables (NAME=value).
func (c *cli) runEnv(t testing.TB, env []string, args ...string) result {
	t.Helper()
	return c.runDir(t, t.TempDir(), env, args...)
}

// runIn is run in the directory dir (where the default data directory,
// .rtfshost, is).
func (c *cli) runIn(t testing.TB, dir string, args ...string) result {
	t.Helper()
	return c.runDir(t, dir, nil, args...)
}

func (c *cli) runDir(t testing.TB, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir = dir
	cmd.Env = append(childEnv(), env...)
	// On timeout, ask for a goroutine dump first: it shows where it hung.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("still running after %v (killed):\n%s", childTimeout, r)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running %s: %v", c.bin, err)
	}
	return r
}

// wantCode fails the test unless r exited with code.
func wantCode(t testing.TB, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d\n%s", code, r)
	}
}

// testCheck: check accepts every example and reports reader and compile
// errors as file:line:col: message, with the source line, and exit 2.
func (c *cli) testCheck(t *testing.T) {
	t.Parallel()
	examples, err := filepath.Glob(filepath.Join(c.examples, "*.rtfs"))
	if err != nil || len(examples) < 6 {
		t.Fatalf("examples: %v %v", examples, err)
	}
	r := c.run(t, append([]string{"check"}, examples...)...)
	wantCode(t, r, exitOK)
	for _, f := range examples {
		if !strings.Contains(r.stdout, f+": ok\n") {
			t.Errorf("check did not report %s as ok\n%s", f, r)
		}
	}

	cases := []struct {
		file, pos, msg string
		lineNo         int
		line           string
	}{
		{"broken_syntax.rtfs", ":6:1: ", "unterminated list", 6, "(defn broken [state chunk metadata]"},
		{"broken_compile.rtfs", ":5:9: ", "let: binding total has no value", 5, "  (let [total]"},
	}
	for _, tc := range cases {
		path := filepath.Join(c.testdata, tc.file)
		r := c.run(t, "check", path)
		wantCode(t, r, exitProgramError)
		wantLines(t, r, r.stderr, path+tc.pos+tc.msg, tc.lineNo, tc.line)
		if strings.Contains(r.stdout, "ok") {
			t.Errorf("check printed ok for a broken file\n%s", r)
		}
	}
}

// wantLines fails unless text has a line starting with first (the message
// with its position), followed by the offending source line: a line that
// names the line number and ends with the source text.
func wantLines(t *testing.T, r result, text, first string, lineNo int, source string) {
	t.Helper()
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, first) {
			continue
		}
		if i+1 >= len(lines) || !strings.HasSuffix(lines[i+1], source) || !strings.Contains(lines[i+1], strconv.Itoa(lineNo)) {
			t.Fatalf("after %q want line %d of the source, %q\n%s", first, lineNo, source, r)
		}
		return
	}
	t.Fatalf("no line starting with %q\n%s", first, r)
}

// testProgramError: an error while the program runs is a program error: its
// position and source line on stderr, exit 2, and no result line; under
// --json an error line on stdout, and nothing on stderr.
func (c *cli) testProgramError(t *testing.T) {
	t.Parallel()
	path := filepath.Join(c.testdata, "runtime_error.rtfs")
	text := c.run(t, "run", "--server-url", c.serverURL, path)
	wantCode(t, text, exitProgramError)
	wantLines(t, text, text.stderr, path+":6:8: count: expected a collection, got int 5", 6, "(def n (count 5))")
	if strings.Count(text.stderr, "count: expected a collection") != 1 || strings.Contains(text.stdout, "result") {
		t.Errorf("the error is not told once, or a result is printed\n%s", text)
	}
	r := c.run(t, "run", "--json", "--server-url", c.serverURL, path)
	wantCode(t, r, exitProgramError)
	if r.stderr != "" {
		t.Errorf("run --json repeats the error on stderr\n%s", r)
	}
	lines := parseJSONLines(t, r)
	if len(lines) != 2 || lines[0].Type != "log" || lines[0].Message != "about to fail" {
		t.Fatalf("want the log line, then the error line\n%s", r)
	}
	// Under --json the program error is a JSON line too.
	if e := lines[1]; e.Type != "error" || e.File != path || e.Line != 6 || e.Col != 8 || e.Message != "count: expected a collection, got int 5" {
		t.Errorf("error line %+v\n%s", e, r)
	}
}

// testStuck: a run whose only stream is paused for good reports it and
// exits 1 instead of waiting forever (docs/streams.md, Lifecycle); resume
// leaves it paused and says how to resume it.
func (c *cli) testStuck(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(c.testdata, "stuck.rtfs")
	r := c.run(t, "run", "--data", data, "--server-url", c.serverURL, path)
	wantCode(t, r, exitStreamFailed)
	for _, want := range []string{"every live stream is paused, and nothing can resume it", "stuck-1: paused with no :resume-after-ms, and its source has ended", "--wait-paused"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("run's report lacks %q:\n%s", want, r)
		}
	}
	// resume leaves a paused stream paused, says how to resume it, and
	// exits 0: nothing needed resuming.
	rj := c.run(t, "resume", "--json", "--data", data, "--server-url", c.serverURL)
	wantCode(t, rj, exitOK)
	for _, want := range []string{`{"type":"log","message":"stream stuck-1 is paused, and stays so: \"rtfshost resume --data ` + data + ` stuck-1\" resumes it`,
		`{"type":"log","message":"nothing to resume in ` + data + `: no stream was interrupted (1 paused; rtfshost streams lists them)"}`} {
		if !strings.Contains(rj.stdout, want) {
			t.Errorf("resume --json does not say %s:\n%s", want, rj)
		}
	}

	// Managing the stored stream: streams, pause, rm refuses it unfinished,
	// cancel, rm, and its id can be used again.
	steps := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"streams"}, exitOK, "stuck-1  paused"},
		{[]string{"streams", "--json"}, exitOK, `"started-at-epoch-ms":`},
		{[]string{"pause", "stuck-1"}, exitOK, "stuck-1: paused (was paused)"},
		{[]string{"pause", "no-such"}, exitStreamFailed, `stream "no-such": no such stream in the data directory ` + data + ` (rtfshost streams lists them)`},
		{[]string{"rm", "stuck-1"}, exitStreamFailed, "is paused, not ended: cancel it first, or remove it with --force"},
		{[]string{"cancel", "stuck-1"}, exitOK, "stuck-1: cancelled (was paused)"},
		{[]string{"cancel", "stuck-1"}, exitOK, "stuck-1: cancelled (was cancelled)"},
		{[]string{"pause", "stuck-1"}, exitStreamFailed, `rtfshost: stream "stuck-1" has ended (cancelled): it cannot be paused; rtfshost rm removes it`},
		{[]string{"resume"}, exitOK, "nothing to resume"},
		{[]string{"rm", "stuck-1"}, exitOK, "stuck-1: removed (was cancelled)"},
		{[]string{"streams"}, exitOK, "no streams"},
	}
	for _, st := range steps {
		r := c.run(t, append(st.args, "--data", data)...)
		wantCode(t, r, st.code)
		if !strings.Contains(r.stdout+r.stderr, st.out) {
			t.Errorf("%v: want %q\n%s", st.args, st.out, r)
		}
	}
	again := c.run(t, "run", "--data", data, "--server-url", c.serverURL, path)
	if !strings.Contains(again.stderr, "stuck-1: paused with no :resume-after-ms") {
		t.Errorf("after rm, the id could not be used again:\n%s", again)
	}
}

// testStreamError: a processor that throws puts its stream in :error; the
// program itself succeeds, the status line says why, and the exit code is 1.
// The failure is told once: under --json in the status line (nothing on
// stderr), as text on stderr headed by the failing form's position with
// its source line, under a status line that says "error" once.
func (c *cli) testStreamError(t *testing.T) {
	t.Parallel()
	path := filepath.Join(c.testdata, "stream_error.rtfs")
	r := c.run(t, "run", "--json", "--server-url", c.serverURL, path)
	wantCode(t, r, exitStreamFailed)
	lines := parseJSONLines(t, r)
	runs := checkLines(t, r, lines, map[string]streamWant{
		"counter.v1": {outputs: 2, state: "error", endReason: "error"},
	})
	wantJSON(t, r, "result", lines[len(lines)-1].Value, `"started"`)
	st := runs["counter.v1"].status
	wantMsg := "processor fragile failed on chunk 3: " + path + ":8:7: cannot handle chunk 3"
	if st.Message != wantMsg {
		t.Errorf("status message %q, want %q\n%s", st.Message, wantMsg, r)
	}
	for i, o := range runs["counter.v1"].outputs {
		wantJSON(t, r, fmt.Sprintf("output %d", i), o.Output, fmt.Sprintf(`{"n":%d,"total":%d}`, i+1, (i+1)*(i+2)/2))
	}
	if r.stderr != "" {
		t.Errorf("run --json repeats the failure on stderr\n%s", r)
	}

	text := c.run(t, "run", "--server-url", c.serverURL, path)
	wantCode(t, text, exitStreamFailed)
	id := regexp.MustCompile(`counter\.v1-[0-9a-f]{8}`).FindString(text.stdout)
	wantStory(t, text, []string{
		path + ":8:7: cannot handle chunk 3",
		`    8 |       (throw {:type :bad-chunk :message (str "cannot handle chunk " n)})`,
		"  in processor fragile, on chunk 3 of stream " + id,
	})
	if !strings.Contains(text.stdout, "\n"+id+" error\n") {
		t.Errorf("no status line saying error once\n%s", text)
	}
}

// wantStory fails unless r's stderr is story, line by line, and its first
// line is the only place stdout and stderr give the failure's message.
func wantStory(t *testing.T, r result, story []string) {
	t.Helper()
	if got := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n"); !slices.Equal(got, story) {
		t.Errorf("stderr:\n%s\nwant:\n%s\n%s", r.stderr, strings.Join(story, "\n"), r)
	}
	msg := story[0][strings.LastIndex(story[0], ": ")+2:]
	if n := strings.Count(r.stdout+r.stderr, msg); n != 1 {
		t.Errorf("the message %q is printed %d times, want once\n%s", msg, n, r)
	}
	if strings.Contains(r.stdout, "error (error)") {
		t.Errorf("a status line says error twice\n%s", r)
	}
}

// testAwaitedError: a stream that fails under the program's await fails
// the program too (exit 1): one story, headed by the processor's failing
// form with its source line, that names the stream, the chunk and the
// await, and shows the ex-info's data; under --json the error line points
// at the same form.
func (c *cli) testAwaitedError(t *testing.T) {
	t.Parallel()
	path := filepath.Join(c.testdata, "awaited_error.rtfs")
	text := c.run(t, "run", "--server-url", c.serverURL, path)
	wantCode(t, text, exitStreamFailed)
	id := regexp.MustCompile(`counter\.v1-[0-9a-f]{8}`).FindString(text.stdout)
	wantStory(t, text, []string{
		path + ":6:7: cannot handle chunk {:n 3 :why :odd}",
		`    6 |       (throw (ex-info "cannot handle chunk" {:n n :why :odd}))`,
		"  in processor fragile, on chunk 3 of stream " + id + " (awaited at " + path + ":13:1)",
	})
	r := c.run(t, "run", "--json", "--server-url", c.serverURL, path)
	wantCode(t, r, exitStreamFailed)
	lines := parseJSONLines(t, r)
	last := lines[len(lines)-1]
	want := outLine{Type: "error", Stream: lines[0].Stream, File: path, Line: 6, Col: 7,
		Message: "processor fragile failed on chunk 3: cannot handle chunk {:n 3 :why :odd}"}
	if !reflect.DeepEqual(last, want) || r.stderr != "" {
		t.Errorf("last line %+v, want %+v, and nothing on stderr\n%s", last, want, r)
	}
}

// testUnreachable: a server that refuses connections ends the stream in
// :error after the retries, with one message that names the cause.
func (c *cli) testUnreachable(t *testing.T) {
	t.Parallel()
	url := "http://" + closedAddr(t) + "/sse"
	r := c.run(t, "run", "--json", "--server-url", url, filepath.Join(c.testdata, "stream_error.rtfs"))
	wantCode(t, r, exitStreamFailed)
	lines := parseJSONLines(t, r)
	runs := checkLines(t, r, lines, map[string]streamWant{
		"counter.v1": {outputs: 0, state: "error", endReason: "error"},
	})
	msg := runs["counter.v1"].status.Message
	for _, want := range []string{url, "connection refused", "gave up after 3 retries"} {
		if !strings.Contains(msg, want) {
			t.Errorf("status message %q does not mention %q", msg, want)
		}
	}
	// One clear message after the retries, not a stack of them.
	if n := strings.Count(strings.TrimSpace(r.stderr), "\n") + 1; n != 1 || strings.Contains(r.stderr, "level=WARN") {
		t.Errorf("want one message on stderr after the retries, got %d lines\n%s", n, r)
	}
}

// closedAddr returns a loopback address on which nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// testEmbeddedServer: with nothing on 127.0.0.1:2025, run starts the
// reference server there, streams through it, and closes it when done, so
// the port is free again.
// testConcurrentRuns: three runs started together on the default address
// each get an embedded server of their own and all succeed
// (docs/localserver.md); the default port stays free.
func (c *cli) testConcurrentRuns(t *testing.T) {
	waitDefaultAddrFree(t)
	var runs []*started
	for i := 0; i < 3; i++ {
		runs = append(runs, c.start(t, t.TempDir(), "run", "--json", filepath.Join(c.examples, "weather.rtfs")))
	}
	for i, s := range runs {
		r := s.wait(t)
		if r.code != exitOK || !strings.Contains(r.stdout, `"state":"completed"`) {
			t.Errorf("run %d of 3:\n%s", i+1, r)
		}
	}
	if err := listenOnce(defaultLocalAddr); err != nil {
		t.Fatalf("after the runs, %s is in use: %v", defaultLocalAddr, err)
	}
}

func (c *cli) testEmbeddedServer(t *testing.T) {
	waitDefaultAddrFree(t)
	r := c.run(t, "run", "--json", filepath.Join(c.examples, "weather.rtfs"))
	wantCode(t, r, exitOK)
	lines := parseJSONLines(t, r)
	checkLines(t, r, lines, map[string]streamWant{
		"weather.monitor.v1": {outputs: 12, state: "completed", endReason: "processor"},
	})
	if err := listenOnce(defaultLocalAddr); err != nil {
		t.Fatalf("after the run, %s is still in use: %v\n%s", defaultLocalAddr, err, r)
	}
}

// lockDefaultAddr takes an exclusive lock, shared by every process that runs
// these tests on this machine (go test ./... twice, or -count with -p), on the
// use of 127.0.0.1:2025, and returns its release.
func lockDefaultAddr(t *testing.T) func() {
	t.Helper()
	path := filepath.Join(os.TempDir(), "rtfshost-e2e-127.0.0.1-2025.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("lock for the default address: %v", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() } // closing the file releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("locking %s: %v", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitDefaultAddrFree waits until nothing listens on 127.0.0.1:2025. A demo
// left running, or a test of another package, may hold it for a while.
func waitDefaultAddrFree(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := listenOnce(defaultLocalAddr)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stays in use by another process, so the embedded server cannot be tested: %v", defaultLocalAddr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// listenOnce checks that addr is free by listening on it and closing.
func listenOnce(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}

// outLine is one line of run --json, as docs/cli.md defines it (decoded
// independently of the reporter's own type).
type outLine struct {
	Type      string          `json:"type"`
	Stream    string          `json:"stream"`
	Was       string          `json:"was"`
	Seq       *int64          `json:"seq"`
	Output    json.RawMessage `json:"output"`
	Count     int64           `json:"count"`
	Kind      string          `json:"kind"`
	State     string          `json:"state"`
	EndReason string          `json:"end-reason"`
	Message   string          `json:"message"`
	Result    json.RawMessage `json:"result"`
	Value     json.RawMessage `json:"value"`
	File      string          `json:"file"`
	Line      int             `json:"line"`
	Col       int             `json:"col"`
	Progress  *struct {
		Done      float64  `json:"done"`
		Total     *float64 `json:"total"`
		Fraction  *float64 `json:"fraction"`
		EtaMs     *int64   `json:"eta-ms"`
		Message   string   `json:"message"`
		Milestone string   `json:"milestone"`
	} `json:"progress"`
}

// parseJSONLines decodes every line of stdout strictly: unknown fields, an
// unknown type or a line that is not one JSON object fail the test.
func parseJSONLines(t testing.TB, r result) []outLine {
	t.Helper()
	var lines []outLine
	for i, text := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if text == "" && r.stdout == "" {
			break
		}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		var l outLine
		if err := dec.Decode(&l); err != nil || dec.More() {
			t.Fatalf("line %d is not one JSON object (%v): %q\n%s", i+1, err, text, r)
		}
		switch l.Type {
		case "output", "status", "log", "result", "error", "ok", "removed", "dropped", "progress":
		default:
			t.Fatalf("line %d has unknown type %q\n%s", i+1, l.Type, r)
		}
		lines = append(lines, l)
	}
	return lines
}

// streamWant is what a test expects of one stream in a run.
type streamWant struct {
	outputs   int // number of output lines; -1: any
	state     string
	endReason string
}

// streamRun is what a run printed about one stream.
type streamRun struct {
	outputs []outLine
	status  outLine
}

// checkLines checks the lines every run prints, whatever the program, and
// returns them grouped by endpoint (want's keys): each stream's outputs have
// rising seqs, its one status line comes after them with the expected state,
// a completed stream's result is its last output, and the one result line,
// if the program has a value, is the last line.
func checkLines(t *testing.T, r result, lines []outLine, want map[string]streamWant) map[string]*streamRun {
	t.Helper()
	runs := map[string]*streamRun{}
	ended := map[string]bool{}
	for i, l := range lines {
		if l.Type == "result" && i != len(lines)-1 {
			t.Fatalf("result line %d is not the last line\n%s", i+1, r)
		}
		if l.Type != "output" && l.Type != "status" {
			continue
		}
		endpoint := endpointOf(l.Stream)
		sr := runs[endpoint]
		if sr == nil {
			sr = &streamRun{}
			runs[endpoint] = sr
		}
		if ended[l.Stream] {
			t.Fatalf("line %d: stream %s printed after its status line\n%s", i+1, l.Stream, r)
		}
		if l.Type == "status" {
			ended[l.Stream] = true
			sr.status = l
			continue
		}
		if l.Seq == nil || (len(sr.outputs) > 0 && *l.Seq <= *sr.outputs[len(sr.outputs)-1].Seq) {
			t.Fatalf("line %d: output seq missing or not rising\n%s", i+1, r)
		}
		sr.outputs = append(sr.outputs, l)
	}
	if len(runs) != len(want) {
		t.Fatalf("got streams on %d endpoints, want %d\n%s", len(runs), len(want), r)
	}
	for endpoint, w := range want {
		checkStream(t, r, endpoint, runs[endpoint], w)
	}
	return runs
}

// checkStream checks one stream's lines against w.
func checkStream(t *testing.T, r result, endpoint string, sr *streamRun, w streamWant) {
	t.Helper()
	switch {
	case sr == nil:
		t.Fatalf("no lines for a stream on %s\n%s", endpoint, r)
	case sr.status.Type != "status":
		t.Fatalf("no status line for the stream on %s\n%s", endpoint, r)
	case w.outputs >= 0 && len(sr.outputs) != w.outputs:
		t.Fatalf("%s: %d output lines, want %d\n%s", endpoint, len(sr.outputs), w.outputs, r)
	case sr.status.State != w.state || sr.status.EndReason != w.endReason:
		t.Fatalf("%s: status %s (%s), want %s (%s)\n%s", endpoint, sr.status.State, sr.status.EndReason, w.state, w.endReason, r)
	}
	if sr.status.State == "completed" && len(sr.outputs) > 0 {
		last := sr.outputs[len(sr.outputs)-1].Output
		wantJSON(t, r, endpoint+" status result", sr.status.Result, string(last))
	}
}

// endpointOf strips the "-xxxxxxxx" suffix of a generated stream id.
func endpointOf(streamID string) string {
	if i := strings.LastIndexByte(streamID, '-'); i > 0 {
		return streamID[:i]
	}
	return streamID
}

// wantJSON fails unless got and want hold equal JSON values.
func wantJSON(t testing.TB, r result, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v: %s\n%s", what, err, got, r)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad expectation %s: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %s\nwant %s\n%s", what, got, want, r)
	}
}

// started is a child process whose stdout the test reads line by line.
type started struct {
	cmd    *exec.Cmd
	lines  *bufio.Scanner
	stderr *bytes.Buffer
	cancel context.CancelFunc
}

// start starts rtfshost with args in dir without waiting for it; the test
// reads its stdout through s.lines and calls s.wait. If the test ends first,
// the child is killed.
func (c *cli) start(t *testing.T, dir string, args ...string) *started {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir = dir
	cmd.Env = childEnv()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &started{cmd: cmd, lines: bufio.NewScanner(stdout), stderr: new(bytes.Buffer), cancel: cancel}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting rtfshost: %v", err)
	}
	// A test that fails before wait leaves no process behind.
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		cancel()
	})
	return s
}

// waitForOutput reads stdout until an output line, which it returns.
func (s *started) waitForOutput(t *testing.T) string {
	t.Helper()
	for s.lines.Scan() {
		if strings.HasPrefix(s.lines.Text(), `{"type":"output"`) {
			return s.lines.Text()
		}
	}
	t.Fatalf("stdout ended before an output line (%v); stderr:\n%s", s.lines.Err(), s.stderr)
	return ""
}

// wait reads the rest of stdout, waits for the child and returns its result.
func (s *started) wait(t *testing.T) result {
	t.Helper()
	defer s.cancel()
	var out strings.Builder
	for s.lines.Scan() {
		out.WriteString(s.lines.Text() + "\n")
	}
	err := s.cmd.Wait()
	r := result{args: s.cmd.Args[1:], stdout: out.String(), stderr: s.stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("waiting for rtfshost: %v\n%s", err, r)
	}
	return r
}

// testInterrupt: Ctrl-C (SIGINT) in the middle of a run stops it with exit
// 130 and tells how to resume from the data directory: under --json as the
// last line, an error line, with nothing on stderr.
func (c *cli) testInterrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	s := c.start(t, dir, "run", "--json", "--data", data, "--server-url", c.serverURL, filepath.Join(c.testdata, "slow_sum.rtfs"))
	s.waitForOutput(t)
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r := s.wait(t)
	wantCode(t, r, exitInterrupted)
	lines := parseJSONLines(t, r)
	if last := lines[len(lines)-1]; last.Type != "error" || !strings.Contains(last.Message, "rtfshost resume --data "+data) || r.stderr != "" {
		t.Errorf("the last line does not say how to resume, or stderr is not empty\n%s", r)
	}
	if strings.Contains(r.stdout, `"type":"result"`) {
		t.Errorf("an interrupted run printed a result\n%s", r)
	}
}

// testHelp: --help of the root and of every command it lists (bar cobra's own
// help and completion) shows at least one example.
func (c *cli) testHelp(t *testing.T) {
	t.Parallel()
	r := c.run(t, "--help")
	wantCode(t, r, exitOK)
	_, list, ok := strings.Cut(r.stdout, "Available Commands:\n")
	if !ok {
		t.Fatalf("no command list\n%s", r)
	}
	var cmds []string
	for _, l := range strings.Split(list, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			break
		}
		if f[0] != "help" && f[0] != "completion" {
			cmds = append(cmds, f[0])
		}
	}
	for _, want := range []string{"check", "localserver", "run", "version"} {
		if !slices.Contains(cmds, want) {
			t.Errorf("command %s is not listed\n%s", want, r)
		}
	}
	for _, args := range append([][]string{{"--help"}}, helpArgs(cmds)...) {
		r := c.run(t, args...)
		wantCode(t, r, exitOK)
		if !strings.Contains(r.stdout, "Examples:\n  rtfshost ") {
			t.Errorf("%s shows no example\n%s", strings.Join(args, " "), r)
		}
	}
}

func helpArgs(cmds []string) [][]string {
	var args [][]string
	for _, c := range cmds {
		args = append(args, []string{c, "--help"})
	}
	return args
}

// inspectJSON runs "inspect --json" on data and decodes the summary.
func (c *cli) inspectJSON(t *testing.T, data string, extra ...string) (map[string]any, result) {
	t.Helper()
	r := c.run(t, append([]string{"inspect", "--json", "--data", data}, extra...)...)
	wantCode(t, r, exitOK)
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, r)
	}
	return m, r
}

// persistedStream is what the tests read from a stream's inspect map.
type persistedStream struct {
	ID, State, EndReason, Cursor string
	Processed                    int
	CurrentState, Result         any
}

// onlyStream returns the one stream of an inspect summary.
func onlyStream(t *testing.T, summary map[string]any, r result) persistedStream {
	t.Helper()
	streams, _ := summary["streams"].([]any)
	if summary["total"] != float64(1) || len(streams) != 1 || !strings.HasPrefix(fmt.Sprint(summary["where"]), "the data directory ") {
		t.Fatalf("want one persisted stream in the summary\n%s", r)
	}
	return streamOf(t, streams[0], r)
}

// streamOf reads one stream's inspect map.
func streamOf(t *testing.T, v any, r result) persistedStream {
	t.Helper()
	m, _ := v.(map[string]any)
	status, _ := m["status"].(map[string]any)
	stats, _ := m["stats"].(map[string]any)
	processed, ok := stats["processed-chunks"].(float64)
	if m == nil || status == nil || !ok {
		t.Fatalf("not an inspect map: %v\n%s", v, r)
	}
	s := persistedStream{Processed: int(processed), CurrentState: m["current-state"], Result: m["result"]}
	s.ID, _ = m["stream-id"].(string)
	s.Cursor, _ = m["cursor"].(string)
	s.State, _ = status["state"].(string)
	s.EndReason, _ = status["end-reason"].(string)
	return s
}

// testInspect: after a run with --data, inspect shows the stream as the run
// left it: as JSON (the summary and --stream), and as a table.
func (c *cli) testInspect(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	r := c.run(t, "run", "--json", "--data", data, "--server-url", c.serverURL, filepath.Join(c.examples, "await.rtfs"))
	wantCode(t, r, exitOK)
	lines := parseJSONLines(t, r)
	runs := checkLines(t, r, lines, map[string]streamWant{
		"weather.monitor.v1": {outputs: 12, state: "completed", endReason: "source-ended"},
	})
	id := runs["weather.monitor.v1"].outputs[0].Stream

	summary, ir := c.inspectJSON(t, data)
	s := onlyStream(t, summary, ir)
	if s.ID != id || s.State != "completed" || s.EndReason != "source-ended" || s.Processed != 12 || s.Cursor != "12" {
		t.Fatalf("inspect after the run: %+v, want %s completed (source-ended), 12 chunks, cursor 12\n%s", s, id, ir)
	}
	last := runs["weather.monitor.v1"].outputs[11].Output
	got, _ := json.Marshal(s.Result)
	wantJSON(t, ir, "persisted result", got, string(last))

	one, ir := c.inspectJSON(t, data, "--stream", id)
	if o := streamOf(t, one, ir); !reflect.DeepEqual(o, s) {
		t.Errorf("inspect --stream %s: %+v, want %+v", id, o, s)
	}
	tr := c.run(t, "inspect", "--data", data)
	wantCode(t, tr, exitOK)
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(id) + `\s+completed\s+12\s+0\s+\d+[smhd]\s+12\s+source-ended\s`).MatchString(tr.stdout) {
		t.Errorf("the table has no row for %s completed, 12 processed, 0 queued, an age, cursor 12, ended source-ended\n%s", id, tr)
	}

	// Resume with nothing to do says so.
	rr := c.run(t, "resume", "--data", data)
	wantCode(t, rr, exitOK)
	if !strings.Contains(rr.stdout+rr.stderr, "nothing to resume in "+data+": no stream was interrupted (1 ended; rtfshost streams lists them)") {
		t.Errorf("resume of finished streams:\n%s", rr)
	}

	// A damaged data directory is refused loudly, never read as empty.
	if err := os.Remove(filepath.Join(data, "MANIFEST")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"inspect", "--data", data}, {"resume", "--data", data}} {
		r := c.run(t, args...)
		wantCode(t, r, exitStreamFailed)
		if !strings.Contains(r.stderr, "is damaged: MANIFEST is missing") || !strings.Contains(r.stderr, "nothing was changed") {
			t.Errorf("%s on a directory without MANIFEST:\n%s", args[0], r)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "MANIFEST")); err == nil {
		t.Error("a refused command created a MANIFEST")
	}
}

// testResume: a run killed with SIGKILL midway leaves its stream persisted
// with a state and a cursor that agree; resume carries on from the cursor and
// ends with the same result as an uninterrupted run, every chunk's effect on
// the state counted once.
func (c *cli) testResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	s := c.start(t, dir, "run", "--json", "--data", data, "--server-url", c.serverURL, filepath.Join(c.testdata, "slow_sum.rtfs"))
	for {
		var o outLine
		if err := json.Unmarshal([]byte(s.waitForOutput(t)), &o); err != nil {
			t.Fatal(err)
		}
		if *o.Seq >= 30 {
			break
		}
	}
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := s.wait(t)
	checkSums(t, killed, parseJSONLines(t, killed))

	summary, ir := c.inspectJSON(t, data)
	mid := onlyStream(t, summary, ir)
	k := mid.Processed
	wantState, _ := json.Marshal(map[string]int{"sum": k * (k + 1) / 2, "chunks": k})
	gotState, _ := json.Marshal(mid.CurrentState)
	if mid.State != "interrupted" || k < 1 || k >= 200 || mid.Cursor != strconv.Itoa(k) {
		t.Fatalf("after SIGKILL: %+v, want an interrupted stream with 1..199 chunks and the cursor at the last\n%s", mid, ir)
	}
	wantJSON(t, ir, "state after SIGKILL", gotState, string(wantState))
	// The table says it was interrupted rather than "active".
	if tr := c.run(t, "streams", "--data", data); !strings.Contains(tr.stdout, mid.ID+"  interrupted") || !strings.Contains(tr.stdout, "carry on with: rtfshost resume") {
		t.Errorf("the table after SIGKILL:\n%s", tr)
	}

	r := c.run(t, "resume", "--json", "--data", data, "--server-url", c.serverURL)
	wantCode(t, r, exitOK)
	lines := parseJSONLines(t, r)
	runs := checkLines(t, r, lines, map[string]streamWant{
		"counter.v1": {outputs: 200 - k, state: "completed", endReason: "processor"},
	})
	if first := runs["counter.v1"].outputs[0]; first.Stream != mid.ID || *first.Seq != int64(k+1) {
		t.Fatalf("resume started at %s seq %d, want %s seq %d\n%s", first.Stream, *first.Seq, mid.ID, k+1, r)
	}
	checkSums(t, r, lines)
	wantJSON(t, r, "resumed result", runs["counter.v1"].status.Result, `{"sum":20100,"chunks":200}`)
	if !strings.Contains(r.stdout, "{:sum 20100 :chunks 200}") && !strings.Contains(r.stdout, `"value":{"sum":20100,"chunks":200}`) {
		t.Errorf("resume does not report the value of the program that awaited the stream\n%s", r)
	}

	summary, ir = c.inspectJSON(t, data)
	if end := onlyStream(t, summary, ir); end.State != "completed" || end.Processed != 200 || end.Cursor != "200" {
		t.Fatalf("after resume: %+v, want completed with 200 chunks\n%s", end, ir)
	}
}

// checkSums checks every output line of slow_sum.rtfs: the output of
// chunk n (its seq) is {:sum 1+...+n :chunks n}.
func checkSums(t *testing.T, r result, lines []outLine) {
	t.Helper()
	for _, l := range lines {
		if l.Type != "output" {
			continue
		}
		n := *l.Seq
		wantJSON(t, r, fmt.Sprintf("output of seq %d", *l.Seq), l.Output, fmt.Sprintf(`{"sum":%d,"chunks":%d}`, n*(n+1)/2, n))
	}
}

// testEnvEndpoint: without --server-url, CCOS_MCP_STREAM_ENDPOINT chooses the
// server: the run streams from a server of its own that only this test knows.
func (c *cli) testEnvEndpoint(t *testing.T) {
	t.Parallel()
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := c.runEnv(t, []string{"CCOS_MCP_STREAM_ENDPOINT=" + srv.URL() + "/sse"}, "run", "--json", filepath.Join(c.examples, "await.rtfs"))
	wantCode(t, r, exitOK)
	if st := srv.Stats(); st.SSEStreams != 1 || st.SSEChunks != 12 {
		t.Fatalf("the server named by CCOS_MCP_STREAM_ENDPOINT served %d streams, %d chunks; want 1 and 12\n%s", st.SSEStreams, st.SSEChunks, r)
	}
}
