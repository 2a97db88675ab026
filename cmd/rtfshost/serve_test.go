package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/rtfs"
)

// serveChildEnv, when set in the environment of this test binary, makes
// TestServeSubprocess run "rtfshost <args>" (args JSON-encoded in the
// variable) instead of testing, as the rtfshost binary would.
const serveChildEnv = "RTFSHOST_SERVE_CHILD_ARGS"

// serveChild runs the command line in the child process and exits.
func serveChild(argsJSON string) {
	var args []string
	if err := json.Unmarshal([]byte(argsJSON), &args); err != nil {
		fmt.Fprintln(os.Stderr, "bad child args:", err)
		os.Exit(3)
	}
	setGCDefaults(os.LookupEnv) // as main does
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := newApp(os.Stdin, os.Stdout, os.Stderr)
	if c, _, err := a.root.Find([]string{"serve"}); err != nil || c == a.root {
		a.root.AddCommand(a.serveCmd()) // until the root registers serve itself
	}
	os.Exit(a.execute(ctx, args))
}

// TestServeSubprocess runs "rtfshost serve" in a child process, with the
// reference server as the stream source, and speaks raw HTTP to it: a
// tools/call POSTed with Accept: application/json, text/event-stream is
// answered over SSE with one event per progress notification (event:
// message, an id, data: the JSON-RPC notification with the token, a rising
// progress and the output as JSON) and a last event with the JSON-RPC result
// (docs/mcp-server.md, Progress notifications).
func TestServeSubprocess(t *testing.T) {
	if args := os.Getenv(serveChildEnv); args != "" {
		serveChild(args)
		return
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	src := localserver.New(localserver.Options{})
	if err := src.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	base, stop := startServeChild(t, "", "serve", "--listen", "127.0.0.1:0", "--server-url", src.URL()+"/sse")
	defer stop()

	sid := rawInitialize(t, base)
	program := `(defn step [state chunk meta] {:state (inc state) :output {:n (:n (:chunk chunk)) :count (inc state)}})`
	call := map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{
			"name": "mcp.stream.start",
			"arguments": map[string]any{
				"program": program, "processor": "step", "endpoint": "counter.v1", "transport": "sse",
				"config": map[string]any{"limit": 3, "interval_ms": 0}, "initial-state": 0,
				// One notification per output, at once (the default batches
				// normal outputs for 200 ms).
				"delivery": map[string]any{"normal": map[string]any{"interval-ms": 0, "max-batch": 1}},
			},
			"_meta": map[string]any{"progressToken": "xyz"},
		},
	}
	resp, body := post(t, base, sid, call)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("tools/call: status %d, Content-Type %q\n%s", resp.StatusCode, ct, body)
	}
	events := parseSSE(t, body)
	if len(events) != 4 {
		t.Fatalf("got %d events, want 3 progress notifications and the result:\n%s", len(events), body)
	}
	seen := map[string]bool{}
	for i, ev := range events {
		if ev.name != "message" || ev.id == "" || seen[ev.id] {
			t.Errorf("event %d: event %q id %q (ids must be present and unique)", i, ev.name, ev.id)
		}
		seen[ev.id] = true
	}
	for i, ev := range events[:3] {
		want := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"_meta":{"rtfshost/coalesced":0,"rtfshost/seq":%d,"rtfshost/stream-id":"STREAM"},"progressToken":"xyz","message":"{\"n\":%d,\"count\":%d}","progress":%d}}`, i+1, i+1, i+1, i+1)
		got := regexp.MustCompile(`"rtfshost/stream-id":"counter\.v1-[0-9a-f]{8}"`).ReplaceAllString(ev.data, `"rtfshost/stream-id":"STREAM"`)
		if got != want {
			t.Errorf("progress event %d:\n got %s\nwant %s", i, ev.data, want)
		}
	}
	var final struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int    `json:"id"`
		Result  struct {
			Content []struct{ Type, Text string } `json:"content"`
			IsError *bool                         `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(events[3].data), &final); err != nil {
		t.Fatalf("last event is not the JSON-RPC result: %v\n%s", err, events[3].data)
	}
	if final.JSONRPC != "2.0" || final.ID != 1 || len(final.Result.Content) != 1 || final.Result.Content[0].Type != "text" {
		t.Fatalf("result event %s", events[3].data)
	}
	if final.Result.IsError != nil && *final.Result.IsError {
		t.Fatalf("isError set: %s", final.Result.Content[0].Text)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(final.Result.Content[0].Text), &res); err != nil {
		t.Fatal(err)
	}
	if res["state"] != "completed" || res["end-reason"] != "source-ended" || fmt.Sprint(res["result"]) != "map[count:3 n:3]" {
		t.Errorf("buffered result %v", res)
	}

	// A failing program is a result with "isError": true on the wire.
	call["id"] = 2
	call["params"] = map[string]any{"name": "rtfs.eval", "arguments": map[string]any{"program": "(count 5)"}}
	_, body = post(t, base, sid, call)
	events = parseSSE(t, body)
	if len(events) != 1 || !strings.Contains(events[0].data, `"isError":true`) || !strings.Contains(events[0].data, `eval.rtfs:1:`) {
		t.Errorf("eval error over the wire:\n%s", body)
	}
	t.Run("delivery by priority, with milestones", func(t *testing.T) { serveDelivery(t, base, sid) })
	t.Run("a dead origin opens its circuit", serveBreaker)
	t.Run("token from the environment", func(t *testing.T) { serveWithToken(t) })
	t.Run("processes need --allow-command", func(t *testing.T) { serveProcesses(t, base, sid) })
	t.Run("a child's environment needs --allow-env", serveChildEnvironment)
	t.Run("tasks survive a kill", func(t *testing.T) { serveTasksSurviveKill(t, src.URL()+"/sse") })
	t.Run("a call resumes after a kill", func(t *testing.T) { serveResumeAfterKill(t, src.URL()+"/sse") })
}

// serveResumeAfterKill: a 2025-11-25 client reads a few progress
// notifications of a tools/call, then serve is killed with SIGKILL and
// started again on the same data directory; the client comes back once
// the recovered stream has ended, resumes with Last-Event-ID and gets every
// later notification, in order, and the call's result: the restarted
// server follows the call from before its stream runs again.
func serveResumeAfterKill(t *testing.T, sourceURL string) {
	dir := filepath.Join(t.TempDir(), "data")
	base, _, kill := startServeChildData(t, "", dir, "serve", "--listen", "127.0.0.1:0", "--server-url", sourceURL)
	sid := rawInitialize(t, base)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": map[string]any{
		"name": "mcp.stream.start", "_meta": map[string]any{"progressToken": "tok"},
		"arguments": map[string]any{
			"program": `(defn step [n chunk meta] {:state (inc n) :output {:count (inc n)}})`, "processor": "step",
			"endpoint": "counter.v1", "transport": "sse", "stream-id": "resumable", "initial-state": 0,
			"config": map[string]any{"limit": 30, "interval_ms": 30},
			// One notification per output, here and after the restart (the
			// stream's :delivery is stored with it).
			"delivery": map[string]any{"normal": map[string]any{"interval-ms": 0, "max-batch": 1}},
		}}})
	req, _ := http.NewRequest(http.MethodPost, base, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var progress []float64
	lastID := ""
	read := func(r io.Reader, until func() bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				lastID = id
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, "notifications/progress") {
				var n struct {
					Params struct{ Progress float64 } `json:"params"`
				}
				_ = json.Unmarshal([]byte(data), &n)
				progress = append(progress, n.Params.Progress)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"id":41`) {
				progress = append(progress, -1) // the result
				if !strings.Contains(data, `\"result\":{\"count\":30}`) {
					t.Errorf("the resumed call's result: %s", data)
				}
			}
			if until() {
				return
			}
		}
	}
	read(resp.Body, func() bool { return len(progress) >= 5 })
	kill()
	resp.Body.Close()

	base, stop, _ := startServeChildData(t, "", dir, "serve", "--listen", "127.0.0.1:0", "--server-url", sourceURL)
	defer stop()
	// The client comes back late: the recovered stream has ended by then,
	// and every output it gave since the restart is stored for the client.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := callServer(context.Background(), base, "mcp.stream.status", map[string]any{"stream-id": "resumable"})
		if err == nil && strings.Contains(st, `"state":"completed"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the recovered stream did not complete: %s %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	get, _ := http.NewRequest(http.MethodGet, base, nil)
	get.Header.Set("Accept", "text/event-stream")
	get.Header.Set("Mcp-Session-Id", sid)
	get.Header.Set("MCP-Protocol-Version", "2025-11-25")
	get.Header.Set("Last-Event-ID", lastID)
	resp, err = (&http.Client{Timeout: 30 * time.Second}).Do(get)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET with Last-Event-ID %s after the restart: %d", lastID, resp.StatusCode)
	}
	read(resp.Body, func() bool { return len(progress) > 0 && progress[len(progress)-1] == -1 })
	if len(progress) != 31 {
		t.Fatalf("progress seen %v, want 1..30 then the result", progress)
	}
	for i, p := range progress[:30] {
		if p != float64(i+1) {
			t.Fatalf("progress seen %v, want 1..30 in order", progress)
		}
	}
}

// serveTasksSurviveKill: a task-augmented mcp.stream.start on serve, which
// is then killed with SIGKILL and started again on the same data
// directory: tasks/get still answers, and tasks/result delivers the
// stream's result with every output of the stream once, in order: those
// made before the kill and those the recovered stream made before the
// client came back. (Outputs are at-least-once across a crash: a chunk
// whose commit the kill lost is processed again, and its output comes
// again with the same :seq, which the task keeps once.)
func serveTasksSurviveKill(t *testing.T, sourceURL string) {
	dir := filepath.Join(t.TempDir(), "data")
	base, _, kill := startServeChildData(t, "", dir, "serve", "--listen", "127.0.0.1:0", "--server-url", sourceURL)
	call := func(base, sid, method string, params any) map[string]any {
		t.Helper()
		_, body := post(t, base, sid, map[string]any{"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
		if !strings.HasPrefix(body, "{") { // an SSE answer: its last event
			if evs := parseSSE(t, body); len(evs) > 0 {
				body = evs[len(evs)-1].data
			}
		}
		var resp struct {
			Result map[string]any `json:"result"`
			Error  any            `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Error != nil {
			t.Fatalf("%s: %v %v\n%s", method, err, resp.Error, body)
		}
		return resp.Result
	}
	sid := rawInitialize(t, base)
	created := call(base, sid, "tools/call", map[string]any{"name": "mcp.stream.start", "task": map[string]any{"ttl": 600000},
		"arguments": map[string]any{
			"program": `(defn step [n chunk meta] {:state (inc n) :output {:count (inc n)}})`, "processor": "step",
			"endpoint": "counter.v1", "transport": "sse", "stream-id": "durable-task", "initial-state": 0,
			"config": map[string]any{"limit": 30, "interval_ms": 40},
		}})
	if task, _ := created["task"].(map[string]any); task["taskId"] != "durable-task" || task["status"] != "working" {
		t.Fatalf("CreateTaskResult %v", created)
	}
	time.Sleep(300 * time.Millisecond) // some chunks in, most to come
	kill()

	base, stop, _ := startServeChildData(t, "", dir, "serve", "--listen", "127.0.0.1:0", "--server-url", sourceURL)
	defer stop()
	// The client comes back once the recovered stream has ended: what the
	// stream gave meanwhile is the task's all the same.
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := callServer(context.Background(), base, "mcp.stream.status", map[string]any{"stream-id": "durable-task"})
		if err == nil && strings.Contains(st, `"state":"completed"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the recovered stream did not complete: %s %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	sid = rawInitialize(t, base)
	if got := call(base, sid, "tasks/get", map[string]any{"taskId": "durable-task"}); got["taskId"] != "durable-task" || got["createdAt"] == nil {
		t.Fatalf("tasks/get after the kill: %v", got)
	}
	res := call(base, sid, "tasks/result", map[string]any{"taskId": "durable-task"})
	text := fmt.Sprint(res["content"])
	if res["isError"] != false || !strings.Contains(text, `"state":"completed"`) || !strings.Contains(text, `"result":{"count":30}`) {
		t.Fatalf("tasks/result after the kill: %v", res)
	}
	var result struct {
		Outputs     []struct{ Count int } `json:"outputs"`
		OutputCount int                   `json:"output-count"`
		Lost        int                   `json:"outputs-lost"`
	}
	b, _ := json.Marshal(res["structuredContent"])
	if err := json.Unmarshal(b, &result); err != nil {
		t.Fatalf("tasks/result after the kill: %v\n%s", err, b)
	}
	counts := make([]int, len(result.Outputs))
	for i, o := range result.Outputs {
		counts[i] = o.Count
	}
	if len(counts) != 30 || result.OutputCount != 30 || result.Lost != 0 {
		t.Fatalf("tasks/result after the kill lists outputs %v (output-count %d, lost %d), want 1..30", counts, result.OutputCount, result.Lost)
	}
	for i, n := range counts {
		if n != i+1 {
			t.Fatalf("tasks/result after the kill lists outputs %v, want 1..30 in order", counts)
		}
	}
	if got := call(base, sid, "tasks/get", map[string]any{"taskId": "durable-task"}); got["status"] != "completed" {
		t.Errorf("tasks/get at the end: %v", got)
	}
}

// serveProcesses: serve refuses an :exec stream whose program the operator
// did not allow, saying how to allow it; with --allow-command sh it runs.
func serveProcesses(t *testing.T, refusing, sid string) {
	start := func(base, sid string) string {
		call := map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{
			"name": "mcp.stream.start", "arguments": map[string]any{
				"program": `(defn step [n chunk meta] {:state (inc n) :output (:line chunk)})`, "processor": "step",
				"transport": "exec", "command": "sh", "args": []string{"-c", "echo one; echo two"}, "initial-state": 0,
			}}}
		_, body := post(t, base, sid, call)
		events := parseSSE(t, body)
		if len(events) == 0 {
			t.Fatalf("no answer:\n%s", body)
		}
		return events[len(events)-1].data
	}
	if got := start(refusing, sid); !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "command sh is not allowed") || !strings.Contains(got, "--allow-command") {
		t.Errorf("serve without --allow-command: %s", got)
	}
	base, stop := startServeChild(t, "", "serve", "--listen", "127.0.0.1:0", "--allow-command", "sh")
	defer stop()
	got := start(base, rawInitialize(t, base))
	if strings.Contains(got, `"isError":true`) || !strings.Contains(got, `\"result\":\"two\"`) {
		t.Errorf("serve --allow-command sh: %s", got)
	}
}

// serveChildEnvironment: under serve a start call's :env sets only the
// variables the operator allows (--allow-env, $RTFSHOST_ALLOW_ENV); any
// other, an interpreter's gadget or an innocent name, is refused with an
// error naming the variable and the flag, and the child never starts.
func serveChildEnvironment(t *testing.T) {
	start := func(base string, env map[string]string) string {
		sid := rawInitialize(t, base)
		call := map[string]any{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": map[string]any{
			"name": "mcp.stream.start", "arguments": map[string]any{
				"program": `(defn step [n chunk meta] {:state (inc n) :output (:line chunk)})`, "processor": "step",
				"transport": "exec", "command": "sh", "args": []string{"-c", `echo "[$GREETING][$PYTHONWARNINGS][$BROWSER]"`},
				"env": env, "initial-state": 0,
			}}}
		_, body := post(t, base, sid, call)
		events := parseSSE(t, body)
		if len(events) == 0 {
			t.Fatalf("no answer:\n%s", body)
		}
		return events[len(events)-1].data
	}
	base, stop := startServeChild(t, "", "serve", "--listen", "127.0.0.1:0", "--allow-command", "sh")
	for _, name := range []string{"GREETING", "PYTHONWARNINGS", "BROWSER", "GIT_CONFIG_COUNT"} {
		got := start(base, map[string]string{name: "x"})
		if !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "environment variable "+name+" is not allowed") ||
			!strings.Contains(got, "--allow-env") {
			t.Errorf("serve without --allow-env, :env %s: %s", name, got)
		}
	}
	if got := start(base, nil); strings.Contains(got, `"isError":true`) || !strings.Contains(got, `\"result\":\"[][][]\"`) {
		t.Errorf("serve, no :env: %s", got)
	}
	stop()

	t.Setenv(allowEnvEnv, "BROWSER, OTHER")
	base, stop = startServeChild(t, "", "serve", "--listen", "127.0.0.1:0", "--allow-command", "sh", "--allow-env", "GREETING")
	defer stop()
	if got := start(base, map[string]string{"GREETING": "hi", "BROWSER": "b"}); strings.Contains(got, `"isError":true`) ||
		!strings.Contains(got, `\"result\":\"[hi][][b]\"`) {
		t.Errorf("serve --allow-env GREETING with $%s: %s", allowEnvEnv, got)
	}
	if got := start(base, map[string]string{"GREETING": "hi", "PYTHONWARNINGS": "ignore::antigravity.x"}); !strings.Contains(got, "environment variable PYTHONWARNINGS is not allowed") {
		t.Errorf("serve --allow-env GREETING, :env PYTHONWARNINGS: %s", got)
	}
}

// serveWithToken runs serve with $RTFSHOST_TOKEN set: requests without the
// bearer token get 401, requests with it are served.
func serveWithToken(t *testing.T) {
	base, stop := startServeChild(t, "tok-123", "serve", "--listen", "127.0.0.1:0")
	defer stop()
	req, _ := http.NewRequest(http.MethodPost, base, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPost, base, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer tok-123")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Errorf("with the token: %d", resp.StatusCode)
	}
}

// startServeChild starts this test binary as "rtfshost <args>", with
// $RTFSHOST_TOKEN set to token, and returns
// the server's base URL (from its first line) and a function that stops it
// and checks its exit.
func startServeChild(t *testing.T, token string, args ...string) (string, func()) {
	t.Helper()
	base, stop, _ := startServeChildData(t, token, filepath.Join(t.TempDir(), "data"), args...)
	return base, stop
}

// startServeChildData is startServeChild on the data directory dir (none
// when dir is ""); it also returns a function that kills the server with
// SIGKILL and reaps it.
func startServeChildData(t *testing.T, token, dir string, args ...string) (string, func(), func()) {
	t.Helper()
	p := startServeProc(t, token, dir, args...)
	return p.base, p.stop, p.kill
}

// serveProc is a running "rtfshost serve" child process.
type serveProc struct {
	t      *testing.T
	base   string // its /mcp URL
	cmd    *exec.Cmd
	stderr *bytes.Buffer // read it only once the process has exited
}

// startServeProc starts this test binary as "rtfshost <args>" on the data
// directory dir (none when dir is ""), with $RTFSHOST_TOKEN set to token,
// and waits for its first line, the URL it serves.
func startServeProc(t *testing.T, token, dir string, args ...string) *serveProc {
	t.Helper()
	if dir != "" {
		args = append(args, "--data", dir)
	}
	argsJSON, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeSubprocess$")
	cmd.Env = append(os.Environ(), serveChildEnv+"="+string(argsJSON), tokenEnv+"="+token)
	return startServeCmd(t, cmd)
}

// startServeCmd starts cmd, an "rtfshost serve" (of this build or another
// one), and waits for its first line, the URL it serves.
func startServeCmd(t *testing.T, cmd *exec.Cmd) *serveProc {
	t.Helper()
	p := &serveProc{t: t, cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	if os.Getenv("RTFSHOST_TEST_SERVE_STDERR") != "" {
		cmd.Stderr = os.Stderr // to watch the server's logs while debugging a test
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case line, ok := <-lines:
		m := regexp.MustCompile(`listening on (http://[^ ]+)/mcp `).FindStringSubmatch(line)
		if !ok || m == nil {
			p.stop()
			t.Fatalf("unexpected first line %q\n%s", line, p.stderr.String())
		}
		p.base = m[1] + "/mcp"
	case <-time.After(30 * time.Second):
		p.stop()
		t.Fatalf("rtfshost serve printed nothing\n%s", p.stderr.String())
	}
	return p
}

// stop ends the server with SIGTERM and checks its exit.
func (p *serveProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		p.t.Errorf("rtfshost serve exited with %v\n%s", err, p.stderr.String())
	}
}

// kill ends the server with SIGKILL and reaps it.
func (p *serveProc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// rawInitialize runs the initialize handshake by hand and returns the
// session id.
func rawInitialize(t *testing.T, url string) string {
	t.Helper()
	resp, body := post(t, url, "", map[string]any{
		"jsonrpc": "2.0", "id": 0, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}},
	})
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" || !strings.Contains(body, `"serverInfo":{"name":"rtfshost"`) {
		t.Fatalf("initialize: %d, session %q\n%s", resp.StatusCode, sid, body)
	}
	resp, _ = post(t, url, sid, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d", resp.StatusCode)
	}
	return sid
}

func post(t *testing.T, url, sid string, msg any) (*http.Response, string) {
	t.Helper()
	b, _ := json.Marshal(msg)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

type sseEvent struct{ name, id, data string }

// parseSSE splits an SSE body into events, checking that every line is a
// field the format knows.
func parseSSE(t *testing.T, body string) []sseEvent {
	t.Helper()
	var events []sseEvent
	for _, block := range strings.Split(strings.TrimRight(body, "\n"), "\n\n") {
		var ev sseEvent
		for _, line := range strings.Split(block, "\n") {
			field, value, _ := strings.Cut(line, ": ")
			switch field {
			case "event":
				ev.name = value
			case "id":
				ev.id = value
			case "data":
				ev.data += value
			default:
				t.Errorf("unexpected SSE line %q", line)
			}
		}
		events = append(events, ev)
	}
	return events
}

func TestServeFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:7070"}, "without a token"},
		{[]string{"--listen", "0.0.0.0:7070", "--token", " "}, "white space"},
		{[]string{"--listen", "0.0.0.0:7070", "--token", "a"}, "1-byte token"},
		{[]string{"--max-memory", "lots"}, `--max-memory: "lots" is not a size`},
		{[]string{"--max-steps", "-5"}, "--max-steps: must not be negative"},
		{[]string{"--allow-server", "ftp://x"}, "--allow-server"},
		{[]string{"--listen", "nonsense"}, `--listen "nonsense"`},
		{[]string{"--progress-interval", "-1s"}, "must not be negative"},
		{[]string{"--stdio", "--listen", "127.0.0.1:0"}, "--stdio and --listen"},
		{[]string{"--stdio", "--token", "0123456789abcdef"}, "--stdio and --token"},
		{[]string{"--stdio", "--oauth-issuer", "https://as.example.com"}, "--stdio and --oauth-issuer"},
		{[]string{"--oauth-audience", "rtfshost"}, "--oauth-audience needs --oauth-issuer"},
		{[]string{"--public-url", "https://mcp.example.com"}, "--public-url needs --oauth-issuer"},
		{[]string{"--oauth-issuer", "https://as.example.com", "--token", "0123456789abcdef"}, "--oauth-issuer and --token: give one"},
		{[]string{"--oauth-issuer", "https://as.example.com", "--listen", "0.0.0.0:7070"}, "needs --public-url"},
		{[]string{"--oauth-issuer", "http://as.example.com", "--listen", "127.0.0.1:0", "--data", t.TempDir()}, "tokens would travel in the clear"},
		{[]string{"--oauth-issuer", "https://as.example.com", "--listen", "127.0.0.1:0", "--public-url", "http://mcp.example.com", "--data", t.TempDir()}, "tokens would travel in the clear"},
	} {
		var stdout, stderr bytes.Buffer
		a := newApp(strings.NewReader(""), &stdout, &stderr)
		cmd := a.serveCmd()
		a.root.AddCommand(cmd)
		code := a.execute(context.Background(), append([]string{cmd.Name()}, tc.args...))
		if code != exitProgramError || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), exitProgramError, tc.want)
		}
	}
	if err := checkListen("localhost:7070", "", false); err != nil {
		t.Errorf("localhost refused: %v", err)
	}
	if err := checkListen("[::]:7070", "0123456789abcdef", false); err != nil {
		t.Errorf("any address with a token refused: %v", err)
	}
	if err := checkListen("[::]:7070", "", true); err != nil {
		t.Errorf("any address under OAuth refused: %v", err)
	}
}

// serveDelivery: a stream of 2,000 chunks whose processor makes a flood of
// low outputs, five immediate findings and two milestones, followed with a
// progress token. The flood becomes a few notifications (the oldest low
// outputs dropped, counted in the result); every immediate output arrives
// alone and in order; every notification carries the milestones' total.
func serveDelivery(t *testing.T, base, sid string) {
	program := `
(defn step [n chunk meta]
  (let [i (:n (:chunk chunk))]
    (cond
      (= i 1000) {:state (inc n) :output {:finding i} :priority :immediate :milestone :half}
      (= i 2000) {:state (inc n) :output {:done i} :milestone :all}
      (= (mod i 400) 0) {:state (inc n) :output {:finding i} :priority :immediate}
      :else {:state (inc n) :output {:debug i} :priority :low})))`
	call := map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": map[string]any{
		"name": "mcp.stream.start", "arguments": map[string]any{
			"program": program, "processor": "step", "endpoint": "counter.v1", "transport": "sse",
			"config": map[string]any{"limit": 2000, "interval_ms": 0}, "initial-state": 0,
			"milestones": []any{map[string]any{"id": "half", "weight": 1}, map[string]any{"id": "all", "weight": 1}},
		},
		"_meta": map[string]any{"progressToken": "flood"},
	}}
	_, body := post(t, base, sid, call)
	events := parseSSE(t, body)
	type note struct {
		Params struct {
			Progress float64        `json:"progress"`
			Total    float64        `json:"total"`
			Message  string         `json:"message"`
			Meta     map[string]any `json:"_meta"`
		} `json:"params"`
	}
	var findings []string
	notes, last := 0, -1.0
	for _, ev := range events[:len(events)-1] {
		var n note
		if err := json.Unmarshal([]byte(ev.data), &n); err != nil {
			t.Fatal(err)
		}
		notes++
		p := n.Params
		if p.Total != 2 || p.Progress <= last {
			t.Errorf("notification %d: progress %v of %v (the previous %v), want a rising progress of 2", notes, p.Progress, p.Total, last)
		}
		last = p.Progress
		if p.Meta["rtfshost/priority"] == "immediate" {
			if _, many := p.Meta["rtfshost/outputs"]; many {
				t.Errorf("an immediate notification carries several outputs: %s", ev.data)
			}
			findings = append(findings, p.Message)
		}
	}
	if want := `{"finding":400} {"finding":800} {"finding":1000} {"finding":1200} {"finding":1600}`; strings.Join(findings, " ") != want {
		t.Errorf("immediate findings %v, want each alone and in order: %s", findings, want)
	}
	if last != 2 {
		t.Errorf("the last notification's progress is %v, want 2 (both milestones)", last)
	}
	if notes > 40 {
		t.Errorf("%d notifications for a flood of 2,000 outputs", notes)
	}
	var final struct {
		Result struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(events[len(events)-1].data), &final); err != nil {
		t.Fatal(err)
	}
	res := final.Result.StructuredContent
	if res["output-count"] != 2000.0 || len(res["outputs"].([]any)) != 2000 || res["progress-notifications"] != float64(notes) {
		t.Errorf("result %v", res["output-count"])
	}
	if d, _ := res["dropped-outputs"].(float64); d < 1500 {
		t.Errorf("dropped-outputs %v, want most of the flood", res["dropped-outputs"])
	}
	t.Logf("%d outputs: %d notifications, %v low ones dropped", 2000, notes, res["dropped-outputs"])
}

// serveBreaker: eight mcp.stream.start calls, one after another, on an
// origin that hangs up on every request. serve retries each stream three
// times: the first stream makes four failed attempts, the second one
// more, which opens the origin's circuit. From then on every start fails
// at once saying so, and the origin gets no request. /metrics shows the
// open circuit.
func serveBreaker(t *testing.T) {
	var requests atomic.Int64
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	defer dead.Close()
	base, stop := startServeChild(t, "", "serve", "--listen", "127.0.0.1:0", "--allow-server", dead.URL+"/")
	defer stop()
	sid := rawInitialize(t, base)
	var before []int64
	var texts []string
	for i := range 8 {
		before = append(before, requests.Load())
		call := map[string]any{"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": map[string]any{
			"name": "mcp.stream.start", "arguments": map[string]any{
				"program": `(defn step [n chunk meta] {:state n})`, "processor": "step",
				"endpoint": "counter.v1", "transport": "sse", "server-url": dead.URL + "/sse",
				"on-error": map[string]any{"then": "end"}, // a source that gave up ends the stream
			}}}
		_, body := post(t, base, sid, call)
		events := parseSSE(t, body)
		if len(events) == 0 {
			t.Fatalf("start %d: no answer", i+1)
		}
		texts = append(texts, events[len(events)-1].data)
	}
	open := "circuit open for " + dead.URL + " until "
	for i, text := range texts {
		if !strings.Contains(text, `"isError":true`) {
			t.Errorf("start %d on a dead origin succeeded: %s", i+1, text)
		}
		if i < 5 {
			continue
		}
		if !strings.Contains(text, "mcp.stream.start: start stream: "+open) || !strings.Contains(text, "(5 failures; last: ") {
			t.Errorf("start %d: %s", i+1, text)
		}
		if n := requests.Load(); n != before[i] {
			t.Errorf("start %d reached the origin (%d requests, %d before it)", i+1, n, before[i])
		}
	}
	if n := requests.Load(); n != 5 {
		t.Errorf("the dead origin got %d requests, want 5 (four of the first stream, one of the second)", n)
	}
	resp, err := http.Get(strings.TrimSuffix(base, "/mcp") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`rtfshost_breaker_state{origin="` + dead.URL + `"} 1`, `rtfshost_breaker_failures{origin="` + dead.URL + `"} 5`, "rtfshost_breaker_opened_total 1"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestRuntimeFlagDefaultsAreEachCommands(t *testing.T) {
	// run, resume and serve share one set of budget flags; each must run
	// with its own defaults, whichever command was registered last.
	for _, tc := range []struct {
		cmd  string
		args []string
		want rtfs.Limits
	}{
		{"serve", nil, rtfs.Limits{MaxMemory: 256 << 20, MaxOutput: 16 << 20, MaxDuration: 30 * time.Second}},
		{"serve", []string{"--max-output-bytes", "1MiB", "--call-timeout", "2s"}, rtfs.Limits{MaxMemory: 256 << 20, MaxOutput: 1 << 20, MaxDuration: 2 * time.Second}},
		{"serve", []string{"--max-output-bytes", "-1"}, rtfs.Limits{MaxMemory: 256 << 20, MaxDuration: 30 * time.Second}},
		{"run", nil, rtfs.Limits{}},
		{"resume", nil, rtfs.Limits{}},
	} {
		a := newApp(strings.NewReader(""), io.Discard, io.Discard)
		cmd, _, err := a.root.Find([]string{tc.cmd})
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := a.rt.resolve(cmd); err != nil {
			t.Fatal(err)
		}
		if got := a.rt.limits(); got != tc.want {
			t.Errorf("%s %v: limits %+v, want %+v", tc.cmd, tc.args, got, tc.want)
		}
	}
}
