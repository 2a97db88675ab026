package mcpserver

import (
	"context"
	"fmt"
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
		st, err := a.host.Provider().Status("ct2")
		return err == nil && st.State == provider.StateCancelled
	})
	if ids := b.host.Provider().Live(); len(ids) != 0 {
		t.Fatalf("b runs %v; the stream is a's", ids)
	}
}
