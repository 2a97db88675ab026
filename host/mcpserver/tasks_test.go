package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rpc posts one JSON-RPC request and decodes its response (JSON, or the
// response event of an SSE body).
func rpc(t *testing.T, url string, header map[string]string, method string, params any) (result map[string]any, rpcErr map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	_, body := rawPost(t, url, string(b), header)
	return decodeResponse(t, method, body)
}

// decodeResponse decodes the JSON-RPC response in body (JSON, or the
// response event of an SSE body).
func decodeResponse(t *testing.T, method, body string) (result map[string]any, rpcErr map[string]any) {
	t.Helper()
	if p := responseOf([]byte(body)); p != nil {
		body = string(p)
	}
	var resp struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("%s: not a JSON-RPC response: %v\n%s", method, err, body)
	}
	return resp.Result, resp.Error
}

func legacyInit(t *testing.T, url string) map[string]string {
	t.Helper()
	resp, body := rawPost(t, url, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: no session\n%s", body)
	}
	if !strings.Contains(body, `"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`) {
		t.Errorf("initialize result lacks the tasks capability:\n%s", body)
	}
	h := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	rawPost(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
	return h
}

// TestTasksLegacy: a 2025-11-25 client augments mcp.stream.start with a
// task: it gets a CreateTaskResult at once, tasks/get follows the stream,
// tasks/result blocks until it ends and returns what the call would have,
// tasks/list lists it, tasks/cancel cancels another and refuses an ended
// one.
func TestTasksLegacy(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	url := f.ts.URL + PathStreamable
	h := legacyInit(t, url)

	// tools/list marks the tools whose spec runs them as tasks, and only
	// those.
	tools, _ := rpc(t, url, h, "tools/list", map[string]any{})
	list, _ := tools["tools"].([]any)
	var offered []string
	for _, x := range list {
		tool, _ := x.(map[string]any)
		if exec, ok := tool["execution"].(map[string]any); ok && exec["taskSupport"] == "optional" {
			offered = append(offered, fmt.Sprint(tool["name"]))
		}
	}
	if len(list) == 0 || fmt.Sprint(offered) != fmt.Sprint([]string{ToolStart, ToolEval}) {
		t.Errorf("tools/list offers tasks for %v of %d tools, want %s and %s", offered, len(list), ToolStart, ToolEval)
	}

	created, e := rpc(t, url, h, "tools/call", map[string]any{"name": ToolStart, "arguments": startArgs("t1"), "task": map[string]any{"ttl": 60000}})
	task, _ := created["task"].(map[string]any)
	if e != nil || task["taskId"] != "t1" || task["status"] != "working" || task["ttl"] != float64(60000) || task["pollInterval"] == nil || task["createdAt"] == nil {
		t.Fatalf("CreateTaskResult = %v, error %v", created, e)
	}
	got, _ := rpc(t, url, h, methodTasksGet, map[string]any{"taskId": "t1"})
	if got["status"] != "working" {
		t.Fatalf("tasks/get while running = %v", got)
	}
	done := make(chan map[string]any, 1)
	go func() {
		res, _ := rpc(t, url, h, methodTasksResult, map[string]any{"taskId": "t1"})
		done <- res
	}()
	f.feed(ctx, "t1", append(values(3), end)...)
	var res map[string]any
	select {
	case res = <-done:
	case <-time.After(hangGuard):
		t.Fatal("tasks/result did not return after the stream ended")
	}
	if res["isError"] != false || !strings.Contains(fmt.Sprint(res["content"]), `"total":4`) {
		t.Fatalf("tasks/result = %v", res)
	}
	if meta, _ := res["_meta"].(map[string]any); fmt.Sprint(meta[metaRelatedTask]) != "map[taskId:t1]" {
		t.Errorf("tasks/result _meta = %v", res["_meta"])
	}
	if got, _ := rpc(t, url, h, methodTasksGet, map[string]any{"taskId": "t1"}); got["status"] != "completed" {
		t.Errorf("tasks/get after the end = %v", got)
	}

	rpc(t, url, h, "tools/call", map[string]any{"name": ToolStart, "arguments": startArgs("t2"), "task": map[string]any{}})
	cancelled, e := rpc(t, url, h, methodTasksCancel, map[string]any{"taskId": "t2"})
	if e != nil || cancelled["status"] != "cancelled" {
		t.Fatalf("tasks/cancel = %v, %v", cancelled, e)
	}
	waitFor(t, "the stream's cancel", func() bool {
		st, err := f.host.Provider().Status(ctx, "t2")
		return err == nil && st.State.Terminal()
	})
	if _, e := rpc(t, url, h, methodTasksCancel, map[string]any{"taskId": "t1"}); e == nil || e["code"] != float64(codeInvalidParams) {
		t.Errorf("cancelling an ended task: %v", e)
	}
	listed, _ := rpc(t, url, h, methodTasksList, map[string]any{})
	b, _ := json.Marshal(listed)
	if !strings.Contains(string(b), `"taskId":"t1"`) || !strings.Contains(string(b), `"taskId":"t2"`) {
		t.Errorf("tasks/list = %s", b)
	}
	if _, e := rpc(t, url, h, methodTasksGet, map[string]any{"taskId": "nope"}); e == nil || e["code"] != float64(codeInvalidParams) {
		t.Errorf("tasks/get of an unknown task: %v", e)
	}
	if _, e := rpc(t, url, h, "tools/call", map[string]any{"name": ToolStatus, "arguments": map[string]any{"stream-id": "t1"}, "task": map[string]any{}}); e == nil || e["code"] != float64(codeMethodNotFound) {
		t.Errorf("a task of a tool without task support: %v", e)
	}
}

// TestTasksModern: a 2026-07-28 client that declares the tasks extension
// gets resultType "task" for mcp.stream.start and rtfs.eval, and tasks/get
// carries the result inline once the task completed; a client without the
// extension gets the plain result.
func TestTasksModern(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	url := f.ts.URL + PathStreamable
	meta := func(tasks bool) map[string]any {
		caps := map[string]any{}
		if tasks {
			caps["extensions"] = map[string]any{extensionTasks: map[string]any{}}
		}
		return map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", metaClientCaps: caps,
			"io.modelcontextprotocol/clientInfo": map[string]any{"name": "raw", "version": "1"}}
	}
	h := map[string]string{"MCP-Protocol-Version": "2026-07-28"}
	call := func(name string, args map[string]any, tasks bool) (map[string]any, map[string]any) {
		hh := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
		return rpc(t, url, hh, "tools/call", map[string]any{"name": name, "arguments": args, "_meta": meta(tasks)})
	}
	created, e := call(ToolStart, startArgs("m1"), true)
	if e != nil || created["resultType"] != "task" || created["taskId"] != "m1" || created["ttlMs"] == nil || created["pollIntervalMs"] == nil {
		t.Fatalf("CreateTaskResult = %v, %v", created, e)
	}
	f.feed(ctx, "m1", append(values(2), end)...)
	var got map[string]any
	waitFor(t, "the task's completion", func() bool {
		got, _ = rpc(t, url, h, methodTasksGet, map[string]any{"taskId": "m1", "_meta": meta(true)})
		return got["status"] == "completed"
	})
	result, _ := got["result"].(map[string]any)
	if result["isError"] != false || !strings.Contains(fmt.Sprint(result["content"]), `"total":3`) {
		t.Fatalf("tasks/get of the completed task = %v", got)
	}
	if got["resultType"] != "complete" || result["resultType"] != "complete" || result["_meta"] != nil {
		t.Errorf("tasks/get: resultType %v, inlined result's %v and _meta %v; want complete, complete and none", got["resultType"], result["resultType"], result["_meta"])
	}
	if ack, e := rpc(t, url, h, methodTasksUpdate, map[string]any{"taskId": "m1", "inputResponses": map[string]any{}, "_meta": meta(true)}); e != nil || ack["resultType"] != "complete" {
		t.Errorf("tasks/update = %v, %v", ack, e)
	}
	// Cancelling an ended task is acknowledged, and changes nothing.
	if ack, e := rpc(t, url, h, methodTasksCancel, map[string]any{"taskId": "m1", "_meta": meta(true)}); e != nil || ack["resultType"] != "complete" {
		t.Errorf("tasks/cancel of a completed task = %v, %v; want the acknowledgement", ack, e)
	}
	if got, _ := rpc(t, url, h, methodTasksGet, map[string]any{"taskId": "m1", "_meta": meta(true)}); got["status"] != "completed" {
		t.Errorf("tasks/get after cancelling the completed task = %v", got)
	}
	// Without the extension declared, the task methods are refused with
	// -32021 naming it; those the extension dropped are not found.
	for _, method := range []string{methodTasksGet, methodTasksUpdate, methodTasksCancel} {
		_, e := rpc(t, url, h, method, map[string]any{"taskId": "m1", "_meta": meta(false)})
		if e["code"] != float64(codeMissingCapability) || !strings.Contains(fmt.Sprint(e["data"]), extensionTasks) {
			t.Errorf("%s without the extension: error %v, want %d naming it", method, e, codeMissingCapability)
		}
	}
	for _, method := range []string{methodTasksResult, methodTasksList} {
		if _, e := rpc(t, url, h, method, map[string]any{"taskId": "m1", "_meta": meta(true)}); e["code"] != float64(codeMethodNotFound) {
			t.Errorf("%s under 2026-07-28: error %v, want %d", method, e, codeMethodNotFound)
		}
	}

	evalTask, e := call(ToolEval, map[string]any{"program": "(+ 40 2)"}, true)
	if e != nil || evalTask["resultType"] != "task" {
		t.Fatalf("rtfs.eval as a task = %v, %v", evalTask, e)
	}
	waitFor(t, "the eval task", func() bool {
		got, _ = rpc(t, url, h, methodTasksGet, map[string]any{"taskId": evalTask["taskId"], "_meta": meta(true)})
		return got["status"] == "completed"
	})
	if !strings.Contains(fmt.Sprint(got["result"]), "42") {
		t.Errorf("eval task result = %v", got)
	}

	plain, e := call(ToolEval, map[string]any{"program": "(+ 1 1)"}, false)
	if e != nil || plain["resultType"] == "task" || !strings.Contains(fmt.Sprint(plain["content"]), "2") {
		t.Errorf("a client without the extension got %v, %v", plain, e)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPrimingEventWithRetry: on 2025-11-25, a tools/call answered over SSE
// starts with SEP-1699's priming event: an id, empty data and a retry
// field.
func TestPrimingEventWithRetry(t *testing.T) {
	f := newFixture(t, Options{})
	url := f.ts.URL + PathStreamable
	h := legacyInit(t, url)
	_, body := rawPost(t, url, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rtfs.eval","arguments":{"program":"(+ 1 2)"}}}`, h)
	first, _, _ := strings.Cut(body, "\n\n")
	lines := strings.Split(first, "\n")
	var id, data, retry bool
	for _, l := range lines {
		id = id || strings.HasPrefix(l, "id: ") && len(l) > 4
		data = data || l == "data: " || l == "data:"
		retry = retry || l == "retry: 1000"
	}
	if !id || !data || !retry || !strings.Contains(body, `"result"`) {
		t.Fatalf("the first event is not a priming event with an id, empty data and retry:\n%s", body)
	}
}

// TestBothErasOnOneEndpoint: go-sdk's default client (2026-07-28: no
// session, server/discover) and a 2025-11-25 client (initialize, a session)
// use /mcp at once; each starts a stream and gets its progress and result.
func TestBothErasOnOneEndpoint(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		version, id string
	}{{"", "modern"}, {"2025-11-25", "legacy"}} {
		log := newProgressLog()
		cs := connectVersion(ctx, t, &mcp.StreamableClientTransport{Endpoint: f.ts.URL + PathStreamable}, log, tc.version)
		want := tc.version
		if want == "" {
			want = sessionlessVersion
		}
		if got := cs.InitializeResult().ProtocolVersion; got != want {
			t.Fatalf("%s client negotiated %s, want %s", tc.id, got, want)
		}
		if (cs.ID() == "") != (tc.version == "") {
			t.Errorf("%s client: session id %q", tc.id, cs.ID())
		}
		params := &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs(tc.id)}
		params.SetProgressToken(tc.id)
		ch := callAsync(ctx, cs, params)
		f.feed(ctx, tc.id, append(values(3), end)...)
		r := await(t, ch)
		if r.err != nil || r.res.IsError {
			t.Fatalf("%s call: %v %+v", tc.id, r.err, r.res)
		}
		if notes := log.waitFor(t, 4); len(notes) != 4 {
			t.Errorf("%s client got %d progress notifications, want 4", tc.id, len(notes))
		}
	}
}

// flushCounter is a ResponseWriter that counts flushes.
type flushCounter struct {
	httptest.ResponseRecorder
	mu      sync.Mutex
	flushes int
}

func (f *flushCounter) Flush() {
	f.mu.Lock()
	f.flushes++
	f.mu.Unlock()
}

func (f *flushCounter) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushes
}

// TestFlushesCoalesce: the response writer flushes a quiet stream's event
// at once, lets a burst share one deferred flush, and flushes what is due
// when the handler returns, after which no timer touches the response.
func TestFlushesCoalesce(t *testing.T) {
	fc := &flushCounter{ResponseRecorder: *httptest.NewRecorder()}
	const window = 200 * time.Millisecond // long enough for a burst on a loaded machine
	w := &retryWriter{ResponseWriter: fc, window: window}
	w.Write([]byte("data: 1\n\n"))
	w.Flush()
	if fc.count() != 1 {
		t.Fatalf("the first event: %d flushes, want 1 at once", fc.count())
	}
	for i := range 10 {
		fmt.Fprintf(w, "data: %d\n\n", i)
		w.Flush()
	}
	if fc.count() != 1 {
		t.Fatalf("a burst flushed %d times at once, want its flush deferred", fc.count())
	}
	waitFor(t, "the deferred flush", func() bool { return fc.count() == 2 })
	time.Sleep(2 * window)
	if fc.count() != 2 {
		t.Fatalf("%d flushes for one burst, want 2 in all", fc.count())
	}
	w.Write([]byte("data: quiet again\n\n"))
	w.Flush() // the stream was quiet: at once
	w.Write([]byte("data: last\n\n"))
	w.Flush() // deferred
	if fc.count() != 3 {
		t.Fatalf("%d flushes, want 3 with the last one deferred", fc.count())
	}
	w.finish()
	if fc.count() != 4 {
		t.Fatalf("finish left the last event unflushed (%d flushes)", fc.count())
	}
	time.Sleep(2 * window)
	if fc.count() != 4 {
		t.Fatalf("a flush ran after finish (%d flushes)", fc.count())
	}
}

// TestWritesWaitForTheStore: what go-sdk writes reaches the client only
// once the events written so far are stored, so a client never holds an
// event a restarted server lacks.
func TestWritesWaitForTheStore(t *testing.T) {
	fc := &flushCounter{ResponseRecorder: *httptest.NewRecorder()}
	entered, release := make(chan struct{}), make(chan struct{})
	w := &retryWriter{ResponseWriter: fc, window: time.Hour, stored: func(context.Context) error {
		close(entered)
		<-release
		return nil
	}}
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		w.Write([]byte("id: 1\ndata: x\n\n"))
		w.Flush()
	}()
	<-entered // the flush waits for the store now
	if got := fc.Body.Len(); got != 0 || fc.count() != 0 {
		t.Fatalf("the client got %d bytes and %d flushes before the event was stored", got, fc.count())
	}
	close(release)
	<-flushed
	if got := fc.Body.String(); got != "id: 1\ndata: x\n\n" || fc.count() != 1 {
		t.Fatalf("after the store: body %q, %d flushes", got, fc.count())
	}
	w.finish()
}
