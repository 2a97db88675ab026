package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/provider"
)

// The work of the tasks: a task is created and driven to its end here,
// by a goroutine of the server, and cancelled (the table is taskstore.go).

// resumeLocked drives a stored task that no goroutine of this process
// drives: a stream task is followed (followLocked), from before its stream
// is recovered when recovered is still open; a task of another tool ends as
// failed, since its work did not survive the restart. In a cluster, a
// stream task whose stream runs on another host is left to that host.
func (t *tasks) resumeLocked(e *taskEntry, recovered <-chan struct{}) {
	if e.rec.StreamID == "" {
		t.finishLocked(e, taskErrorResult("the server restarted while the program ran; an %s task does not survive a restart", e.rec.Tool), provider.StateError)
		return
	}
	select {
	case <-recovered:
		if t.clustered() && !t.runsHere(e.rec.StreamID) {
			return // another host drives it; refresh reads what it stores
		}
	default: // the host recovers the streams after this
	}
	t.followLocked(e, nil, recovered)
}

// create makes a task for a call of tool with the raw arguments, stores it,
// and starts its work; the task exists (tasks/get answers) when it
// returns. With a session (2025-11-25), the work's progress (with token,
// the progress token of the tools/call; nil: none) and log notifications
// go to that session while the task runs (taskPeer).
func (t *tasks) create(ctx context.Context, tool string, raw json.RawMessage, ttl time.Duration, session *mcp.ServerSession, token any) (taskRecord, error) {
	t.loaded(ctx)
	spec, ok := t.s.toolSpec(tool)
	if !ok || spec.task == noTask {
		return taskRecord{}, &rpcFailure{code: codeMethodNotFound, msg: fmt.Sprintf("tool %q does not run as a task (only %s do)", tool, strings.Join(t.s.taskTools(), " and "))}
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
	if spec.task == taskOfStream {
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
		rec.ID = t.s.prov.NewStreamID(tool[strings.LastIndex(tool, ".")+1:]) // rtfs.eval: eval-...
		rec.Message = "running the program"
	}
	t.mu.Lock()
	if _, dup := t.byID[rec.ID]; dup {
		t.mu.Unlock()
		return taskRecord{}, &rpcFailure{code: codeInvalidParams, msg: fmt.Sprintf("a task %q exists already", rec.ID)}
	}
	e := &taskEntry{rec: rec, done: make(chan struct{})}
	if session != nil {
		e.peer = &taskPeer{t: t, e: e, id: rec.ID, session: session, token: token, statuses: hasTaskStatus(session)}
	}
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
	if spec.task == taskOfStream {
		t.followLocked(e, a, recoveredAlready)
	} else {
		t.runLocked(e, spec, a)
	}
	return e.rec, nil
}

// followLocked starts the goroutine that drives a stream task: it starts
// the stream (start != nil) or follows a stored one, which it looks at once
// recovered is closed (the host has recovered its streams); it collects
// the stream's outputs as the blocking tool would, keeps them in the store
// (taskout.go), and stores the result when the stream ends. It subscribes
// to the stream before it returns, so that it sees every output of a
// stream started or recovered after that. On Close it leaves the stream and
// the task as they are: the stream is durable and followed again by the
// next serve.
func (t *tasks) followLocked(e *taskEntry, start args, recovered <-chan struct{}) {
	ctx, cancel := context.WithCancel(e.peer.with(t.s.ctx))
	e.running, e.cancel = true, cancel
	id := e.rec.StreamID
	c := t.s.newCall(ctx, &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ToolStart}})
	outs := t.outputsOf(ctx, e.rec.ID)
	keeper := outs.watch(id)
	watchErr := c.watchStream(id)
	t.s.calls.Add(1)
	go func() {
		defer t.s.calls.Done()
		defer cancel()
		defer c.release()
		closing := false
		defer func() {
			if !closing && keeper != nil {
				keeper.Close()
			} // else it keeps the outputs the stream gives until the host stops it
		}()
		if watchErr != nil {
			t.finish(e, taskErrorResult("%s: %v", ToolStart, watchErr), provider.StateError)
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
				_, _ = t.s.prov.Cancel(ctx, id)
			}
			t.setMessage(e, "the stream is running")
		} else {
			select {
			case <-recovered:
			case <-ctx.Done():
				closing = true
				return // Close
			}
			// A stream loaded here, running or ended, is followed here; in
			// a cluster one that another host runs is left to it.
			if !t.loadedHere(id) {
				if _, err := t.s.prov.Status(ctx, id); err != nil {
					t.finish(e, taskErrorResult("the task's stream %s was not found after the server restarted", id), provider.StateError)
					return
				}
				if t.clustered() && !t.loadedHere(id) {
					t.letGo(e) // another host recovered it
					return
				}
			}
		}
		ends, err := c.pump(ctx, nil, func(ends map[string]provider.Status) bool {
			_, ok := ends[id]
			return ok
		})
		if err != nil {
			// Close: the stream stays stored, and so does the task. The
			// host stops the stream after the server has closed; the
			// outputs it gives meanwhile are still kept, for whichever
			// host or process drives the task next.
			closing = true
			return
		}
		st := ends[id]
		if !st.State.Terminal() {
			// The stream moved to another host of the cluster: the task
			// goes on there (refresh drives it where the stream runs).
			t.letGo(e)
			return
		}
		res := c.streamResult(st)
		if outs != nil {
			res = outs.result(ctx, res)
		}
		t.finish(e, streamTaskResult(res, e.rec.ID), st.State)
		if outs != nil {
			t.dropOutputs(ctx, e.rec.ID) // the stored result holds them
		}
	}()
}

// letGo records that no goroutine of this process drives e any more.
func (t *tasks) letGo(e *taskEntry) {
	t.mu.Lock()
	e.running = false
	t.mu.Unlock()
}

// runLocked starts the goroutine that runs the call of a task of a
// taskOfCall tool (rtfs.eval).
func (t *tasks) runLocked(e *taskEntry, spec toolSpec, a args) {
	ctx, cancel := context.WithCancel(e.peer.with(t.s.ctx))
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
		t.finish(e, taskResult(res, e.rec.ID), state)
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
	rec, err := t.stored(t.s.ctx, e.rec.ID)
	return err == nil && rec.Status == taskCancelled
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
// the stream state; a cancelled task stays cancelled. The session that
// created the task is told the new status.
func (t *tasks) finish(e *taskEntry, result json.RawMessage, state provider.State) {
	t.mu.Lock()
	p := e.peer
	changed := t.finishLocked(e, result, state)
	rec := e.rec
	t.mu.Unlock()
	if changed {
		p.notifyStatus(rec)
	}
}

// finishLocked is finish with t.mu held; it reports whether the task's
// status changed (it had not ended), and tells nobody.
func (t *tasks) finishLocked(e *taskEntry, result json.RawMessage, state provider.State) bool {
	if e.rec.terminal() {
		if e.rec.Result == nil { // cancelled by tasks/cancel: keep the status, add the result
			e.rec.Result = result
			_ = t.save(context.Background(), e.rec)
		}
		return false
	}
	switch state {
	case provider.StateCompleted:
		e.rec.Status, e.rec.Message = taskCompleted, "the stream completed"
		if e.rec.StreamID == "" { // a taskOfCall tool's
			e.rec.Message = "the program finished"
		}
	case provider.StateCancelled:
		e.rec.Status, e.rec.Message = taskCancelled, "the stream was cancelled"
	default:
		e.rec.Status, e.rec.Message = taskFailed, "the work failed: tasks/result has the error"
	}
	e.rec.Result, e.rec.Updated, e.running = result, time.Now().UTC(), false
	e.peer = nil // its session is no longer needed
	close(e.done)
	if err := t.save(context.Background(), e.rec); err != nil {
		t.s.log.Error("mcp tasks: storing a task's result", "task", e.rec.ID, "err", err)
	}
	return true
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
	rec, cancel, p := e.rec, e.cancel, e.peer
	t.mu.Unlock()
	if err := t.save(ctx, rec); err != nil {
		return taskRecord{}, fmt.Errorf("storing the cancelled task: %w", err)
	}
	p.notifyStatus(rec)
	switch {
	case rec.StreamID != "" && t.clustered() && t.store != nil:
		t.cancelStream(rec.StreamID)
	case rec.StreamID != "":
		// The task is stored cancelled: its stream is cancelled even if
		// the request's ctx ends now.
		_, _ = t.s.prov.Cancel(context.WithoutCancel(ctx), rec.StreamID)
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
	if _, err := t.s.prov.Cancel(t.s.ctx, id); err == nil {
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
			if _, err := t.s.prov.Cancel(t.s.ctx, id); err == nil {
				return
			}
		}
		t.s.log.Warn("mcp tasks: a cancelled task's stream was not found to cancel", "stream", id)
	}()
}

// cancelPatience bounds how long a cancelled task's stream is looked for.
const cancelPatience = 10 * time.Second

// A taskPeer carries the notifications of a task's work to the session
// that created it, under revision 2025-11-25, which allows them while the
// task runs: each progress notification with the progress token of the
// tools/call that created the task, and each, progress or log, with the
// related-task _meta. Nothing is sent once the task has reached a
// terminal status. go-sdk sends them on the session's standalone stream
// (the GET a client keeps open), since the work runs on no request of its
// own; the event store keeps them for a client that resumes. The
// 2026-07-28 tasks extension forbids them: its tasks have no peer.
type taskPeer struct {
	t       *tasks
	e       *taskEntry
	id      string // the task's id
	session *mcp.ServerSession
	token   any // nil: no progress notifications
	// statuses says the session's revision has task status notifications
	// (2025-11-25).
	statuses bool
}

// hasTaskStatus reports whether session's revision has
// notifications/tasks/status (revisionHasTaskStatus).
func hasTaskStatus(session *mcp.ServerSession) bool {
	p := session.InitializeParams()
	return p != nil && revisionHasTaskStatus(p.ProtocolVersion)
}

// revisionHasTaskStatus reports whether a session of revision v may get
// notifications/tasks/status: 2025-11-25 (later revisions have no
// sessions, and the tasks extension of 2026-07-28 has notifications/tasks
// instead).
func revisionHasTaskStatus(v string) bool { return v >= "2025-11-25" && v < sessionlessVersion }

// notifyStatus tells the session that created the task that its status is
// now rec's (notifications/tasks/status, with the task as tasks/get gives
// it and without the related-task _meta, as the revision asks), on the
// session's standalone stream; after the task's progress notifications,
// since the task's work has sent its last one by then. A nil p, or a
// session of another revision, is told nothing.
func (p *taskPeer) notifyStatus(rec taskRecord) {
	if p == nil || !p.statuses {
		return
	}
	if err := p.session.NotifyProgress(p.t.s.ctx, statusCarrier(rec)); err != nil {
		p.t.s.log.Debug("task status notification not sent", "task", rec.ID, "err", err)
	}
}

type taskPeerKey struct{}

// with returns ctx carrying p for the task's call (newCall); a nil p
// returns ctx.
func (p *taskPeer) with(ctx context.Context) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, taskPeerKey{}, p)
}

// taskPeerOf returns the taskPeer of a task's call, nil for any other.
func taskPeerOf(ctx context.Context) *taskPeer {
	p, _ := ctx.Value(taskPeerKey{}).(*taskPeer)
	return p
}

// running reports whether the task has not reached a terminal status.
func (p *taskPeer) running() bool {
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	return !p.e.rec.terminal()
}

// NotifyProgress sends a progress notification of the task's work.
func (p *taskPeer) NotifyProgress(ctx context.Context, params *mcp.ProgressNotificationParams) error {
	if p.token == nil || !p.running() {
		return nil
	}
	params.ProgressToken = p.token
	params.Meta = p.related(params.Meta)
	return p.session.NotifyProgress(ctx, params)
}

// Log sends a log notification of the task's work (go-sdk drops it below
// the level the session asked for).
//
//lint:ignore SA1019 logging is deprecated from MCP 2026-07-28; we serve the revisions before it
func (p *taskPeer) Log(ctx context.Context, params *mcp.LoggingMessageParams) error {
	if !p.running() {
		return nil
	}
	params.Meta = p.related(params.Meta)
	//lint:ignore SA1019 logging is deprecated from MCP 2026-07-28; we serve the revisions before it
	return p.session.Log(ctx, params)
}

// related returns meta with the related-task key set.
func (p *taskPeer) related(meta mcp.Meta) mcp.Meta {
	if meta == nil {
		meta = mcp.Meta{}
	}
	meta[metaRelatedTask] = map[string]string{"taskId": p.id}
	return meta
}
