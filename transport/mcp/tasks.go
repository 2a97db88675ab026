package mcp

import (
	"context"
	"encoding/json"

	"fmt"
	"hash/fnv"
	"net/http"
	"time"
)

// Task polling: a tools/call answered with a task (a 2025-11-25
// CreateTaskResult, a 2026-07-28 result with resultType "task") is followed
// with tasks/get until it ends. The shapes are those of the MCP revisions
// and of rtfshost's own server (host/mcpserver/taskwire.go): 2025-11-25 tasks
// carry pollInterval (ms) and their result comes from tasks/result;
// 2026-07-28 tasks carry pollIntervalMs and tasks/get returns the result
// inline once the task is completed.

// Bounds of the interval between two tasks/get requests.
const (
	minTaskPoll     = 100 * time.Millisecond
	maxTaskPoll     = 30 * time.Second
	defaultTaskPoll = time.Second
)

// Task statuses.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// taskInfo is the part of a task (a CreateTaskResult's task, a 2026-07-28
// task result, a tasks/get answer) the client reads.
type taskInfo struct {
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage"`
	PollInterval   *float64        `json:"pollInterval"`   // 2025-11-25, ms
	PollIntervalMs *float64        `json:"pollIntervalMs"` // 2026-07-28
	Result         json.RawMessage `json:"result"`         // 2026-07-28, once completed
	Error          json.RawMessage `json:"error"`          // 2026-07-28, a failed task's error, if any
}

// interval is the task's poll interval within [minTaskPoll, maxTaskPoll],
// defaultTaskPoll when the server suggests none.
func (ti *taskInfo) interval() time.Duration {
	ms := ti.PollIntervalMs
	if ms == nil {
		ms = ti.PollInterval
	}
	if ms == nil || *ms <= 0 {
		return defaultTaskPoll
	}
	d := time.Duration(*ms * float64(time.Millisecond))
	return min(max(d, minTaskPoll), maxTaskPoll)
}

// isTask reports whether a tools/call result is a task rather than the
// tool's result.
func isTask(result json.RawMessage) bool {
	var r toolResult
	return json.Unmarshal(result, &r) == nil &&
		(r.ResultType == resultTypeTask || len(r.Task) > 0 && string(r.Task) != "null")
}

func terminalTask(status string) bool {
	return status == taskCompleted || status == taskFailed || status == taskCancelled
}

// taskCreated records the task that answered tools/call and delivers its
// status; raw is the task object (2025-11-25) or the task result
// (2026-07-28).
func (t *tracker) taskCreated(ctx context.Context, raw json.RawMessage) error {
	var ti taskInfo
	if err := json.Unmarshal(raw, &ti); err != nil || ti.TaskID == "" {
		return t.protocolError(fmt.Errorf("tools/call answered with a task without a taskId: %.200s", raw))
	}
	t.st.Task = ti.TaskID
	t.pollEvery = ti.interval()
	return t.taskStatus(ctx, raw, &ti)
}

// taskStatus delivers a running task's status as a chunk with Event
// "task" and Data raw, when its status or status message changed since the
// last one delivered (the cursor records a hash of both). A terminal
// status is not a chunk: the result, or Run's error, says how it ended.
func (t *tracker) taskStatus(ctx context.Context, raw json.RawMessage, ti *taskInfo) error {
	if terminalTask(ti.Status) {
		return nil
	}
	h := fnv.New32a()
	h.Write([]byte(ti.Status))
	h.Write([]byte{0})
	h.Write([]byte(ti.StatusMessage))
	sig := h.Sum32() | 1 // never 0, which means none delivered
	if sig == t.st.TaskSig {
		return nil
	}
	t.st.TaskSig = sig
	return t.deliver(ctx, "task", raw)
}

// pollTask follows the call's task (r.tr.st.Task) with tasks/get, the
// first after wait, then at the task's poll interval, until it ends: its
// result becomes the last chunk, a failure without a result or a
// cancellation a permanent error. Under the session era it reads the
// session's standalone stream meanwhile, for the task's progress, and a
// session the server forgot (404) is replaced by a new one once per
// failure streak: tasks outlive sessions.
func (r *streamRun) pollTask(ctx context.Context, wait time.Duration) error {
	if r.session != "" && !r.modern() {
		r.startListener(ctx)
		defer r.stopListener()
	}
	reinitialized := false
	for {
		if err := r.pause(ctx, wait); err != nil {
			return err
		}
		msg, err := r.rpc(ctx, methodTasksGet, params{"taskId": r.tr.st.Task})
		if err != nil {
			if statusOf(err) == http.StatusNotFound && r.session != "" && !r.modern() && !reinitialized {
				reinitialized = true
				r.debug("session not found while polling the task; initializing a new one", "task", r.tr.st.Task)
				r.stopListener()
				if herr := r.handshake(ctx); herr != nil {
					return herr
				}
				r.tr.st.Session, r.tr.st.Proto = r.session, r.proto
				r.startListener(ctx)
				wait = 0
				continue
			}
			return err
		}
		reinitialized = false
		var ti taskInfo
		if err := json.Unmarshal(msg.Result, &ti); err != nil {
			return r.fail(methodTasksGet, 0, true, fmt.Errorf("malformed tasks/get result: %w", err))
		}
		wait = ti.interval()
		if err := r.drainProgress(ctx); err != nil {
			return err
		}
		switch {
		case terminalTask(ti.Status):
			return r.taskOutcome(ctx, &ti)
		case ti.Status == taskInputRequired:
			r.cancelCall(ctx)
			return r.fail(methodTasksGet, 0, true, fmt.Errorf(
				"the task %s needs input (status input_required), which this client cannot give; it was cancelled", r.tr.st.Task))
		}
		if err := r.tr.taskStatus(ctx, msg.Result, &ti); err != nil {
			return err
		}
	}
}

// pause waits d, delivering the progress the standalone stream carries
// meanwhile, unless ctx ends first.
func (r *streamRun) pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	fired, stop := r.retry.Clock().After(d)
	defer stop()
	for {
		var items <-chan listenItem
		if r.listen != nil {
			items = r.listen.items
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-fired:
			return nil
		case it, ok := <-items:
			if !ok {
				r.stopListener()
				continue
			}
			if _, err := r.tr.handle(ctx, progressOnly(it.msgs), "", false); err != nil {
				return err
			}
		}
	}
}

// drainProgress delivers the progress the standalone stream has already
// received, without waiting.
func (r *streamRun) drainProgress(ctx context.Context) error {
	for r.listen != nil {
		select {
		case it, ok := <-r.listen.items:
			if !ok {
				r.stopListener()
				return nil
			}
			if _, err := r.tr.handle(ctx, progressOnly(it.msgs), "", false); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	return nil
}

// taskOutcome ends a task that reached a terminal status: its result
// (inline under 2026-07-28, from tasks/result under 2025-11-25) becomes
// the last chunk, through the same isError check as a tools/call result; a
// cancelled task, or a failed one without a result, is a permanent error.
func (r *streamRun) taskOutcome(ctx context.Context, ti *taskInfo) error {
	id := r.tr.st.Task
	if ti.Status == taskCancelled {
		return r.fail(methodTasksGet, 0, true, fmt.Errorf("the task %s was cancelled on the server%s", id, detail(ti.StatusMessage)))
	}
	if !r.modern() {
		msg, err := r.rpc(ctx, methodTasksResult, params{"taskId": id})
		if err != nil {
			return err
		}
		return r.tr.result(ctx, msg, true)
	}
	if len(ti.Result) > 0 && string(ti.Result) != "null" {
		return r.tr.result(ctx, &rpcMessage{Result: ti.Result}, true)
	}
	if ti.Status == taskFailed {
		why := ti.StatusMessage
		if len(ti.Error) > 0 {
			var e rpcError
			if json.Unmarshal(ti.Error, &e) == nil && e.Message != "" {
				why = e.Error()
			} else {
				why = string(ti.Error)
			}
		}
		return r.fail(methodTasksGet, 0, true, fmt.Errorf("%w: the task %s failed%s", ErrToolFailed, id, detail(why)))
	}
	return r.fail(methodTasksGet, 0, true, fmt.Errorf("the task %s completed without a result", id))
}

// detail formats an optional message for an error text.
func detail(msg string) string {
	if msg == "" {
		return ""
	}
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText] + "…"
	}
	return ": " + msg
}

// cancelCall asks the server to stop the call: tasks/cancel once it is a
// task, else notifications/cancelled for its request. It runs within
// cleanupTimeout, on a context detached from ctx's cancellation; failures
// are logged only.
func (r *streamRun) cancelCall(ctx context.Context) {
	cctx, stop := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer stop()
	method, p, id := methodCancelled, cancelledParams(r.tr.st.Req, "cancelled by the host"), 0
	if r.tr.st.Task != "" {
		method, p, id = methodTasksCancel, params{"taskId": r.tr.st.Task}, r.newID()
	}
	resp, err := r.post(cctx, id, method, p)
	if err != nil {
		r.debug(method+" failed", "err", err)
		return
	}
	drain(resp)
}
