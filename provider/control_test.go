package provider

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// Pause, Resume and Cancel from Go, and their errors on ended or missing
// streams (T11: an unknown id is an error, never a silent default).
func TestGoControl(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter(), QueueCapacity: 8})
	st, err := f.p.Pause(t.Context(), id)
	if err != nil || st.State != StatePaused {
		t.Fatalf("Pause = %+v, %v", st, err)
	}
	for n := 1; n <= 3; n++ {
		f.Send(id, fmt.Sprintf(`{"n":%d}`, n))
	}
	f.waitFor("queueing", func() bool { return path(f.Inspect(id), "stats", "queued-chunks") == rtfs.Int(3) })
	if m := f.Inspect(id); path(m, "stats", "processed-chunks") != rtfs.Int(0) {
		t.Fatalf("a paused stream processed chunks: %v", path(m, "stats"))
	}
	if st, err = f.p.Resume(t.Context(), id); err != nil || st.State != StateActive {
		t.Fatalf("Resume = %+v, %v", st, err)
	}
	f.waitFor("drain", func() bool { return path(f.Inspect(id), "stats", "processed-chunks") == rtfs.Int(3) })
	if _, err := f.p.Pause(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	f.Send(id, `{"n":4}`)
	f.Send(id, `{"n":5}`)
	f.waitFor("queueing", func() bool { return path(f.Inspect(id), "stats", "queued-chunks") == rtfs.Int(2) })
	if st, err = f.p.Cancel(t.Context(), id); err != nil || st.State != StateCancelled || st.EndReason != "request" {
		t.Fatalf("Cancel = %+v, %v", st, err)
	}
	f.Await(id)
	if m := f.Inspect(id); path(m, "dropped-chunks") != rtfs.Int(2) {
		t.Errorf("dropped = %v, want 2", path(m, "dropped-chunks"))
	}
	if got := seenInts(f.stateOf(id)); !reflect.DeepEqual(got, ints(1, 3)) {
		t.Errorf("seen = %v", got)
	}
	_, err = f.p.Resume(t.Context(), id)
	var ended *EndedError
	if !errors.Is(err, ErrEnded) || !errors.As(err, &ended) || ended.State != StateCancelled || ended.Verb != "resume" ||
		err.Error() != `cannot resume stream "`+id+`": it is cancelled` {
		t.Errorf("Resume after cancel = %v, want an *EndedError (ErrEnded) of a cancelled stream", err)
	}
	if st, err := f.p.Cancel(t.Context(), id); err != nil || st.State != StateCancelled {
		t.Errorf("second Cancel = %+v, %v; want the status unchanged", st, err)
	}
	for name, op := range map[string]func(context.Context, string) (Status, error){"pause": f.p.Pause, "resume": f.p.Resume, "cancel": f.p.Cancel, "status": f.p.Status} {
		if _, err := op(t.Context(), "missing-stream"); !errors.Is(err, ErrNoStream) || errors.Is(err, ErrNoStoredStream) || err.Error() != `no stream with id "missing-stream"` {
			t.Errorf("%s of a missing stream = %v", name, err)
		}
	}
	if _, err := f.p.Inspect("missing-stream", InspectOptions{}); err == nil {
		t.Error("Inspect of a missing stream succeeded")
	}
	if _, err := f.p.Await(context.Background(), "missing-stream"); err == nil {
		t.Error("Await of a missing stream succeeded")
	}
}

// Await honours its context; WaitAll waits for every stream and reports the
// failed ones.
func TestAwaitAndWaitAll(t *testing.T) {
	f := newFixture(t, Options{})
	ok := f.start(StartRequest{goProc: counter()})
	bad := f.start(StartRequest{goProc: counter(), OnError: endOnError})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := f.p.Await(ctx, ok); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Await of a running stream = %v", err)
	}
	f.Send(ok, `{"n":1}`)
	f.mock.Source(ok).Close()
	f.Send(bad, `{"n":1,"reply":"bogus"}`)
	err := f.p.WaitAll(context.Background())
	var se *StreamError
	if !errors.As(err, &se) || se.StreamID != bad || se.State != StateError {
		t.Fatalf("WaitAll = %v, want the failure of %s", err, bad)
	}
	if strings.Contains(err.Error(), ok) {
		t.Errorf("WaitAll reports the completed stream: %v", err)
	}
	if v, err := f.p.Await(context.Background(), ok); err != nil || !rtfs.Equal(v, rtfs.MapOf(rtfs.Keyword("count"), rtfs.Int(1))) {
		t.Errorf("Await = %v, %v", v, err)
	}
}

// Close stops running streams; Await then reports the interruption and
// Start is refused.
func TestCloseInterruptsStreams(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter()})
	f.Send(id, `{"n":1}`)
	if err := f.p.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := f.p.Await(context.Background(), id)
	if err == nil || !strings.Contains(err.Error(), "interrupted while active") {
		t.Fatalf("Await after Close = %v", err)
	}
	if _, err := f.p.Start(StartRequest{Endpoint: "e", Transport: "mock", goProc: counter()}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close = %v", err)
	}
	// Nothing acts on a stream after Close, and nothing says it did:
	// every control call and every report of its live state is ErrClosed.
	for name, op := range map[string]func() error{
		"Pause":   func() error { _, err := f.p.Pause(t.Context(), id); return err },
		"Resume":  func() error { _, err := f.p.Resume(t.Context(), id); return err },
		"Cancel":  func() error { _, err := f.p.Cancel(t.Context(), id); return err },
		"Skip":    func() error { _, err := f.p.Skip(t.Context(), id); return err },
		"Status":  func() error { _, err := f.p.Status(t.Context(), id); return err },
		"Info":    func() error { _, err := f.p.Info(id, InspectOptions{}); return err },
		"Inspect": func() error { _, err := f.p.Inspect(id, InspectOptions{}); return err },
	} {
		if err := op(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// T7: the inspect map of a stream without a transport (manual connect), fed
// through Deliver; the include flags leave keys out; the summary.
func TestInspectFields(t *testing.T) {
	f := newFixture(t, Options{ManualConnect: true, Transports: catalogOf(map[string]transport.StreamTransport{})})
	id := f.start(StartRequest{StreamID: "s-1", InitialState: rtfs.MapOf(rtfs.Keyword("count"), rtfs.Int(0)), goProc: counter()})
	if err := f.p.Deliver(context.Background(), id, transport.Chunk{Data: []byte(`{"payload":"alpha"}`), ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	f.waitFor("processing", func() bool { return path(f.Inspect(id), "stats", "processed-chunks") == rtfs.Int(1) })
	m := f.Inspect(id)
	checks := map[string]rtfs.Value{
		"stream-id": rtfs.String("s-1"), "processor": rtfs.String("go-proc"), "endpoint": rtfs.String("weather.monitor.v1"),
		"queue-capacity": rtfs.Int(32), "persistence-enabled": rtfs.False, "cursor": rtfs.String("c1"),
		"dropped-chunks": rtfs.Int(0), "reconnects": rtfs.Int(0), "result": rtfs.Nil,
		"last-output":   rtfs.MapOf(rtfs.Keyword("count"), rtfs.Int(1)),
		"initial-state": rtfs.MapOf(rtfs.Keyword("count"), rtfs.Int(0)),
		"queue":         rtfs.NewVector(),
		"status":        rtfs.MapOf(rtfs.Keyword("state"), rtfs.Keyword("active")),
	}
	for k, want := range checks {
		if got := path(m, k); got == nil || !rtfs.Equal(got, want) {
			t.Errorf(":%s = %v, want %v", k, got, want)
		}
	}
	tr := map[string]rtfs.Value{"task-present": rtfs.False, "task-active": rtfs.False, "auto-connect": rtfs.False,
		"timeout-ms": rtfs.Int(30000), "retry-attempts": rtfs.Int(3), "server-url": rtfs.String(DefaultServerURL), "kind": rtfs.Keyword("mock")}
	for k, want := range tr {
		if got := path(m, "transport", k); got == nil || !rtfs.Equal(got, want) {
			t.Errorf(":transport :%s = %v, want %v", k, got, want)
		}
	}
	stats := map[string]rtfs.Value{"processed-chunks": rtfs.Int(1), "queued-chunks": rtfs.Int(0), "dropped-chunks": rtfs.Int(0), "bytes-received": rtfs.Int(19)}
	for k, want := range stats {
		if got := path(m, "stats", k); got == nil || !rtfs.Equal(got, want) {
			t.Errorf(":stats :%s = %v, want %v", k, got, want)
		}
	}
	for _, k := range []string{"last-event-epoch-ms", "last-latency-ms"} {
		if _, ok := path(m, "stats", k).(rtfs.Int); !ok {
			t.Errorf(":stats :%s = %v, want an int", k, path(m, "stats", k))
		}
	}
	if _, ok := path(m, "observed-at-epoch-ms").(rtfs.Int); !ok {
		t.Error(":observed-at-epoch-ms is not an int")
	}
	if _, ok := path(m, "current-state").(*rtfs.Map); !ok {
		t.Error(":current-state is not a map")
	}
	v, _ := f.p.Inspect(id, InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
	for _, k := range []string{"queue", "current-state", "initial-state"} {
		if path(v, k) != nil {
			t.Errorf("key :%s present although omitted", k)
		}
	}
	sum := f.p.Summary(InspectOptions{})
	if path(sum, "total") != rtfs.Int(1) || path(sum, "streams").(*rtfs.Vector).Len() != 1 ||
		path(sum, "auto-connect") != rtfs.False || path(sum, "server-url") != rtfs.String(DefaultServerURL) {
		t.Errorf("summary = %v", sum)
	}
}

// Chunk decoding and metadata: JSON with keyword keys, plain text as a
// string, data-less events skipped, and the metadata map.
func TestDecodingAndMetadata(t *testing.T) {
	f := newFixture(t, Options{})
	var chunks, metas []rtfs.Value
	id := f.start(StartRequest{Endpoint: "docs.search.v1", StreamID: "d1", goProc: goProc(func(state, chunk, meta rtfs.Value) (rtfs.Value, error) {
		chunks, metas = append(chunks, chunk), append(metas, meta)
		return rtfs.MapOf(), nil
	})})
	src := f.mock.Source(id)
	ctx := context.Background()
	at := time.UnixMilli(1725912345678)
	for _, c := range []transport.Chunk{
		{Data: []byte(`{"city":"Paris","temperature_c":21.5,"tags":["a"]}`), Event: "chunk", ID: "7", ReceivedAt: at},
		{Data: nil, Event: "keepalive"},
		{Data: []byte("not json {"), ID: "8", ReceivedAt: at},
		{Data: []byte(`{"message":"{\"x\":1}","progress":2}`), Event: "progress", ID: "9", ReceivedAt: at},
	} {
		if err := src.Send(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	src.Close()
	f.Await(id)
	if len(chunks) != 3 {
		t.Fatalf("processor saw %d chunks, want 3 (the data-less event is no chunk)", len(chunks))
	}
	want0 := rtfs.MapOf(rtfs.Keyword("city"), rtfs.String("Paris"), rtfs.Keyword("temperature_c"), rtfs.Float(21.5), rtfs.Keyword("tags"), rtfs.NewVector(rtfs.String("a")))
	if !rtfs.Equal(chunks[0], want0) || chunks[1] != rtfs.String("not json {") {
		t.Errorf("chunks = %v, %v", chunks[0], chunks[1])
	}
	if !rtfs.Equal(path(chunks[2], "message"), rtfs.MapOf(rtfs.Keyword("x"), rtfs.Int(1))) {
		t.Errorf("progress :message not decoded: %v", chunks[2])
	}
	wantMeta := rtfs.MapOf(rtfs.Keyword("stream-id"), rtfs.String("d1"), rtfs.Keyword("seq"), rtfs.Int(1), // the first chunk is chunk 1
		rtfs.Keyword("event"), rtfs.String("chunk"), rtfs.Keyword("id"), rtfs.String("7"),
		rtfs.Keyword("received-at-ms"), rtfs.Int(1725912345678), rtfs.Keyword("endpoint"), rtfs.String("docs.search.v1"))
	if !rtfs.Equal(metas[0], wantMeta) {
		t.Errorf("metadata = %v\nwant %v", metas[0], wantMeta)
	}
	if path(metas[1], "seq") != rtfs.Int(2) || path(metas[1], "event") != rtfs.Nil {
		t.Errorf("second metadata = %v", metas[1])
	}
}

// Start rejects bad requests with messages naming the key.
func TestStartErrors(t *testing.T) {
	f := newFixture(t, Options{})
	f.start(StartRequest{StreamID: "dup", goProc: counter()})
	g := compileGlobals(t, `(def not-fn 5) (defn p [s c m] {:state s}) (defn one [s] {:state s})`)
	cases := []struct {
		req  StartRequest
		want string
	}{
		{StartRequest{Transport: "mock", goProc: counter()}, "start stream: :endpoint: must not be empty"},
		{StartRequest{Endpoint: "e", Transport: "mock", StreamID: "dup", goProc: counter()}, `start stream: :stream-id: a stream with id "dup" already exists`},
		{StartRequest{Endpoint: "e", Transport: "mock", QueueCapacity: -1, goProc: counter()}, ":queue-capacity: must be positive, got -1"},
		{StartRequest{Endpoint: "e", Transport: "mcp", goProc: counter()}, ":transport: no transport :mcp (this host has :mock)"},
		{StartRequest{Endpoint: "e", Transport: "mock"}, ":processor: a processor function is required"},
		{StartRequest{Endpoint: "e", Transport: "mock", Processor: rtfs.Symbol("nope"), Globals: g}, `:processor: no function named "nope" is defined in test.rtfs`},
		{StartRequest{Endpoint: "e", Transport: "mock", Processor: rtfs.String("not-fn"), Globals: g}, `:processor: "not-fn" is int 5, not a function`},
		{StartRequest{Endpoint: "e", Transport: "mock", Processor: rtfs.Symbol("p")}, "there is no program to look it up in"},
		{StartRequest{Endpoint: "e", Transport: "mock", Processor: rtfs.Int(3)}, "expected a function, a symbol or a string, got int 3"},
		{StartRequest{Endpoint: "e", Transport: "mock", Processor: rtfs.Symbol("one"), Globals: g}, ":processor: one cannot be called as (processor state chunk metadata) or (processor state chunk)"},
	}
	for _, tc := range cases {
		_, err := f.p.Start(tc.req)
		wantErrContains(t, err, tc.want)
	}
}

// scriptedTransport reports one reconnect, delivers one chunk, then either
// panics or returns its error.
type scriptedTransport struct {
	panicMsg string
	err      error
}

func (s *scriptedTransport) Run(ctx context.Context, spec transport.Spec, _ string, sink transport.Sink) error {
	if obs, ok := sink.(transport.ReconnectObserver); ok {
		obs.Reconnecting(1, 0, errors.New("dropped"))
	}
	if err := sink.Deliver(ctx, transport.Chunk{Data: []byte(`{"n":1}`), ID: "1", ReceivedAt: time.Now()}); err != nil {
		return err
	}
	if s.panicMsg != "" {
		panic(s.panicMsg)
	}
	return s.err
}

// Reconnects are counted; a transport's failure or panic, and a processor's
// panic, end the stream in :error without crashing the host.
func TestTransportAndProcessorFaults(t *testing.T) {
	tr := catalogOf(map[string]transport.StreamTransport{
		"fails":  &scriptedTransport{err: &transport.Error{Op: "connect", Status: 404, Permanent: true, Err: errors.New("not found")}},
		"panics": &scriptedTransport{panicMsg: "transport bug"},
	})
	f := newFixture(t, Options{Transports: tr})
	id := f.start(StartRequest{Transport: "fails", goProc: counter()})
	st := f.Await(id)
	if st.State != StateError || st.Message != "transport: connect: HTTP 404: not found" {
		t.Errorf("failing transport: %+v", st)
	}
	m := f.Inspect(id)
	if path(m, "reconnects") != rtfs.Int(1) || path(m, "stats", "processed-chunks") != rtfs.Int(1) {
		t.Errorf("reconnects = %v, stats = %v", path(m, "reconnects"), path(m, "stats"))
	}
	id = f.start(StartRequest{Transport: "panics", goProc: counter()})
	if st := f.Await(id); st.State != StateError || st.Message != "transport: transport panicked: transport bug" {
		t.Errorf("panicking transport: %+v", st)
	}
	id = f.start(StartRequest{Transport: "fails", OnError: endOnError, goProc: goProc(func(state, chunk, meta rtfs.Value) (rtfs.Value, error) { panic("processor bug") })})
	if st := f.Await(id); st.State != StateError || st.Message != "processor go-proc failed on chunk 1: processor panicked: processor bug" {
		t.Errorf("panicking processor: %+v", st)
	}
}

// Starts racing Close either succeed (and are stopped by Close) or fail with
// ErrClosed; no goroutine survives (goleak checks at the end).
func TestCloseRacesStart(t *testing.T) {
	f := newFixture(t, Options{})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				_, err := f.p.Start(StartRequest{Endpoint: "e", Transport: "mock", StreamID: fmt.Sprintf("r%d-%d", i, j), goProc: counter()})
				if err != nil && !errors.Is(err, ErrClosed) {
					t.Error(err)
					return
				}
			}
		}(i)
	}
	f.p.Close()
	wg.Wait()
	f.p.Close()
}

// A stream that ends in :error drops and counts its queued chunks, as a cancel
// does, instead of keeping them waiting.
func TestErrorDropsTheQueue(t *testing.T) {
	f := newFixture(t, Options{})
	release := make(chan struct{})
	id := f.start(StartRequest{OnError: endOnError, goProc: goProc(func(state, chunk, meta rtfs.Value) (rtfs.Value, error) {
		<-release
		return nil, errors.New("boom")
	})})
	f.Send(id, `{"n": 1}`)
	f.waitFor("the worker to take the first chunk", func() bool {
		v, _ := f.p.Inspect(id, InspectOptions{})
		return path(v, "stats", "queued-chunks") == rtfs.Int(0)
	})
	f.Send(id, `{"n": 2}`)
	f.Send(id, `{"n": 3}`)
	// Send returns once the mock's Run holds the chunk; wait until both
	// are in the queue.
	f.waitFor("two chunks queued", func() bool {
		v, _ := f.p.Inspect(id, InspectOptions{})
		return path(v, "stats", "queued-chunks") == rtfs.Int(2)
	})
	close(release)
	if st := f.Await(id); st.State != StateError {
		t.Fatalf("status %+v", st)
	}
	v := f.Inspect(id)
	if q, d := path(v, "stats", "queued-chunks"), path(v, "dropped-chunks"); q != rtfs.Int(0) || d != rtfs.Int(2) {
		t.Errorf("after the error: queued %v, dropped %v; want 0 and 2", q, d)
	}
}

// A processor with a declared :config type runs as written: the type lists
// :timeout_ms, which its body leaves out, and the keys of a braced map type
// are optional.
func TestDeclaredConfigTypeRunsAsWritten(t *testing.T) {
	g := compileGlobals(t, `
(defn update-state [state chunk] (assoc state :last chunk))
(defn transform-data [chunk] (:value chunk))
(defn my-stream-processor
  [state chunk metadata]
  :[ :map { :state :any
            :action :[ :enum :continue :pause :resume :cancel :complete ]
            :output :any
            :config :[ :map { :buffer_size :int :timeout_ms :int } ] } ]
  {:state (update-state state chunk)
   :action :continue
   :output (transform-data chunk)
   :config {:buffer_size 100}})`)
	f := newFixture(t, Options{})
	id := f.start(StartRequest{Processor: rtfs.Symbol("my-stream-processor"), Globals: g})
	f.Send(id, `{"value": 3}`)
	f.waitFor("the chunk to be processed", func() bool {
		v, _ := f.p.Inspect(id, InspectOptions{})
		return path(v, "stats", "processed-chunks") == rtfs.Int(1)
	})
	if st, _ := f.p.Status(t.Context(), id); st.State != StateActive {
		t.Fatalf("the processor failed: %+v", st)
	}
	if out := path(f.Inspect(id), "last-output"); out != rtfs.Int(3) {
		t.Errorf("last output %v", out)
	}
}

func TestRemove(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{StreamID: "r1", goProc: counter()})
	ctx := context.Background()
	if _, err := f.p.Remove(ctx, id, false); err == nil || !strings.Contains(err.Error(), "not ended") {
		t.Fatalf("remove of an active stream without force: %v", err)
	}
	if was, err := f.p.Remove(ctx, id, true); err != nil || was != StateActive {
		t.Fatalf("forced remove: %v %v", was, err)
	}
	if _, err := f.p.Status(ctx, id); err == nil {
		t.Fatal("the removed stream is still known")
	}
	f.start(StartRequest{StreamID: "r1", goProc: counter()}) // the id is free again
}
