package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
)

// answerCap is a capability of the tests' first process only: a replay
// that performed it instead of answering from the journal would fail.
func answerCap(v rtfs.Value) capabilities.Capability {
	return capabilities.Capability{ID: "test.answer", Handler: func(context.Context, *capabilities.Call) (capabilities.Answer, error) {
		return capabilities.Now(v), nil
	}}
}

// runRecorded runs src as a host does with a store: every host call served
// from f's registry (println's too, which prints nothing here) and
// recorded in a journal that the calls see, whose run lets go of it at
// its end.
func runRecorded(t *testing.T, f *fixture, src string) rtfs.Value {
	t.Helper()
	if _, ok := f.caps.Lookup(capabilities.LogCapability); !ok {
		must(t, f.caps.Register(capabilities.Capability{ID: capabilities.LogCapability, Handler: func(context.Context, *capabilities.Call) (capabilities.Answer, error) {
			return capabilities.Now(rtfs.Nil), nil
		}}))
	}
	prog, err := rtfs.Compile("start.rtfs", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	j := &capabilities.Journal{}
	th := rtfs.NewThread(rtfs.Limits{})
	out, err := th.Run(ctx, prog)
	out, err = capabilities.Drive(ctx, th, out, err, j.Serve(func(ctx context.Context, out rtfs.Outcome) (rtfs.Value, error) {
		return f.caps.Call(ctx, &capabilities.Call{ID: out.Call.Capability, Args: out.Call.Args, Pos: out.Call.Pos, Globals: out.Globals, Journal: j})
	}))
	if err != nil {
		t.Fatal(err)
	}
	must(t, f.p.ReleaseRunJournal(ctx, j.Head(), ""))
	return out.Value
}

// asIfOtherCompiler rewrites the store as a build with another compiler
// (or prelude) would have written it: every program is stored under, and
// every definition names, a hash that this build's compiler does not give
// the source. The globals and function values in the definitions stay as
// they are: recovery must not read them.
func asIfOtherCompiler(t *testing.T, st persistence.Store) {
	t.Helper()
	ctx := context.Background()
	var b persistence.Batch
	must(t, st.Scan(ctx, []byte(stream.ProgramPrefix), func(key, value []byte) error {
		b.Delete(append([]byte(nil), key...))
		b.Put(stream.ProgramKey(otherHash(string(key[len(stream.ProgramPrefix):]))), append([]byte(nil), value...))
		return nil
	}))
	must(t, st.Scan(ctx, []byte(stream.StreamPrefix), func(key, value []byte) error {
		if _, suffix, _, ok := stream.ParseStreamKey(key); !ok || suffix != stream.SuffixDef {
			return nil
		}
		var d stream.DefRecord
		must(t, d.Decode(key, value))
		if d.ProgHash != "" {
			d.ProgHash = otherHash(d.ProgHash)
		}
		b.Put(append([]byte(nil), key...), d.Encode())
		return nil
	}))
	must(t, st.Commit(ctx, &b))
}

// otherHash is the hash "another compiler" gives the program of hash h.
func otherHash(h string) string {
	sum := sha256.Sum256([]byte("another compiler " + h))
	return hex.EncodeToString(sum[:])
}

// recordedStartSrc makes host calls before and after it starts a stream
// whose processor reads a global computed from one of their answers.
const recordedStartSrc = `
(println "starting")
(def k (:k (call :test.answer)))
(defn proc [state chunk meta]
  {:state (assoc state :sum (+ (:sum state) (* k (:n chunk 0))))})
(def h (call :mcp.stream.start {:stream-id "rec" :endpoint "e" :transport :mock :processor proc :initial-state {:sum 0}}))
(call :test.answer)
(:stream-id h)`

// A stream started by a recorded run comes back under another compiler:
// its program is replayed from the journal (the capability that answered
// before is not even registered any more) to the start call, and its
// processor, with the globals computed there, carries on from its state.
func TestRecoverOtherCompilerReplaysJournal(t *testing.T) {
	mem := persistence.NewMemStore()
	ps := newPersisted(t, mem)
	must(t, ps.f.caps.Register(answerCap(rtfs.MapOf(rtfs.Keyword("k"), rtfs.Int(10)))))
	if id := runRecorded(t, ps.f, recordedStartSrc); id != rtfs.String("rec") {
		t.Fatalf("program returned %v", id)
	}
	for n := 1; n <= 3; n++ {
		ps.f.Send("rec", `{"n":`+string(rune('0'+n))+`}`)
	}
	ps.f.processed("rec", 3)
	must(t, ps.f.p.Close())
	asIfOtherCompiler(t, mem)

	ps.open()
	must(t, ps.f.p.Recover(context.Background()))
	if got := path(ps.f.Inspect("rec"), "current-state", "sum"); got != rtfs.Int(60) {
		t.Fatalf("recovered :sum = %v, want 60", got)
	}
	for n := 4; n <= 5; n++ {
		ps.f.Send("rec", `{"n":`+string(rune('0'+n))+`}`)
	}
	ps.f.processed("rec", 5)
	if got := path(ps.f.Inspect("rec"), "current-state", "sum"); got != rtfs.Int(150) {
		t.Fatalf(":sum = %v, want 150 (10 × (1+…+5), each chunk once)", got)
	}
	if got := path(ps.f.Inspect("rec"), "processor"); got != rtfs.String("proc") {
		t.Fatalf(":processor = %v", got)
	}
}

// Streams stored without a journal (by a release that kept none, or
// started from Go) come back under another compiler when the answers
// before their start are known: a processor named in the run's final
// globals, and a start after println. An unknown answer before the start
// makes the stream unrecoverable, with the reason, and the others run.
func TestRecoverOtherCompilerLegacy(t *testing.T) {
	mem := persistence.NewMemStore()
	ps := newPersisted(t, mem)
	must(t, ps.f.caps.Register(answerCap(rtfs.Int(3))))
	startCount(ps.f, compileGlobals(t, countSrc), "named", rtfs.Symbol("proc"))
	runRecorded(t, ps.f, `(println "go")
(defn p2 [state chunk] {:state (+ state (:n chunk 0))})
(call :mcp.stream.start {:endpoint "legacy.v1" :transport :mock :processor p2 :initial-state 0})`)
	runRecorded(t, ps.f, `(def x (call :test.answer))
(defn p3 [state chunk] {:state (+ state x)})
(call :mcp.stream.start {:stream-id "unknown" :endpoint "e" :transport :mock :processor p3 :initial-state 0})`)
	var legacyID string
	for _, id := range ps.f.p.StreamIDs() {
		if strings.HasPrefix(id, "legacy.v1-") {
			legacyID = id
		}
	}
	ps.f.Send("named", `{"n":1}`)
	ps.f.Send(legacyID, `{"n":4}`)
	ps.f.processed("named", 1)
	ps.f.processed(legacyID, 1)
	must(t, ps.f.p.Close())
	// As a release that kept no origin records stored them.
	var b persistence.Batch
	for _, id := range []string{"named", legacyID, "unknown"} {
		b.Delete(stream.OriginKey(id))
	}
	must(t, mem.Commit(context.Background(), &b))
	asIfOtherCompiler(t, mem)

	ps.open()
	err := ps.f.p.Recover(context.Background())
	wantErrContains(t, err, `recover stream "unknown"`)
	wantErrContains(t, err, "host call 1, :test.answer at start.rtfs:1:8: its answer was not kept by the release that stored the run")
	st, _ := ps.f.p.Status(t.Context(), "unknown")
	if st.State != StateUnrecoverable || !strings.Contains(st.Message, "its answer was not kept") {
		t.Fatalf("unknown: %+v", st)
	}
	ps.f.Send("named", `{"n":2,"done":true}`)
	if st := ps.f.Await("named"); st.State != StateCompleted || path(ps.f.stateOf("named"), "sum") != rtfs.Int(3) {
		t.Fatalf("named: %+v, state %v", st, ps.f.stateOf("named"))
	}
	ps.f.Send(legacyID, `{"n":5}`)
	ps.f.processed(legacyID, 2)
	if got := ps.f.stateOf(legacyID); got != rtfs.Int(9) {
		t.Fatalf("%s: state %v, want 9", legacyID, got)
	}
}

// A stored source that does not match the source hash its origin record
// holds is refused, not replayed.
func TestRecoverOtherCompilerDamagedSource(t *testing.T) {
	mem := persistence.NewMemStore()
	ps := newPersisted(t, mem)
	startCount(ps.f, compileGlobals(t, countSrc), "s", rtfs.Symbol("proc"))
	must(t, ps.f.p.Close())
	ctx := context.Background()
	data, err := mem.Get(ctx, stream.OriginKey("s"))
	must(t, err)
	var o stream.OriginRecord
	must(t, o.Decode(stream.OriginKey("s"), data))
	o.SourceHash = strings.Repeat("0", 64)
	var b persistence.Batch
	b.Put(stream.OriginKey("s"), o.Encode())
	must(t, mem.Commit(ctx, &b))
	asIfOtherCompiler(t, mem)
	ps.open()
	wantErrContains(t, ps.f.p.Recover(ctx), "does not match its hash")
}

// A processor looked up in the final globals of a recorded run (what the
// mcp.stream.start tool does) comes back under another compiler by a
// replay of the whole run, its answers from the journal.
func TestRecoverOtherCompilerWholeRun(t *testing.T) {
	mem := persistence.NewMemStore()
	ps := newPersisted(t, mem)
	must(t, ps.f.caps.Register(answerCap(rtfs.MapOf(rtfs.Keyword("k"), rtfs.Int(7)))))
	prog, err := rtfs.Compile("tool.rtfs", []byte(`(def k (:k (call :test.answer)))
(defn proc [state chunk meta] {:state (+ state (* k (:n chunk 0)))})`))
	must(t, err)
	ctx := context.Background()
	j := &capabilities.Journal{}
	th := rtfs.NewThread(rtfs.Limits{})
	out, err := th.Run(ctx, prog)
	out, err = capabilities.Drive(ctx, th, out, err, j.Serve(func(ctx context.Context, out rtfs.Outcome) (rtfs.Value, error) {
		return ps.f.caps.Call(ctx, &capabilities.Call{ID: out.Call.Capability, Args: out.Call.Args, Globals: out.Globals})
	}))
	must(t, err)
	ps.f.start(StartRequest{StreamID: "tool", Processor: rtfs.Symbol("proc"), Globals: out.Globals, InitialState: rtfs.Int(0), Journal: j})
	ps.f.Send("tool", `{"n":1}`)
	ps.f.processed("tool", 1)
	must(t, ps.f.p.Close())
	asIfOtherCompiler(t, mem)
	ps.open()
	must(t, ps.f.p.Recover(ctx))
	ps.f.Send("tool", `{"n":2}`)
	ps.f.processed("tool", 2)
	if got := ps.f.stateOf("tool"); got != rtfs.Int(21) {
		t.Fatalf("state %v, want 21 (7 × (1+2))", got)
	}
}

// Streams started one after the other by one recorded run refer to the
// run's journal at their own position: each comes back under another
// compiler with the globals of its own start (a global redefined between
// the starts). Each stream removed lets go of the journal, which goes
// with the last.
func TestRecoverOtherCompilerSeveralStarts(t *testing.T) {
	mem := persistence.NewMemStore()
	ps := newPersisted(t, mem)
	must(t, ps.f.caps.Register(answerCap(rtfs.Int(10))))
	runRecorded(t, ps.f, `
(def k (call :test.answer))
(defn proc [state chunk meta] {:state (+ state (* k (:n chunk 0)))})
(call :mcp.stream.start {:stream-id "a" :endpoint "e" :transport :mock :processor proc :initial-state 0})
(def k (+ k (call :test.answer)))
(call :mcp.stream.start {:stream-id "b" :endpoint "e" :transport :mock :processor proc :initial-state 0})
(def k (+ k 1))
(call :mcp.stream.start {:stream-id "c" :endpoint "e" :transport :mock :processor proc :initial-state 0})
(call :test.answer)`)
	// One segment per start after the first (which came after one call),
	// and a reference per stream whose start came after any call.
	if n := countPrefix(t, mem, stream.RunJournalPrefix); n != 3+3 {
		t.Fatalf("%d journal keys, want 3 segments and 3 references", n)
	}
	for _, id := range []string{"a", "b", "c"} {
		ps.f.Send(id, `{"n":1}`)
		ps.f.processed(id, 1)
	}
	must(t, ps.f.p.Close())
	asIfOtherCompiler(t, mem)
	ps.open()
	must(t, ps.f.p.Recover(context.Background()))
	for id, k := range map[string]int64{"a": 10, "b": 20, "c": 21} {
		ps.f.Send(id, `{"n":2}`)
		ps.f.processed(id, 2)
		if got := ps.f.stateOf(id); got != rtfs.Int(3*k) {
			t.Errorf("stream %s: state %v, want %d (k %d at its start, chunks 1 and 2)", id, got, 3*k, k)
		}
	}
	for i, id := range []string{"a", "b", "c"} {
		if _, err := ps.f.p.Remove(context.Background(), id, true); err != nil {
			t.Fatal(err)
		}
		want := 3 + 2 - i // the segments, and the references left
		if i == 2 {
			want = 0
		}
		if n := countPrefix(t, mem, stream.RunJournalPrefix); n != want {
			t.Fatalf("after removing %s: %d journal keys, want %d", id, n, want)
		}
	}
}

func countPrefix(t *testing.T, st persistence.Store, prefix string) int {
	t.Helper()
	n := 0
	must(t, st.Scan(context.Background(), []byte(prefix), func(_, _ []byte) error { n++; return nil }))
	return n
}

// A stream upgraded to another program keeps no journal of the run that
// started it: it lets go of the run's journal, which goes when nothing
// else refers to it.
func TestUpgradeReleasesRunJournal(t *testing.T) {
	mem := persistence.NewMemStore()
	ps := newPersisted(t, mem)
	must(t, ps.f.caps.Register(answerCap(rtfs.Int(10))))
	runRecorded(t, ps.f, `
(def k (call :test.answer))
(defn proc [state chunk meta] {:state (+ state (* k (:n chunk 0)))})
(call :mcp.stream.start {:stream-id "u" :endpoint "e" :transport :mock :processor proc :initial-state 0})`)
	if n := countPrefix(t, mem, stream.RunJournalPrefix); n != 2 {
		t.Fatalf("%d journal keys, want the segment and the stream's reference", n)
	}
	if _, err := ps.f.p.Pause(t.Context(), "u"); err != nil {
		t.Fatal(err)
	}
	must(t, ps.f.p.Close())
	if _, err := UpgradeStored(context.Background(), mem, Upgrade{StreamID: "u", Program: newProgram(t, newProcSrc)}); err != nil {
		t.Fatal(err)
	}
	if n := countPrefix(t, mem, stream.RunJournalPrefix); n != 0 {
		t.Fatalf("%d journal keys left after the upgrade", n)
	}
}
