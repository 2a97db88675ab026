package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/provider"
)

// MCP Tasks on the wire, in both shapes: the experimental Tasks of revision
// 2025-11-25 (a tools/call with params.task, tasks/get, a blocking
// tasks/result, tasks/list, tasks/cancel) and the
// io.modelcontextprotocol/tasks extension of 2026-07-28 (a tools/call
// answered with resultType "task", tasks/get with the result inline,
// tasks/update, tasks/cancel). go-sdk v1.8.0 has no Tasks, so the layers
// here serve those methods in front of go-sdk, with go-sdk's JSON-RPC
// shapes, and add the tasks capability to what go-sdk answers;
// docs/mcp-server.md says which parts are ours. The tasks themselves are in
// taskstore.go.

// The task methods and _meta keys.
const (
	methodTasksGet    = "tasks/get"
	methodTasksResult = "tasks/result"
	methodTasksList   = "tasks/list"
	methodTasksCancel = "tasks/cancel"
	methodTasksUpdate = "tasks/update"
	extensionTasks    = "io.modelcontextprotocol/tasks"
	metaRelatedTask   = "io.modelcontextprotocol/related-task"
	metaClientCaps    = "io.modelcontextprotocol/clientCapabilities"
)

// serveTasks answers the task methods, and tools/call requests that ask for
// a task (2025-11-25: params.task; 2026-07-28: a client that declared the
// extension calling a tool that runs as a task), before go-sdk sees them.
// Every other request goes to next.
func (s *Server) serveTasks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env := envelopeOf(r)
		m, ok := env.single()
		if !ok || !m.full || m.ID == nil {
			next.ServeHTTP(w, r)
			return
		}
		modern := env.era == eraSessionless
		if !s.isTaskRequest(m, modern) {
			next.ServeHTTP(w, r)
			return
		}
		result, err := s.taskCall(r.Context(), m, modern, s.session(env.session))
		writeRPC(w, m.ID, result, err)
	})
}

// isTaskRequest reports whether the request m is the tasks layer's to
// answer (over HTTP or stdio): a task method, or a tools/call that asks
// for a task (2025-11-25: params.task; 2026-07-28, modern: a client that
// declared the extension calling a tool that runs as a task).
func (s *Server) isTaskRequest(m *message, modern bool) bool {
	switch {
	case !m.full || m.ID == nil:
		return false
	case m.Method == "tools/call" && m.Params.Task != nil && !modern,
		m.Method == "tools/call" && modern && m.declares(extensionTasks) && s.runsAsTask(m.Params.Name):
		return true
	}
	return strings.HasPrefix(m.Method, "tasks/")
}

// taskCall serves one task request of session (nil for none: the
// notifications of a task's work go nowhere) and returns its result.
func (s *Server) taskCall(ctx context.Context, req *message, modern bool, session *mcp.ServerSession) (any, error) {
	if modern {
		return s.modernTaskCall(ctx, req)
	}
	switch req.Method {
	case "tools/call":
		rec, err := s.createTask(ctx, req, session)
		if err != nil {
			return nil, err
		}
		return map[string]any{"task": taskJSON(rec, false), "_meta": map[string]any{
			"io.modelcontextprotocol/model-immediate-response": fmt.Sprintf("Started %s as task %s; poll it with tasks/get.", rec.Tool, rec.ID)}}, nil
	case methodTasksGet:
		e, err := s.tasks.lookup(ctx, req.Params.TaskID)
		if err != nil {
			return nil, err
		}
		return taskJSON(s.tasks.snapshot(ctx, e), false), nil
	case methodTasksResult:
		e, err := s.tasks.lookup(ctx, req.Params.TaskID)
		if err != nil {
			return nil, err
		}
		rec, err := s.tasks.wait(ctx, e)
		if err != nil {
			return nil, err
		}
		if rec.Result == nil {
			return json.RawMessage(taskErrorResult("task %s was cancelled before it produced a result", rec.ID)), nil
		}
		return rec.Result, nil
	case methodTasksList:
		recs, next, err := s.tasks.list(ctx, req.Params.Cursor)
		if err != nil {
			return nil, err
		}
		list := make([]any, 0, len(recs))
		for _, r := range recs {
			list = append(list, taskJSON(r, false))
		}
		out := map[string]any{"tasks": list}
		if next != "" {
			out["nextCursor"] = next
		}
		return out, nil
	case methodTasksCancel:
		rec, err := s.tasks.cancelTask(ctx, req.Params.TaskID)
		if err != nil {
			return nil, err
		}
		return taskJSON(rec, false), nil
	}
	return nil, &rpcFailure{code: codeMethodNotFound, msg: fmt.Sprintf("method %q not found (the tasks of revision 2025-11-25 are tasks/get, tasks/result, tasks/list and tasks/cancel)", req.Method)}
}

// modernTaskCall serves a request of the 2026-07-28 tasks extension. Every
// result says resultType ("task" for the task a tools/call created,
// "complete" for the rest) and names the server in _meta, as go-sdk's
// answers do; a request that does not declare the extension is refused
// with -32021, and the methods of 2025-11-25 that the extension dropped
// (tasks/result, tasks/list) are not found.
func (s *Server) modernTaskCall(ctx context.Context, req *message) (any, error) {
	switch req.Method {
	case methodTasksGet, methodTasksUpdate, methodTasksCancel:
		if !req.declares(extensionTasks) {
			return nil, &rpcFailure{code: codeMissingCapability,
				msg:  fmt.Sprintf("%s needs the %s extension: declare it in the request's _meta[%q].extensions", req.Method, extensionTasks, metaClientCaps),
				data: map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extensionTasks: map[string]any{}}}}}
		}
	}
	var out map[string]any
	switch req.Method {
	case "tools/call":
		rec, err := s.createTask(ctx, req, nil) // the extension forbids notifications of tasks
		if err != nil {
			return nil, err
		}
		out = taskJSON(rec, true)
		out["resultType"] = "task"
		return s.modernResult(out), nil
	case methodTasksGet:
		e, err := s.tasks.lookup(ctx, req.Params.TaskID)
		if err != nil {
			return nil, err
		}
		rec := s.tasks.snapshot(ctx, e)
		out = taskJSON(rec, true)
		if rec.terminal() && rec.Result != nil && rec.Status != taskCancelled {
			// A tool's failure is an isError result of a completed task:
			// the extension keeps failed for JSON-RPC errors.
			out["result"] = inlineResult(rec.Result)
			out["status"] = taskCompleted
		}
	case methodTasksCancel:
		// An acknowledgement, the same for a task that has ended (which
		// keeps its status): the extension makes cancelling idempotent.
		e, err := s.tasks.lookup(ctx, req.Params.TaskID)
		if err != nil {
			return nil, err
		}
		if rec := s.tasks.snapshot(ctx, e); !rec.terminal() {
			if _, err := s.tasks.cancelTask(ctx, req.Params.TaskID); err != nil {
				if rec = s.tasks.snapshot(ctx, e); !rec.terminal() { // not that it ended meanwhile
					return nil, err
				}
			}
		}
		out = map[string]any{}
	case methodTasksUpdate:
		if _, err := s.tasks.lookup(ctx, req.Params.TaskID); err != nil {
			return nil, err
		}
		out = map[string]any{} // rtfshost's tasks never ask for input
	default:
		return nil, &rpcFailure{code: codeMethodNotFound, msg: fmt.Sprintf("method %q not found: the %s extension of revision %s has tasks/get, tasks/update and tasks/cancel", req.Method, extensionTasks, sessionlessVersion)}
	}
	out["resultType"] = "complete"
	return s.modernResult(out), nil
}

// modernResult puts the server's name in the _meta of a 2026-07-28
// result, as go-sdk does on its own answers.
func (s *Server) modernResult(out map[string]any) map[string]any {
	out["_meta"] = map[string]any{mcp.MetaKeyServerInfo: map[string]string{"name": s.opts.Name, "version": s.opts.Version}}
	return out
}

// inlineResult is a task's stored CallToolResult as tasks/get of
// 2026-07-28 inlines it: a result of that revision (resultType
// "complete"), without the related-task _meta, which the extension leaves
// out (the task id is beside it).
func inlineResult(stored json.RawMessage) json.RawMessage {
	res, ok := decodeObject(stored)
	if !ok {
		return stored
	}
	if meta := res.object("_meta"); meta != nil {
		delete(meta, metaRelatedTask)
		if len(meta) == 0 {
			delete(res, "_meta")
		} else {
			res.set("_meta", meta)
		}
	}
	res.set("resultType", "complete")
	b, err := json.Marshal(res)
	if err != nil {
		return stored
	}
	return b
}

// createTask creates the task a tools/call asks for; the notifications of
// its work go to session (nil: nowhere).
func (s *Server) createTask(ctx context.Context, req *message, session *mcp.ServerSession) (taskRecord, error) {
	var ttl time.Duration
	if req.Params.Task != nil && req.Params.Task.TTL != nil {
		ttl = time.Duration(*req.Params.Task.TTL) * time.Millisecond
	}
	var token any
	if session != nil {
		token = req.progressTokenValue()
	}
	return s.tasks.create(ctx, req.Params.Name, req.Params.Arguments, ttl, session, token)
}

// session returns the live session of go-sdk's with id, nil when there is
// none (no id, or a session of before a restart).
func (s *Server) session(id string) *mcp.ServerSession {
	if id == "" {
		return nil
	}
	for ss := range s.mcp.Sessions() {
		if ss.ID() == id {
			return ss
		}
	}
	return nil
}

// taskJSON is a task as the revision writes it: ttl and pollInterval
// (2025-11-25) or ttlMs and pollIntervalMs (2026-07-28).
func taskJSON(rec taskRecord, modern bool) map[string]any {
	m := map[string]any{
		"taskId":        rec.ID,
		"status":        rec.Status,
		"createdAt":     rec.Created.Format(time.RFC3339Nano),
		"lastUpdatedAt": rec.Updated.Format(time.RFC3339Nano),
	}
	if rec.Message != "" {
		m["statusMessage"] = rec.Message
	}
	if modern {
		m["ttlMs"], m["pollIntervalMs"] = rec.TTL.Milliseconds(), taskPoll.Milliseconds()
	} else {
		m["ttl"], m["pollInterval"] = rec.TTL.Milliseconds(), taskPoll.Milliseconds()
	}
	return m
}

// writeRPC writes a JSON-RPC response: result, or err as an error (an
// *rpcFailure keeps its code; anything else is an internal error).
func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(rpcAnswer(id, result, err))
}

// rpcAnswer is the JSON-RPC response of writeRPC.
func rpcAnswer(id json.RawMessage, result any, err error) []byte {
	resp := map[string]any{"jsonrpc": "2.0", "id": id}
	if err != nil {
		code := codeInternal
		var f *rpcFailure
		if errors.As(err, &f) {
			code = f.code
		} else {
			f = nil
		}
		e := map[string]any{"code": code, "message": err.Error()}
		if f != nil && f.data != nil {
			e["data"] = f.data
		}
		resp["error"] = e
	} else {
		resp["result"] = result
	}
	b, _ := json.Marshal(resp)
	return b
}

// JSON-RPC error codes the task methods answer with.
const (
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	// codeMissingCapability: the request lacks a client capability the
	// method needs (2026-07-28).
	codeMissingCapability = -32021
)

// rpcFailure is a JSON-RPC error to answer a request with.
type rpcFailure struct {
	code int
	msg  string
	data any // the error's data; nil: none
}

func (f *rpcFailure) Error() string { return f.msg }

// legacyTaskCaps is the tasks capability of revision 2025-11-25.
var legacyTaskCaps = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// announceTasks adds what go-sdk cannot say to the answers of the stateful
// era: the tasks capability in the initialize result, and
// execution.taskSupport "optional" on the tools that run as tasks in
// tools/list. Other requests pass unchanged; these two, small, are
// buffered whole.
func (s *Server) announceTasks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, ok := envelopeOf(r).single()
		if !ok || (m.Method != "initialize" && m.Method != "tools/list") {
			next.ServeHTTP(w, r)
			return
		}
		method := m.Method
		rec := &recorder{header: http.Header{}}
		next.ServeHTTP(rec, r)
		patched := rewriteResults(rec.body.Bytes(), func(res jsonObject) { s.announce(method, res) })
		rec.body.Reset()
		rec.body.Write(patched)
		rec.header.Del("Content-Length")
		rec.replay(w)
	})
}

// announce adds to go-sdk's result of method (initialize or tools/list,
// of the sessions era) what it cannot say of tasks: the tasks capability,
// and execution.taskSupport on the tools that run as tasks.
func (s *Server) announce(method string, res jsonObject) {
	if method == "initialize" {
		if caps := res.object("capabilities"); caps != nil {
			caps["tasks"] = legacyTaskCaps
			res.set("capabilities", caps)
		}
		return
	}
	tools := res.objects("tools")
	if tools == nil {
		return
	}
	for _, tool := range tools {
		if s.runsAsTask(tool.str("name")) {
			tool["execution"] = json.RawMessage(`{"taskSupport":"optional"}`)
		}
	}
	res.set("tools", tools)
}

// streamTaskResult is the CallToolResult of a stream task: what the
// blocking mcp.stream.start would have returned.
func streamTaskResult(res streamResult, taskID string) json.RawMessage {
	return taskResult(jsonResult(res, res.State != provider.StateCompleted), taskID)
}

// taskResult is the CallToolResult of task taskID: res with the
// related-task _meta.
func taskResult(res *mcp.CallToolResult, taskID string) json.RawMessage {
	if res != nil {
		if res.Meta == nil {
			res.Meta = mcp.Meta{}
		}
		res.Meta[metaRelatedTask] = map[string]string{"taskId": taskID}
	}
	return resultJSON(res)
}

// taskErrorResult is an isError CallToolResult with the message.
func taskErrorResult(format string, args ...any) json.RawMessage {
	return resultJSON(textResult(fmt.Sprintf(format, args...), true))
}

// resultJSON encodes a CallToolResult, with isError explicit (see
// explicitSuccess).
func resultJSON(res *mcp.CallToolResult) json.RawMessage {
	if res == nil {
		res = textResult("the tool returned no result", true)
	}
	var v json.Marshaler = res
	if !res.IsError {
		v = succeeded{res}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{"content":[{"type":"text","text":"the result could not be encoded"}],"isError":true}`)
	}
	return b
}

// Task status notifications (notifications/tasks/status, 2025-11-25): the
// full task, sent to the session that created it when its status changes
// (taskPeer.notifyStatus). go-sdk sends only the notifications it knows, so
// the status goes out as a notifications/progress that carries the task
// under _meta[metaTaskStatus] (statusCarrier), and it is turned into the
// status notification wherever the session's messages leave the server:
// the event store keeps the turned one (durableEvents.Append), the
// task-status layer turns it on the response streams of /mcp (the
// standalone stream it goes on, as the task's progress does), and
// stdioLayers.Write on stdout. No client ever sees the carrier.
const (
	notificationTaskStatus = "notifications/tasks/status"
	metaTaskStatus         = "rtfshost/task-status"
)

// statusCarrier is the notifications/progress that carries the status
// notification of the task rec.
func statusCarrier(rec taskRecord) *mcp.ProgressNotificationParams {
	return &mcp.ProgressNotificationParams{ProgressToken: metaTaskStatus, Meta: mcp.Meta{metaTaskStatus: taskJSON(rec, false)}}
}

// taskStatusMessage returns the JSON-RPC message data as the client gets
// it: the status notification when data is a status carrier, else data
// itself (ok false). Cost: a search for metaTaskStatus in data, and a
// decoding only when it is there.
func taskStatusMessage(data []byte) (out []byte, ok bool) {
	if !bytes.Contains(data, []byte(metaTaskStatus)) {
		return data, false
	}
	m := decodeMessage(data)
	task, found := m.Params.Meta[metaTaskStatus]
	if m.invalid || m.Method != "notifications/progress" || !found {
		return data, false
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": notificationTaskStatus, "params": task})
	if err != nil {
		return data, false
	}
	return b, true
}

// taskStatusWire is the task-status layer: what go-sdk writes on a
// response stream of the sessions era reaches the client with each status
// carrier turned into its status notification (taskStatusMessage).
func taskStatusWire(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&statusWriter{ResponseWriter: w}, r)
	})
}

// statusWriter turns the status carriers among the SSE events written to
// it. go-sdk writes whole events (and the layers between it and here whole
// runs of them), one "data:" line each.
type statusWriter struct{ http.ResponseWriter }

var dataLine = []byte("data: ")

// Write writes b with the data line of each status carrier turned; it
// reports len(b) written when all of it was.
func (w *statusWriter) Write(b []byte) (int, error) {
	if !bytes.Contains(b, []byte(metaTaskStatus)) {
		return w.ResponseWriter.Write(b)
	}
	out := make([]byte, 0, len(b)+64)
	for line := range bytes.Lines(b) {
		if data, found := bytes.CutPrefix(line, dataLine); found {
			body := bytes.TrimRight(data, "\r\n")
			if turned, ok := taskStatusMessage(body); ok {
				line = append(append(append([]byte(nil), dataLine...), turned...), data[len(body):]...)
			}
		}
		out = append(out, line...)
	}
	if _, err := w.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Flush flushes the underlying writer.
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap gives http.ResponseController the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
