package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/cluster/clustertest"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/provider"
)

// newClusterFixture is newFixture on a host of the cluster at natsURL.
func newClusterFixture(t *testing.T, natsURL, node string) *fixture {
	t.Helper()
	return newFixtureOpen(t, Options{}, func(ho host.Options) (*host.Host, error) {
		return host.Open(host.OpenOptions{Options: ho,
			Cluster: &cluster.Options{URLs: []string{natsURL}, Node: node, LeaseTTL: time.Second}})
	})
}

// TestTasksInCluster: a task created on one host of a cluster is answered
// by another, from the record its driver stores: tasks/get while it works,
// tasks/result once its stream, run by the first host, has ended.
func TestTasksInCluster(t *testing.T) {
	ns := clustertest.Server(t, clustertest.Options{})
	a := newClusterFixture(t, ns.ClientURL(), "a")
	b := newClusterFixture(t, ns.ClientURL(), "b")
	urlA, urlB := a.ts.URL+PathStreamable, b.ts.URL+PathStreamable
	ha, hb := legacyInit(t, urlA), legacyInit(t, urlB)
	// b has looked at its tasks before a creates one.
	if _, e := rpc(t, urlB, hb, methodTasksGet, map[string]any{"taskId": "ct1"}); e == nil {
		t.Fatal("tasks/get of a task no host made answered")
	}
	created, e := rpc(t, urlA, ha, "tools/call", map[string]any{"name": ToolStart, "arguments": startArgs("ct1"), "task": map[string]any{}})
	if task, _ := created["task"].(map[string]any); e != nil || task["taskId"] != "ct1" {
		t.Fatalf("CreateTaskResult = %v, error %v", created, e)
	}
	if got, e := rpc(t, urlB, hb, methodTasksGet, map[string]any{"taskId": "ct1"}); e != nil || got["status"] != "working" {
		t.Fatalf("tasks/get on b = %v, %v", got, e)
	}
	done := make(chan map[string]any, 1)
	go func() {
		res, _ := rpc(t, urlB, hb, methodTasksResult, map[string]any{"taskId": "ct1"})
		done <- res
	}()
	a.feed(context.Background(), "ct1", append(values(3), end)...)
	select {
	case res := <-done:
		if res["isError"] != false || !strings.Contains(fmt.Sprint(res["content"]), `"total":4`) {
			t.Fatalf("tasks/result on b = %v", res)
		}
	case <-time.After(hangGuard):
		t.Fatal("tasks/result on b did not return after the stream ended on a")
	}
	// A task b has never been asked about is in its list; cancelled
	// through b, its stream on a is cancelled.
	rpc(t, urlA, ha, "tools/call", map[string]any{"name": ToolStart, "arguments": startArgs("ct2"), "task": map[string]any{}})
	list, _ := rpc(t, urlB, hb, methodTasksList, map[string]any{})
	if s := fmt.Sprint(list["tasks"]); !strings.Contains(s, "taskId:ct1") || !strings.Contains(s, "taskId:ct2") {
		t.Fatalf("tasks/list on b = %v", list)
	}
	if got, e := rpc(t, urlB, hb, methodTasksCancel, map[string]any{"taskId": "ct2"}); e != nil || got["status"] != "cancelled" {
		t.Fatalf("tasks/cancel on b = %v, %v", got, e)
	}
	waitFor(t, "a's stream to be cancelled", func() bool {
		st, err := a.host.Provider().Status(t.Context(), "ct2")
		return err == nil && st.State == provider.StateCancelled
	})
	if ids := b.host.Provider().Live(); len(ids) != 0 {
		t.Fatalf("b runs %v; the stream is a's", ids)
	}
}

// TestTaskFollowsItsStream: a stream task's stream moves to host b when
// a, which runs it, shuts down (as serve does on SIGTERM: the MCP server,
// then the host, which hands its streams over). b takes the task with the
// stream: tasks/get on b says completed once the stream ends there, and
// tasks/result on b returns the exact result, every output once, in
// order, those a gave and those b gave. One task b was asked about before
// the move, one it had never heard of.
func TestTaskFollowsItsStream(t *testing.T) {
	ns := clustertest.Server(t, clustertest.Options{})
	a := newClusterFixture(t, ns.ClientURL(), "a")
	b := newClusterFixture(t, ns.ClientURL(), "b")
	urlA, urlB := a.ts.URL+PathStreamable, b.ts.URL+PathStreamable
	ha, hb := legacyInit(t, urlA), legacyInit(t, urlB)
	ids := []string{"move-asked", "move-unknown"}
	for _, id := range ids {
		created, e := rpc(t, urlA, ha, "tools/call", map[string]any{"name": ToolStart, "arguments": startArgs(id), "task": map[string]any{}})
		if task, _ := created["task"].(map[string]any); e != nil || task["taskId"] != id {
			t.Fatalf("CreateTaskResult = %v, error %v", created, e)
		}
		a.feed(context.Background(), id, values(3)...)
	}
	for _, id := range ids {
		waitFor(t, "a to process 3 chunks of "+id, func() bool {
			in, err := a.host.Provider().Info(id, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
			return err == nil && in.Stats.ProcessedChunks == 3
		})
	}
	if got, e := rpc(t, urlB, hb, methodTasksGet, map[string]any{"taskId": ids[0]}); e != nil || got["status"] != "working" {
		t.Fatalf("tasks/get on b before the move = %v, %v", got, e)
	}

	a.shutDown()
	for _, id := range ids {
		waitFor(t, "b to run "+id, func() bool { return slices.Contains(b.host.Provider().Live(), id) })
		b.feed(context.Background(), id, append(values(2), end)...)
	}
	for _, id := range ids {
		waitFor(t, "the task "+id+" to complete on b", func() bool {
			got, e := rpc(t, urlB, hb, methodTasksGet, map[string]any{"taskId": id})
			return e == nil && got["status"] == "completed"
		})
		res, e := rpc(t, urlB, hb, methodTasksResult, map[string]any{"taskId": id})
		if e != nil || res["isError"] != false {
			t.Fatalf("tasks/result of %s on b = %v, %v", id, res, e)
		}
		var out streamResult
		content, _ := res["content"].([]any)
		block, _ := content[0].(map[string]any)
		if err := json.Unmarshal([]byte(fmt.Sprint(block["text"])), &out); err != nil {
			t.Fatalf("tasks/result of %s: %v\n%v", id, err, res)
		}
		var outs []string
		for _, o := range out.Outputs {
			outs = append(outs, string(o))
		}
		want := []string{`{"n":1,"value":1}`, `{"n":2,"value":2}`, `{"n":3,"value":3}`, `{"n":4,"value":1}`, `{"n":5,"value":2}`, `{"total":6}`}
		if out.State != provider.StateCompleted || string(out.Result) != `{"total":6}` || !slices.Equal(outs, want) || out.OutputCount != 6 || out.Lost != 0 {
			t.Errorf("tasks/result of %s on b: state %s result %s outputs %v (count %d, lost %d); want completed, {\"total\":6}, %v",
				id, out.State, out.Result, outs, out.OutputCount, out.Lost, want)
		}
	}
}

// TestListInCluster: mcp.stream.inspect without a stream-id, and the
// rtfs://streams resource, list the streams of every host of the cluster,
// a page at a time in id order: those each host runs, as that host sees
// them, and one that ended on a host that has left since, from its
// records. Every host gives the same list.
func TestListInCluster(t *testing.T) {
	ns := clustertest.Server(t, clustertest.Options{})
	hosts := map[string]*fixture{}
	headers := map[string]map[string]string{}
	for _, node := range []string{"a", "b", "c"} {
		hosts[node] = newClusterFixture(t, ns.ClientURL(), node)
		headers[node] = legacyInit(t, hosts[node].ts.URL+PathStreamable)
	}
	call := func(node, tool string, args map[string]any) (map[string]any, bool) {
		t.Helper()
		res, e := rpc(t, hosts[node].ts.URL+PathStreamable, headers[node], "tools/call", map[string]any{"name": tool, "arguments": args})
		if e != nil {
			t.Fatalf("%s on %s: %v", tool, node, e)
		}
		sc, _ := res["structuredContent"].(map[string]any)
		return sc, res["isError"] == true
	}
	start := func(node, id string) {
		args := startArgs(id)
		args["detach"] = true
		if _, failed := call(node, ToolStart, args); failed {
			t.Fatalf("start %s on %s failed", id, node)
		}
	}
	for node, ids := range map[string][]string{"a": {"l-a1", "l-a2"}, "b": {"l-b1"}, "c": {"l-c1"}} {
		for _, id := range ids {
			start(node, id)
		}
	}
	hosts["a"].feed(context.Background(), "l-a1", values(2)...)
	for node, id := range map[string]string{"a": "l-a2", "c": "l-c1"} {
		hosts[node].feed(context.Background(), id, end)
		waitFor(t, id+" to end", func() bool {
			st, err := hosts[node].host.Provider().Status(t.Context(), id)
			return err == nil && st.State == provider.StateCompleted
		})
	}
	waitFor(t, "l-a1 to process 2 chunks", func() bool {
		in, err := hosts["a"].host.Provider().Info("l-a1", provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
		return err == nil && in.Stats.ProcessedChunks == 2
	})
	hosts["c"].shutDown() // l-c1 is now only in the store
	delete(hosts, "c")

	want := "l-a1 active 2, l-a2 completed 1, l-b1 active 0, l-c1 completed 1"
	for _, node := range []string{"a", "b"} {
		var got []string
		cursor, pages := "", 0
		for {
			args := map[string]any{"limit": 2, "include-state": false}
			if cursor != "" {
				args["cursor"] = cursor
			}
			sum, failed := call(node, ToolInspect, args)
			if failed || fmt.Sprint(sum["total"]) != "4" {
				t.Fatalf("inspect on %s, page %d: %v", node, pages, sum)
			}
			pages++
			for _, s := range sum["streams"].([]any) {
				m := s.(map[string]any)
				st := m["status"].(map[string]any)["state"]
				got = append(got, fmt.Sprintf("%s %s %v", m["stream-id"], st, m["stats"].(map[string]any)["processed-chunks"]))
			}
			next, _ := sum["next-cursor"].(string)
			if next == "" {
				break
			}
			if pages == 1 {
				// The resource's pages are the tool's.
				read, e := rpc(t, hosts[node].ts.URL+PathStreamable, headers[node], "resources/read", map[string]any{"uri": streamsURI + "?cursor=" + next})
				contents, _ := read["contents"].([]any)
				if e != nil || len(contents) != 1 || !strings.Contains(fmt.Sprint(contents[0]), `"stream-id":"l-b1"`) || strings.Contains(fmt.Sprint(contents[0]), `"stream-id":"l-a1"`) {
					t.Errorf("resources/read of the second page on %s = %v, %v", node, read, e)
				}
			}
			cursor = next
		}
		if strings.Join(got, ", ") != want || pages != 2 {
			t.Errorf("the list on %s, in %d pages: %s; want %s in 2", node, pages, strings.Join(got, ", "), want)
		}
		read, e := rpc(t, hosts[node].ts.URL+PathStreamable, headers[node], "resources/read", map[string]any{"uri": streamsURI})
		contents, _ := read["contents"].([]any)
		if e != nil || len(contents) != 1 || !strings.Contains(fmt.Sprint(contents[0]), `"total":4`) || strings.Contains(fmt.Sprint(contents[0]), "next-cursor") {
			t.Errorf("resources/read %s on %s = %v, %v", streamsURI, node, read, e)
		}
	}
	if _, failed := call("a", ToolInspect, map[string]any{"cursor": "nope"}); !failed {
		t.Error("inspect with a bad cursor did not fail")
	}
}

// TestTaskOfStreamEndedAfterServerClosed: serve closes its MCP server
// before its host, which runs the streams until it stops them; a stream
// task's stream that gives outputs, and ends, in between has them kept
// all the same. Another host then finishes the task when it is asked for
// its result alone (no tasks/get): every output once, in order.
func TestTaskOfStreamEndedAfterServerClosed(t *testing.T) {
	ns := clustertest.Server(t, clustertest.Options{})
	a := newClusterFixture(t, ns.ClientURL(), "a")
	b := newClusterFixture(t, ns.ClientURL(), "b")
	urlA, urlB := a.ts.URL+PathStreamable, b.ts.URL+PathStreamable
	ha, hb := legacyInit(t, urlA), legacyInit(t, urlB)
	const id = "tail"
	if _, e := rpc(t, urlA, ha, "tools/call", map[string]any{"name": ToolStart, "arguments": startArgs(id), "task": map[string]any{}}); e != nil {
		t.Fatal(e)
	}
	a.feed(context.Background(), id, values(2)...)
	waitFor(t, "a to process 2 chunks", func() bool {
		in, err := a.host.Provider().Info(id, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
		return err == nil && in.Stats.ProcessedChunks == 2
	})
	a.srv.Close()
	a.feed(context.Background(), id, append(values(2), end)...)
	waitFor(t, "the stream to end on a", func() bool {
		st, err := a.host.Provider().Status(t.Context(), id)
		return err == nil && st.State == provider.StateCompleted
	})
	a.shutDown()

	res, e := rpc(t, urlB, hb, methodTasksResult, map[string]any{"taskId": id})
	if e != nil || res["isError"] != false {
		t.Fatalf("tasks/result on b = %v, %v", res, e)
	}
	var out streamResult
	content, _ := res["content"].([]any)
	block, _ := content[0].(map[string]any)
	if err := json.Unmarshal([]byte(fmt.Sprint(block["text"])), &out); err != nil {
		t.Fatalf("tasks/result: %v\n%v", err, res)
	}
	var outs []string
	for _, o := range out.Outputs {
		outs = append(outs, string(o))
	}
	want := []string{`{"n":1,"value":1}`, `{"n":2,"value":2}`, `{"n":3,"value":1}`, `{"n":4,"value":2}`, `{"total":5}`}
	if out.State != provider.StateCompleted || !slices.Equal(outs, want) || out.OutputCount != 5 || out.Lost != 0 {
		t.Errorf("tasks/result on b: state %s outputs %v (count %d, lost %d); want completed, %v", out.State, outs, out.OutputCount, out.Lost, want)
	}
}
