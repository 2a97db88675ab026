package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/transport"
)

// forEras runs f against the task server in both shapes.
func forEras(t *testing.T, f func(t *testing.T, modern bool)) {
	for _, era := range []struct {
		name   string
		modern bool
	}{{version20251125, false}, {version20260728, true}} {
		t.Run(era.name, func(t *testing.T) {
			leakCheck(t)
			f(t, era.modern)
		})
	}
}

// taskMessages returns the statusMessage of every "task" chunk.
func taskMessages(t *testing.T, s *recSink) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.chunks {
		if c.Event != "task" {
			continue
		}
		var ti taskInfo
		if err := json.Unmarshal(c.Data, &ti); err != nil || ti.TaskID != taskID || ti.Status != taskWorking {
			t.Fatalf("task chunk %s (%v)", c.Data, err)
		}
		out = append(out, ti.StatusMessage)
	}
	return out
}

// withoutProgress drops "progress" from events.
func withoutProgress(events []string) []string {
	return slices.DeleteFunc(events, func(e string) bool { return e == "progress" })
}

// TestTaskResult: a tools/call answered with a task, in either shape, is
// never taken for an empty result: Run polls it with tasks/get, delivers
// each status change as a "task" chunk (and, in a 2025-11-25 session, the
// progress on the standalone stream), then the task's result as the last
// chunk, and the cursor names the task.
func TestTaskResult(t *testing.T) {
	forEras(t, func(t *testing.T, modern bool) {
		f := newTaskServer(t, &taskServer{modern: modern, steps: []string{"step 1", "step 2"}})
		sink := &recSink{}
		if err := (Streamable{policy: fastPolicy}).Run(context.Background(), f.spec(), "", sink); err != nil {
			t.Fatalf("Run: %v (requests %v)", err, f.log.all())
		}
		if got, want := withoutProgress(sink.events()), []string{"task", "task", "task", "result"}; !slices.Equal(got, want) {
			t.Fatalf("events %v, want %v", sink.events(), want)
		}
		if got, want := taskMessages(t, sink), []string{"starting the job", "step 1", "step 2"}; !slices.Equal(got, want) {
			t.Fatalf("task statuses %q, want %q", got, want)
		}
		if !modern && !slices.Equal(sink.progressValues(t), []float64{1}) {
			t.Fatalf("events %v: want the task's progress from the standalone stream", sink.events())
		}
		last := sink.last()
		var res struct {
			Content []struct{ Text string } `json:"content"`
			Struct  struct{ Rows int }      `json:"structuredContent"`
		}
		if err := json.Unmarshal(last.Data, &res); err != nil || res.Content[0].Text != "job done" || res.Struct.Rows != 3 {
			t.Fatalf("result chunk %s (%v)", last.Data, err)
		}
		st, err := decodeCursor(last.ID, kindStreamable)
		if err != nil || !st.Done || st.Task != taskID {
			t.Fatalf("result cursor %+v (%v)", st, err)
		}
		wantResult := 1
		if modern {
			wantResult = 0 // 2026-07-28: the result is inline in tasks/get
		}
		if f.log.count("POST tools/call") != 1 || f.log.count("POST tasks/get") != 3 || f.log.count("POST tasks/result") != wantResult || f.wasCancelled() {
			t.Fatalf("requests %v", f.log.all())
		}
		if !modern {
			var call struct {
				Params struct {
					Task json.RawMessage `json:"task"`
				} `json:"params"`
			}
			_ = json.Unmarshal(f.log.postsOf(methodToolsCall)[0].body, &call)
			if call.Params.Task == nil || f.log.count("POST tools/list") != 1 || f.log.count("DELETE") != 1 {
				t.Fatalf("requests %v, params.task %s: want tools/list, a task-augmented call and the session ended", f.log.all(), call.Params.Task)
			}
		}
		if h := f.log.postsOf(methodTasksGet)[0].header; modern && (h.Get(headerMethod) != methodTasksGet || h.Get(headerSession) != "") {
			t.Fatalf("2026-07-28 tasks/get headers %v", h)
		}
	})
}

// TestTaskFailed: a task whose result has isError true ends Run with the
// permanent ErrToolFailed and the tool's text, as a direct result does.
func TestTaskFailed(t *testing.T) {
	forEras(t, func(t *testing.T, modern bool) {
		f := newTaskServer(t, &taskServer{modern: modern, fail: true})
		sink := &recSink{}
		err := (Streamable{policy: fastPolicy}).Run(context.Background(), f.spec(), "", sink)
		if !errors.Is(err, ErrToolFailed) || !transport.IsPermanent(err) || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("Run error = %v", err)
		}
		if slices.Contains(sink.events(), "result") {
			t.Fatalf("events %v: a failed result is not a chunk", sink.events())
		}
	})
}

// TestTaskCancel: cancelling Run while it polls a task sends tasks/cancel
// for it (not notifications/cancelled) and returns ctx's error; a task that
// needs input the client cannot give is cancelled and ends Run with a
// permanent error.
func TestTaskCancel(t *testing.T) {
	forEras(t, func(t *testing.T, modern bool) {
		f := newTaskServer(t, &taskServer{modern: modern, steps: []string{"a", "b", "c", "d", "e"}})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sink := &recSink{onChunk: func(n int, c transport.Chunk) error {
			if c.Event == "task" && n >= 2 {
				cancel()
			}
			return nil
		}}
		if err := (Streamable{policy: fastPolicy}).Run(ctx, f.spec(), "", sink); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run error = %v, want context.Canceled", err)
		}
		if !f.wasCancelled() || f.log.count("POST notifications/cancelled") != 0 {
			t.Fatalf("requests %v: want tasks/cancel", f.log.all())
		}
		if p := f.log.postsOf(methodTasksCancel); len(p) != 1 || !strings.Contains(string(p[0].body), `"taskId":"`+taskID+`"`) {
			t.Fatalf("tasks/cancel requests %d", len(p))
		}
	})
	forEras(t, func(t *testing.T, modern bool) {
		f := newTaskServer(t, &taskServer{modern: modern, input: true})
		err := (Streamable{policy: fastPolicy}).Run(context.Background(), f.spec(), "", &recSink{})
		if !transport.IsPermanent(err) || !strings.Contains(err.Error(), "input_required") || !f.wasCancelled() {
			t.Fatalf("Run error = %v, cancelled %v", err, f.wasCancelled())
		}
	})
}

// TestTaskResumeAfterHostRestart: the task id is in the cursor. The first
// Run gives up while tasks/get fails (as when the host stops); a Run from
// its last cursor with Spec.Resumed polls the same task, without a second
// tools/call, does not deliver again the status it had delivered, and
// delivers the result. In a 2025-11-25 session the server also forgot the
// session (it restarted too): the client initializes a new one and polls
// on it, since tasks outlive sessions.
func TestTaskResumeAfterHostRestart(t *testing.T) {
	forEras(t, func(t *testing.T, modern bool) {
		fail := func(w http.ResponseWriter, n int) bool {
			if n < 2 {
				return false
			}
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return true
		}
		f := newTaskServer(t, &taskServer{modern: modern, steps: []string{"step 1", "step 2"}, getHook: fail})
		spec := f.spec()
		spec.RetryAttempts = 1
		first := &recSink{}
		err := (Streamable{policy: fastPolicy}).Run(context.Background(), spec, "", first)
		if err == nil || transport.IsPermanent(err) {
			t.Fatalf("first Run error = %v, want a transient give-up", err)
		}
		if got, want := taskMessages(t, first), []string{"starting the job", "step 1"}; !slices.Equal(got, want) {
			t.Fatalf("first Run task statuses %q, want %q", got, want)
		}
		cursor := first.last().ID
		if st, _ := decodeCursor(cursor, kindStreamable); st.Task != taskID {
			t.Fatalf("cursor %+v does not name the task", st)
		}
		if f.wasCancelled() {
			t.Fatal("a Run that gave up cancelled the task")
		}
		f.setHook(nil, 0) // the server's task starts its steps again: "step 1" is not news
		if !modern {
			f.forgetSessions()
		}
		second := &recSink{}
		spec.Resumed = true
		if err := (Streamable{policy: fastPolicy}).Run(context.Background(), spec, cursor, second); err != nil {
			t.Fatalf("resumed Run: %v (requests %v)", err, f.log.all())
		}
		if got, want := withoutProgress(second.events()), []string{"task", "result"}; !slices.Equal(got, want) {
			t.Fatalf("resumed Run events %v, want %v", second.events(), want)
		}
		if got := taskMessages(t, second); !slices.Equal(got, []string{"step 2"}) {
			t.Fatalf("resumed Run task statuses %q", got)
		}
		if f.log.count("POST tools/call") != 1 {
			t.Fatalf("tools/call sent %d times: requests %v", f.log.count("POST tools/call"), f.log.all())
		}
		if !modern && f.log.count("POST initialize") != 2 {
			t.Fatalf("requests %v: want a new session after the 404", f.log.all())
		}
	})
}

// TestLegacyRefusesTaskAnswer: :mcp-sse does not follow tasks, so a task
// answer ends its stream with a permanent error, never as an empty result.
func TestLegacyRefusesTaskAnswer(t *testing.T) {
	leakCheck(t)
	s := newConfServer(t, &confServer{legacy: true, script: func(c *callWriter) {
		writeSSE(c.w, "", `{"jsonrpc":"2.0","id":2,"result":{"task":{"taskId":"t1","status":"working","pollInterval":100}}}`)
		c.end()
	}})
	sink := &recSink{}
	err := (LegacySSE{policy: fastPolicy}).Run(context.Background(), s.spec(), "", sink)
	if !transport.IsPermanent(err) || !containsAll(err.Error(), "answered with a task", ":mcp-sse does not follow") || len(sink.chunks) != 0 {
		t.Fatalf("Run error = %v, %d chunks", err, len(sink.chunks))
	}
}
