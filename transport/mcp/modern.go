package mcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// This file is what Streamable speaks beyond the session revisions: MCP
// 2026-07-28 (server/discover, a _meta on every request, no session, no
// resumability) and the tasks a tool call may become, in both shapes
// (2025-11-25's experimental tasks, 2026-07-28's tasks extension).
//
// Under 2026-07-28 a response stream that breaks loses its request. The
// tool is called again only when that cannot do harm twice: the tool says
// so (idempotentHint in tools/list) or the program allows it (:restart
// :on-failure); otherwise the stream ends in an error that says why. A
// tool call answered with a task is followed by polling tasks/get; the
// task id goes into the cursor, so a restarted host polls the same task and
// never calls the tool again.

// The methods, headers and _meta keys of 2026-07-28 and of the tasks.
const (
	methodDiscover    = "server/discover"
	methodToolsList   = "tools/list"
	methodTasksGet    = "tasks/get"
	methodTasksResult = "tasks/result"
	methodTasksCancel = "tasks/cancel"

	headerMethod = "Mcp-Method"
	headerName   = "Mcp-Name"

	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo      = "io.modelcontextprotocol/clientInfo"
	metaClientCaps      = "io.modelcontextprotocol/clientCapabilities"
	extensionTasks      = "io.modelcontextprotocol/tasks"
)

// Request ids besides initializeID and callID; each is used by one request
// at a time.
const (
	discoverID    = 3
	listID        = 4
	taskRequestID = 5
)

// The bounds of the interval between two tasks/get; the server's
// pollInterval is kept within them (default: a second).
const (
	minTaskPoll     = 50 * time.Millisecond
	defaultTaskPoll = time.Second
	maxTaskPoll     = 30 * time.Second
)

// StreamableConfig is the configuration of the :mcp transport, from its
// start keys (StreamableKind's Configure). The zero value is the default.
type StreamableConfig struct {
	// Restart allows the tool to be called again when its call is lost:
	// a broken response stream under 2026-07-28, or a host restart while
	// the call was in flight (:restart :on-failure).
	Restart bool
}

// errTaskCreated is returned through the call path when the tool's answer
// was a task (tracker.result): Run then follows the task (pollTask).
var errTaskCreated = errors.New("the tool call became a task")

// modern reports whether the run speaks 2026-07-28.
func (r *streamRun) modern() bool { return r.proto == version20260728 }

// discover asks by server/discover whether the server speaks 2026-07-28.
// modern: it does, and the run speaks it from now on, with no session. Any
// refusal (any error status, a JSON-RPC error, no answer, other versions)
// means it does not, and the caller falls back to initialize; only a
// network failure is returned as err, for a retry.
func (r *streamRun) discover(ctx context.Context) (modern bool, err error) {
	r.session, r.proto = "", version20260728
	defer func() {
		if !modern {
			r.proto = ""
		}
	}()
	msg, err := r.rpc(ctx, discoverID, methodDiscover, r.withMeta(map[string]any{}))
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if resumable(err) && statusOf(err) == 0 {
			return false, err // the network: ask again
		}
		r.discovered = true // any answer but a 2xx one: a server of the session revisions
		return false, nil
	}
	r.discovered = true
	var res struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if json.Unmarshal(msg.Result, &res) != nil || !slices.Contains(res.SupportedVersions, version20260728) {
		r.debug("server/discover offers no 2026-07-28; falling back to initialize", "versions", res.SupportedVersions)
		return false, nil
	}
	return true, nil
}

// withMeta adds to params the _meta every 2026-07-28 request carries (the
// revision, the client and its capabilities, which declare the tasks
// extension); under the session revisions it returns params as they are.
func (r *streamRun) withMeta(params map[string]any) map[string]any {
	if !r.modern() {
		return params
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = make(map[string]any, 3)
	}
	meta[metaProtocolVersion] = version20260728
	meta[metaClientInfo] = map[string]string{"name": clientName, "version": clientVersion}
	meta[metaClientCaps] = map[string]any{"extensions": map[string]any{extensionTasks: map[string]any{}}}
	params["_meta"] = meta
	return params
}

// rpc sends one request and returns its response message (an answer with a
// JSON-RPC error is a permanent *transport.Error). A 202 answer, which
// carries none, is a permanent error too.
func (r *streamRun) rpc(ctx context.Context, id int, method string, params any) (*rpcMessage, error) {
	resp, err := r.post(ctx, id, method, params)
	if err != nil {
		return nil, err
	}
	defer drain(resp)
	if resp.StatusCode == http.StatusAccepted {
		return nil, r.fail(method, resp.StatusCode, true, errors.New("the server accepted the request without answering it"))
	}
	return r.readResponse(ctx, resp, id, method)
}

// reissue handles a tools/call whose answer was lost under 2026-07-28 (its
// response stream broke, or the host stopped during it): the request
// cannot be resumed, so the tool is called again, under the retry policy,
// only when the program set :restart :on-failure or the tool is annotated
// idempotentHint: true. Otherwise it returns a permanent error saying why.
// Progress of a repeated call starts over, so chunks already delivered may
// come again (at-least-once); the tool's effect is the tool's business, as
// its annotation promised.
func (r *streamRun) reissue(ctx context.Context, cause error) error {
	for {
		if err := r.retry.Wait(ctx, cause, r.serverRetry); err != nil {
			return err
		}
		if !r.restart {
			idem, err := r.idempotentTool(ctx)
			if err != nil {
				if resumable(err) {
					cause = err
					continue
				}
				return r.fail(methodToolsCall, 0, true, fmt.Errorf("the answer to tools/call %s was lost (%v), and tools/list, which says whether it may be called again, failed: %w", r.tool, cause, err))
			}
			if !idem {
				return r.fail(methodToolsCall, 0, true, fmt.Errorf(
					"the answer to tools/call %s was lost (%v); MCP 2026-07-28 cannot resume a request, and the tool is not annotated idempotentHint: true nor does the stream set :restart :on-failure, so it is not called again", r.tool, cause))
			}
		}
		r.debug("calling the tool again", "cause", cause)
		r.tr.st.Token = "rtfs-" + rand.Text()
		r.tr.st.Progress, r.tr.st.HasProgress, r.tr.st.Event = 0, false, ""
		done, err := r.call(ctx)
		if done || !resumable(err) {
			return err
		}
		cause = err
	}
}

// idempotentTool reports whether tools/list annotates the run's tool
// idempotentHint: true (remembered once known). It reads at most 20 pages.
func (r *streamRun) idempotentTool(ctx context.Context) (bool, error) {
	if r.idempotent != nil {
		return *r.idempotent, nil
	}
	cursor := ""
	for range 20 {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		msg, err := r.rpc(ctx, listID, methodToolsList, r.withMeta(params))
		if err != nil {
			return false, err
		}
		var res struct {
			Tools []struct {
				Name        string `json:"name"`
				Annotations *struct {
					IdempotentHint bool `json:"idempotentHint"`
				} `json:"annotations"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(msg.Result, &res); err != nil {
			return false, r.fail(methodToolsList, 0, true, fmt.Errorf("malformed tools/list result: %w", err))
		}
		for _, t := range res.Tools {
			if t.Name == r.tool {
				idem := t.Annotations != nil && t.Annotations.IdempotentHint
				r.idempotent = &idem
				return idem, nil
			}
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	no := false
	r.idempotent = &no
	return false, nil
}

// taskInfo is what the client reads of a task, in either shape.
type taskInfo struct {
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage"`
	PollInterval   *int64          `json:"pollInterval"`   // 2025-11-25, ms
	PollIntervalMs *int64          `json:"pollIntervalMs"` // 2026-07-28
	Result         json.RawMessage `json:"result"`         // 2026-07-28, once completed
}

func (t *taskInfo) poll() time.Duration {
	ms := t.PollIntervalMs
	if ms == nil {
		ms = t.PollInterval
	}
	if ms == nil {
		return defaultTaskPoll
	}
	return min(max(time.Duration(*ms)*time.Millisecond, minTaskPoll), maxTaskPoll)
}

// taskOf recognises a tools/call result that is a task rather than the
// tool's result: 2025-11-25's CreateTaskResult ({"task": {...}}) or
// 2026-07-28's {"resultType": "task", ...}.
func taskOf(result json.RawMessage) (taskInfo, json.RawMessage, bool) {
	var probe struct {
		ResultType string          `json:"resultType"`
		Task       json.RawMessage `json:"task"`
	}
	if json.Unmarshal(result, &probe) != nil {
		return taskInfo{}, nil, false
	}
	raw := result
	switch {
	case probe.ResultType == "task":
	case len(probe.Task) > 0 && probe.Task[0] == '{':
		raw = probe.Task
	default:
		return taskInfo{}, nil, false
	}
	var t taskInfo
	if json.Unmarshal(raw, &t) != nil || t.TaskID == "" {
		return taskInfo{}, nil, false
	}
	return t, raw, true
}

// pollTask follows the task the tool call became until its result: it
// asks tasks/get every pollInterval and delivers each change of status or
// status message as a chunk with Event "task" (its Data the task), then the
// tool's result as the last chunk, as a call without a task would. The
// result comes inline in tasks/get (2026-07-28) or from tasks/result
// (2025-11-25). A failed task with a result delivers that result's error;
// a cancelled task, or one that wants input rtfshost cannot give, ends the
// stream in an error. Transient failures are retried under the policy.
func (r *streamRun) pollTask(ctx context.Context) error {
	id := r.tr.st.Task
	seen := r.tr.taskSeen
	for {
		msg, err := r.rpc(ctx, taskRequestID, methodTasksGet, r.withMeta(map[string]any{"taskId": id}))
		if err != nil {
			if !resumable(err) {
				return err
			}
			if werr := r.retry.Wait(ctx, err, 0); werr != nil {
				return werr
			}
			continue
		}
		r.retry.Reset()
		var t taskInfo
		if err := json.Unmarshal(msg.Result, &t); err != nil {
			return r.tr.protocolError(fmt.Errorf("malformed tasks/get result: %w", err))
		}
		if now := t.Status + "\x00" + t.StatusMessage; now != seen {
			seen = now
			if err := r.tr.deliver(ctx, "task", msg.Result); err != nil {
				return err
			}
		}
		switch t.Status {
		case "completed", "failed":
			if len(t.Result) > 0 {
				return r.tr.result(ctx, &rpcMessage{Result: t.Result})
			}
			if r.modern() {
				return r.fail(methodTasksGet, 0, true, fmt.Errorf("task %s %s: %s", id, t.Status, orNone(t.StatusMessage)))
			}
			res, err := r.rpc(ctx, taskRequestID, methodTasksResult, map[string]any{"taskId": id})
			if err != nil {
				return err
			}
			return r.tr.result(ctx, res)
		case "cancelled":
			return r.fail(methodTasksGet, 0, true, fmt.Errorf("the server cancelled task %s: %s", id, orNone(t.StatusMessage)))
		case "input_required":
			return r.fail(methodTasksGet, 0, true, fmt.Errorf("task %s asks for input, which rtfshost cannot give: %s", id, orNone(t.StatusMessage)))
		}
		wait := time.NewTimer(t.poll())
		select {
		case <-ctx.Done():
			wait.Stop()
			return ctx.Err()
		case <-wait.C:
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "(no message)"
	}
	return s
}

// StreamableKey are the start keys of :mcp.
func streamableKeys() []transport.Key { return []transport.Key{transport.RestartKey()} }

// configureStreamable reads the :mcp start keys into a StreamableConfig.
func configureStreamable(keys map[string]json.RawMessage) (any, error) {
	restart, err := transport.ParseRestart(keys)
	return StreamableConfig{Restart: restart}, err
}
