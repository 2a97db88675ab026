package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/rtfshost/rtfshost/persistence"
)

// closeFixture closes f's server, HTTP server and host, as a serve that
// stops does (its cleanup closes them again, which does nothing); the
// streams of its tasks stay stored, unfinished.
func closeFixture(f *fixture) {
	f.srv.Close()
	f.ts.Close()
	f.host.Close()
}

// taskOutputsOf returns the stream result of a task's tasks/result.
func taskOutputsOf(t *testing.T, url string, h map[string]string, id string) streamResult {
	t.Helper()
	res, e := rpc(t, url, h, methodTasksResult, map[string]any{"taskId": id})
	if e != nil || res["isError"] != false {
		t.Fatalf("tasks/result of %s = %v, %v", id, res, e)
	}
	var out streamResult
	b, _ := json.Marshal(res["structuredContent"])
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("tasks/result of %s: %v\n%v", id, err, res)
	}
	return out
}

// outputsList returns the outputs as compact JSON strings.
func outputsList(outs []json.RawMessage) []string {
	list := make([]string, len(outs))
	for i, o := range outs {
		list[i] = compactJSON(o)
	}
	return list
}

// TestTaskOutputsAcrossRestart: a stream task's result lists every output
// of its stream once, in order, though the server restarted while the
// stream ran: those made before the restart (kept in the store as they
// came) and those the recovered stream made before any client asked for
// the task (its follower subscribed before the host recovered the stream:
// Server.Recover).
func TestTaskOutputsAcrossRestart(t *testing.T) {
	t.Run("every output", func(t *testing.T) { taskOutputsAcrossRestart(t, false) })
	t.Run("one lost in the crash", func(t *testing.T) { taskOutputsAcrossRestart(t, true) })
}

// taskOutputsAcrossRestart runs TestTaskOutputsAcrossRestart; with lose,
// the store loses the third output's record before the restart, as a crash
// between the stream's commit of its chunk and the task's commit of its
// output would: the result lists the others and counts that one lost.
func taskOutputsAcrossRestart(t *testing.T, lose bool) {
	store := persistence.NewMemStore()
	ctx := context.Background()
	f1 := newFixtureStore(t, Options{}, store)
	url := f1.ts.URL + PathStreamable
	h := legacyInit(t, url)
	if _, e := rpc(t, url, h, "tools/call", map[string]any{"name": ToolStart, "arguments": startArgs("r1"), "task": map[string]any{}}); e != nil {
		t.Fatalf("tools/call as a task: %v", e)
	}
	f1.feed(ctx, "r1", values(3)...)
	waitFor(t, "three outputs", func() bool {
		in, err := f1.host.Provider().Info("r1", infoLight)
		return err == nil && in.Stats.Outputs == 3
	})
	closeFixture(f1)
	if n := storedOutputs(t, store); n != 3 {
		t.Fatalf("%d outputs stored before the restart, want 3", n)
	}
	if lose {
		var b persistence.Batch
		b.Delete(taskOutKey("r1", 3))
		if err := store.Commit(ctx, &b); err != nil {
			t.Fatal(err)
		}
	}

	// The restarted server: the recovered stream takes its last chunks and
	// ends before any request comes.
	f2 := newFixtureStore(t, Options{}, store)
	if err := f2.srv.Recover(ctx); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	f2.feed(ctx, "r1", append(values(2), end)...)
	waitFor(t, "the recovered stream's end", func() bool {
		st, err := f2.host.Provider().Status(ctx, "r1")
		return err == nil && st.State.Terminal()
	})
	url = f2.ts.URL + PathStreamable
	res := taskOutputsOf(t, url, legacyInit(t, url), "r1")
	want := []string{`{"n":1,"value":1}`, `{"n":2,"value":2}`, `{"n":3,"value":3}`, `{"n":4,"value":1}`, `{"n":5,"value":2}`, `{"total":6}`}
	var lost int64
	if lose {
		want, lost = append(want[:2:2], want[3:]...), 1
	}
	if got := outputsList(res.Outputs); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("outputs after the restart:\n got %v\nwant %v", got, want)
	}
	if res.OutputCount != 6 || res.Lost != lost || res.Truncated != 0 || res.State != "completed" {
		t.Errorf("result after the restart: %+v, want 6 outputs, %d lost", res, lost)
	}
	if n := storedOutputs(t, store); n != 0 {
		t.Errorf("%d stored outputs left once the task's result is stored", n)
	}
}

// storedOutputs counts the task output records in store.
func storedOutputs(t *testing.T, store persistence.Store) int {
	t.Helper()
	n := 0
	if err := store.Scan(context.Background(), []byte(taskOutPrefix), func(_, _ []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
