package provider

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/internal/bytecodec"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/persistence/storetest"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// countSrc counts chunks in :count, sums their :n in :sum and outputs the
// count; a chunk {"done":true} completes the stream with {:total count}.
const countSrc = `
(defn proc [state chunk meta]
  (let [n (inc (:count state))
        st (assoc state :count n :sum (+ (:sum state 0) (:n chunk 0)) :last-seq (:seq meta))]
    (if (:done chunk)
      {:state st :action :complete :output {:total n}}
      {:state st :output n})))`

// persisted is a provider over a store that a test can close and open again,
// as a restarted process would.
type persisted struct {
	t     *testing.T
	store persistence.Store
	f     *fixture
}

func newPersisted(t *testing.T, store persistence.Store) *persisted {
	t.Helper()
	ps := &persisted{t: t, store: store}
	ps.open()
	return ps
}

// open makes a new provider (and mock transport) on the store.
func (ps *persisted) open() {
	ps.t.Helper()
	ps.f = newFixture(ps.t, Options{Store: ps.store})
}

// restart closes the provider and opens a new one that recovers.
func (ps *persisted) restart() {
	ps.t.Helper()
	if err := ps.f.p.Close(); err != nil {
		ps.t.Fatalf("Close: %v", err)
	}
	ps.open()
	if err := ps.f.p.Recover(context.Background()); err != nil {
		ps.t.Fatalf("Recover: %v", err)
	}
}

// processed waits until stream id has processed n chunks.
func (f *fixture) processed(id string, n int) {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("%d chunks processed", n), func() bool {
		return path(f.Inspect(id), "stats", "processed-chunks") == rtfs.Int(n)
	})
}

func startCount(f *fixture, g *rtfs.Globals, id string, proc rtfs.Value) string {
	f.t.Helper()
	return f.start(StartRequest{StreamID: id, Processor: proc, Globals: g,
		InitialState: rtfs.MapOf(rtfs.Keyword("count"), rtfs.Int(0)), QueueCapacity: 8,
		Config: rtfs.MapOf(rtfs.Keyword("limit"), rtfs.Int(5))})
}

// T10 (ccos phase4 test_stream_persists_and_resumes_state): a stream with
// {:count 0} processes one chunk; the provider goes away; a new provider on
// the same store recovers it with :count 1, and with every field of its
// snapshot (the reference lost the endpoint, capacity, stats and more).
func TestPersistT10ResumesState(t *testing.T) {
	g := compileGlobals(t, countSrc)
	ps := newPersisted(t, persistence.NewMemStore())
	id := startCount(ps.f, g, "t10", rtfs.Symbol("proc"))
	ps.f.Send(id, `{"n":7}`)
	ps.f.processed(id, 1)
	before := ps.f.Inspect(id)

	ps.restart()
	after := ps.f.Inspect(id)
	for _, k := range [][]string{{"current-state"}, {"initial-state"}, {"endpoint"}, {"processor"}, {"queue-capacity"},
		{"status"}, {"cursor"}, {"last-output"}, {"result"}, {"stats", "processed-chunks"}, {"stats", "bytes-received"},
		{"stats", "outputs"}, {"stats", "last-latency-ms"}, {"stats", "dropped-chunks"}, {"transport", "kind"}} {
		if b, a := path(before, k...), path(after, k...); b == nil || !rtfs.Equal(a, b) {
			t.Errorf("%v: before %v, after recovery %v", k, b, a)
		}
	}
	if c := path(after, "current-state", "count"); c != rtfs.Int(1) {
		t.Fatalf(":count after recovery = %v, want 1", c)
	}
	if path(after, "persistence-enabled") != rtfs.True {
		t.Errorf(":persistence-enabled = %v", path(after, "persistence-enabled"))
	}
	// The recovered stream carries on: its next chunk has :seq 2.
	ps.f.Send(id, `{"n":5,"done":true}`)
	if st := ps.f.Await(id); st.State != StateCompleted {
		t.Fatalf("status %+v", st)
	}
	want := rtfs.MapOf(rtfs.Keyword("count"), rtfs.Int(2), rtfs.Keyword("sum"), rtfs.Int(12), rtfs.Keyword("last-seq"), rtfs.Int(2))
	if got := ps.f.stateOf(id); !rtfs.Equal(got, want) {
		t.Fatalf("state = %v, want %v", got, want)
	}
}

// T11 (test_resume_missing_snapshot_errors): recovering an id the store does
// not hold is an error; so is recovering without a store.
func TestPersistT11MissingSnapshot(t *testing.T) {
	f := newFixture(t, Options{Store: persistence.NewMemStore()})
	err := f.p.RecoverStream(context.Background(), "missing-stream")
	if !errors.Is(err, ErrNotPersisted) || !strings.Contains(err.Error(), `"missing-stream"`) {
		t.Fatalf("RecoverStream(missing) = %v", err)
	}
	bare := newFixture(t, Options{})
	wantErrContains(t, bare.p.Recover(context.Background()), "no store is configured")
	wantErrContains(t, bare.p.RecoverStream(context.Background(), "x"), "no store is configured")
}

// An anonymous closure processor (capturing a value) survives a restart.
func TestPersistAnonymousClosure(t *testing.T) {
	g := compileGlobals(t, `(def step (let [k 10] (fn [s c m] {:state (assoc s :count (+ (:count s) k))})))`)
	fn, _ := g.Get("step")
	ps := newPersisted(t, persistence.NewMemStore())
	id := startCount(ps.f, g, "anon", fn)
	ps.f.Send(id, `{}`)
	ps.f.processed(id, 1)
	ps.restart()
	ps.f.Send(id, `{}`)
	ps.f.processed(id, 2)
	if c := path(ps.f.stateOf(id), "count"); c != rtfs.Int(20) {
		t.Fatalf(":count = %v, want 20", c)
	}
	if p := path(ps.f.Inspect(id), "processor"); p != rtfs.String("anonymous fn") {
		t.Errorf(":processor = %v", p)
	}
}

// Finished streams stay inspectable after a restart, and Await and WaitAll
// answer for them.
func TestPersistFinishedStreamsInspectable(t *testing.T) {
	g := compileGlobals(t, countSrc)
	ps := newPersisted(t, persistence.NewMemStore())
	done := startCount(ps.f, g, "done", rtfs.Symbol("proc"))
	ps.f.Send(done, `{"n":1,"done":true}`)
	ps.f.Await(done)
	cancelled := startCount(ps.f, g, "cancelled", rtfs.Symbol("proc"))
	ps.f.Send(cancelled, `{"action":"pause"}`)
	ps.f.waitFor("paused", func() bool { st, _ := ps.f.p.Status(t.Context(), cancelled); return st.State == StatePaused })
	ps.f.Send(cancelled, `{"n":3}`)
	ps.f.Send(cancelled, `{"n":4}`)
	ps.f.waitFor("2 queued", func() bool { return path(ps.f.Inspect(cancelled), "stats", "queued-chunks") == rtfs.Int(2) })
	if _, err := ps.f.p.Cancel(t.Context(), cancelled); err != nil {
		t.Fatal(err)
	}
	ps.f.Await(cancelled)
	ps.restart()

	v, err := ps.f.p.Await(context.Background(), done)
	if err != nil || !rtfs.Equal(v, rtfs.MapOf(rtfs.Keyword("total"), rtfs.Int(1))) {
		t.Fatalf("Await(done) = %v, %v", v, err)
	}
	st, _ := ps.f.p.Status(t.Context(), cancelled)
	if st.State != StateCancelled || st.EndReason != "request" {
		t.Fatalf("cancelled stream: %+v", st)
	}
	if d := path(ps.f.Inspect(cancelled), "dropped-chunks"); d != rtfs.Int(2) {
		t.Errorf(":dropped-chunks = %v, want 2", d)
	}
	sum := ps.f.p.Summary(InspectOptions{})
	if path(sum, "total") != rtfs.Int(2) || path(sum, "persistence-enabled") != rtfs.True {
		t.Errorf("summary: %v", sum)
	}
	if err := ps.f.p.WaitAll(context.Background()); err != nil {
		t.Errorf("WaitAll = %v, want nil (no stream failed)", err)
	}
	// The journal of each stream is gone with its end: the one that
	// processed every chunk, and the one cancelled with chunks queued.
	for _, id := range []string{done, cancelled} {
		n := 0
		must(t, ps.store.Scan(context.Background(), stream.JournalPrefix(id), func(_, _ []byte) error { n++; return nil }))
		if n != 0 {
			t.Errorf("stream %s: %d journal entries left after it ended", id, n)
		}
	}
}

// Journal mode: chunks the mock delivered and the stream had not processed
// (it was paused) are in the journal; after a restart they are queued again,
// in order, and each is processed once.
func TestPersistJournalReplaysQueuedChunks(t *testing.T) {
	g := compileGlobals(t, countSrc)
	ps := newPersisted(t, persistence.NewMemStore())
	id := startCount(ps.f, g, "journal", rtfs.Symbol("proc"))
	ps.f.Send(id, `{"n":1}`)
	ps.f.Send(id, `{"action":"pause"}`)
	ps.f.waitFor("paused", func() bool { st, _ := ps.f.p.Status(t.Context(), id); return st.State == StatePaused })
	for n := 2; n <= 4; n++ {
		ps.f.Send(id, fmt.Sprintf(`{"n":%d}`, n))
	}
	ps.f.waitFor("3 queued", func() bool { return path(ps.f.Inspect(id), "stats", "queued-chunks") == rtfs.Int(3) })
	ps.restart()

	info := ps.f.Inspect(id)
	if path(info, "status", "state") != rtfs.Keyword("paused") {
		t.Fatalf("status after recovery: %v", path(info, "status"))
	}
	q := path(info, "queue").(*rtfs.Vector)
	if q.Len() != 3 || path(q.Index(0), "chunk", "n") != rtfs.Int(2) || path(q.Index(2), "metadata", "seq") != rtfs.Int(5) {
		t.Fatalf("queue after recovery: %v", q)
	}
	if _, err := ps.f.p.Resume(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	ps.f.Send(id, `{"n":5,"done":true}`)
	ps.f.Await(id)
	want := rtfs.MapOf(rtfs.Keyword("count"), rtfs.Int(6), rtfs.Keyword("sum"), rtfs.Int(15), rtfs.Keyword("last-seq"), rtfs.Int(6))
	if got := ps.f.stateOf(id); !rtfs.Equal(got, want) {
		t.Fatalf("state = %v, want %v", got, want)
	}
}

// The mock's producer learns where to resume: the cursor of the recovered
// Run is the ID of the last chunk the stream journaled.
func TestPersistJournalCursorForProducer(t *testing.T) {
	g := compileGlobals(t, countSrc)
	ps := newPersisted(t, persistence.NewMemStore())
	id := startCount(ps.f, g, "cursor", rtfs.Symbol("proc"))
	src := ps.f.mock.Source(id)
	<-src.Started()
	if c := src.Cursor(); c != "" {
		t.Fatalf("cursor of a new stream = %q", c)
	}
	ctx := context.Background()
	for n := 1; n <= 3; n++ {
		must(t, src.Send(ctx, transport.Chunk{Data: []byte(fmt.Sprintf(`{"n":%d}`, n)), ID: fmt.Sprint("c", n)}))
	}
	ps.f.processed(id, 3)
	ps.restart()
	src = ps.f.mock.Source(id)
	<-src.Started()
	if c := src.Cursor(); c != "c3" {
		t.Fatalf("cursor after recovery = %q, want c3", c)
	}
}

// A store error puts the stream in :error with the cause; the last
// committed state stays, so a restarted provider resumes from it.
func TestPersistStoreErrorFailsStream(t *testing.T) {
	g := compileGlobals(t, countSrc)
	mem := persistence.NewMemStore()
	fs := storetest.NewFaultStore(mem)
	ps := newPersisted(t, fs)
	id := startCount(ps.f, g, "disk-full", rtfs.Symbol("proc"))
	ps.f.Send(id, `{"n":1}`)
	ps.f.processed(id, 1)
	// The worker submits chunk 1's snapshot just after it counts the
	// chunk: wait until the store holds it.
	waitUntil(t, "chunk 1's snapshot to be committed", func() bool {
		must(t, ps.f.p.ps.Com.Flush(context.Background()))
		r, err := stream.LoadProgress(context.Background(), mem, id)
		return err == nil && r.Processed == 1
	})
	fs.FailAfter(0, nil)
	// The journal commit of the next chunk fails: the stream stops with the
	// cause, and the source is told.
	err := ps.f.mock.Source(id).Send(context.Background(), transport.Chunk{Data: []byte(`{"n":2}`)})
	st := ps.f.Await(id)
	if st.State != StateError || !strings.Contains(st.Message, "no space left on device") {
		t.Fatalf("status = %+v (send: %v)", st, err)
	}
	fs.Heal()
	ps.restart()
	st, _ = ps.f.p.Status(t.Context(), id)
	if st.State != StateActive {
		t.Fatalf("after restart: %+v, want the last committed (active) status", st)
	}
	if c := path(ps.f.stateOf(id), "count"); c != rtfs.Int(1) {
		t.Fatalf(":count = %v, want 1", c)
	}
}

// A failing progress commit (cursor mode) also stops the stream with the
// cause instead of dropping state silently.
func TestPersistProgressCommitFailure(t *testing.T) {
	g := compileGlobals(t, countSrc)
	fs := storetest.NewFaultStore(persistence.NewMemStore())
	tr := &mock.Transport{}
	f := newFixture(t, Options{Store: fs, Transports: catalogOf(map[string]transport.StreamTransport{"mock": replaying{tr}})})
	f.mock = tr
	id := startCount(f, g, "progress-fail", rtfs.Symbol("proc"))
	fs.FailNext(1, errors.New("disk on fire"))
	f.Send(id, `{"n":1}`)
	st := f.Await(id)
	if st.State != StateError || !strings.Contains(st.Message, "disk on fire") || !strings.Contains(st.Message, "persistence failed") {
		t.Fatalf("status = %+v", st)
	}
}

// replaying wraps a mock transport so that the provider takes it for a
// source that replays: the cursor path without a journal.
type replaying struct{ t *mock.Transport }

func (r replaying) Run(ctx context.Context, spec transport.Spec, cursor string, sink transport.Sink) error {
	return r.t.Run(ctx, spec, cursor, sink)
}

// A record of an unknown format version, and a corrupt record, are each
// reported with their key and listed as unrecoverable; the other streams
// recover and keep running.
func TestPersistBadRecordsReported(t *testing.T) {
	g := compileGlobals(t, countSrc)
	mem := persistence.NewMemStore()
	ps := newPersisted(t, mem)
	for _, id := range []string{"good", "future", "corrupt"} {
		startCount(ps.f, g, id, rtfs.Symbol("proc"))
		ps.f.Send(id, `{"n":1}`)
		ps.f.processed(id, 1)
	}
	must(t, ps.f.p.Close())
	ctx := context.Background()
	var b persistence.Batch
	b.Put(stream.StreamKey("future", stream.SuffixProg), persistence.EncodeRecord(stream.KindProgress, stream.RecordVersion+1, []byte("new")))
	def, err := mem.Get(ctx, stream.StreamKey("corrupt", stream.SuffixDef))
	must(t, err)
	def[len(def)/2] ^= 0xff
	b.Put(stream.StreamKey("corrupt", stream.SuffixDef), def)
	must(t, mem.Commit(ctx, &b))

	ps.open()
	err = ps.f.p.Recover(ctx)
	var uv *persistence.UnknownVersionError
	var cr *persistence.CorruptRecordError
	if !errors.As(err, &uv) || !errors.As(err, &cr) {
		t.Fatalf("Recover = %v, want an unknown version and a corrupt record", err)
	}
	for _, want := range []string{`"stream/future\x00p"`, "format version 2", `"stream/corrupt\x00d"`, `recover stream "corrupt"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	// The two bad ones are listed, unrecoverable, with the reason.
	for id, want := range map[string]string{"future": "format version 2", "corrupt": `"stream/corrupt\x00d"`} {
		st, err := ps.f.p.Status(ctx, id)
		if err != nil || st.State != StateUnrecoverable || !strings.Contains(st.Message, want) {
			t.Errorf("%s: %+v, %v; want unrecoverable, saying %s", id, st, err, want)
		}
		if _, err := ps.f.p.Pause(ctx, id); err == nil {
			t.Errorf("%s: an unrecoverable stream was paused", id)
		}
	}
	if n := len(ps.f.p.StreamIDs()); n != 3 {
		t.Fatalf("%d streams listed, want 3", n)
	}
	ps.f.Send("good", `{"n":2,"done":true}`)
	if st := ps.f.Await("good"); st.State != StateCompleted {
		t.Fatalf("good: %+v", st)
	}
}

// Starting a stream under an id the store holds (not recovered) is refused,
// so its records are never overwritten.
func TestPersistStartRefusesStoredID(t *testing.T) {
	g := compileGlobals(t, countSrc)
	ps := newPersisted(t, persistence.NewMemStore())
	startCount(ps.f, g, "taken", rtfs.Symbol("proc"))
	must(t, ps.f.p.Close())
	ps.open()
	_, err := ps.f.p.Start(StartRequest{StreamID: "taken", Endpoint: "e", Transport: "mock", Processor: rtfs.Symbol("proc"), Globals: g})
	wantErrContains(t, err, `a stream with id "taken" exists in the store and has not ended (active): rtfshost resume taken carries it on`)
}

// Starting a stream under the id of an ended stream of the store says how
// to start it: another id, or rtfshost rm first.
func TestPersistStartRefusesEndedID(t *testing.T) {
	g := compileGlobals(t, countSrc)
	ps := newPersisted(t, persistence.NewMemStore())
	startCount(ps.f, g, "done", rtfs.Symbol("proc"))
	ps.f.Send("done", `{"n":1,"done":true}`)
	if st := ps.f.Await("done"); st.State != StateCompleted {
		t.Fatalf("done: %+v", st)
	}
	must(t, ps.f.p.Close())
	ps.open()
	_, err := ps.f.p.Start(StartRequest{StreamID: "done", Endpoint: "e", Transport: "mock", Processor: rtfs.Symbol("proc"), Globals: g})
	wantErrContains(t, err, `a stream with id "done" exists in the store, ended (completed): give another :stream-id (or none, for a fresh one), or remove the old one first with rtfshost rm done`)
}

// With manual connect, recovered unfinished streams are loaded for
// inspection only: nothing runs and nothing is written.
func TestPersistManualConnectLoadsDormant(t *testing.T) {
	g := compileGlobals(t, countSrc)
	ps := newPersisted(t, persistence.NewMemStore())
	id := startCount(ps.f, g, "dormant", rtfs.Symbol("proc"))
	ps.f.Send(id, `{"n":1}`)
	ps.f.processed(id, 1)
	must(t, ps.f.p.Close())
	f := newFixture(t, Options{Store: ps.store, ManualConnect: true})
	must(t, f.p.Recover(context.Background()))
	if c := path(f.stateOf(id), "count"); c != rtfs.Int(1) {
		t.Fatalf(":count = %v", c)
	}
	if path(f.Inspect(id), "transport", "task-present") != rtfs.False {
		t.Errorf("a dormant stream has a transport task")
	}
	_, err := f.p.Pause(t.Context(), id)
	wantErrContains(t, err, "inspect only")
	wantErrContains(t, f.p.Deliver(context.Background(), id, rtfsChunk(1)), "has ended")
	_, err = f.p.Await(context.Background(), id)
	wantErrContains(t, err, `stream "dormant" is active but not running: it was loaded from the store without running`)
}

func TestStreamKeyRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		key    []byte
		id     string
		suffix byte
		seq    int64
	}{
		{stream.StreamKey("a/b", stream.SuffixDef), "a/b", stream.SuffixDef, 0},
		{stream.StreamKey("x", stream.SuffixProg), "x", stream.SuffixProg, 0},
		{stream.JournalKey("s-1", 1<<40+3), "s-1", stream.SuffixJournal, 1<<40 + 3},
	} {
		id, suffix, seq, ok := stream.ParseStreamKey(tc.key)
		if !ok || id != tc.id || suffix != tc.suffix || seq != tc.seq {
			t.Errorf("parse %q = %q %c %d %v", tc.key, id, suffix, seq, ok)
		}
	}
	for _, bad := range []string{"stream/x", "stream/x\x00", "stream/x\x00dd", "stream/x\x00j123"} {
		if _, _, _, ok := stream.ParseStreamKey([]byte(bad)); ok {
			t.Errorf("parse %q: ok", bad)
		}
	}
}

// Truncated payloads are corrupt records naming the key, never a panic.
func TestProgressRecordTruncated(t *testing.T) {
	r := stream.ProgressRecord{Status: "active", Cursor: "c", Extra: []int64{5, 9}, State: []byte{1, 2, 3}, LatencyNs: -1}
	full := r.AppendTo(nil)
	var back stream.ProgressRecord
	key := stream.StreamKey("k", stream.SuffixProg)
	must(t, back.Decode(key, persistence.EncodeRecord(stream.KindProgress, stream.RecordVersion, full)))
	if back.Cursor != "c" || len(back.Extra) != 2 || back.Extra[1] != 9 || back.LatencyNs != -1 {
		t.Fatalf("round trip: %+v", back)
	}
	for n := 0; n < len(full); n++ {
		var cr *persistence.CorruptRecordError
		err := (&stream.ProgressRecord{}).Decode(key, persistence.EncodeRecord(stream.KindProgress, stream.RecordVersion, full[:n]))
		if !errors.As(err, &cr) || !strings.Contains(err.Error(), `"stream/k\x00p"`) {
			t.Fatalf("truncated at %d: %v", n, err)
		}
	}
}

// The record of a stream's process group round-trips; a truncated one is a
// corrupt record naming its key.
func TestChildRecordRoundTrip(t *testing.T) {
	r := stream.ChildRecord{Pid: 4242, Start: 1 << 40, Boot: "0b9f2d3e-boot"}
	key := stream.StreamKey("k", stream.SuffixChild)
	var back stream.ChildRecord
	must(t, back.Decode(key, r.Encode()))
	if back != r {
		t.Fatalf("round trip: %+v, want %+v", back, r)
	}
	full := persistence.EncodeRecord(stream.KindChild, stream.RecordVersion, nil)
	enc := r.Encode()
	payload := enc[len(full)-4 : len(enc)-4] // between the header and the checksum
	for n := 0; n < len(payload); n++ {
		var cr *persistence.CorruptRecordError
		err := (&stream.ChildRecord{}).Decode(key, persistence.EncodeRecord(stream.KindChild, stream.RecordVersion, payload[:n]))
		if !errors.As(err, &cr) || !strings.Contains(err.Error(), `"stream/k\x00c"`) {
			t.Fatalf("truncated at %d: %v", n, err)
		}
	}
}

// A store holding nothing of a stream but the record of its process group
// (written as the stream was removed) recovers without it and without an
// error.
func TestPersistLeftoverChildRecordIgnored(t *testing.T) {
	mem := persistence.NewMemStore()
	var b persistence.Batch
	b.Put(stream.StreamKey("gone", stream.SuffixChild), (&stream.ChildRecord{Pid: 1, Start: 1, Boot: "b"}).Encode())
	must(t, mem.Commit(context.Background(), &b))
	f := newFixture(t, Options{Store: mem})
	must(t, f.p.Recover(context.Background()))
	if ids := f.p.StreamIDs(); len(ids) != 0 {
		t.Fatalf("streams after recovery: %v", ids)
	}
	if err := f.p.RecoverStream(context.Background(), "gone"); !errors.Is(err, ErrNotPersisted) {
		t.Fatalf("RecoverStream: %v, want ErrNotPersisted", err)
	}
}

// A processor error holds the stream as failed with the state before the
// failing chunk; both are stored, so a restart shows the same.
func TestPersistProcessorErrorKeepsState(t *testing.T) {
	g := compileGlobals(t, `(defn proc [s c m] (if (:boom c) (throw "boom") {:state (assoc s :count (inc (:count s)))}))`)
	ps := newPersisted(t, persistence.NewMemStore())
	id := startCount(ps.f, g, "boom", rtfs.Symbol("proc"))
	ps.f.Send(id, `{}`)
	ps.f.Send(id, `{"boom":true}`)
	want := ps.f.waitState(id, StateFailed)
	if !strings.Contains(want.Message, "boom") {
		t.Fatalf("status = %+v", want)
	}
	ps.restart()
	if got, _ := ps.f.p.Status(t.Context(), id); !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart %+v, want %+v", got, want)
	}
	if c := path(ps.f.stateOf(id), "count"); c != rtfs.Int(1) {
		t.Fatalf(":count = %v, want 1", c)
	}
}

// specRecorder is a transport that records the server URL of every Run and
// then waits for the end of its context.
type specRecorder struct {
	mu   sync.Mutex
	urls []string
}

func (r *specRecorder) Run(ctx context.Context, spec transport.Spec, cursor string, sink transport.Sink) error {
	r.mu.Lock()
	r.urls = append(r.urls, spec.HTTP.ServerURL)
	r.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (r *specRecorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.urls) == 0 {
		return ""
	}
	return r.urls[len(r.urls)-1]
}

// A recovered stream reconnects to the server it started on (its cursor is
// that server's), not to whatever server the recovering provider defaults
// to; a recovering provider whose URL is that server's with credentials lends
// them.
func TestPersistRecoveredStreamKeepsItsServer(t *testing.T) {
	store := persistence.NewMemStore()
	defer store.Close()
	g := compileGlobals(t, countSrc)
	proc, _ := g.Get("proc")
	open := func(serverURL string) (*Provider, *specRecorder) {
		rec := &specRecorder{}
		p := New(Options{Store: store, ServerURL: serverURL, LookupEnv: noEnv,
			Transports: catalogOf(map[string]transport.StreamTransport{"sse": rec})})
		return p, rec
	}
	p, rec := open("http://127.0.0.1:9123/sse")
	if _, err := p.Start(StartRequest{StreamID: "s", Endpoint: "counter.v1", Processor: proc, Globals: g}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the first connect", func() bool { return rec.last() != "" })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ provider, want string }{
		{"http://127.0.0.1:2025/sse", "http://127.0.0.1:9123/sse"},
		{"http://user:pw@127.0.0.1:9123/sse", "http://user:pw@127.0.0.1:9123/sse"},
	} {
		p, rec := open(tc.provider)
		if err := p.Recover(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the reconnect", func() bool { return rec.last() != "" })
		if got := rec.last(); got != tc.want {
			t.Errorf("recovered under %s: reconnected to %s, want %s", tc.provider, got, tc.want)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// storeBytes is the size of every value a store holds.
func storeBytes(t *testing.T, st persistence.Store) int {
	t.Helper()
	n := 0
	if err := st.Scan(context.Background(), nil, func(_, v []byte) error { n += len(v); return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// A stream whose state and output shared structure wrote 35 MB to the store
// from 5 chunks. The store's codec writes what is shared once: here a state of
// 300,000 elements in 1,300 vectors, and an output that shares part of it.
func TestPersistSharedStructureOnce(t *testing.T) {
	g := compileGlobals(t, `
(defn proc [s c m]
  (let [a (vec (range 100)) b (vec (repeat 300 a)) v (vec (repeat 1000 b))]
    {:state (assoc s :count (inc (:count s)) :big v) :output {:n (:count s) :part b}}))`)
	store := persistence.NewMemStore()
	f := newFixture(t, Options{Store: store, Limits: rtfs.Limits{MaxOutput: 1 << 30}})
	id := startCount(f, g, "shared", rtfs.Symbol("proc"))
	for i := 0; i < 5; i++ {
		f.Send(id, `{}`)
	}
	f.processed(id, 5)
	if err := f.p.Close(); err != nil {
		t.Fatal(err)
	}
	if n := storeBytes(t, store); n > 256<<10 {
		t.Fatalf("the store holds %d bytes after 5 chunks of a shared 300,000-element state", n)
	}
}

// A state the store cannot encode within the output limit ends the stream
// in :error with a message that names the limit, and the store keeps the
// last state it committed: the chunk whose state did not fit is not lost
// but processed again after a restart (journal mode), and fails again.
func TestPersistStateBeyondTheOutputLimit(t *testing.T) {
	g := compileGlobals(t, `(defn proc [s c m] {:state (assoc s :count (inc (:count s)) :xs (into (:xs s []) (range 1000)))})`)
	store := persistence.NewMemStore()
	limits := rtfs.Limits{MaxOutput: 8 << 10}
	f := newFixture(t, Options{Store: store, Limits: limits})
	id := startCount(f, g, "grows", rtfs.Symbol("proc"))
	f.Send(id, `{}`) // 1,000 ints: about 3 KB stored
	f.Send(id, `{}`) // 2,000 ints: about 6 KB
	f.Send(id, `{}`) // 3,000 ints: 8.8 KB, past 8 KiB
	wantLimit := func(st Status) {
		t.Helper()
		if st.State != StateError || !strings.Contains(st.Message, "output limit of 8192 bytes exceeded") || !strings.Contains(st.Message, "encode state") {
			t.Fatalf("status %s %q; want :error naming the limit", st.State, st.Message)
		}
	}
	wantLimit(f.Await(id))
	if err := f.p.Close(); err != nil {
		t.Fatal(err)
	}
	f = newFixture(t, Options{Store: store, Limits: limits})
	if err := f.p.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantLimit(f.Await(id))
	if c := path(f.stateOf(id), "count"); c != rtfs.Int(3) {
		t.Fatalf("after the restart :count = %v, want 3: the third chunk processed again", c)
	}
}

// holdFirst returns a registry with the host call :test.hold, which, when
// block is set, holds the call whose :n is 1 until the provider closes,
// saying so on held; every other call returns at once.
func holdFirst(t *testing.T, held chan<- struct{}, block bool) *capabilities.Registry {
	t.Helper()
	reg := capabilities.NewRegistry()
	must(t, reg.Register(capabilities.Capability{ID: "test.hold", Handler: func(ctx context.Context, c *capabilities.Call) (capabilities.Answer, error) {
		if n, _ := capabilities.Field(c.Args[0].(*rtfs.Map), "n"); block && n == rtfs.Int(1) {
			held <- struct{}{}
			<-ctx.Done() // until the provider closes
			return capabilities.Answer{}, ctx.Err()
		}
		return capabilities.Now(nil), nil
	}}))
	return reg
}

// Journal mode past the queue's capacity: the stream holds one chunk in its
// processor and a full queue behind it when the provider goes away, so its
// journal holds one chunk more than the queue takes. Recovery queues all of
// them again, in order, ahead of anything newer: the chunk past the
// capacity neither jumps the others (a processor that completes on it
// would end the stream with the others never processed) nor is lost. Each
// comes back as it was delivered, its :fd (a process transport's output)
// included.
func TestPersistJournalPastCapacityKeepsOrder(t *testing.T) {
	const src = `
(defn proc [state chunk meta]
  (call :test.hold {:n (:n chunk)})
  (let [seen (conj (:seen state) [(:n chunk) (:fd meta)])]
    (if (= (:n chunk) 4)
      {:state {:seen seen} :action :complete}
      {:state {:seen seen}})))`
	mem := persistence.NewMemStore()
	held := make(chan struct{}, 1)
	hold := func(block bool) *capabilities.Registry { return holdFirst(t, held, block) }
	fds := []string{"", "stderr", "stdout", "stderr", "stdout"} // by n
	send := func(f *fixture, id string, n int) {
		t.Helper()
		c := transport.Chunk{Data: []byte(fmt.Sprintf(`{"n":%d}`, n)), FD: fds[n]}
		must(t, f.mock.Source(id).Send(context.Background(), c))
	}
	f := newFixture(t, Options{Store: mem, Capabilities: hold(true)})
	g := compileGlobals(t, src)
	id := f.start(StartRequest{StreamID: "past-capacity", Processor: rtfs.Symbol("proc"), Globals: g,
		InitialState: rtfs.MapOf(rtfs.Keyword("seen"), rtfs.NewVector()), QueueCapacity: 2})
	send(f, id, 1)
	<-held // chunk 1 is in the processor
	send(f, id, 2)
	send(f, id, 3)
	f.waitFor("2 queued", func() bool { return path(f.Inspect(id), "stats", "queued-chunks") == rtfs.Int(2) })
	must(t, f.p.Close())

	f = newFixture(t, Options{Store: mem, Capabilities: hold(false)})
	must(t, f.p.Recover(context.Background()))
	send(f, id, 4)
	if st := f.Await(id); st.State != StateCompleted {
		t.Fatalf("status %+v", st)
	}
	want := rtfs.NewVector()
	for n := 1; n <= 4; n++ {
		want = want.Conj(rtfs.NewVector(rtfs.Int(n), rtfs.Keyword(fds[n])))
	}
	if got := path(f.stateOf(id), "seen"); !rtfs.Equal(got, want) {
		t.Fatalf("processed %v after recovery, want %v: the journal must be processed in order, whole, as delivered, before newer chunks", got, want)
	}
}

// enteringStore is a MemStore whose commits, while held is set, say so on
// entered and wait for open to be closed.
type enteringStore struct {
	*persistence.MemStore
	held    atomic.Bool
	entered chan struct{}
	open    chan struct{}
}

func (s *enteringStore) Commit(ctx context.Context, b *persistence.Batch) error {
	if s.held.Load() {
		s.entered <- struct{}{}
		<-s.open
	}
	return s.MemStore.Commit(ctx, b)
}

// limitedEnteringStore is an enteringStore whose commits hold 240 bytes,
// so that a journal entry stops taking chunks at 60 (three of the test's
// chunks, about 21 bytes each).
type limitedEnteringStore struct{ *enteringStore }

func (limitedEnteringStore) BatchLimits() (ops, bytes int) { return 100, 240 }

// The chunks that arrive while a stream's journal entry waits for its
// commit join one entry of their own (up to a quarter of what the store's
// commit holds); a host that stops with them unprocessed processes them
// after recovery, in order, once each, and the stream that ends leaves no
// entry behind.
func TestJournalEntriesGroupChunks(t *testing.T) {
	newStore := func() *enteringStore {
		return &enteringStore{MemStore: persistence.NewMemStore(), entered: make(chan struct{}, 1), open: make(chan struct{})}
	}
	t.Run("unbounded", func(t *testing.T) {
		store := newStore()
		testJournalEntriesGroup(t, store, store, []int{1, 4})
	})
	t.Run("bounded", func(t *testing.T) {
		store := newStore()
		testJournalEntriesGroup(t, limitedEnteringStore{store}, store, []int{1, 3, 1})
	})
}

func testJournalEntriesGroup(t *testing.T, st persistence.Store, store *enteringStore, want []int) {
	const src = `
(defn proc [state chunk meta]
  (call :test.hold {:n (:n chunk)})
  (let [seen (conj (:seen state) (:n chunk))]
    (if (= (:n chunk) 6)
      {:state {:seen seen} :action :complete}
      {:state {:seen seen}})))`
	held := make(chan struct{}, 1)
	hold := func(block bool) *capabilities.Registry { return holdFirst(t, held, block) }
	send := func(f *fixture, id string, n int) {
		t.Helper()
		must(t, f.mock.Source(id).Send(context.Background(), transport.Chunk{Data: []byte(fmt.Sprintf(`{"n":%d}`, n)), ID: strconv.Itoa(n)}))
	}
	f := newFixture(t, Options{Store: st, Capabilities: hold(true)})
	id := f.start(StartRequest{StreamID: "grouped", Processor: rtfs.Symbol("proc"), Globals: compileGlobals(t, src),
		InitialState: rtfs.MapOf(rtfs.Keyword("seen"), rtfs.NewVector())})
	store.held.Store(true)
	send(f, id, 1)
	<-store.entered // chunk 1's entry is taken for its commit, which waits
	<-held          // chunk 1 is in the processor
	for n := 2; n <= 5; n++ {
		send(f, id, n)
	}
	// Send returns once the mock source holds a chunk, before the stream
	// has it: the commit stays held until chunks 2-5 are queued, which
	// they are only once journaled.
	waitUntil(t, "chunks 2-5 queued", func() bool {
		in, err := f.p.Info(id, InspectOptions{})
		return err == nil && in.Stats.QueuedChunks == 4
	})
	store.held.Store(false)
	close(store.open)
	must(t, f.p.Close())

	var chunks []int
	must(t, store.Scan(context.Background(), stream.JournalPrefix(id), func(key, value []byte) error {
		_, _, seq, _ := stream.ParseStreamKey(key)
		entries, err := stream.DecodeJournal(key, value, seq)
		chunks = append(chunks, len(entries))
		return err
	}))
	if !slices.Equal(chunks, want) {
		t.Fatalf("journal entries hold %v chunks, want %v: chunk 1 alone, 2-5 joining the entry that waited", chunks, want)
	}
	// Cancelled offline (a copy of the store), the stream drops and counts
	// the five chunks of its two entries.
	ctx := context.Background()
	offline := persistence.NewMemStore()
	var all persistence.Batch
	must(t, store.Scan(ctx, nil, func(key, value []byte) error {
		all.Put(slices.Clone(key), slices.Clone(value))
		return nil
	}))
	must(t, offline.Commit(ctx, &all))
	if from, err := SetStoredState(ctx, offline, id, StateCancelled); err != nil || from != StateActive {
		t.Fatalf("SetStoredState: %v, %v", from, err)
	}
	if r, err := stream.LoadProgress(ctx, offline, id); err != nil || r.Dropped != 5 {
		t.Fatalf("cancelled offline: %+v, %v; want 5 dropped", r, err)
	}
	must(t, offline.Scan(ctx, stream.JournalPrefix(id), func(key, _ []byte) error {
		return fmt.Errorf("journal entry %q left after an offline cancel", key)
	}))

	f = newFixture(t, Options{Store: st, Capabilities: hold(false)})
	must(t, f.p.Recover(context.Background()))
	send(f, id, 6)
	if st := f.Await(id); st.State != StateCompleted {
		t.Fatalf("status %+v", st)
	}
	seen := rtfs.NewVector(rtfs.Int(1), rtfs.Int(2), rtfs.Int(3), rtfs.Int(4), rtfs.Int(5), rtfs.Int(6))
	if got := path(f.stateOf(id), "seen"); !rtfs.Equal(got, seen) {
		t.Fatalf("processed %v after recovery, want %v", got, seen)
	}
	n := 0
	must(t, store.Scan(context.Background(), stream.JournalPrefix(id), func(_, _ []byte) error { n++; return nil }))
	if n != 0 {
		t.Errorf("%d journal entries left after the stream ended", n)
	}
}

// A version-1 journal entry (one chunk) written before it kept a chunk's
// :fd reads as a chunk without one, and one written after as a chunk with
// one.
func TestJournalRecordWithoutFD(t *testing.T) {
	v1 := func(fd string) []byte {
		e := bytecodec.Encoder{}
		e.Str("1:1")
		e.Str("e")
		e.Int(7)
		e.Bytes([]byte(`{"line":"x"}`))
		if fd != "" {
			e.Str(fd)
		}
		return persistence.EncodeRecord(stream.KindJournal, 1, e.B)
	}
	key := stream.JournalKey("k", 3)
	for _, fd := range []string{"", "stderr"} {
		got, err := stream.DecodeJournal(key, v1(fd), 3)
		must(t, err)
		if len(got) != 1 || got[0].Seq != 3 || got[0].First != 3 || got[0].Rec.Fd != fd || got[0].Rec.ID != "1:1" ||
			got[0].Rec.Event != "e" || got[0].Rec.Received != 7 || string(got[0].Rec.Data) != `{"line":"x"}` {
			t.Fatalf("fd %q: decoded %+v", fd, got)
		}
	}
}

// A version-2 journal entry, as this build writes it, holding two chunks:
// the bytes are fixed, so that a change to the format shows here.
func TestJournalEntryVersion2(t *testing.T) {
	const stored = "b7040203313a37008080ddd5a6b9c1fb300c7b226c696e65223a2261227d067374646f757403313a38036d73678280ddd5a6b9c1fb300c7b226c696e65223a2262227d00a71adb49"
	chunks := []transport.Chunk{
		{ID: "1:7", ReceivedAt: time.Unix(0, 1764147600000000000), Data: []byte(`{"line":"a"}`), FD: "stdout"},
		{ID: "1:8", Event: "msg", ReceivedAt: time.Unix(0, 1764147600000000001), Data: []byte(`{"line":"b"}`)},
	}
	b := persistence.AppendRecordHeader(nil, stream.KindJournal, stream.JournalVersionGroup)
	for i := range chunks {
		b = stream.AppendJournalChunk(b, &chunks[i])
	}
	if got := hex.EncodeToString(persistence.FinishRecord(b, 0)); got != stored {
		t.Fatalf("encoded %s, want %s", got, stored)
	}
	data, _ := hex.DecodeString(stored)
	got, err := stream.DecodeJournal(stream.JournalKey("k", 7), data, 7)
	must(t, err)
	if len(got) != len(chunks) {
		t.Fatalf("decoded %d chunks, want %d", len(got), len(chunks))
	}
	for i, e := range got {
		c := chunks[i]
		if e.Seq != 7+int64(i) || e.First != 7 || e.Rec.ID != c.ID || e.Rec.Event != c.Event || e.Rec.Received != c.ReceivedAt.UnixNano() ||
			string(e.Rec.Data) != string(c.Data) || e.Rec.Fd != c.FD {
			t.Errorf("chunk %d: decoded %+v, want %+v at seq %d", i, e, c, 7+i)
		}
	}
	if _, err := stream.DecodeJournal(stream.JournalKey("k", 7), data[:len(data)-5], 7); err == nil {
		t.Error("a truncated entry decoded")
	}
	// An entry whose chunks run into the next entry's is damaged: recovery
	// would process a chunk twice.
	var l stream.Loaded
	must(t, l.Add(stream.JournalKey("k", 7), data, stream.SuffixJournal, 7))
	var corrupt *persistence.CorruptRecordError
	if err := l.Add(stream.JournalKey("k", 8), data, stream.SuffixJournal, 8); !errors.As(err, &corrupt) || !strings.Contains(err.Error(), "overlaps") {
		t.Errorf("overlapping entries: %v, want a corrupt record error", err)
	}
}

// gatedStore is a MemStore whose commits hold one batch of operations at
// most (so a stream's batches carry at most 4 journal deletes) and wait
// while held is set.
type gatedStore struct {
	*persistence.MemStore
	held atomic.Bool
	open chan struct{}
}

func (s *gatedStore) BatchLimits() (ops, bytes int) { return 12, 1 << 20 }

func (s *gatedStore) Commit(ctx context.Context, b *persistence.Batch) error {
	if s.held.Load() {
		<-s.open
	}
	return s.MemStore.Commit(ctx, b)
}

// A journaled stream that ends with more processed chunks than one batch
// deletes (its snapshots held back meanwhile) leaves no journal entry.
func TestPersistJournalClearedPastBatchLimit(t *testing.T) {
	g := compileGlobals(t, countSrc)
	store := &gatedStore{MemStore: persistence.NewMemStore(), open: make(chan struct{})}
	f := newFixture(t, Options{Store: store})
	id := startCount(f, g, "many", rtfs.Symbol("proc"))
	store.held.Store(true)
	for range 20 {
		f.Send(id, `{"n":1}`)
	}
	f.Send(id, `{"n":1,"done":true}`)
	f.waitFor("21 processed", func() bool { return path(f.Inspect(id), "stats", "processed-chunks") == rtfs.Int(21) })
	close(store.open)
	f.Await(id)
	n := 0
	must(t, store.Scan(context.Background(), stream.JournalPrefix(id), func(_, _ []byte) error { n++; return nil }))
	if n != 0 {
		t.Errorf("%d journal entries left after the stream ended", n)
	}
	if c := path(f.stateOf(id), "count"); c != rtfs.Int(21) {
		t.Errorf(":count = %v, want 21", c)
	}
}

// WatchLoads is told of each stream the provider loads, running or ended,
// before it is registered, so that a Pending subscription made there gets
// every event of it; then of how the load went. A watch stopped is told
// nothing.
func TestWatchLoads(t *testing.T) {
	g := compileGlobals(t, countSrc)
	ps := newPersisted(t, persistence.NewMemStore())
	live := startCount(ps.f, g, "live", rtfs.Symbol("proc"))
	ps.f.Send(live, `{"n":1}`)
	ps.f.processed(live, 1)
	done := startCount(ps.f, g, "done", rtfs.Symbol("proc"))
	ps.f.Send(done, `{"done":true}`)
	ps.f.Await(done)
	if err := ps.f.p.Close(); err != nil {
		t.Fatal(err)
	}
	ps.open()

	type told struct {
		ended, registered bool
		loaded            chan error
		mu                sync.Mutex
		events            []Event
	}
	var mu sync.Mutex
	seen := map[string]*told{}
	stop := ps.f.p.WatchLoads(func(ctx context.Context, id string, ended bool) func(error) {
		w := &told{ended: ended, registered: slices.Contains(ps.f.p.StreamIDs(), id), loaded: make(chan error, 1)}
		mu.Lock()
		seen[id] = w
		mu.Unlock()
		if _, err := ps.f.p.Subscribe(id, SubscribeOptions{Pending: true, Receive: func(ev Event) {
			w.mu.Lock()
			w.events = append(w.events, ev)
			w.mu.Unlock()
		}}); err != nil {
			t.Errorf("Subscribe(%s): %v", id, err)
		}
		return func(err error) { w.loaded <- err }
	})
	defer stop()
	ps.f.p.WatchLoads(func(_ context.Context, id string, _ bool) func(error) {
		t.Errorf("a stopped watch was told of %s", id)
		return nil
	})()
	must(t, ps.f.p.Recover(context.Background()))
	ps.f.Send(live, `{"n":2,"done":true}`)
	ps.f.Await(live)
	for id, ended := range map[string]bool{live: false, done: true} {
		mu.Lock()
		w := seen[id]
		mu.Unlock()
		if w == nil {
			t.Fatalf("the watch was not told of %s", id)
		}
		if err := <-w.loaded; err != nil || w.ended != ended || w.registered {
			t.Errorf("%s: loaded %v, ended %v (want %v), registered when told %v", id, err, w.ended, ended, w.registered)
		}
		ps.f.waitFor("the end of "+id, func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.events) > 0 && w.events[len(w.events)-1].Kind == EventEnd
		})
		w.mu.Lock()
		var kinds []EventKind
		for _, ev := range w.events {
			kinds = append(kinds, ev.Kind)
		}
		w.mu.Unlock()
		want := []EventKind{EventEnd}
		if !ended {
			want = []EventKind{EventOutput, EventEnd} // chunk 2's output: every event after the recovery
		}
		if !slices.Equal(kinds, want) {
			t.Errorf("%s: events %v, want %v", id, kinds, want)
		}
	}
}
