package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/cluster/clustertest"
	"github.com/rtfshost/rtfshost/host/mcpserver"
	"github.com/rtfshost/rtfshost/internal/localserver"
)

// TestServeCluster: two "rtfshost serve --cluster" processes share an
// embedded NATS. A stream started through one answers status, pause,
// resume and inspect through the other (forwarded to its owner); when its
// owner leaves with SIGTERM, the other takes it over and finishes it.
func TestServeCluster(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after the server's own cleanup
	ns := clustertest.Server(t, clustertest.Options{})
	src := localserver.New(localserver.Options{})
	if err := src.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	serve := func(node string) (string, func()) {
		base, stop, _ := startServeChildData(t, "", "", "serve", "--listen", "127.0.0.1:0", "--server-url", src.URL()+"/sse",
			"--cluster", ns.ClientURL(), "--node", node, "--lease-ttl", "1s")
		return base, stop
	}
	a, stopA := serve("a")
	b, stopB := serve("b")
	defer stopB()
	ctx := context.Background()
	program := `(defn step [state chunk meta] {:state (+ state (:n (:chunk chunk))) :output (:n (:chunk chunk))})`
	text, err := callServer(ctx, a, mcpserver.ToolStart, map[string]any{
		"program": program, "processor": "step", "endpoint": "counter.v1", "transport": "sse", "stream-id": "shared",
		"config": map[string]any{"limit": 400, "interval_ms": 5}, "initial-state": 0, "detach": true,
	})
	if err != nil || !strings.Contains(text, `"shared"`) {
		stopA()
		t.Fatalf("start on a: %s %v", text, err)
	}
	state := func(server string) string {
		t.Helper()
		text, err := callServer(ctx, server, mcpserver.ToolStatus, map[string]any{"stream-id": "shared"})
		if err != nil {
			t.Fatalf("status on %s: %v", server, err)
		}
		var st struct{ State string }
		_ = json.Unmarshal([]byte(text), &st)
		return st.State
	}
	if got := state(b); got != "active" {
		t.Fatalf("status on b: %q", got)
	}
	// streams --server lists the streams of every host, whichever is
	// asked, a page at a time (one stream a page here).
	text, err = callServer(ctx, b, mcpserver.ToolStart, map[string]any{
		"program": program, "processor": "step", "endpoint": "counter.v1", "transport": "sse", "stream-id": "other",
		"config": map[string]any{"limit": 3, "interval_ms": 1}, "initial-state": 0,
	})
	if err != nil || !strings.Contains(text, `"completed"`) {
		stopA()
		t.Fatalf("start on b: %s %v", text, err)
	}
	defer func(n int) { livePage = n }(livePage)
	livePage = 1
	for _, server := range []string{a, b} {
		var stdout, stderr bytes.Buffer
		code := newApp(nil, &stdout, &stderr).execute(ctx, []string{"streams", "--server", server})
		if code != exitOK || !regexp.MustCompile(`(?m)^other\s+completed\s+3\s`).Match(stdout.Bytes()) ||
			!regexp.MustCompile(`(?m)^shared\s+active\s`).Match(stdout.Bytes()) {
			stopA()
			t.Fatalf("streams --server %s: exit %d\n%s%s", server, code, stdout.String(), stderr.String())
		}
	}
	if _, err := callServer(ctx, b, mcpserver.ToolPause, map[string]any{"stream-id": "shared"}); err != nil {
		t.Fatal(err)
	}
	if got := state(a); got != "paused" {
		t.Fatalf("a's stream is %q after b paused it", got)
	}
	if _, err := callServer(ctx, b, mcpserver.ToolResume, map[string]any{"stream-id": "shared"}); err != nil {
		t.Fatal(err)
	}
	// Paused again, so that it cannot end on a before a leaves: a paused
	// stream is handed over paused, and b resumes it.
	if _, err := callServer(ctx, b, mcpserver.ToolPause, map[string]any{"stream-id": "shared"}); err != nil {
		t.Fatal(err)
	}
	stopA() // SIGTERM: a hands its stream over
	deadline := time.Now().Add(30 * time.Second)
	for {
		text, err := callServer(ctx, b, mcpserver.ToolResume, map[string]any{"stream-id": "shared"})
		if err == nil && strings.Contains(text, `"active"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b did not resume the stream handed over: %s %v", text, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		text, err := callServer(ctx, b, mcpserver.ToolInspect, map[string]any{"stream-id": "shared", "include-queue": false})
		if err == nil && strings.Contains(text, `"completed"`) {
			if want := `"current-state":80200`; !strings.Contains(text, want) {
				t.Fatalf("inspect on b after the end lacks %s:\n%s", want, text)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream did not complete on b: %s %v", text, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.Get(strings.TrimSuffix(b, mcpserver.PathStreamable) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^rtfshost_cluster_claims_total [1-9]`).Match(metrics) || !strings.Contains(string(metrics), "rtfshost_cluster_owned 0") {
		t.Fatalf("b's cluster metrics after it took the stream over and finished it:\n%s", regexp.MustCompile(`(?m)^rtfshost_cluster.*$`).FindAll(metrics, -1))
	}
}

// TestServeClusterUnreachable: serve --cluster with no NATS at the URL
// fails at once with an error that names the URL.
func TestServeClusterUnreachable(t *testing.T) {
	var out, errOut lockedWriter
	code := newApp(strings.NewReader(""), &out, &errOut).execute(context.Background(),
		[]string{"serve", "--listen", "127.0.0.1:0", "--cluster", "nats://127.0.0.1:1", "--node", "x"})
	if code != exitStreamFailed || !strings.Contains(errOut.String(), "nats://127.0.0.1:1") || !strings.Contains(errOut.String(), "unreachable") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}

// TestServeClusterTermNATSDown: SIGTERM to serve --cluster while NATS does
// not answer, with a stream committing and an MCP call following another
// (its progress notifications are stored events): the host waits for NATS
// for its shutdown grace (10 s) from the signal, says that it gives up, and
// exits.
func TestServeClusterTermNATSDown(t *testing.T) {
	ns := clustertest.Server(t, clustertest.Options{})
	src := localserver.New(localserver.Options{})
	if err := src.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := startServeProc(t, "", "", "serve", "--listen", "127.0.0.1:0", "--server-url", src.URL()+"/sse",
		"--cluster", ns.ClientURL(), "--node", "a", "--lease-ttl", "1s")
	defer p.kill()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	program := `(defn step [state chunk meta] {:state (+ state (:n (:chunk chunk))) :output (:n (:chunk chunk))})`
	start := func(id string) map[string]any {
		return map[string]any{"program": program, "processor": "step", "endpoint": "counter.v1", "transport": "sse", "stream-id": id,
			"config": map[string]any{"limit": 100000, "interval_ms": 2}, "initial-state": 0}
	}
	detached := start("detached")
	detached["detach"] = true
	if _, err := callServer(ctx, p.base, mcpserver.ToolStart, detached); err != nil {
		t.Fatal(err)
	}
	notified := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case notified <- struct{}{}:
			default:
			}
		}})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.base}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	followed := &mcp.CallToolParams{Name: mcpserver.ToolStart, Arguments: start("followed")}
	followed.SetProgressToken("tok")
	callDone := make(chan struct{})
	go func() {
		defer close(callDone)
		_, _ = cs.CallTool(ctx, followed)
	}()
	defer func() { cancel(); <-callDone }()
	select {
	case <-notified:
	case <-time.After(20 * time.Second):
		t.Fatal("no progress notification of the followed stream")
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	time.Sleep(300 * time.Millisecond) // the streams' commits wait for NATS now
	signalled := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	var exitErr error
	select {
	case exitErr = <-exited:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-exited
		t.Fatalf("serve --cluster had not exited 60s after SIGTERM with NATS down\n%s", p.stderr.String())
	}
	took := time.Since(signalled)
	t.Logf("serve --cluster exited %v after SIGTERM with NATS down", took.Round(100*time.Millisecond))
	logs := p.stderr.String()
	if exitErr != nil || !strings.Contains(logs, "shutdown grace") {
		t.Fatalf("exit %v after %v; want exit 0 and the log line that the host gave NATS its shutdown grace:\n%s", exitErr, took, logs)
	}
	if took > 30*time.Second {
		t.Fatalf("serve --cluster took %v to exit after SIGTERM; its shutdown grace is 10s", took)
	}
}

// TestServeClusterTaskMoves: a stream started as an MCP task on one of two
// "rtfshost serve --cluster" processes moves to the other when its host
// gets SIGTERM, or SIGKILL (paused first, so that it does not end before
// it moves); the other drives the task from then on: tasks/get there ends
// completed, and tasks/result lists the outputs of both hosts once each,
// in order: every one after SIGTERM; after SIGKILL, those a stored before
// it died, the others counted in outputs-lost.
func TestServeClusterTaskMoves(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	ns := clustertest.Server(t, clustertest.Options{})
	src := localserver.New(localserver.Options{})
	if err := src.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, how := range []string{"term", "kill"} {
		t.Run(how, func(t *testing.T) { serveClusterTaskMoves(t, ns.ClientURL(), src.URL()+"/sse", how) })
	}
}

func serveClusterTaskMoves(t *testing.T, natsURL, sourceURL, how string) {
	serve := func(node string) (string, func(), func()) {
		return startServeChildData(t, "", "", "serve", "--listen", "127.0.0.1:0", "--server-url", sourceURL,
			"--cluster", natsURL, "--node", node, "--lease-ttl", "1s")
	}
	a, stopA, killA := serve("a")
	b, stopB, _ := serve("b")
	defer stopB()
	leave := stopA
	if how == "kill" {
		leave = killA
	}
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
			t.Fatalf("%s on %s: %v %v\n%s", method, base, err, resp.Error, body)
		}
		return resp.Result
	}
	const n = 60
	created := call(a, rawInitialize(t, a), "tools/call", map[string]any{"name": "mcp.stream.start", "task": map[string]any{"ttl": 600000},
		"arguments": map[string]any{
			"program": `(defn step [n chunk meta] {:state (inc n) :output {:count (inc n)}})`, "processor": "step",
			"endpoint": "counter.v1", "transport": "sse", "stream-id": "moving-task-" + how, "initial-state": 0,
			"config": map[string]any{"limit": n, "interval_ms": 20},
		}})
	if task, _ := created["task"].(map[string]any); task["taskId"] != "moving-task-"+how || task["status"] != "working" {
		stopA()
		t.Fatalf("CreateTaskResult %v", created)
	}
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for { // some chunks on a, most to come
		text, err := callServer(ctx, a, mcpserver.ToolInspect, map[string]any{"stream-id": "moving-task-" + how, "include-queue": false})
		var in struct {
			Stats struct {
				Processed int `json:"processed-chunks"`
			} `json:"stats"`
		}
		if err == nil && json.Unmarshal([]byte(text), &in) == nil && in.Stats.Processed >= 5 {
			break
		}
		if time.Now().After(deadline) {
			stopA()
			t.Fatalf("the task's stream did not run on a: %s %v", text, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Paused (through b), so that it cannot end on a before a leaves: it
	// is handed over paused, and b resumes it.
	if _, err := callServer(ctx, b, mcpserver.ToolPause, map[string]any{"stream-id": "moving-task-" + how}); err != nil {
		stopA()
		t.Fatal(err)
	}
	leave() // SIGTERM: a hands the stream over; SIGKILL: b takes it when a's lease expires
	deadline = time.Now().Add(30 * time.Second)
	for {
		text, err := callServer(ctx, b, mcpserver.ToolResume, map[string]any{"stream-id": "moving-task-" + how})
		if err == nil && strings.Contains(text, `"active"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b did not resume the stream handed over: %s %v", text, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	sid := rawInitialize(t, b)
	for {
		got := call(b, sid, "tasks/get", map[string]any{"taskId": "moving-task-" + how})
		if got["status"] == "completed" {
			break
		}
		if got["status"] != "working" || time.Now().After(deadline) {
			t.Fatalf("tasks/get on b: %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	res := call(b, sid, "tasks/result", map[string]any{"taskId": "moving-task-" + how})
	var result struct {
		State       string                `json:"state"`
		Result      struct{ Count int }   `json:"result"`
		Outputs     []struct{ Count int } `json:"outputs"`
		OutputCount int                   `json:"output-count"`
		Lost        int                   `json:"outputs-lost"`
	}
	raw, _ := json.Marshal(res["structuredContent"])
	if err := json.Unmarshal(raw, &result); err != nil || res["isError"] != false {
		t.Fatalf("tasks/result on b: %v\n%s", err, raw)
	}
	counts := make([]int, len(result.Outputs))
	for i, o := range result.Outputs {
		counts[i] = o.Count
	}
	ok := result.State == "completed" && result.Result.Count == n && len(counts)+result.Lost == n && result.OutputCount == n &&
		(how == "kill" || result.Lost == 0) && len(counts) > 0 && counts[len(counts)-1] == n
	for i := 1; ok && i < len(counts); i++ {
		ok = counts[i] > counts[i-1]
	}
	if !ok {
		t.Fatalf("tasks/result on b: %s, result %d, outputs %v (output-count %d, lost %d); want completed, %d, 1..%d (after SIGKILL, some may be lost)",
			result.State, result.Result.Count, counts, result.OutputCount, result.Lost, n, n)
	}
	// b took the stream over (a did not finish it before it left).
	resp, err := http.Get(strings.TrimSuffix(b, mcpserver.PathStreamable) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`(?m)^rtfshost_cluster_claims_total [1-9]`).Match(metrics) {
		t.Fatalf("b's cluster metrics: %s", regexp.MustCompile(`(?m)^rtfshost_cluster.*$`).FindAll(metrics, -1))
	}
}
