package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
)

// MCP Tasks, in both shapes: the experimental Tasks of revision 2025-11-25
// (a tools/call with params.task, tasks/get, a blocking tasks/result,
// tasks/list, tasks/cancel) and the io.modelcontextprotocol/tasks extension
// of 2026-07-28 (a tools/call answered with resultType "task", tasks/get
// with the result inline, tasks/update, tasks/cancel). go-sdk v1.8.0 has no
// Tasks, so this file serves those methods itself, in front of go-sdk, with
// go-sdk's JSON-RPC shapes; docs/mcp-server.md says which parts are ours.
//
// A task of mcp.stream.start is its stream: the task id is the stream id,
// its status follows the stream's, tasks/cancel cancels the stream, and
// since the stream is durable, so is the task: its record (created before
// the CreateTaskResult is sent, updated with the final result) is kept in
// the host's store, and after serve restarts, tasks/get still answers and
// the result is still delivered. A task of rtfs.eval runs the program; its
// result is stored when it ends, but a restart while it runs ends it as
// failed.

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

// The task statuses.
const (
	taskWorking   = "working"
	taskCompleted = "completed"
	taskFailed    = "failed"
	taskCancelled = "cancelled"
)

// Task timing: the default and the longest time-to-live, and the suggested
// polling interval.
const (
	defaultTaskTTL = time.Hour
	maxTaskTTL     = 7 * 24 * time.Hour
	taskPoll       = time.Second
	taskPageSize   = 50
)

// The store record of a task.
const (
	kindTask    persistence.RecordKind = 32
	taskVersion                        = 1
	taskPrefix                         = "mcp/task/"
)

// taskRecord is what is stored of a task.
type taskRecord struct {
	ID       string          `json:"id"`
	Tool     string          `json:"tool"`
	StreamID string          `json:"stream,omitempty"`
	Created  time.Time       `json:"created"`
	Updated  time.Time       `json:"updated"`
	TTL      time.Duration   `json:"ttl"`
	Status   string          `json:"status"`
	Message  string          `json:"message,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"` // the CallToolResult, once terminal
}

func (r *taskRecord) terminal() bool {
	return r.Status == taskCompleted || r.Status == taskFailed || r.Status == taskCancelled
}

// taskEntry is a task this server knows: its record and, while it runs in
// this process, how to stop it.
type taskEntry struct {
	rec     taskRecord
	done    chan struct{}      // closed when rec becomes terminal
	running bool               // a goroutine of this process drives it
	cancel  context.CancelFunc // stops that goroutine's work
}

// tasks is the Server's task table. Its methods are safe for concurrent
// use; the goroutines it starts are counted in Server.calls.
type tasks struct {
	s     *Server
	store persistence.Store // nil: tasks live as long as the process

	mu     sync.Mutex
	loaded bool
	byID   map[string]*taskEntry
}

func newTasks(s *Server, store persistence.Store) *tasks {
	return &tasks{s: s, store: store, byID: make(map[string]*taskEntry)}
}

// load reads the stored tasks once. The provider has recovered its streams
// by the time the first request arrives (serve recovers before it listens),
// so a task whose stream runs again is followed from here.
func (t *tasks) load(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.loaded {
		return
	}
	t.loaded = true
	if t.store == nil {
		return
	}
	var expired [][]byte
	err := t.store.Scan(ctx, []byte(taskPrefix), func(k, v []byte) error {
		_, payload, err := persistence.DecodeRecord(k, v, kindTask, taskVersion)
		if err != nil {
			return err
		}
		var rec taskRecord
		if err := json.Unmarshal(payload, &rec); err != nil {
			return &persistence.CorruptRecordError{Key: append([]byte(nil), k...), Reason: err.Error()}
		}
		if rec.terminal() && time.Since(rec.Created) > rec.TTL {
			expired = append(expired, bytes.Clone(k)) // its ttl is over: forget it
			return nil
		}
		e := &taskEntry{rec: rec, done: make(chan struct{})}
		if rec.terminal() {
			close(e.done)
		}
		t.byID[rec.ID] = e
		return nil
	})
	if len(expired) > 0 {
		var b persistence.Batch
		for _, k := range expired {
			b.Delete(k)
		}
		if cerr := t.store.Commit(ctx, &b); cerr != nil {
			t.s.log.Error("mcp tasks: deleting expired tasks", "err", cerr)
		}
	}
	if err != nil {
		t.s.log.Error("mcp tasks: reading the stored tasks", "err", err)
	}
	for _, e := range t.byID {
		if !e.rec.terminal() {
			t.resumeLocked(e)
		}
	}
}

// resumeLocked drives a stored task that no goroutine of this process
// drives: a stream task whose stream was recovered is followed to its end;
// any other ends as failed.
func (t *tasks) resumeLocked(e *taskEntry) {
	if e.rec.StreamID != "" && t.clustered() && !t.runsHere(e.rec.StreamID) {
		return // another host drives it; refresh reads what it stores
	}
	if e.rec.StreamID != "" {
		if st, err := t.s.prov.Status(e.rec.StreamID); err == nil {
			if st.State.Terminal() {
				rec := e.rec
				t.finishLocked(e, streamTaskResult(streamResult{StreamID: st.StreamID, State: st.State, EndReason: st.EndReason,
					Message: st.Message, Result: shownJSON(st.Result, t.s.opts.Limits.OutputLimit(), "the stream's result"), Outputs: []json.RawMessage{}}, rec.ID), st.State)
				return
			}
			t.followLocked(e, nil)
			return
		}
		t.finishLocked(e, taskErrorResult("the task's stream %s was not found after the server restarted", e.rec.StreamID), provider.StateError)
		return
	}
	t.finishLocked(e, taskErrorResult("the server restarted while the program ran; an rtfs.eval task does not survive a restart"), provider.StateError)
}

// In a cluster (docs/cluster.md) the task records are shared by every host,
// and a stream task is driven by the host that runs its stream. The other
// hosts answer for it from its record, read again from the store at each
// look, and take it over when its stream comes to them.

// clustered reports whether the server's host shares its store with other
// hosts.
func (t *tasks) clustered() bool { return t.s.host.Cluster() != nil }

// runsHere reports whether this host runs stream id.
func (t *tasks) runsHere(id string) bool { return slices.Contains(t.s.prov.Live(), id) }

// refreshLocked reads task id's record from the store when this host does
// not drive it (another host of the cluster may have created or changed
// it), and drives it once its stream runs here. It returns the entry, nil
// when the store has no such task.
func (t *tasks) refreshLocked(ctx context.Context, id string) *taskEntry {
	e := t.byID[id]
	if e != nil && (e.running || e.rec.terminal()) {
		return e
	}
	data, err := t.store.Get(ctx, []byte(taskPrefix+id))
	if err != nil {
		return e
	}
	_, payload, err := persistence.DecodeRecord([]byte(taskPrefix+id), data, kindTask, taskVersion)
	var rec taskRecord
	if err != nil || json.Unmarshal(payload, &rec) != nil {
		return e
	}
	if e == nil {
		e = &taskEntry{done: make(chan struct{})}
		t.byID[id] = e
	}
	e.rec = rec
	if rec.terminal() {
		close(e.done)
		return e
	}
	t.resumeLocked(e)
	return e
}

// save stores rec; without a store it does nothing.
func (t *tasks) save(ctx context.Context, rec taskRecord) error {
	if t.store == nil {
		return nil
	}
	payload, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	var b persistence.Batch
	b.Put([]byte(taskPrefix+rec.ID), persistence.EncodeRecord(kindTask, taskVersion, payload))
	return t.store.Commit(ctx, &b)
}

// create makes a task for a call of tool with the raw arguments, stores it,
// and starts its work; the task exists (tasks/get answers) when it
// returns.
func (t *tasks) create(ctx context.Context, tool string, raw json.RawMessage, ttl time.Duration) (taskRecord, error) {
	t.load(ctx)
	spec, ok := t.s.toolSpec(tool)
	if !ok || (tool != ToolStart && tool != ToolEval) {
		return taskRecord{}, &rpcFailure{code: codeMethodNotFound, msg: fmt.Sprintf("tool %q does not run as a task (only %s and %s do)", tool, ToolStart, ToolEval)}
	}
	a, err := parseArgs(spec.name, spec.input, raw)
	if err != nil {
		return taskRecord{}, &rpcFailure{code: codeInvalidParams, msg: err.Error()}
	}
	if ttl <= 0 {
		ttl = defaultTaskTTL
	}
	ttl = min(ttl, maxTaskTTL)
	now := time.Now().UTC()
	rec := taskRecord{Tool: tool, Created: now, Updated: now, TTL: ttl, Status: taskWorking}
	if tool == ToolStart {
		rec.StreamID = a.str("stream-id")
		if rec.StreamID == "" {
			base := a.str("endpoint")
			if base == "" {
				base = a.str("transport")
			}
			rec.StreamID = t.s.prov.NewStreamID(base)
			a["stream-id"], _ = json.Marshal(rec.StreamID)
		}
		rec.ID = rec.StreamID
		rec.Message = "starting the stream"
	} else {
		rec.ID = t.s.prov.NewStreamID("eval")
		rec.Message = "running the program"
	}
	t.mu.Lock()
	if _, dup := t.byID[rec.ID]; dup {
		t.mu.Unlock()
		return taskRecord{}, &rpcFailure{code: codeInvalidParams, msg: fmt.Sprintf("a task %q exists already", rec.ID)}
	}
	e := &taskEntry{rec: rec, done: make(chan struct{})}
	t.byID[rec.ID] = e
	t.mu.Unlock()
	if err := t.save(ctx, rec); err != nil {
		t.mu.Lock()
		delete(t.byID, rec.ID)
		t.mu.Unlock()
		return taskRecord{}, fmt.Errorf("storing the task: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if tool == ToolStart {
		t.followLocked(e, a)
	} else {
		t.evalLocked(e, spec, a)
	}
	return e.rec, nil
}

// followLocked starts the goroutine that drives a stream task: it starts
// the stream (start != nil) or follows a recovered one, collects its
// outputs as the blocking tool would, and stores the result when the
// stream ends. On Close it leaves the stream and the task as they are: the
// stream is durable and resumed by the next serve.
func (t *tasks) followLocked(e *taskEntry, start args) {
	ctx, cancel := context.WithCancel(t.s.ctx)
	e.running, e.cancel = true, cancel
	t.s.calls.Add(1)
	go func() {
		defer t.s.calls.Done()
		defer cancel()
		c := t.s.newCall(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ToolStart}})
		defer c.release()
		id := e.rec.StreamID
		if err := c.watchStream(id); err != nil {
			t.finish(e, taskErrorResult("%s: %v", ToolStart, err), provider.StateError)
			return
		}
		if start != nil {
			req, err := c.startRequest(ctx, start)
			if err == nil {
				_, err = t.s.prov.Start(req)
			}
			if err != nil {
				t.finish(e, taskErrorResult("%s: %v", ToolStart, err), provider.StateError)
				return
			}
			if t.cancelled(e) { // tasks/cancel came while the stream started
				_, _ = t.s.prov.Cancel(id)
			}
			t.setMessage(e, "the stream is running")
		}
		ends, err := c.pump(ctx, nil, func(ends map[string]provider.Status) bool {
			_, ok := ends[id]
			return ok
		})
		if err != nil {
			return // Close: the stream stays stored, and so does the task
		}
		st := ends[id]
		if !st.State.Terminal() {
			// The stream moved to another host of the cluster: the task
			// goes on there (refresh drives it where the stream runs).
			t.mu.Lock()
			e.running = false
			t.mu.Unlock()
			return
		}
		t.finish(e, streamTaskResult(c.streamResult(st), e.rec.ID), st.State)
	}()
}

// evalLocked starts the goroutine that runs an rtfs.eval task.
func (t *tasks) evalLocked(e *taskEntry, spec toolSpec, a args) {
	ctx, cancel := context.WithCancel(t.s.ctx)
	e.running, e.cancel = true, cancel
	t.s.calls.Add(1)
	go func() {
		defer t.s.calls.Done()
		defer cancel()
		raw, _ := json.Marshal(a)
		res, err := t.s.toolHandler(spec)(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: spec.name, Arguments: raw}})
		if t.s.ctx.Err() != nil {
			return // Close
		}
		if err != nil {
			res = textResult(err.Error(), true)
		}
		state := provider.StateCompleted
		if res == nil || res.IsError {
			state = provider.StateError
		}
		t.finish(e, relatedTo(resultJSON(res), e.rec.ID), state)
	}()
}

// cancelled reports whether tasks/cancel cancelled e.
func (t *tasks) cancelled(e *taskEntry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.rec.Status == taskCancelled {
		return true
	}
	if t.store == nil || !t.clustered() {
		return false
	}
	// Another host may have cancelled it through the stored record.
	data, err := t.store.Get(t.s.ctx, []byte(taskPrefix+e.rec.ID))
	if err != nil {
		return false
	}
	var rec taskRecord
	_, payload, err := persistence.DecodeRecord([]byte(taskPrefix+e.rec.ID), data, kindTask, taskVersion)
	return err == nil && json.Unmarshal(payload, &rec) == nil && rec.Status == taskCancelled
}

// setMessage updates a running task's status message.
func (t *tasks) setMessage(e *taskEntry, msg string) {
	t.mu.Lock()
	if !e.rec.terminal() {
		e.rec.Message, e.rec.Updated = msg, time.Now().UTC()
	}
	rec := e.rec
	t.mu.Unlock()
	if err := t.save(context.Background(), rec); err != nil {
		t.s.log.Error("mcp tasks: storing a task", "task", rec.ID, "err", err)
	}
}

// finish makes e terminal with the CallToolResult result, its status from
// the stream state; a cancelled task stays cancelled.
func (t *tasks) finish(e *taskEntry, result json.RawMessage, state provider.State) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finishLocked(e, result, state)
}

func (t *tasks) finishLocked(e *taskEntry, result json.RawMessage, state provider.State) {
	if e.rec.terminal() {
		if e.rec.Result == nil { // cancelled by tasks/cancel: keep the status, add the result
			e.rec.Result = result
			_ = t.save(context.Background(), e.rec)
		}
		return
	}
	switch state {
	case provider.StateCompleted:
		e.rec.Status, e.rec.Message = taskCompleted, "the stream completed"
		if e.rec.Tool == ToolEval {
			e.rec.Message = "the program finished"
		}
	case provider.StateCancelled:
		e.rec.Status, e.rec.Message = taskCancelled, "the stream was cancelled"
	default:
		e.rec.Status, e.rec.Message = taskFailed, "the work failed: tasks/result has the error"
	}
	e.rec.Result, e.rec.Updated, e.running = result, time.Now().UTC(), false
	close(e.done)
	if err := t.save(context.Background(), e.rec); err != nil {
		t.s.log.Error("mcp tasks: storing a task's result", "task", e.rec.ID, "err", err)
	}
}

// lookup returns the task id, or an invalid-params failure for an unknown
// or expired one.
func (t *tasks) lookup(ctx context.Context, id string) (*taskEntry, error) {
	t.load(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.store != nil && t.clustered() {
		t.refreshLocked(ctx, id)
	}
	e, ok := t.byID[id]
	if ok && time.Since(e.rec.Created) > e.rec.TTL && e.rec.terminal() {
		delete(t.byID, id)
		if t.store != nil {
			var b persistence.Batch
			b.Delete([]byte(taskPrefix + id))
			_ = t.store.Commit(ctx, &b)
		}
		ok = false
	}
	if !ok {
		return nil, &rpcFailure{code: codeInvalidParams, msg: fmt.Sprintf("no task %q (unknown, or expired after its ttl)", id)}
	}
	return e, nil
}

// cancelTask cancels a task that has not ended: its stream is cancelled
// (or its program stopped) and it is cancelled before this returns.
func (t *tasks) cancelTask(ctx context.Context, id string) (taskRecord, error) {
	e, err := t.lookup(ctx, id)
	if err != nil {
		return taskRecord{}, err
	}
	t.mu.Lock()
	if e.rec.terminal() {
		t.mu.Unlock()
		return taskRecord{}, &rpcFailure{code: codeInvalidParams, msg: fmt.Sprintf("task %q has ended (%s) and cannot be cancelled", id, e.rec.Status)}
	}
	e.rec.Status, e.rec.Message, e.rec.Updated = taskCancelled, "the task was cancelled by request", time.Now().UTC()
	close(e.done)
	rec, cancel := e.rec, e.cancel
	t.mu.Unlock()
	if err := t.save(ctx, rec); err != nil {
		return taskRecord{}, fmt.Errorf("storing the cancelled task: %w", err)
	}
	switch {
	case rec.StreamID != "" && t.clustered() && t.store != nil:
		t.cancelStream(rec.StreamID)
	case rec.StreamID != "":
		_, _ = t.s.prov.Cancel(rec.StreamID)
	case cancel != nil:
		cancel()
	}
	return rec, nil
}

// cancelStream cancels a task's stream in a cluster, where it may run on
// another host and may not have started yet (the host that drives the
// task starts it, then looks at the stored record again): it is asked
// until it is cancelled or ended, for at most cancelPatience, on a
// goroutine of the server.
func (t *tasks) cancelStream(id string) {
	if _, err := t.s.prov.Cancel(id); err == nil {
		return
	}
	t.s.calls.Add(1)
	go func() {
		defer t.s.calls.Done()
		deadline := time.Now().Add(cancelPatience)
		for time.Now().Before(deadline) {
			select {
			case <-t.s.ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := t.s.prov.Cancel(id); err == nil {
				return
			}
		}
		t.s.log.Warn("mcp tasks: a cancelled task's stream was not found to cancel", "stream", id)
	}()
}

// cancelPatience bounds how long a cancelled task's stream is looked for.
const cancelPatience = 10 * time.Second

// wait blocks until the task ends or ctx does. In a cluster, a task that
// another host drives is read again from the store every clusterPoll.
func (t *tasks) wait(ctx context.Context, e *taskEntry) (taskRecord, error) {
	for done := false; !done; {
		var tick <-chan time.Time
		if t.store != nil && t.clustered() {
			tick = time.After(clusterPoll)
		}
		select {
		case <-e.done:
			done = true
		case <-tick:
			t.mu.Lock()
			t.refreshLocked(ctx, e.rec.ID)
			t.mu.Unlock()
		case <-ctx.Done():
			return taskRecord{}, ctx.Err()
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return e.rec, nil
}

// clusterPoll is how often a task another host drives is read again while
// tasks/result waits for it.
const clusterPoll = 500 * time.Millisecond

// snapshot returns e's record, its message refreshed from its stream.
func (t *tasks) snapshot(e *taskEntry) taskRecord {
	t.mu.Lock()
	rec := e.rec
	t.mu.Unlock()
	if !rec.terminal() && rec.StreamID != "" {
		if st, err := t.s.prov.Status(rec.StreamID); err == nil && st.State == provider.StatePaused {
			rec.Message = "the stream is paused"
		}
	}
	return rec
}

// list returns the tasks after cursor, oldest first, and the next cursor.
func (t *tasks) list(ctx context.Context, cursor string) ([]taskRecord, string, error) {
	t.load(ctx)
	start := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 {
			return nil, "", &rpcFailure{code: codeInvalidParams, msg: fmt.Sprintf("bad cursor %q", cursor)}
		}
		start = n
	}
	var ids []string
	if t.store != nil && t.clustered() {
		// Tasks other hosts made since this one loaded its table.
		err := t.store.Scan(ctx, []byte(taskPrefix), func(k, _ []byte) error {
			ids = append(ids, strings.TrimPrefix(string(k), taskPrefix))
			return nil
		})
		if err != nil {
			return nil, "", fmt.Errorf("reading the stored tasks: %w", err)
		}
	}
	t.mu.Lock()
	for _, id := range ids {
		t.refreshLocked(ctx, id)
	}
	recs := make([]taskRecord, 0, len(t.byID))
	for _, e := range t.byID {
		recs = append(recs, e.rec)
	}
	t.mu.Unlock()
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].Created.Equal(recs[j].Created) {
			return recs[i].Created.Before(recs[j].Created)
		}
		return recs[i].ID < recs[j].ID
	})
	if start >= len(recs) {
		return nil, "", nil
	}
	end := min(start+taskPageSize, len(recs))
	next := ""
	if end < len(recs) {
		next = strconv.Itoa(end)
	}
	return recs[start:end], next, nil
}

// streamTaskResult is the CallToolResult of a stream task: what the
// blocking mcp.stream.start would have returned.
func streamTaskResult(res streamResult, taskID string) json.RawMessage {
	return relatedTo(resultJSON(jsonResult(res, res.State != provider.StateCompleted)), taskID)
}

// taskErrorResult is an isError CallToolResult with the message.
func taskErrorResult(format string, args ...any) json.RawMessage {
	return resultJSON(textResult(fmt.Sprintf(format, args...), true))
}

// resultJSON encodes a CallToolResult, with isError explicit.
func resultJSON(res *mcp.CallToolResult) json.RawMessage {
	if res == nil {
		res = textResult("the tool returned no result", true)
	}
	b, err := json.Marshal(res)
	if err != nil {
		b = []byte(`{"content":[{"type":"text","text":"the result could not be encoded"}],"isError":true}`)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) == nil {
		if _, ok := m["isError"]; !ok {
			m["isError"] = json.RawMessage(strconv.FormatBool(res.IsError))
			b, _ = json.Marshal(m)
		}
	}
	return b
}

// relatedTo adds the related-task _meta to a result.
func relatedTo(result json.RawMessage, taskID string) json.RawMessage {
	var m map[string]any
	if json.Unmarshal(result, &m) != nil {
		return result
	}
	meta, _ := m["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[metaRelatedTask] = map[string]string{"taskId": taskID}
	m["_meta"] = meta
	b, err := json.Marshal(m)
	if err != nil {
		return result
	}
	return b
}

// JSON-RPC error codes the task methods answer with.
const (
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
)

// rpcFailure is a JSON-RPC error to answer a request with.
type rpcFailure struct {
	code int
	msg  string
}

func (f *rpcFailure) Error() string { return f.msg }

// taskRequest is the part of a JSON-RPC request the task layer reads.
type taskRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		TaskID    string          `json:"taskId"`
		Cursor    string          `json:"cursor"`
		Task      *struct {
			TTL *int64 `json:"ttl"`
		} `json:"task"`
		Meta map[string]json.RawMessage `json:"_meta"`
	} `json:"params"`
}

// modern reports whether the request is of the 2026-07-28 revision.
func (r *taskRequest) modern(header http.Header) bool {
	if v := header.Get(headerProtocolVersion); v != "" {
		return v >= sessionlessVersion
	}
	var v string
	_ = json.Unmarshal(r.Params.Meta[mcp.MetaKeyProtocolVersion], &v)
	return v >= sessionlessVersion
}

// wantsTasks reports whether a 2026-07-28 request's client declared the
// tasks extension.
func (r *taskRequest) wantsTasks() bool {
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(r.Params.Meta[metaClientCaps], &caps) != nil {
		return false
	}
	_, ok := caps.Extensions[extensionTasks]
	return ok
}

// serveTasks answers the task methods, and tools/call requests that ask for
// a task (2025-11-25: params.task; 2026-07-28: a client that declared the
// extension calling mcp.stream.start or rtfs.eval), before go-sdk sees
// them. Every other request goes to next, its body restored.
func (s *Server) serveTasks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !isJSON(r.Header.Get("Content-Type")) {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := requestBody(w, r)
		if !ok {
			return
		}
		var req taskRequest
		if json.Unmarshal(body, &req) != nil || req.ID == nil {
			next.ServeHTTP(w, r)
			return
		}
		modern := req.modern(r.Header)
		switch {
		case req.Method == "tools/call" && req.Params.Task != nil && !modern,
			req.Method == "tools/call" && modern && req.wantsTasks() && (req.Params.Name == ToolStart || req.Params.Name == ToolEval):
		case strings.HasPrefix(req.Method, "tasks/"):
		default:
			next.ServeHTTP(w, r)
			return
		}
		result, err := s.taskCall(r.Context(), &req, modern)
		writeRPC(w, req.ID, result, err)
	})
}

// taskCall serves one task request and returns its result.
func (s *Server) taskCall(ctx context.Context, req *taskRequest, modern bool) (any, error) {
	switch req.Method {
	case "tools/call":
		var ttl time.Duration
		if req.Params.Task != nil && req.Params.Task.TTL != nil {
			ttl = time.Duration(*req.Params.Task.TTL) * time.Millisecond
		}
		rec, err := s.tasks.create(ctx, req.Params.Name, req.Params.Arguments, ttl)
		if err != nil {
			return nil, err
		}
		if modern {
			m := taskJSON(rec, true)
			m["resultType"] = "task"
			return m, nil
		}
		return map[string]any{"task": taskJSON(rec, false), "_meta": map[string]any{
			"io.modelcontextprotocol/model-immediate-response": fmt.Sprintf("Started %s as task %s; poll it with tasks/get.", rec.Tool, rec.ID)}}, nil
	case methodTasksGet:
		e, err := s.tasks.lookup(ctx, req.Params.TaskID)
		if err != nil {
			return nil, err
		}
		rec := s.tasks.snapshot(e)
		m := taskJSON(rec, modern)
		if modern && rec.terminal() && rec.Result != nil && rec.Status != taskCancelled {
			m["result"] = rec.Result // a tool's failure is an isError result of a completed task
			m["status"] = taskCompleted
		}
		return m, nil
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
		if modern {
			return nil, &rpcFailure{code: codeMethodNotFound, msg: "tasks/list is not part of the 2026-07-28 tasks extension"}
		}
		recs, next, err := s.tasks.list(ctx, req.Params.Cursor)
		if err != nil {
			return nil, err
		}
		out := map[string]any{"tasks": []any{}}
		list := make([]any, 0, len(recs))
		for _, r := range recs {
			list = append(list, taskJSON(r, false))
		}
		out["tasks"] = list
		if next != "" {
			out["nextCursor"] = next
		}
		return out, nil
	case methodTasksCancel:
		rec, err := s.tasks.cancelTask(ctx, req.Params.TaskID)
		if err != nil {
			return nil, err
		}
		if modern {
			return map[string]any{}, nil
		}
		return taskJSON(rec, false), nil
	case methodTasksUpdate:
		if _, err := s.tasks.lookup(ctx, req.Params.TaskID); err != nil {
			return nil, err
		}
		return map[string]any{}, nil // rtfshost's tasks never ask for input
	}
	return nil, &rpcFailure{code: codeMethodNotFound, msg: fmt.Sprintf("method %q not found", req.Method)}
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
	resp := map[string]any{"jsonrpc": "2.0", "id": id}
	if err != nil {
		code := codeInternal
		var f *rpcFailure
		if errors.As(err, &f) {
			code = f.code
		}
		resp["error"] = map[string]any{"code": code, "message": err.Error()}
	} else {
		resp["result"] = result
	}
	b, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// toolSpec returns the spec of the tool named name.
func (s *Server) toolSpec(name string) (toolSpec, bool) {
	for _, t := range s.toolSpecs() {
		if t.name == name {
			return t, true
		}
	}
	return toolSpec{}, false
}

// legacyTaskCaps is the tasks capability of revision 2025-11-25.
var legacyTaskCaps = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// announceTasks adds what go-sdk cannot say to the answers of the stateful
// era: the tasks capability in the initialize result, and
// execution.taskSupport "optional" on mcp.stream.start and rtfs.eval in
// tools/list. Other requests pass unchanged; these two, small, are
// buffered whole.
func announceTasks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !isJSON(r.Header.Get("Content-Type")) {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := requestBody(w, r)
		if !ok {
			return
		}
		var m rpcMessage
		if json.Unmarshal(body, &m) != nil || (m.Method != "initialize" && m.Method != "tools/list") {
			next.ServeHTTP(w, r)
			return
		}
		rec := &recorder{header: http.Header{}}
		next.ServeHTTP(rec, r)
		patched := patchResults(rec.body.Bytes(), func(res map[string]json.RawMessage) {
			if m.Method == "initialize" {
				var caps map[string]json.RawMessage
				if json.Unmarshal(res["capabilities"], &caps) == nil {
					if caps == nil {
						caps = map[string]json.RawMessage{}
					}
					caps["tasks"] = legacyTaskCaps
					res["capabilities"], _ = json.Marshal(caps)
				}
				return
			}
			var tools []map[string]json.RawMessage
			if json.Unmarshal(res["tools"], &tools) != nil {
				return
			}
			for _, tool := range tools {
				var name string
				_ = json.Unmarshal(tool["name"], &name)
				if name == ToolStart || name == ToolEval {
					tool["execution"] = json.RawMessage(`{"taskSupport":"optional"}`)
				}
			}
			res["tools"], _ = json.Marshal(tools)
		})
		rec.body.Reset()
		rec.body.Write(patched)
		rec.header.Del("Content-Length")
		rec.replay(w)
	})
}

// patchResults applies patch to the result of every JSON-RPC response in a
// recorded body: an application/json body, or the data lines of an SSE one.
func patchResults(body []byte, patch func(map[string]json.RawMessage)) []byte {
	apply := func(msg []byte) []byte {
		var resp map[string]json.RawMessage
		if json.Unmarshal(msg, &resp) != nil || resp["result"] == nil {
			return msg
		}
		var res map[string]json.RawMessage
		if json.Unmarshal(resp["result"], &res) != nil {
			return msg
		}
		patch(res)
		resp["result"], _ = json.Marshal(res)
		out, err := json.Marshal(resp)
		if err != nil {
			return msg
		}
		return out
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return apply(trimmed)
	}
	lines := bytes.Split(body, []byte("\n"))
	for i, l := range lines {
		if data, ok := bytes.CutPrefix(l, []byte("data: ")); ok && len(data) > 0 && data[0] == '{' {
			lines[i] = append([]byte("data: "), apply(data)...)
		}
	}
	return bytes.Join(lines, []byte("\n"))
}
