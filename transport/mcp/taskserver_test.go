package mcp

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// taskServer is a fake MCP server whose tool "job" runs as a task, in the
// shapes rtfshost's own server produces (host/mcpserver/taskwire.go, which this
// package cannot import): under 2025-11-25 a session whose initialize
// declares capabilities.tasks, a tools/list with execution.taskSupport
// "required", a tools/call with params.task answered by a CreateTaskResult
// ({"task":{taskId,status,statusMessage,ttl,pollInterval,...}}),
// tasks/get, tasks/result and tasks/cancel; under 2026-07-28
// server/discover, a tools/call from a client that declared the
// io.modelcontextprotocol/tasks extension answered with the task and
// resultType "task" (ttlMs, pollIntervalMs), tasks/get with the result
// inline (status "completed") once it is done, and tasks/cancel answered
// {}. Each tasks/get moves the task one step: it is working with the next
// status message of steps, then completed.
type taskServer struct {
	modern bool
	steps  []string
	fail   bool // the task's result has isError true
	input  bool // the first tasks/get says input_required
	// getHook, if set, may answer the n-th tasks/get itself (returning
	// true); setHook changes it.
	getHook func(w http.ResponseWriter, n int) bool

	http *httptest.Server
	log  wireLog
	stop chan struct{}

	mu        sync.Mutex
	session   string
	sessions  int
	created   bool
	token     string
	polls     int
	cancelled bool
}

const taskID = "job-1"

func newTaskServer(t *testing.T, f *taskServer) *taskServer {
	t.Helper()
	f.stop = make(chan struct{})
	f.http = httptest.NewServer(f.log.record(http.HandlerFunc(f.serve), nil))
	t.Cleanup(f.http.Close)
	t.Cleanup(func() { close(f.stop) })
	return f
}

func (f *taskServer) spec() transport.Spec {
	return transport.Spec{StreamID: "task", Endpoint: "job", Arguments: []byte(`{"x":1}`), RetryAttempts: 3,
		HTTP: transport.HTTP{ServerURL: f.http.URL + "/mcp", Client: f.http.Client()}}
}

// forgetSessions makes the server answer the current session with 404, as
// a restarted server would.
func (f *taskServer) forgetSessions() {
	f.mu.Lock()
	f.session = "gone"
	f.mu.Unlock()
}

func (f *taskServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		if f.modern {
			http.Error(w, "2026-07-28 has no GET stream or session", http.StatusMethodNotAllowed)
			return
		}
		f.serveOther(w, r)
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name   string          `json:"name"`
			TaskID string          `json:"taskId"`
			Task   json.RawMessage `json:"task"`
			Meta   struct {
				ProgressToken string `json:"progressToken"`
				Version       string `json:"io.modelcontextprotocol/protocolVersion"`
				Caps          struct {
					Extensions map[string]json.RawMessage `json:"extensions"`
				} `json:"io.modelcontextprotocol/clientCapabilities"`
			} `json:"_meta"`
		} `json:"params"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	if req.ID == nil {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	if f.modern {
		if r.Header.Get(headerMethod) != req.Method || r.Header.Get(headerProtocol) != version20260728 || req.Params.Meta.Version != version20260728 {
			rpcReply(w, req.ID, nil, -32020, "header mismatch or missing _meta protocol version")
			return
		}
	} else if req.Method != methodInitialize {
		f.mu.Lock()
		ok := r.Header.Get(headerSession) == f.session
		f.mu.Unlock()
		if !ok {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
	}
	switch req.Method {
	case methodDiscover:
		if !f.modern {
			rpcReply(w, req.ID, nil, -32601, "method not found")
			return
		}
		rpcReply(w, req.ID, map[string]any{"supportedVersions": []string{version20260728}, "capabilities": map[string]any{"tools": map[string]any{}}}, 0, "")
	case methodInitialize:
		if f.modern {
			rpcReply(w, req.ID, nil, -32022, "unsupported protocol version")
			return
		}
		f.mu.Lock()
		f.sessions++
		f.session = fmt.Sprintf("sess-%d", f.sessions)
		sid := f.session
		f.mu.Unlock()
		w.Header().Set(headerSession, sid)
		rpcReply(w, req.ID, map[string]any{"protocolVersion": version20251125, "serverInfo": map[string]string{"name": "tasks", "version": "1"},
			"capabilities": map[string]any{"tools": map[string]any{}, "tasks": json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)}}, 0, "")
	case methodToolsList:
		tool := map[string]any{"name": "job", "inputSchema": map[string]any{"type": "object"}}
		if !f.modern {
			tool["execution"] = map[string]any{"taskSupport": "required"}
		}
		rpcReply(w, req.ID, map[string]any{"tools": []any{tool}}, 0, "")
	case methodToolsCall:
		_, declared := req.Params.Meta.Caps.Extensions[extensionTasks]
		switch {
		case f.modern && !declared:
			rpcReply(w, req.ID, f.result(), 0, "") // no task for a client without the extension
			return
		case !f.modern && req.Params.Task == nil:
			rpcReply(w, req.ID, nil, -32601, "tool job requires task augmentation (taskSupport required)")
			return
		}
		f.mu.Lock()
		f.created, f.token = true, req.Params.Meta.ProgressToken
		f.mu.Unlock()
		task := f.task("working", "starting the job")
		if f.modern {
			task["resultType"] = "task"
			rpcReply(w, req.ID, task, 0, "")
			return
		}
		rpcReply(w, req.ID, map[string]any{"task": task, "_meta": map[string]any{
			"io.modelcontextprotocol/model-immediate-response": "Started job as task " + taskID}}, 0, "")
	case methodTasksGet:
		f.mu.Lock()
		f.polls++
		n, cancelled, hook := f.polls, f.cancelled, f.getHook
		f.mu.Unlock()
		if hook != nil && hook(w, n) {
			return
		}
		if req.Params.TaskID != taskID {
			rpcReply(w, req.ID, nil, -32602, fmt.Sprintf("no task %q", req.Params.TaskID))
			return
		}
		switch {
		case cancelled:
			rpcReply(w, req.ID, f.task("cancelled", "the task was cancelled by request"), 0, "")
		case f.input && n == 1:
			rpcReply(w, req.ID, f.task("input_required", "which region?"), 0, "")
		case n <= len(f.steps):
			rpcReply(w, req.ID, f.task("working", f.steps[n-1]), 0, "")
		case f.modern:
			done := f.task("completed", "the stream completed")
			done["result"] = f.result()
			rpcReply(w, req.ID, done, 0, "")
		default:
			rpcReply(w, req.ID, f.task("completed", "the stream completed"), 0, "")
		}
	case methodTasksResult:
		rpcReply(w, req.ID, f.result(), 0, "")
	case methodTasksCancel:
		f.mu.Lock()
		f.cancelled = true
		f.mu.Unlock()
		if f.modern {
			rpcReply(w, req.ID, map[string]any{}, 0, "")
			return
		}
		rpcReply(w, req.ID, f.task("cancelled", "the task was cancelled by request"), 0, "")
	default:
		rpcReply(w, req.ID, nil, -32601, "method not found")
	}
}

// serveOther answers GET (the 2025 standalone stream: one progress
// notification for the task's token once the task exists) and DELETE.
func (f *taskServer) serveOther(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	ok, created, tok := r.Header.Get(headerSession) == f.session, f.created, f.token
	f.mu.Unlock()
	switch {
	case !ok:
		http.Error(w, "session not found", http.StatusNotFound)
	case r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet:
		sseHeaders(w)
		if created { // with the headers, so it is there when the client's wait for them ends
			writeSSE(w, "", fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%q,"progress":1,"total":2,"message":"half way"}}`, tok))
		} else {
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-f.stop:
		}
	default:
		http.Error(w, "method", http.StatusMethodNotAllowed)
	}
}

// task is the task in the revision's shape (host/mcpserver's taskJSON).
func (f *taskServer) task(status, msg string) map[string]any {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	m := map[string]any{"taskId": taskID, "status": status, "statusMessage": msg, "createdAt": now, "lastUpdatedAt": now}
	if f.modern {
		m["ttlMs"], m["pollIntervalMs"] = 3600000, 100
	} else {
		m["ttl"], m["pollInterval"] = 3600000, 100
	}
	return m
}

// result is the task's CallToolResult, related to the task.
func (f *taskServer) result() map[string]any {
	text := "job done"
	if f.fail {
		text = "job failed: disk full"
	}
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": f.fail,
		"structuredContent": map[string]any{"rows": 3},
		"_meta":             map[string]any{"io.modelcontextprotocol/related-task": map[string]string{"taskId": taskID}}}
}

// rpcReply writes a JSON-RPC response: result, or an error when code is
// not 0.
func rpcReply(w http.ResponseWriter, id json.RawMessage, result any, code int, msg string) {
	resp := map[string]any{"jsonrpc": "2.0", "id": id}
	if code != 0 {
		resp["error"] = map[string]any{"code": code, "message": msg}
	} else {
		resp["result"] = result
	}
	b, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", contentJSON)
	_, _ = w.Write(b)
}

func (f *taskServer) wasCancelled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancelled
}

// setHook replaces getHook and restarts the step count at n.
func (f *taskServer) setHook(hook func(w http.ResponseWriter, n int) bool, n int) {
	f.mu.Lock()
	f.getHook, f.polls = hook, n
	f.mu.Unlock()
}
