package observe_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/host/observe"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hangGuard bounds every wait, so that a bug fails a test instead of
// hanging it; no test relies on it for timing.
const hangGuard = 20 * time.Second

// program starts two streams on the mock transport: "steady" continues on
// every chunk; "stopper" pauses on its first chunk, so the chunks after it
// wait in its queue until the test cancels it.
const program = `
(defn steady [state chunk meta] {:state (inc state) :action :continue :output {:n (inc state)}})
(defn stopper [state chunk meta] {:state (inc state) :action :pause})
(call :mcp.stream.start {:endpoint "steady.v1" :transport :mock :stream-id "steady" :processor steady :initial-state 0})
(call :mcp.stream.start {:endpoint "stopper.v1" :transport :mock :stream-id "stopper" :processor stopper :initial-state 0})
`

// countingStore counts the store commits under a MemStore.
type countingStore struct {
	persistence.Store
	mu      sync.Mutex
	commits int
}

func (c *countingStore) Commit(ctx context.Context, b *persistence.Batch) error {
	c.mu.Lock()
	c.commits++
	c.mu.Unlock()
	return c.Store.Commit(ctx, b)
}

type rig struct {
	t     *testing.T
	obs   *observe.Observer
	spans *tracetest.SpanRecorder
	tp    *sdktrace.TracerProvider
	mock  *mock.Transport
	store *countingStore
	h     *host.Host
}

func newRig(t *testing.T, opts observe.Options) *rig {
	t.Helper()
	r := &rig{t: t, spans: tracetest.NewSpanRecorder(), mock: &mock.Transport{}, store: &countingStore{Store: persistence.NewMemStore()}}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	opts.Tracer = r.tp
	var err error
	if r.obs, err = observe.New(opts); err != nil {
		t.Fatal(err)
	}
	r.h, err = host.New(host.Options{
		Streams: provider.Options{
			Transports: transport.NewCatalog(mock.Kind(r.mock)),
			LookupEnv:  func(string) (string, bool) { return "", false },
			Observer:   r.obs,
		},
		Store:  r.store,
		Stdout: io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.obs.Attach(r.h.Provider()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.h.Close()
		_ = r.tp.Shutdown(context.Background())
	})
	return r
}

func (r *rig) run(ctx context.Context, src string) {
	r.t.Helper()
	prog, err := rtfs.Compile("test.rtfs", []byte(src))
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.h.Run(ctx, prog); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) send(id string, n int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	src := r.mock.Source(id)
	for i := range n {
		if err := src.Send(ctx, transport.Chunk{Data: []byte(fmt.Sprintf(`{"i":%d}`, i)), ID: fmt.Sprint(i)}); err != nil {
			r.t.Fatalf("send chunk %d to %s: %v", i, id, err)
		}
	}
}

// waitQueued waits until stream id has n chunks queued.
func (r *rig) waitQueued(id string, n int64) {
	r.t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		in, err := r.h.Provider().Info(id, provider.InspectOptions{OmitQueue: true})
		if err != nil {
			r.t.Fatal(err)
		}
		if in.Stats.QueuedChunks == n && in.Status.State == provider.StatePaused {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("stream %s: %d queued (%s), want %d queued and paused", id, in.Stats.QueuedChunks, in.Status.State, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// scrape reads the rig's /metrics the way Prometheus does, and parses it.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	ts := httptest.NewServer(h)
	defer ts.Close()
	resp, err := http.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sum adds the values of the family's series whose labels include want.
func sum(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	total := 0.0
series:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

// TestMetricsAfterAKnownRun runs two streams whose chunks are counted in
// advance and checks that /metrics says the same: chunks received,
// processed, dropped, the store batches committed, the directives, the
// stream states, and the gauges of a queue.
func TestMetricsAfterAKnownRun(t *testing.T) {
	r := newRig(t, observe.Options{SampleRatio: 1})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	r.run(ctx, program)

	r.send("steady", 5)
	r.mock.Source("steady").Close()
	if _, err := r.h.Provider().Await(ctx, "steady"); err != nil {
		t.Fatal(err)
	}
	r.send("stopper", 4) // the first pauses it; three wait in its queue
	r.waitQueued("stopper", 3)

	live := scrape(t, r.obs.Handler())
	if got := sum(t, live, "rtfshost_queue_depth", map[string]string{"endpoint": "stopper.v1", "transport": "mock"}); got != 3 {
		t.Errorf("queue depth of the paused stream = %v, want 3", got)
	}
	if got := sum(t, live, "rtfshost_queue_capacity", map[string]string{"endpoint": "stopper.v1"}); got != 32 {
		t.Errorf("queue capacity = %v, want 32", got)
	}
	if got := sum(t, live, "rtfshost_streams", map[string]string{"state": "paused"}); got != 1 {
		t.Errorf("paused streams = %v, want 1", got)
	}

	if _, err := r.h.Provider().Cancel(ctx, "stopper"); err != nil {
		t.Fatal(err)
	}
	if err := r.h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	r.h.Close() // commits every batch submitted

	fams := scrape(t, r.obs.Handler())
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"rtfshost_chunks_received_total", nil, 9},
		{"rtfshost_chunks_received_total", map[string]string{"endpoint": "steady.v1", "transport": "mock"}, 5},
		{"rtfshost_chunks_processed_total", nil, 6},
		{"rtfshost_chunks_processed_total", map[string]string{"endpoint": "stopper.v1"}, 1},
		{"rtfshost_chunks_dropped_total", nil, 3},
		{"rtfshost_chunks_dropped_total", map[string]string{"endpoint": "stopper.v1"}, 3},
		{"rtfshost_chunk_bytes_received_total", nil, 9 * 7},
		{"rtfshost_processor_call_duration_seconds", nil, 6},
		{"rtfshost_directives_total", map[string]string{"action": "continue", "source": "processor"}, 5},
		{"rtfshost_directives_total", map[string]string{"action": "pause", "source": "processor"}, 1},
		{"rtfshost_directives_total", map[string]string{"action": "cancel", "source": "request"}, 1},
		{"rtfshost_streams_started_total", map[string]string{"transport": "mock"}, 2},
		{"rtfshost_streams_ended_total", map[string]string{"state": "completed", "end_reason": "source-ended"}, 1},
		{"rtfshost_streams_ended_total", map[string]string{"state": "cancelled", "end_reason": "request"}, 1},
		{"rtfshost_streams", map[string]string{"state": "completed"}, 1},
		{"rtfshost_streams", map[string]string{"state": "cancelled"}, 1},
		{"rtfshost_streams", map[string]string{"state": "active"}, 0},
		{"rtfshost_queue_depth", nil, 0}, // no live stream: no series
		{"rtfshost_store_batches_total", map[string]string{"outcome": "failed"}, 0},
	} {
		if got := sumOrZero(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The batches of the mock streams (which journal: the mock cannot
	// replay): per stream its start, a journal entry per chunk received
	// unless it joined the entry waiting for its commit, a progress
	// snapshot per chunk processed unless it joined the one in flight
	// (docs/durability.md), and its final record. steady: 1+(1…5)+(1…5)+1,
	// stopper: 1+(1…4)+1+1.
	if got := sum(t, fams, "rtfshost_store_batches_total", map[string]string{"outcome": "committed"}); got < 8 || got > 19 {
		t.Errorf("store batches committed = %v, want 8 to 19", got)
	}
	r.store.mu.Lock()
	commits := r.store.commits
	r.store.mu.Unlock()
	if got := sum(t, fams, "rtfshost_store_commit_duration_seconds", nil); got != float64(commits) {
		t.Errorf("store commits observed = %v, the store saw %d", got, commits)
	}
	if got := sum(t, fams, "rtfshost_store_commit_batches", nil); got != float64(commits) {
		t.Errorf("batch-size samples = %v, want one per commit (%d)", got, commits)
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("no %s: the Go and process collectors are missing", name)
		}
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stream_id" {
					t.Errorf("%s has a stream_id label without PerStream", name)
				}
			}
		}
	}
}

func sumOrZero(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	if _, ok := fams[name]; !ok {
		return 0
	}
	return sum(t, fams, name, labels)
}

// TestPerStreamLabelsAndBoundedEndpoints checks the opt-in stream_id label
// and that endpoints beyond MaxEndpoints share the label "other", with
// credentials and query removed from URL endpoints.
func TestPerStreamLabelsAndBoundedEndpoints(t *testing.T) {
	r := newRig(t, observe.Options{PerStream: true, MaxEndpoints: 2})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var src strings.Builder
	src.WriteString("(defn p [s c m] {:state s :action :continue})\n")
	for i, ep := range []string{"a.v1", "http://user:secret@example.test/x?token=abc", "c.v1"} {
		fmt.Fprintf(&src, "(call :mcp.stream.start {:endpoint %q :transport :mock :stream-id \"s%d\" :processor p})\n", ep, i)
	}
	r.run(ctx, src.String())
	for i := range 3 {
		r.send(fmt.Sprintf("s%d", i), 1)
	}
	// The mock's Send returns once the source has the chunk; the stream
	// counts it when it takes it into its queue, a moment later.
	var fams map[string]*dto.MetricFamily
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(5 * time.Millisecond) {
		fams = scrape(t, r.obs.Handler())
		if sumOrZero(t, fams, "rtfshost_chunks_received_total", nil) >= 3 || time.Now().After(deadline) {
			break
		}
	}
	for i, ep := range []string{"a.v1", "http://example.test/x", "other"} {
		labels := map[string]string{"stream_id": fmt.Sprintf("s%d", i), "endpoint": ep}
		if got := sum(t, fams, "rtfshost_chunks_received_total", labels); got != 1 {
			t.Errorf("chunks received %v = %v, want 1", labels, got)
		}
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "secret") || strings.Contains(l.GetValue(), "token=") {
					t.Errorf("%s leaks a credential in label %s=%q", f.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// TestSpans checks the spans of a stream started under an MCP call whose
// _meta carries a traceparent: the call's span is the remote parent's
// child, with the MCP attributes; the stream's span is the call's child;
// the transport's and the sampled processor calls' spans are the stream's.
func TestSpans(t *testing.T) {
	r := newRig(t, observe.Options{SampleRatio: 0.5})
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx, call := r.obs.StartCall(context.Background(), observe.CallInfo{
		Method: "tools/call", Tool: "rtfs.eval", SessionID: "S1", RequestID: "7",
		Meta: map[string]any{"traceparent": "00-" + traceID + "-" + parentID + "-01", "progressToken": "x"},
	})
	r.run(ctx, `(defn steady [state chunk meta] {:state (inc state) :action :continue})
(call :mcp.stream.start {:endpoint "steady.v1" :transport :mock :stream-id "steady" :processor steady :initial-state 0})`)
	call.End(observe.OutcomeOK, "")
	r.send("steady", 4)
	r.mock.Source("steady").Close()
	wctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := r.h.Provider().Await(wctx, "steady"); err != nil {
		t.Fatal(err)
	}
	r.h.Close()

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range r.spans.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	one := func(name string) sdktrace.ReadOnlySpan {
		t.Helper()
		if len(byName[name]) != 1 {
			t.Fatalf("%d spans named %q, want 1 (spans: %v)", len(byName[name]), name, names(byName))
		}
		return byName[name][0]
	}
	mcpSpan := one("tools/call rtfs.eval")
	if got := mcpSpan.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("MCP span trace %s, want the incoming %s", got, traceID)
	}
	if got := mcpSpan.Parent().SpanID().String(); got != parentID || !mcpSpan.Parent().IsRemote() {
		t.Errorf("MCP span parent %s (remote %v), want the incoming %s", got, mcpSpan.Parent().IsRemote(), parentID)
	}
	if mcpSpan.SpanKind() != trace.SpanKindServer {
		t.Errorf("MCP span kind %v, want server", mcpSpan.SpanKind())
	}
	wantAttrs(t, mcpSpan, map[attribute.Key]string{
		"mcp.method.name": "tools/call", "gen_ai.tool.name": "rtfs.eval", "mcp.session.id": "S1", "jsonrpc.request.id": "7",
	})
	streamSpan := one("rtfshost.stream steady.v1")
	if streamSpan.Parent().SpanID() != mcpSpan.SpanContext().SpanID() {
		t.Error("the stream's span is not the MCP call's child")
	}
	wantAttrs(t, streamSpan, map[attribute.Key]string{
		"rtfshost.stream.id": "steady", "rtfshost.stream.transport": "mock",
		"rtfshost.stream.state": "completed", "rtfshost.stream.end_reason": "source-ended",
	})
	tr := one("rtfshost.transport mock")
	if tr.Parent().SpanID() != streamSpan.SpanContext().SpanID() {
		t.Error("the transport's span is not the stream's child")
	}
	procs := byName["rtfshost.processor steady"]
	if len(procs) != 2 { // ratio 0.5 of 4 calls: the first and the third
		t.Fatalf("%d processor spans at ratio 0.5 over 4 chunks, want 2", len(procs))
	}
	for _, p := range procs {
		if p.Parent().SpanID() != streamSpan.SpanContext().SpanID() {
			t.Error("a processor span is not the stream's child")
		}
		if !p.EndTime().After(p.StartTime()) && !p.EndTime().Equal(p.StartTime()) {
			t.Error("a processor span ends before it starts")
		}
	}
	wantAttrs(t, procs[0], map[attribute.Key]string{"rtfshost.chunk.seq": "1"}) // the first chunk is chunk 1
}

// TestSpansOffByDefaultRatio checks that the default ratio does not make a
// span per chunk: 300 chunks give the first call's span and at most a few.
func TestSpansOffByDefaultRatio(t *testing.T) {
	r := newRig(t, observe.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	r.run(ctx, `(defn steady [state chunk meta] {:state (inc state) :action :continue})
(call :mcp.stream.start {:endpoint "steady.v1" :transport :mock :stream-id "steady" :processor steady :initial-state 0})`)
	r.send("steady", 300)
	r.mock.Source("steady").Close()
	if _, err := r.h.Provider().Await(ctx, "steady"); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range r.spans.Ended() {
		if strings.HasPrefix(s.Name(), "rtfshost.processor") {
			n++
		}
	}
	if n != 3 { // DefaultSampleRatio 0.01: calls 0, 100 and 200
		t.Errorf("%d processor spans over 300 chunks at the default ratio, want 3", n)
	}
}

func names(m map[string][]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]string) {
	t.Helper()
	got := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		got[kv.Key] = kv.Value.String()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: %s = %q, want %q", s.Name(), k, got[k], v)
		}
	}
}

// TestOutputsDroppedByPriority: the low outputs a subscriber's Outbox drops
// are counted by priority.
func TestOutputsDroppedByPriority(t *testing.T) {
	r := newRig(t, observe.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	r.run(ctx, `
(defn chatty [state chunk meta] {:state (inc state) :output state :priority :low})
(call :mcp.stream.start {:endpoint "chatty.v1" :transport :mock :stream-id "chatty" :processor chatty :initial-state 0})`)
	box := provider.NewOutbox(provider.OutboxOptions{})
	sub, err := r.h.Provider().Subscribe("chatty", provider.SubscribeOptions{Receive: box.Add})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	r.send("chatty", 50) // nothing is taken: beyond a batch of 20, the oldest go
	r.mock.Source("chatty").Close()
	if _, err := r.h.Provider().Await(ctx, "chatty"); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, r.obs.Handler())
	if got := sum(t, fams, "rtfshost_outputs_dropped_total", map[string]string{"priority": "low"}); got != 30 {
		t.Errorf("low outputs dropped = %v, want 30", got)
	}
}

// TestDirectivesCountWhatHappened: rtfshost_directives_total counts the
// directives applied, by their real action and source: none for a chunk
// whose result names no action, the control chunks' own actions, the
// processor's, a :resume-after-ms running out (source timer) and requests
// that change something (pausing a paused stream applies nothing).
func TestDirectivesCountWhatHappened(t *testing.T) {
	r := newRig(t, observe.Options{SampleRatio: 1})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	r.run(ctx, `
(defn plain [state chunk meta] {:state (inc state) :output state})
(defn napper [state chunk meta]
  (if (= state 0) {:state 1 :action :pause :config {:resume-after-ms 5}} {:state (inc state) :action :continue}))
(call :mcp.stream.start {:endpoint "plain.v1" :transport :mock :stream-id "plain" :processor plain :initial-state 0})
(call :mcp.stream.start {:endpoint "napper.v1" :transport :mock :stream-id "napper" :processor napper :initial-state 0})
`)
	// plain: two ordinary chunks, a control pause, a control resume, one more.
	src := r.mock.Source("plain")
	for i, data := range []string{`{"i":0}`, `{"i":1}`, `{"action":"pause"}`, `{"action":"resume"}`, `{"i":4}`} {
		if err := src.Send(ctx, transport.Chunk{Data: []byte(data), ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	r.send("napper", 3) // pauses on the first, resumes after 5 ms, continues twice
	r.mock.Source("napper").Close()
	if _, err := r.h.Provider().Await(ctx, "napper"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(hangGuard)
	for {
		in, err := r.h.Provider().Info("plain", provider.InspectOptions{OmitQueue: true})
		if err != nil {
			t.Fatal(err)
		}
		if in.Stats.ProcessedChunks == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plain processed %d chunks, want 5", in.Stats.ProcessedChunks)
		}
		time.Sleep(time.Millisecond)
	}
	for range 2 { // the second pause changes nothing
		if _, err := r.h.Provider().Pause(ctx, "plain"); err != nil {
			t.Fatal(err)
		}
	}
	fams := scrape(t, r.obs.Handler())
	want := map[[2]string]float64{
		{"pause", "control-chunk"}:  1,
		{"resume", "control-chunk"}: 1,
		{"pause", "processor"}:      1,
		{"resume", "timer"}:         1,
		{"continue", "processor"}:   2,
		{"pause", "request"}:        1,
	}
	got := map[[2]string]float64{}
	for _, m := range fams["rtfshost_directives_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if v := m.GetCounter().GetValue(); v != 0 {
			got[[2]string{l["action"], l["source"]}] = v
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rtfshost_directives_total by action and source:\n got %v\nwant %v", got, want)
	}
}

// TestFailuresAndDeadLetters: a stream held by a processor failure counts
// in rtfshost_streams{state="failed"} and rtfshost_streams_held_total; the
// chunk it sets aside on Skip counts in rtfshost_dead_letters_total, per
// stream with PerStream.
func TestFailuresAndDeadLetters(t *testing.T) {
	r := newRig(t, observe.Options{PerStream: true})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	r.run(ctx, `
(defn picky [state chunk meta] (if (= (:i chunk) 1) (throw "no ones") {:state (inc state)}))
(call :mcp.stream.start {:endpoint "picky.v1" :transport :mock :stream-id "picky" :processor picky :initial-state 0})`)
	r.send("picky", 3)
	p := r.h.Provider()
	deadline := time.Now().Add(hangGuard)
	for st, _ := p.Status(ctx, "picky"); st.State != provider.StateFailed; st, _ = p.Status(ctx, "picky") {
		if time.Now().After(deadline) {
			t.Fatalf("the stream did not fail: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	fams := scrape(t, r.obs.Handler())
	if got := sum(t, fams, "rtfshost_streams", map[string]string{"state": "failed"}); got != 1 {
		t.Errorf("failed streams = %v, want 1", got)
	}
	if got := sum(t, fams, "rtfshost_streams_held_total", map[string]string{"kind": "processor", "transport": "mock"}); got != 1 {
		t.Errorf("held = %v, want 1", got)
	}
	if _, err := p.Skip(ctx, "picky"); err != nil {
		t.Fatal(err)
	}
	for in, _ := p.Info("picky", provider.InspectOptions{}); in.Stats.ProcessedChunks != 2; in, _ = p.Info("picky", provider.InspectOptions{}) {
		if time.Now().After(deadline) {
			t.Fatalf("the stream did not go on: %+v", in.Status)
		}
		time.Sleep(time.Millisecond)
	}
	fams = scrape(t, r.obs.Handler())
	if got := sum(t, fams, "rtfshost_dead_letters_total", map[string]string{"stream_id": "picky", "endpoint": "picky.v1"}); got != 1 {
		t.Errorf("dead letters = %v, want 1", got)
	}
	if got := sumOrZero(t, fams, "rtfshost_streams", map[string]string{"state": "failed"}); got != 0 {
		t.Errorf("failed streams after Skip = %v, want 0", got)
	}
}
