package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// printingCounter is counterProgram's processor printing every chunk.
const printingCounter = `
(defn step [state chunk meta]
  (let [n (+ state 1)]
    (println "chunk" n)
    (if (= (:kind chunk) "end")
      {:state n :action :complete :output {:total n}}
      {:state n :output {:n n}})))
`

// sseReader reads the JSON-RPC messages of an SSE response as they come.
type sseReader struct {
	mu   sync.Mutex
	msgs []map[string]any
	wake chan struct{}
}

// openStandalone opens the session's standalone stream (GET /mcp) and
// reads it until the test ends.
func openStandalone(t *testing.T, url string, h map[string]string) *sseReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		resp.Body.Close()
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	r := &sseReader{wake: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || data == "" {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(data), &m) == nil {
				r.mu.Lock()
				r.msgs = append(r.msgs, m)
				r.mu.Unlock()
				select {
				case r.wake <- struct{}{}:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// matching returns the messages of method whose params satisfy keep.
func (r *sseReader) matching(method string, keep func(params map[string]any) bool) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]any
	for _, m := range r.msgs {
		p, _ := m["params"].(map[string]any)
		if m["method"] == method && keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// await waits until matching returns at least n messages, and returns them.
func (r *sseReader) await(t *testing.T, n int, method string, keep func(map[string]any) bool) []map[string]any {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		if got := r.matching(method, keep); len(got) >= n {
			return got
		}
		select {
		case <-r.wake:
		case <-deadline:
			t.Fatalf("got %d %s, want %d", len(r.matching(method, keep)), method, n)
		}
	}
}

// relatedTo reports whether params carry the related-task _meta of task id.
func relatedTo(params map[string]any, id string) bool {
	meta, _ := params["_meta"].(map[string]any)
	rel, _ := meta[metaRelatedTask].(map[string]any)
	return rel["taskId"] == id
}

// TestLegacyTaskNotifications: under 2025-11-25, a task keeps talking to
// the session that created it, on the stream the client keeps open (its
// GET): a progress notification per output with the progress token of the
// tools/call, and the printed lines as log notifications, each with the
// related-task _meta; none after the task reached a terminal status.
func TestLegacyTaskNotifications(t *testing.T) {
	// An hour between progress notifications: the first output is sent at
	// once, the next ones are held for the final flush.
	f := newFixture(t, Options{ProgressInterval: time.Hour})
	sent := countSent(f) // the count TestModernTaskSendsNothing reads
	ctx := context.Background()
	url := f.ts.URL + PathStreamable
	h := legacyInit(t, url)
	if _, e := rpc(t, url, h, "logging/setLevel", map[string]any{"level": "info"}); e != nil {
		t.Fatal(e)
	}
	get := openStandalone(t, url, h)
	start := func(id, token string) {
		t.Helper()
		args := startArgs(id)
		args["program"] = printingCounter
		if _, e := rpc(t, url, h, "tools/call", map[string]any{"name": ToolStart, "arguments": args, "task": map[string]any{},
			"_meta": map[string]any{"progressToken": token}}); e != nil {
			t.Fatalf("tools/call %s as a task: %v", id, e)
		}
	}
	progressOf := func(token string) func(map[string]any) bool {
		return func(p map[string]any) bool { return p["progressToken"] == token }
	}

	// A task that completes: its first output at once, the rest in the
	// final flush before the task's terminal status.
	start("n1", "tok-1")
	f.feed(ctx, "n1", values(1)...)
	get.await(t, 1, "notifications/progress", progressOf("tok-1"))
	// (Outputs that came together would share a notification.)
	f.feed(ctx, "n1", values(2)[1], end)
	notes := get.await(t, 2, "notifications/progress", progressOf("tok-1"))
	for _, p := range notes {
		if !relatedTo(p, "n1") {
			t.Errorf("progress of the task without its related-task _meta: %v", p)
		}
	}
	if last := notes[len(notes)-1]; last["progress"] != float64(3) || !strings.Contains(fmt.Sprint(last["message"]), `"total":3`) {
		t.Errorf("the last progress notification = %v, want the third output", last)
	}
	logs := get.await(t, 3, "notifications/message", func(p map[string]any) bool { return relatedTo(p, "n1") })
	if fmt.Sprint(logs[0]["data"]) != "chunk 1" {
		t.Errorf("first log notification of the task = %v", logs[0])
	}

	// A task cancelled while an output is held: the held output is not
	// sent, since the task is cancelled before the flush.
	start("n2", "tok-2")
	f.feed(ctx, "n2", values(2)...)
	get.await(t, 1, "notifications/progress", progressOf("tok-2"))
	waitFor(t, "the second output of n2", func() bool {
		in, err := f.host.Provider().Info("n2", infoLight)
		return err == nil && in.Stats.Outputs == 2
	})
	if _, e := rpc(t, url, h, methodTasksCancel, map[string]any{"taskId": "n2"}); e != nil {
		t.Fatal(e)
	}
	waitFor(t, "the cancelled task's result", func() bool {
		f.srv.tasks.mu.Lock()
		defer f.srv.tasks.mu.Unlock()
		return f.srv.tasks.byID["n2"].rec.Result != nil // stored after the final flush
	})
	// A third task's notification follows anything n2 sent on the stream.
	start("n3", "tok-3")
	f.feed(ctx, "n3", values(1)...)
	get.await(t, 1, "notifications/progress", progressOf("tok-3"))
	if got := get.matching("notifications/progress", progressOf("tok-2")); len(got) != 1 {
		t.Errorf("the cancelled task sent %d progress notifications, want 1 (none after cancel): %v", len(got), got)
	}
	_, _ = f.host.Provider().Cancel(ctx, "n3")
	if n := sent(); n["notifications/progress"] < 4 || n["notifications/message"] < 3 {
		t.Errorf("sent %v, want the progress and log notifications counted", n)
	}
}

// TestModernTaskSendsNothing: the 2026-07-28 tasks extension forbids
// progress and log notifications of tasks, so a task of that revision
// sends none, though its call had a progress token, its stream outputs
// and its processor prints, and the client asked for log messages.
func TestModernTaskSendsNothing(t *testing.T) {
	f := newFixture(t, Options{})
	sent := countSent(f)
	ctx := context.Background()
	url := f.ts.URL + PathStreamable
	meta := map[string]any{"progressToken": "m-tok", "io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/logLevel": "debug",
		metaClientCaps:                     map[string]any{"extensions": map[string]any{extensionTasks: map[string]any{}}}}
	h := map[string]string{"MCP-Protocol-Version": "2026-07-28"}
	args := startArgs("q1")
	args["program"] = printingCounter
	created, e := rpc(t, url, h, "tools/call", map[string]any{"name": ToolStart, "arguments": args, "_meta": meta})
	if e != nil || created["resultType"] != "task" {
		t.Fatalf("tools/call as a task = %v, %v", created, e)
	}
	f.feed(ctx, "q1", append(values(3), end)...)
	waitFor(t, "the task's completion", func() bool {
		got, _ := rpc(t, url, h, methodTasksGet, map[string]any{"taskId": "q1", "_meta": meta})
		return got["status"] == "completed"
	})
	if n := sent(); n["notifications/progress"] != 0 || n["notifications/message"] != 0 {
		t.Errorf("a 2026-07-28 task sent notifications: %v", n)
	}
}

// countSent counts the messages the fixture's MCP server sends, by method;
// the returned function reads the counts.
func countSent(f *fixture) func() map[string]int {
	var mu sync.Mutex
	sent := map[string]int{}
	f.srv.mcp.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			mu.Lock()
			sent[method]++
			mu.Unlock()
			return next(ctx, method, req)
		}
	})
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(sent)
	}
}

// TestTaskStatusNotifications: under 2025-11-25 a task's session is told
// each change of its status (notifications/tasks/status, the full task as
// tasks/get gives it, without the related-task _meta), on the stream the
// client keeps open, after the task's progress notifications: completed
// for a stream that completed, cancelled for a task cancelled by request
// (once). The carrier it goes out as never reaches the client. Only
// sessions of 2025-11-25 are told: earlier revisions have no such
// notification, later ones no sessions.
func TestTaskStatusNotifications(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	url := f.ts.URL + PathStreamable
	h := legacyInit(t, url)
	get := openStandalone(t, url, h)
	start := func(h map[string]string, id string) {
		t.Helper()
		if _, e := rpc(t, url, h, "tools/call", map[string]any{"name": ToolStart, "arguments": startArgs(id), "task": map[string]any{"ttl": 60000},
			"_meta": map[string]any{"progressToken": "tok-" + id}}); e != nil {
			t.Fatalf("tools/call %s as a task: %v", id, e)
		}
	}
	of := func(id string) func(map[string]any) bool {
		return func(p map[string]any) bool { return p["taskId"] == id }
	}

	start(h, "s1")
	f.feed(ctx, "s1", append(values(2), end)...)
	got := get.await(t, 1, notificationTaskStatus, of("s1"))[0]
	if got["status"] != "completed" || got["statusMessage"] != "the stream completed" || got["ttl"] != float64(60000) ||
		got["pollInterval"] == nil || got["createdAt"] == nil || got["lastUpdatedAt"] == nil || got["_meta"] != nil {
		t.Errorf("the status notification of a completed task = %v", got)
	}
	if task, _ := rpc(t, url, h, methodTasksGet, map[string]any{"taskId": "s1"}); fmt.Sprint(task) != fmt.Sprint(got) {
		t.Errorf("the status notification says %v, tasks/get %v", got, task)
	}
	get.mu.Lock()
	order := []string{}
	for _, m := range get.msgs {
		p, _ := m["params"].(map[string]any)
		if p["taskId"] == "s1" || p["progressToken"] == "tok-s1" {
			order = append(order, fmt.Sprint(m["method"]))
		}
	}
	get.mu.Unlock()
	if want := "[notifications/progress notifications/progress notifications/progress notifications/tasks/status]"; fmt.Sprint(order) != want {
		t.Errorf("the task's messages on the stream: %v, want %s", order, want)
	}

	start(h, "s2")
	f.feed(ctx, "s2", values(1)...)
	get.await(t, 1, "notifications/progress", func(p map[string]any) bool { return p["progressToken"] == "tok-s2" })
	if _, e := rpc(t, url, h, methodTasksCancel, map[string]any{"taskId": "s2"}); e != nil {
		t.Fatal(e)
	}
	if got := get.await(t, 1, notificationTaskStatus, of("s2"))[0]; got["status"] != "cancelled" {
		t.Errorf("the status notification of a cancelled task = %v", got)
	}

	if c := get.matching("notifications/progress", func(p map[string]any) bool { return p["progressToken"] == metaTaskStatus }); len(c) != 0 {
		t.Errorf("a status carrier reached the client: %v", c)
	}
	for v, want := range map[string]bool{"2025-03-26": false, "2025-06-18": false, "2025-11-25": true, sessionlessVersion: false} {
		if got := revisionHasTaskStatus(v); got != want {
			t.Errorf("revision %s has task status notifications: %v, want %v", v, got, want)
		}
	}
}

// TestTaskStatusCarrier: the carrier of a status notification is stored
// in the event store as the notification itself, for a client that
// resumes, and only a progress notification with the carrier's _meta is
// turned (a progress message that names the key is not).
func TestTaskStatusCarrier(t *testing.T) {
	rec := taskRecord{ID: "c1", Status: taskCompleted, Message: "the stream completed", TTL: time.Minute}
	carrier, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": statusCarrier(rec)})
	if err != nil {
		t.Fatal(err)
	}
	d := newDurableEvents(nil, func(string, ...any) {})
	defer d.close()
	if err := d.Append(context.Background(), "sess", "", carrier); err != nil {
		t.Fatal(err)
	}
	var stored []string
	for data, err := range d.After(context.Background(), "sess", "", -1) {
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, string(data))
	}
	var m map[string]any
	if len(stored) != 1 || json.Unmarshal([]byte(stored[0]), &m) != nil {
		t.Fatalf("stored %q", stored)
	}
	if err := schemas.validate("2025-11-25", "TaskStatusNotification", m); err != nil || m["method"] != notificationTaskStatus {
		t.Errorf("stored %s: %v", stored[0], err)
	}
	plain := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1,"message":"{\"k\":\"rtfshost/task-status\"}"}}`
	if out, ok := taskStatusMessage([]byte(plain)); ok || string(out) != plain {
		t.Errorf("a progress notification naming the key was turned: %s", out)
	}
}
