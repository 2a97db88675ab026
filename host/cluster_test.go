package host_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// natsServer starts an embedded nats-server with JetStream on 127.0.0.1
// port 0, its data in a temporary directory; the test stops it.
func natsServer(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// clusterHost opens a host of the cluster at ns, reading the reference
// server at src.
func clusterHost(t *testing.T, ns *server.Server, node, src string) *host.Host {
	t.Helper()
	h, err := host.Open(host.OpenOptions{
		Options: host.Options{Streams: provider.Options{ServerURL: src, LookupEnv: env(nil)}},
		Cluster: &cluster.Options{URLs: []string{ns.ClientURL()}, Node: node, LeaseTTL: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// sumProgram starts a stream of the reference server's counter that sums
// and counts what it reads: every chunk exactly once gives :count N and
// :sum N(N+1)/2.
const sumProgram = `
(defn proc [state chunk meta]
  (let [n (get-in chunk [:chunk :n] 0)]
    {:state {:count (inc (:count state)) :sum (+ (:sum state) n)} :output n}))
(call :mcp.stream.start {:stream-id "sums" :endpoint "counter.v1" :transport :sse :processor proc
                         :initial-state {:count 0 :sum 0}
                         :config {:limit %d :interval_ms 3}})`

func processed(t *testing.T, h *host.Host, id string) int64 {
	v, err := h.Provider().Inspect(id, provider.InspectOptions{})
	if err != nil {
		return -1
	}
	n, _ := get(v, "stats", "processed-chunks").(rtfs.Int)
	return int64(n)
}

// TestClusterHandover: two hosts share a JetStream. A stream started on a
// answers status, pause, resume and inspect from b (forwarded to its
// owner); when a leaves cleanly, b takes it over at once (no TTL to wait)
// from the committed cursor, and it ends with every chunk counted once.
func TestClusterHandover(t *testing.T) {
	ns := natsServer(t)
	src := localserver.New(localserver.Options{})
	if err := src.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	url := src.URL() + "/sse"
	a := clusterHost(t, ns, "a", url)
	b := clusterHost(t, ns, "b", url)
	defer b.Close()

	const limit = 400
	prog, err := rtfs.Compile("sums.rtfs", fmt.Appendf(nil, sumProgram, limit))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(context.Background(), prog); err != nil {
		a.Close()
		t.Fatal(err)
	}
	waitUntil(t, "a to process 30 chunks", func() bool { return processed(t, a, "sums") >= 30 })
	if ids := b.Provider().StreamIDs(); len(ids) != 0 {
		t.Fatalf("b runs %v; only a should", ids)
	}
	if o, err := b.Cluster().OwnerOf(context.Background(), "sums"); err != nil || o.Node != "a" || !o.Alive {
		t.Fatalf("owner %+v %v, want a", o, err)
	}
	if st, err := b.Provider().Pause("sums"); err != nil || st.State != provider.StatePaused {
		t.Fatalf("pause from b: %+v %v", st, err)
	}
	if st, _ := a.Provider().Status("sums"); st.State != provider.StatePaused {
		t.Fatalf("a's stream is %s after b paused it", st.State)
	}
	v, err := b.Provider().Inspect("sums", provider.InspectOptions{})
	if err != nil || get(v, "status", "state") != rtfs.Keyword("paused") {
		t.Fatalf("inspect from b: %v %v", v, err)
	}
	if st, err := b.Provider().Resume("sums"); err != nil || st.State != provider.StateActive {
		t.Fatalf("resume from b: %+v %v", st, err)
	}
	waitUntil(t, "a to process 100 chunks", func() bool { return processed(t, a, "sums") >= 100 })
	left := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "b to take the stream over", func() bool { return processed(t, b, "sums") > 0 })
	if took := time.Since(left); took > 900*time.Millisecond {
		t.Errorf("b took %v to take over a stream handed over; the TTL is 1s", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.Provider().Await(ctx, "sums"); err != nil {
		t.Fatal(err)
	}
	v, _ = b.Provider().Inspect("sums", provider.InspectOptions{})
	state := fmt.Sprint(get(v, "current-state"))
	want := fmt.Sprintf("{:count %d :sum %d}", limit, limit*(limit+1)/2)
	if state != want {
		t.Fatalf("final state %s, want %s: a chunk was lost or counted twice", state, want)
	}
	if n := processed(t, b, "sums"); n != limit {
		t.Fatalf("processed-chunks %d, want %d", n, limit)
	}
	if orphans, err := b.Cluster().Orphans(ctx); err != nil || len(orphans) != 0 {
		t.Fatalf("orphans after the end: %v %v", orphans, err)
	}
	if !strings.Contains(fmt.Sprint(get(v, "status", "state")), "completed") {
		t.Fatalf("status %v", get(v, "status"))
	}
}
