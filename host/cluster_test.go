package host_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/cluster/clustertest"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// clusterHost opens a host of the cluster at ns, reading the reference
// server at src.
func clusterHost(t *testing.T, ns *server.Server, node, src string) *host.Host {
	t.Helper()
	h, _, err := openClusterHost(ns.ClientURL(), node, src)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// openClusterHost opens a host of the cluster at natsURL with the default
// transports and a mock one (a source that cannot replay), reading the
// reference server at src, with a lease TTL of 1 s.
func openClusterHost(natsURL, node, src string) (*host.Host, *mock.Transport, error) {
	return openClusterHostWith(cluster.Options{URLs: []string{natsURL}, Node: node}, src)
}

// openClusterHostBalanced is openClusterHost; balanced spreads new streams
// by load.
func openClusterHostBalanced(natsURL, node, src string, balanced bool) (*host.Host, *mock.Transport, error) {
	return openClusterHostWith(cluster.Options{URLs: []string{natsURL}, Node: node, Balanced: balanced}, src)
}

// openClusterHostWith is openClusterHost with the cluster options copts (a
// lease TTL of 1 s unless they set one).
func openClusterHostWith(copts cluster.Options, src string) (*host.Host, *mock.Transport, error) {
	if copts.LeaseTTL == 0 {
		copts.LeaseTTL = time.Second
	}
	mk := &mock.Transport{}
	h, err := host.Open(host.OpenOptions{
		Options: host.Options{Streams: provider.Options{ServerURL: src, LookupEnv: env(nil),
			Transports: transport.NewCatalog(append(host.DefaultTransports().Kinds(), mock.Kind(mk))...)}},
		Cluster: &copts,
	})
	return h, mk, err
}

// sumProgram starts a stream of the reference server's counter that sums
// and counts what it reads: every chunk exactly once gives :count N and
// :sum N(N+1)/2.
const sumProgram = `
(defn proc [state chunk meta]
  (let [n (get-in chunk [:chunk :n] 0)]
    {:state {:count (inc (:count state)) :sum (+ (:sum state) n)} :output n}))
(call :mcp.stream.start {:stream-id %q :endpoint "counter.v1" :transport %s :processor proc
                         :initial-state {:count 0 :sum 0}
                         :config {:limit %d :interval_ms %d}})`

// sumsOf compiles sumProgram for stream id over transport (:sse or :mock).
func sumsOf(t testing.TB, id, transport string, limit, intervalMs int) *rtfs.Program {
	t.Helper()
	prog, err := rtfs.Compile(id+".rtfs", fmt.Appendf(nil, sumProgram, id, transport, limit, intervalMs))
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

// wantSums is the final state of a sums stream of limit chunks, each
// counted once.
func wantSums(limit int) string { return fmt.Sprintf("{:count %d :sum %d}", limit, limit*(limit+1)/2) }

func processed(t testing.TB, h *host.Host, id string) int64 {
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
	ns := clustertest.Server(t, clustertest.Options{})
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
	if _, err := a.Run(context.Background(), sumsOf(t, "sums", ":sse", limit, 3)); err != nil {
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
	if st, err := b.Provider().Pause(t.Context(), "sums"); err != nil || st.State != provider.StatePaused {
		t.Fatalf("pause from b: %+v %v", st, err)
	}
	if st, _ := a.Provider().Status(t.Context(), "sums"); st.State != provider.StatePaused {
		t.Fatalf("a's stream is %s after b paused it", st.State)
	}
	v, err := b.Provider().Inspect("sums", provider.InspectOptions{})
	if err != nil || get(v, "status", "state") != rtfs.Keyword("paused") {
		t.Fatalf("inspect from b: %v %v", v, err)
	}
	if st, err := b.Provider().Resume(t.Context(), "sums"); err != nil || st.State != provider.StateActive {
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
	if want := wantSums(limit); state != want {
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

// startSource starts the reference server; the test closes it.
func startSource(t testing.TB) string {
	t.Helper()
	src := localserver.New(localserver.Options{})
	if err := src.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src.URL() + "/sse"
}

// awaitSums waits for stream id to end, asked through h (which forwards to
// its owner), and checks its final state and count.
func awaitSums(t testing.TB, h *host.Host, id string, limit int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := h.Provider().Await(ctx, id); err != nil {
		t.Fatalf("await %s: %v", id, err)
	}
	v, err := h.Provider().Inspect(id, provider.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(get(v, "current-state")), wantSums(limit); got != want {
		t.Fatalf("stream %s ended with %s, want %s: a chunk was lost or counted twice", id, got, want)
	}
	if n := get(v, "stats", "processed-chunks"); n != rtfs.Int(limit) {
		t.Fatalf("stream %s processed %v chunks, want %d", id, n, limit)
	}
}

// takenOver waits until h runs stream id and has processed a chunk of its
// own, and returns when that happened.
func takenOver(t testing.TB, h *host.Host, id string) time.Time {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	first := int64(-1)
	for time.Now().Before(deadline) {
		if slices.Contains(h.Provider().StreamIDs(), id) {
			n := processed(t, h, id)
			if first < 0 {
				first = n
			} else if n > first {
				return time.Now()
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s was not taken over", id)
	return time.Time{}
}

// TestClusterKillOwner: the owner of a stream, a child process, is killed
// with SIGKILL mid-stream; the other host takes the stream over once the
// owner's heartbeat expires, and the final state equals the uninterrupted
// run's: over a source that replays from the cursor (SSE) and over one that
// cannot (journal mode: the chunks the owner had journaled and not
// processed are processed by the new owner, and its producer resumes after
// the last one journaled).
func TestClusterKillOwner(t *testing.T) {
	for _, tc := range []struct{ name, transport string }{{"sse", ":sse"}, {"journal", ":mock"}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := clustertest.Server(t, clustertest.Options{})
			url := startSource(t)
			const limit = 400
			a := startClusterChild(t, childSpec{NATS: ns.ClientURL(), Node: "a", Src: url, Transport: tc.transport,
				IDs: []string{"k"}, Limit: limit, Interval: 3})
			b, mk, err := openClusterHost(ns.ClientURL(), "b", url)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			stopFeed := feedAll(context.Background(), mk, []string{"k"}, limit, 3)
			defer stopFeed()
			waitUntil(t, "a to process 60 chunks", func() bool { return processed(t, b, "k") >= 60 })
			if ids := b.Provider().StreamIDs(); len(ids) != 0 {
				t.Fatalf("b runs %v before the kill", ids)
			}
			a.kill()
			killed := time.Now()
			t.Logf("failover: %v from SIGKILL to the first chunk processed by b (lease TTL 1s)", takenOver(t, b, "k").Sub(killed))
			awaitSums(t, b, "k", limit)
		})
	}
}

// TestClusterZombie: the owner is stopped (SIGSTOP) past its lease; the
// other host takes the stream over; when the owner continues (SIGCONT) its
// next commit is refused by JetStream, so it stops the stream locally
// ("moved"), and the final state is the one of a single run.
func TestClusterZombie(t *testing.T) {
	ns := clustertest.Server(t, clustertest.Options{})
	url := startSource(t)
	const limit = 500
	a := startClusterChild(t, childSpec{NATS: ns.ClientURL(), Node: "a", Src: url, Transport: ":sse",
		IDs: []string{"z"}, Limit: limit, Interval: 3})
	b := clusterHost(t, ns, "b", url)
	defer b.Close()
	waitUntil(t, "a to process 60 chunks", func() bool { return processed(t, b, "z") >= 60 })
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	takenOver(t, b, "z")
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.waitLine("moved z", 20*time.Second); !ok {
		t.Fatal("the zombie did not stop its stream after it was taken over")
	}
	awaitSums(t, b, "z", limit)
	a.stop()
}

// TestClusterNATSRestart: NATS goes away under load and comes back on the
// same address and storage. Commits wait meanwhile (the streams stop
// taking chunks) and go on after; hosts whose heartbeat expired in the
// outage may lose streams to each other, fenced. Every stream ends with
// every chunk counted once.
func TestClusterNATSRestart(t *testing.T) {
	dir := t.TempDir()
	ns1 := clustertest.Server(t, clustertest.Options{Dir: dir})
	port := ns1.Addr().(*net.TCPAddr).Port
	url := startSource(t)
	natsURL := ns1.ClientURL()
	a, _, err := openClusterHost(natsURL, "a", url)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _, err := openClusterHost(natsURL, "b", url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const limit = 300
	ids := []string{"r1", "r2", "r3", "r4"}
	for i, id := range ids {
		h := []*host.Host{a, b}[i%2]
		if _, err := h.Run(context.Background(), sumsOf(t, id, ":sse", limit, 5)); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the streams to process 40 chunks", func() bool { return processed(t, a, "r1") >= 40 })
	ns1.Shutdown()
	ns1.WaitForShutdown()
	time.Sleep(1500 * time.Millisecond)
	clustertest.Server(t, clustertest.Options{Dir: dir, Port: port})
	for _, id := range ids {
		awaitSums(t, a, id, limit)
	}
}

// TestCluster1000Streams: 1,000 streams over 3 hosts, one of them (a
// child process) killed mid-way: the other two take its streams over and
// every stream completes with every chunk counted once.
func TestCluster1000Streams(t *testing.T) {
	ns := clustertest.Server(t, clustertest.Options{})
	url := startSource(t)
	const n, limit = 1000, 30
	var ids [3][]string
	for i := range n {
		ids[i%3] = append(ids[i%3], fmt.Sprintf("s%04d", i))
	}
	a := clusterHost(t, ns, "a", url)
	defer a.Close()
	b := clusterHost(t, ns, "b", url)
	defer b.Close()
	c := startClusterChild(t, childSpec{NATS: ns.ClientURL(), Node: "c", Src: url, Transport: ":sse",
		IDs: ids[2], Limit: limit, Interval: 20})
	for i, h := range []*host.Host{a, b} {
		for _, id := range ids[i] {
			if _, err := h.Run(context.Background(), sumsOf(t, id, ":sse", limit, 20)); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(200 * time.Millisecond)
	c.kill()
	for i := range ids {
		for _, id := range ids[i] {
			awaitSums(t, []*host.Host{a, b}[i%2], id, limit)
		}
	}
}

// TestClusterBalancedPlacement: with balanced placement, streams all
// started on one host are offered to the less loaded hosts, which take
// them over from their cursor: each host ends up running about a third,
// and every stream completes with every chunk counted once. Placement
// balances the streams that run at once, so each stream is paused as soon
// as it starts, and all are resumed once spread: starting 30 takes longer
// on a loaded machine than a stream lasts, and a stream that has ended
// stays where it ran.
func TestClusterBalancedPlacement(t *testing.T) {
	ns := clustertest.Server(t, clustertest.Options{})
	url := startSource(t)
	var hosts []*host.Host
	for _, node := range []string{"a", "b", "c"} {
		h, _, err := openClusterHostBalanced(ns.ClientURL(), node, url, true)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		hosts = append(hosts, h)
	}
	const n, limit = 30, 150
	for i := range n {
		id := fmt.Sprintf("p%02d", i)
		if _, err := hosts[0].Run(context.Background(), sumsOf(t, id, ":sse", limit, 10)); err != nil {
			t.Fatal(err)
		}
		// Through any host: placement may be moving it already.
		waitUntil(t, id+" paused", func() bool { _, err := hosts[0].Provider().Pause(t.Context(), id); return err == nil })
	}
	waitUntil(t, "the streams to spread", func() bool {
		for _, h := range hosts {
			if k := len(h.Provider().Live()); k < n/3-1 {
				return false
			}
		}
		return true
	})
	for i := range n {
		id := fmt.Sprintf("p%02d", i)
		waitUntil(t, id+" resumed", func() bool { _, err := hosts[0].Provider().Resume(t.Context(), id); return err == nil })
	}
	for i := range n {
		awaitSums(t, hosts[0], fmt.Sprintf("p%02d", i), limit)
	}
}

// BenchmarkFailover measures the failover time with a lease TTL of 1 s:
// from the SIGKILL of a stream's owner (a child process) to the first
// chunk the other host processes. Run it with -benchtime=5x; it reports
// ms/failover (ns/op is the whole cycle, start to takeover).
func BenchmarkFailover(b *testing.B) {
	ns := clustertest.Server(b, clustertest.Options{})
	url := startSource(b)
	h, _, err := openClusterHost(ns.ClientURL(), "b", url)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("f%d", i)
		a := startClusterChild(b, childSpec{NATS: ns.ClientURL(), Node: fmt.Sprintf("a%d", i), Src: url, Transport: ":sse",
			IDs: []string{id}, Limit: 100000, Interval: 2})
		waitUntil(b, "the child to process 20 chunks", func() bool { return processed(b, h, id) >= 20 })
		a.kill()
		killed := time.Now()
		total += takenOver(b, h, id).Sub(killed)
		if _, err := h.Provider().Cancel(b.Context(), id); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
}

// TestClusterParkedProgramMoves: a program parked on :mcp.stream.await on
// a host that leaves is taken over with its stream by another host, which
// resumes it when the stream ends; its outcome is stored once.
func TestClusterParkedProgramMoves(t *testing.T) {
	ns := clustertest.Server(t, clustertest.Options{})
	url := startSource(t)
	a := clusterHost(t, ns, "a", url)
	b := clusterHost(t, ns, "b", url)
	defer b.Close()
	const limit = 300
	src := fmt.Sprintf(sumProgram, "pk", ":sse", limit, 5) + `
(let [st (call :mcp.stream.await {:stream-id "pk"})] {:awaited true})`
	prog, err := rtfs.Compile("parked.rtfs", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { _, err := a.Run(context.Background(), prog); runErr <- err }()
	waitUntil(t, "a to process 30 chunks", func() bool { return processed(t, a, "pk") >= 30 })
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-runErr; !errors.Is(err, host.ErrParkInterrupted) {
		t.Fatalf("Run on a after Close = %v, want ErrParkInterrupted", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitUntil(t, "b to take the parked program over", func() bool {
		res, err := b.ResumedPrograms(ctx)
		return err == nil && len(res) == 1
	})
	res, _ := b.ResumedPrograms(ctx)
	if r := res[0]; r.Err != "" || r.Value != "{:awaited true}" || r.StreamID != "pk" {
		t.Fatalf("resumed program = %+v", r)
	}
	awaitSums(t, b, "pk", limit)
}

// TestClusterNATSLeaderKilled: three hosts on a NATS cluster of three
// servers (the RTFSHOST stream with three replicas) run 30 streams with a
// lease TTL of 3 s; the server leading the stream is killed (SIGKILL, so its
// peers elect a new leader after their election timeout, 4-9 s, longer than
// the TTL). No host failed, so no stream changes its owner: no claim, no
// fenced commit; and every stream ends exact.
func TestClusterNATSLeaderKilled(t *testing.T) {
	nc := clustertest.Cluster(t, clustertest.ClusterOptions{})
	url := startSource(t)
	var hosts []*host.Host
	for i, node := range []string{"a", "b", "c"} {
		urls := nc.URLs()
		urls = append(urls[i:], urls[:i]...) // each host on another server first
		h, _, err := openClusterHostWith(cluster.Options{URLs: urls, Node: node, LeaseTTL: 3 * time.Second, Replicas: 3}, url)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		hosts = append(hosts, h)
	}
	const n, limit = 30, 400
	for i := range n {
		if _, err := hosts[i%3].Run(context.Background(), sumsOf(t, fmt.Sprintf("l%02d", i), ":sse", limit, 30)); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the streams to process 10 chunks", func() bool { return processed(t, hosts[2], "l29") >= 10 })
	var before [3]cluster.Stats
	for i, h := range hosts {
		before[i] = h.Cluster().Stats()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	leader, err := nc.StreamLeader(ctx, "RTFSHOST")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	nc.Kill(leader)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		now, err := nc.StreamLeader(ctx, "RTFSHOST")
		cancel()
		if err == nil && now != leader {
			t.Logf("the RTFSHOST stream's leader %s killed; %s elected %v later", leader, now, time.Since(killed).Round(100*time.Millisecond))
			break
		}
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("no new leader 30s after %s was killed: %v", leader, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range n {
		awaitSums(t, hosts[i%3], fmt.Sprintf("l%02d", i), limit)
	}
	moved := 0
	for i, h := range hosts {
		st := h.Cluster().Stats()
		claims, fenced := st.Claims-before[i].Claims, st.Fenced-before[i].Fenced
		moved += int(claims)
		if claims != 0 || fenced != 0 {
			t.Errorf("host %s: %d claims and %d fenced commits while no host failed", []string{"a", "b", "c"}[i], claims, fenced)
		}
	}
	t.Logf("streams moved: %d of %d", moved, n)
}

// TestClusterStatusOfKilledOwner: after its owner's SIGKILL, until its
// lease expires, another host answers status and inspect of a stream from
// its stored records, marked stale with the owner and its last heartbeat;
// pause is refused, naming the owner. Once the lease expires the stream is
// taken over and answers fresh again, and it ends exact.
func TestClusterStatusOfKilledOwner(t *testing.T) {
	ns := clustertest.Server(t, clustertest.Options{})
	url := startSource(t)
	const limit, ttl = 400, 5 * time.Second
	a := startClusterChild(t, childSpec{NATS: ns.ClientURL(), Node: "a", Src: url, Transport: ":sse",
		IDs: []string{"k"}, Limit: limit, Interval: 3, LeaseTTL: ttl})
	ofA := ns.NumClients() // a's connections: b has none yet
	b := clusterHost(t, ns, "b", url)
	defer b.Close()
	waitUntil(t, "a to process 30 chunks", func() bool { return processed(t, b, "k") >= 30 })
	all := ns.NumClients()
	a.kill()
	killed := time.Now()
	// A request that NATS routes to a's connection before it has seen that
	// connection close gets no answer until the forward timeout; once it
	// has, the owner's absence is known at once (no responders).
	waitUntil(t, "NATS to drop a's connections", func() bool { return ns.NumClients() <= all-ofA })
	st, err := b.Provider().Status(t.Context(), "k")
	if err != nil {
		t.Fatalf("status of the stream of a killed host, within its lease: %v", err)
	}
	if time.Since(killed) >= ttl {
		t.Fatalf("the status took %v, past the lease TTL: this test checks nothing", time.Since(killed))
	}
	if st.State != provider.StateActive || st.Stale == nil || st.Stale.Owner != "a" || st.Stale.SinceEpochMs == nil ||
		*st.Stale.SinceEpochMs > killed.UnixMilli() || killed.Sub(time.UnixMilli(*st.Stale.SinceEpochMs)) > ttl {
		t.Fatalf("status within the lease = %+v (stale %+v), want active, stale since a's last heartbeat", st, st.Stale)
	}
	in, err := b.Provider().Info("k", provider.InspectOptions{})
	if err != nil || in.Stale == nil || in.Stale.Owner != "a" || in.Stats.ProcessedChunks == 0 {
		t.Fatalf("inspect within the lease = %+v, %v; want the stored snapshot, stale", in, err)
	}
	if v := get(in.Value(), "stale", "owner"); v != rtfs.String("a") {
		t.Fatalf("the inspect map's :stale :owner is %v", v)
	}
	if _, err := b.Provider().Pause(t.Context(), "k"); err == nil || !strings.Contains(err.Error(), "owner a does not answer") {
		t.Fatalf("pause within the lease: %v, want an error naming the owner", err)
	}
	takenOver(t, b, "k")
	if st, err := b.Provider().Status(t.Context(), "k"); err != nil || st.Stale != nil {
		t.Fatalf("status after the takeover: %+v %v, want fresh", st, err)
	}
	awaitSums(t, b, "k", limit)
}

// TestClusterUpgradeForwarded: a processor swap asked of a host that does
// not run the stream is made by the host that does; the stream goes on
// there with the new processor, every chunk counted once.
func TestClusterUpgradeForwarded(t *testing.T) {
	ns := clustertest.Server(t, clustertest.Options{})
	url := startSource(t)
	a := clusterHost(t, ns, "a", url)
	defer a.Close()
	b := clusterHost(t, ns, "b", url)
	defer b.Close()
	const limit = 200
	if _, err := a.Run(context.Background(), sumsOf(t, "up", ":sse", limit, 5)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "20 chunks", func() bool { return processed(t, a, "up") >= 20 })
	prog, err := rtfs.Compile("new.rtfs", []byte(`
(defn proc [state chunk meta]
  (let [n (get-in chunk [:chunk :n] 0)]
    {:state {:count (inc (:count state)) :sum (+ (:sum state) n) :new (inc (:new state 0))}}))`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Provider().Upgrade(context.Background(), provider.Upgrade{StreamID: "up", Program: prog})
	if err != nil {
		t.Fatal(err)
	}
	if res.To.File != "new.rtfs" || res.From.File != "up.rtfs" || res.State != provider.StateActive {
		t.Fatalf("upgrade through b: %+v", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.Provider().Await(ctx, "up"); err != nil {
		t.Fatal(err)
	}
	v, err := a.Provider().Inspect("up", provider.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := get(v, "current-state", "new").(rtfs.Int)
	if get(v, "current-state", "count") != rtfs.Int(limit) || get(v, "current-state", "sum") != rtfs.Int(limit*(limit+1)/2) || n < 1 || n > limit-20 {
		t.Fatalf("the stream ended with %v: want every chunk once, the new processor's after the swap", get(v, "current-state"))
	}
}

// TestClusterForwardHonoursContext: a request forwarded over NATS to a
// stream's owner that holds its lease but never answers ends when the
// caller's context does, with an error matching context.DeadlineExceeded,
// not at provider.DefaultForwardTimeout; a context already cancelled asks
// nobody.
func TestClusterForwardHonoursContext(t *testing.T) {
	ns := clustertest.Server(t, clustertest.Options{})
	owner, err := cluster.Connect(t.Context(), cluster.Options{URLs: []string{ns.ClientURL()}, Node: "a", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	asked := make(chan string, 4)
	hang := make(chan struct{})
	if err := owner.Serve(func(_ context.Context, req []byte) []byte {
		asked <- string(req)
		<-hang // the owner never answers while the test runs
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	defer close(hang) // before owner.Close
	if err := owner.Claim(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	b := clusterHost(t, ns, "b", "")
	defer b.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = b.Provider().Pause(ctx, "k")
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Pause of a stream whose owner never answers = %v, want context.DeadlineExceeded", err)
	}
	if took >= provider.DefaultForwardTimeout/2 {
		t.Fatalf("Pause returned after %v: the caller's 500ms deadline did not bound it", took)
	}
	if req := <-asked; !strings.Contains(req, `"pause"`) {
		t.Fatalf("the owner was asked %s, want the pause", req)
	}

	ended, cancel2 := context.WithCancel(t.Context())
	cancel2()
	if _, err := b.Provider().Status(ended, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Status with a cancelled context = %v, want context.Canceled", err)
	}
	select {
	case req := <-asked:
		t.Fatalf("a cancelled context still asked the owner %s", req)
	case <-time.After(100 * time.Millisecond):
	}
}
