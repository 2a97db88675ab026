//go:build unix

package main

import (
	"context"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pausingProgram starts stream agree-1, whose processor pauses it on its
// first chunk, and, with keeper, a stream that goes on (so that a run
// holding the directory is not stuck).
func pausingProgram(keeper bool) string {
	src := `(defn stop [n chunk meta] {:state (inc n) :action :pause})
(call :mcp.stream.start {:endpoint "counter.v1" :stream-id "agree-1" :config {:limit 1000000 :interval_ms 50}
                         :processor stop :initial-state 0})
`
	if keeper {
		src += counterProgram("keeper", 1000000, 50)
	}
	return src
}

// whereRE matches how the desks name themselves in messages.
var whereRE = regexp.MustCompile(`the data directory \S+( \(held by process \d+ \([^()]*\)\))?|the serve at \S+`)

// testAgree: the stream-management commands print the same lines and exit
// with the same codes wherever the stream is: in a data directory no
// process holds, in one a run holds (through its control socket), and in
// a serve (--server). A stream paused by its processor is paused, paused
// again, cancelled, cancelled again (exit 0: nothing to do), refused a
// pause and a resume, removed, and then unknown, text and --json.
func (c *cli) testAgree(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	steps := []string{
		"inspect --no-state --no-queue --stream agree-1",
		"pause agree-1",
		"cancel agree-1",
		"cancel agree-1",
		"pause agree-1",
		"resume agree-1",
		"cancel --json agree-1",
		"rm agree-1",
		"pause agree-1",
		"pause --json agree-1",
		"inspect --json --stream agree-1",
	}
	type outcome struct {
		code           int
		stdout, stderr string
	}
	play := func(dir string, extra ...string) []outcome {
		t.Helper()
		var out []outcome
		for _, s := range steps {
			r := c.runIn(t, dir, append(strings.Fields(s), extra...)...)
			stdout := regexp.MustCompile(`(?m)^(observed-at-epoch-ms|started-at-epoch-ms|stats|transport|cursor|programs)\s.*\n`).ReplaceAllString(r.stdout, "")
			out = append(out, outcome{r.code, whereRE.ReplaceAllString(stdout, "WHERE"), whereRE.ReplaceAllString(r.stderr, "WHERE")})
		}
		return out
	}
	pausedIn := func(dir string, extra ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := c.runIn(t, dir, append([]string{"inspect", "--stream", "agree-1", "--no-state", "--no-queue"}, extra...)...)
			if regexp.MustCompile(`(?m)^status\s+\{:state :paused`).MatchString(r.stdout) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("agree-1 is not paused:\n%s", r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// A data directory no process holds: the run stops, agree-1 stuck.
	offline := t.TempDir()
	r := c.runIn(t, offline, "run", "--server-url", c.serverURL, writeProgram(t, offline, "p.rtfs", pausingProgram(false)))
	wantCode(t, r, exitStreamFailed)
	pausedIn(offline)
	stored := play(offline)

	// A data directory a run holds.
	held := t.TempDir()
	run := c.start(t, held, "run", "--json", "--server-url", c.serverURL, writeProgram(t, held, "p.rtfs", pausingProgram(true)))
	pausedIn(held)
	live := play(held)
	if r := c.runIn(t, held, "cancel", "keeper"); r.code != exitOK {
		t.Errorf("cancel keeper:\n%s", r)
	}
	wantCode(t, run.wait(t), exitOK)

	// A serve.
	srv, cs, m := c.serveSession(t, ctx)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp.stream.start", Arguments: map[string]any{
		"program": "(defn stop [n chunk meta] {:state (inc n) :action :pause})", "processor": "stop", "endpoint": "counter.v1", "transport": "sse",
		"stream-id": "agree-1", "detach": true, "initial-state": 0, "config": map[string]any{"limit": 1000000, "interval_ms": 50},
	}})
	if err != nil || res.IsError {
		t.Fatalf("start on serve: %v %s", err, resultText(res))
	}
	cs.Close()
	pausedIn(t.TempDir(), "--server", m[1])
	served := play(t.TempDir(), "--server", m[1])
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	srv.wait(t)

	for i, s := range steps {
		if stored[i] != live[i] || stored[i] != served[i] {
			t.Errorf("%s:\n data directory: %+v\n held by a run:  %+v\n serve:          %+v", s, stored[i], live[i], served[i])
		}
	}
	noSuch := `stream \"agree-1\": no such stream in WHERE (rtfshost streams lists them)`
	want := map[int]outcome{
		1:  {exitOK, "agree-1: paused (was paused)\n", ""},
		2:  {exitOK, "agree-1: cancelled (was paused)\n", ""},
		3:  {exitOK, "agree-1: cancelled (was cancelled)\n", ""},
		4:  {exitStreamFailed, "", "rtfshost: stream \"agree-1\" has ended (cancelled): it cannot be paused; rtfshost rm removes it\n"},
		6:  {exitOK, `{"type":"status","stream":"agree-1","state":"cancelled","was":"cancelled"}` + "\n", ""},
		7:  {exitOK, "agree-1: removed (was cancelled)\n", ""},
		9:  {exitStreamFailed, `{"type":"error","stream":"agree-1","message":"` + noSuch + `"}` + "\n", ""},
		10: {exitStreamFailed, `{"type":"error","message":"` + noSuch + `"}` + "\n", ""},
	}
	for i, w := range want {
		if stored[i] != w {
			t.Errorf("%s: %+v, want %+v", steps[i], stored[i], w)
		}
	}
}

// failingProgram starts stream agree-f (6 chunks), whose processor throws
// on chunk 3, and, with keeper, a stream that goes on.
func failingProgram(keeper bool) string {
	src := throwingProgram("agree-f", 6, 3)
	if keeper {
		src += counterProgram("keeper", 1000000, 50)
	}
	return src
}

// testAgreeFailed: the repair commands of a failed stream print the same
// lines and exit with the same codes wherever the stream is (a data
// directory, the run that holds it, a serve): dead-letters of a stream
// with none, resume --skip's line, then (once the stream has gone on to its
// end) its dead letter as a table and as JSON, --skip refused on the
// completed stream naming its state, an unknown stream's error.
func (c *cli) testAgreeFailed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	before := []string{"dead-letters agree-f", "dead-letters --json agree-f"}
	after := []string{"dead-letters agree-f", "dead-letters --json agree-f", "resume agree-f --skip", "resume --json agree-f --skip", "dead-letters nope"}
	volatile := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z|\b\d{10,}\b|[^\s"]*:1:\d+: boom`)
	type outcome struct {
		code           int
		stdout, stderr string
	}
	norm := func(r result) outcome {
		return outcome{r.code, volatile.ReplaceAllString(whereRE.ReplaceAllString(r.stdout, "WHERE"), "X"), volatile.ReplaceAllString(whereRE.ReplaceAllString(r.stderr, "WHERE"), "X")}
	}
	waitFor := func(dir, state string, extra ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := c.runIn(t, dir, append([]string{"inspect", "--stream", "agree-f", "--no-state", "--no-queue"}, extra...)...)
			if regexp.MustCompile(`(?m)^status\s+\{:state :` + state).MatchString(r.stdout) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("agree-f is not %s:\n%s", state, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	play := func(dir string, extra ...string) []outcome {
		t.Helper()
		var out []outcome
		for _, s := range before {
			out = append(out, norm(c.runIn(t, dir, append(strings.Fields(s), extra...)...)))
		}
		r := c.runIn(t, dir, append([]string{"resume", "agree-f", "--skip"}, extra...)...)
		// Offline, the resumed stream runs here: its outputs and logs follow.
		first, _, _ := strings.Cut(r.stdout, "\n")
		out = append(out, outcome{r.code, first, ""})
		waitFor(dir, "completed", extra...)
		for _, s := range after {
			out = append(out, norm(c.runIn(t, dir, append(strings.Fields(s), extra...)...)))
		}
		return out
	}

	offline := t.TempDir()
	r := c.runIn(t, offline, "run", "--server-url", c.serverURL, writeProgram(t, offline, "p.rtfs", failingProgram(false)))
	wantCode(t, r, exitStreamFailed)
	stored := play(offline, "--server-url", c.serverURL)

	held := t.TempDir()
	run := c.start(t, held, "run", "--json", "--server-url", c.serverURL, writeProgram(t, held, "p.rtfs", failingProgram(true)))
	waitFor(held, "failed")
	live := play(held)
	if r := c.runIn(t, held, "cancel", "keeper"); r.code != exitOK {
		t.Errorf("cancel keeper:\n%s", r)
	}
	wantCode(t, run.wait(t), exitOK)

	srv, cs, m := c.serveSession(t, ctx)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp.stream.start", Arguments: map[string]any{
		"program":   `(defn p [s chunk meta] (if (= 3 (get-in chunk [:chunk :n])) (throw "boom on purpose") {:state (inc s) :output (inc s)}))`,
		"processor": "p", "endpoint": "counter.v1", "transport": "sse",
		"stream-id": "agree-f", "detach": true, "initial-state": 0, "config": map[string]any{"limit": 6, "interval_ms": 10},
	}})
	if err != nil || res.IsError {
		t.Fatalf("start on serve: %v %s", err, resultText(res))
	}
	cs.Close()
	waitFor(t.TempDir(), "failed", "--server", m[1])
	served := play(t.TempDir(), "--server", m[1])
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	srv.wait(t)

	steps := append(append(append([]string{}, before...), "resume agree-f --skip (its first line)"), after...)
	for i, s := range steps {
		if stored[i] != live[i] || stored[i] != served[i] {
			t.Errorf("%s:\n data directory: %+v\n held by a run:  %+v\n serve:          %+v", s, stored[i], live[i], served[i])
		}
	}
	notFailed := `stream \"agree-f\" is completed, not failed: --skip sets aside the chunk a failed stream is held on, and it is held on none`
	want := map[int]outcome{
		0: {exitOK, "stream agree-f has no dead letters: it set no chunk aside\n", ""},
		1: {exitOK, "", ""},
		2: {exitOK, "agree-f: active (was failed); chunk 3 is set aside as a dead letter", ""},
		3: {exitOK, "SEQ  ID  ATTEMPTS  SET ASIDE             ERROR\n3    3   1         X  X on purpose\n1 dead letter; --json shows each chunk whole\n", ""},
		5: {exitStreamFailed, "", "rtfshost: " + strings.ReplaceAll(notFailed, `\"`, `"`) + "\n"},
		6: {exitStreamFailed, `{"type":"error","stream":"agree-f","message":"` + notFailed + `"}` + "\n", ""},
		7: {exitStreamFailed, "", `rtfshost: stream "nope": no such stream in WHERE (rtfshost streams lists them)` + "\n"},
	}
	for i, w := range want {
		if stored[i] != w {
			t.Errorf("%s: %+v, want %+v", steps[i], stored[i], w)
		}
	}
	if !strings.Contains(stored[4].stdout, `{"type":"dead-letter","stream-id":"agree-f","seq":3,"chunk":{"endpoint":"counter.v1","seq":3,"chunk":{"n":3}`) {
		t.Errorf("dead-letters --json: %+v", stored[4])
	}
}

// serveSession starts a serve on a port of its own, with the test's
// reference server, and connects an MCP client to it; m[1] is its base URL.
// The caller closes the session and stops the serve.
func (c *cli) serveSession(t *testing.T, ctx context.Context) (*started, *mcp.ClientSession, []string) {
	t.Helper()
	srv := c.start(t, t.TempDir(), "serve", "--listen", "127.0.0.1:0", "--server-url", c.serverURL)
	if !srv.lines.Scan() {
		t.Fatalf("serve printed nothing\n%s", srv.stderr)
	}
	m := regexp.MustCompile(`listening on (http://[^ ]+)/mcp `).FindStringSubmatch(srv.lines.Text())
	if m == nil {
		t.Fatalf("serve's first line: %q", srv.lines.Text())
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "agree-test", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: m[1] + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv, cs, m
}
