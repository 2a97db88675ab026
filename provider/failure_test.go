package provider

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	texec "github.com/rtfshost/rtfshost/transport/exec"
	"github.com/rtfshost/rtfshost/transport/sse"
)

// flaky is a Go processor that records the :n of every chunk it processes
// in :seen (as counter does) and fails on the chunk whose :n is bad while
// broken is set; calls counts its calls on that chunk.
func flaky(bad int64, broken *atomic.Bool, calls *atomic.Int64) stream.Processor {
	c := counter()
	return goProc(func(state, chunk, meta rtfs.Value) (rtfs.Value, error) {
		if path(chunk, "n") == rtfs.Int(bad) {
			calls.Add(1)
			if broken.Load() {
				return nil, errors.New("sensor offline")
			}
		}
		return c.Call(context.Background(), state, chunk, meta)
	})
}

// waitState waits until stream id is in state want and returns its status.
func (f *fixture) waitState(id string, want State) Status {
	f.t.Helper()
	var st Status
	f.waitFor("state "+string(want), func() bool {
		st, _ = f.p.Status(context.Background(), id)
		return st.State == want
	})
	return st
}

// A processor that fails on chunk 3 holds the stream as failed with the
// state after chunk 2; the chunks after it wait; an Await stays parked;
// Resume retries chunk 3 (now working) and the stream goes on: every chunk
// processed once, in order, and the Await gets the stream's result.
func TestFailureHoldsThenResumeRetries(t *testing.T) {
	for _, store := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "store"}[store], func(t *testing.T) {
			var opts Options
			if store {
				opts.Store = persistence.NewMemStore()
			}
			f := newFixture(t, opts)
			var broken atomic.Bool
			var calls atomic.Int64
			broken.Store(true)
			id := f.start(StartRequest{StreamID: "held", goProc: flaky(3, &broken, &calls)})
			awaited := make(chan error, 1)
			go func() { _, err := f.p.Await(context.Background(), id); awaited <- err }()
			for n := 1; n <= 5; n++ {
				f.Send(id, `{"n":`+stream.Itoa(int64(n))+`}`)
			}
			st := f.waitState(id, StateFailed)
			fl := st.Failure
			if fl == nil || fl.Kind != FailureProcessor || fl.Seq != 3 || fl.Attempts != 1 || !strings.Contains(fl.Error, "processor go-proc failed on chunk 3: sensor offline") {
				t.Fatalf("status %+v, failure %+v", st, fl)
			}
			if got := seenInts(f.stateOf(id)); !reflect.DeepEqual(got, []int64{1, 2}) {
				t.Fatalf("state while failed: seen %v, want [1 2]", got)
			}
			// Chunks 4 and 5 may still be on their way from the mock source
			// (Send returns once the transport has taken the chunk, before it
			// is queued); once queued, they stay there while the stream is held.
			f.waitFor("chunks 4 and 5 queued behind the failed chunk", func() bool {
				return path(f.Inspect(id), "stats", "queued-chunks") == rtfs.Int(2)
			})
			in := f.Inspect(id)
			if path(in, "failure", "seq") != rtfs.Int(3) || path(in, "failure", "kind") != rtfs.Keyword("processor") || path(in, "status", "state") != rtfs.Keyword("failed") {
				t.Fatalf("inspect :failure %v :status %v", path(in, "failure"), path(in, "status"))
			}
			if q := path(in, "stats", "queued-chunks"); q != rtfs.Int(2) {
				t.Fatalf("queued while failed = %v, want chunks 4 and 5", q)
			}
			if stuck := f.p.Stuck(); len(stuck) != 1 || !strings.Contains(stuck[0].Reason, "failed on chunk 3") {
				t.Fatalf("Stuck = %+v", stuck)
			}
			select {
			case err := <-awaited:
				t.Fatalf("Await returned while the stream is failed: %v", err)
			default:
			}
			if _, err := f.p.Pause(t.Context(), id); err == nil {
				t.Fatal("Pause of a failed stream succeeded")
			}
			// A Resume while it is still broken fails again: attempts add up.
			if _, err := f.p.Resume(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			f.waitFor("a second attempt", func() bool {
				st, _ := f.p.Status(t.Context(), id)
				return st.State == StateFailed && st.Failure.Attempts == 2
			})
			broken.Store(false)
			if _, err := f.p.Resume(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			f.processed(id, 5)
			if got := seenInts(f.stateOf(id)); !reflect.DeepEqual(got, []int64{1, 2, 3, 4, 5}) {
				t.Fatalf("seen %v, want every chunk once", got)
			}
			if calls.Load() != 3 {
				t.Fatalf("chunk 3 was tried %d times, want 3", calls.Load())
			}
			if st, _ := f.p.Status(t.Context(), id); st.State != StateActive || st.Failure != nil || st.Message != "" {
				t.Fatalf("status after the repair %+v", st)
			}
			f.mock.Source(id).Close()
			if err := <-awaited; err != nil {
				t.Fatalf("Await = %v", err)
			}
		})
	}
}

// Skip sets the held chunk aside as a dead letter, stored with the stream,
// and goes on with the next: the result lacks chunk 3 only; the dead
// letter survives a restart, inspect counts it, and removing the stream
// deletes it.
func TestFailureSkipKeepsDeadLetter(t *testing.T) {
	mem := persistence.NewMemStore()
	ps := newPersisted(t, mem)
	var broken atomic.Bool
	var calls atomic.Int64
	broken.Store(true)
	id := ps.f.start(StartRequest{StreamID: "skip", goProc: flaky(3, &broken, &calls)})
	if _, err := ps.f.p.Skip(t.Context(), id); err == nil || !strings.Contains(err.Error(), "not failed on a chunk") {
		t.Fatalf("Skip of an active stream = %v", err)
	}
	for n := 1; n <= 5; n++ {
		ps.f.Send(id, `{"n":`+stream.Itoa(int64(n))+`,"why":"reading"}`)
	}
	ps.f.waitState(id, StateFailed)
	if _, err := ps.f.p.Skip(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	ps.f.processed(id, 4)
	if got := seenInts(ps.f.stateOf(id)); !reflect.DeepEqual(got, []int64{1, 2, 4, 5}) {
		t.Fatalf("seen %v, want all but 3", got)
	}
	dls, err := ps.f.p.DeadLetters(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].Seq != 3 || !rtfs.Equal(dls[0].Chunk.V, rtfs.MapOf(rtfs.Keyword("n"), rtfs.Int(3), rtfs.Keyword("why"), rtfs.String("reading"))) ||
		path(dls[0].Metadata.V, "seq") != rtfs.Int(3) || !strings.Contains(dls[0].Error, "sensor offline") || dls[0].Attempts != 1 || dls[0].At.IsZero() {
		t.Fatalf("dead letters %+v", dls)
	}
	if c := path(ps.f.Inspect(id), "dead-letters", "count"); c != rtfs.Int(1) {
		t.Fatalf(":dead-letters :count = %v", c)
	}
	if err := ps.f.p.Close(); err != nil {
		t.Fatal(err)
	}
	stored, err := StoredDeadLetters(context.Background(), mem, id)
	if err != nil || len(stored) != 1 || stored[0].Seq != 3 || !rtfs.Equal(stored[0].Chunk.V, dls[0].Chunk.V) {
		t.Fatalf("StoredDeadLetters = %+v, %v", stored, err)
	}
	if _, err := RemoveStored(context.Background(), mem, id, true); err != nil {
		t.Fatal(err)
	}
	if left := dump(t, mem); strings.Contains(left, "dead/") {
		t.Fatalf("rm left dead letters:\n%s", left)
	}
}

// The :on-error policy: retries with backoff that succeed leave no trace
// but the attempts; retries spent then :skip set the chunk aside; then
// :end ends the stream in :error as before; bad policies are refused
// naming the key.
func TestOnErrorPolicies(t *testing.T) {
	t.Run("retry succeeds", func(t *testing.T) {
		f := newFixture(t, Options{})
		var calls atomic.Int64
		var broken atomic.Bool
		broken.Store(true)
		proc := flaky(2, &broken, &calls)
		fixing := goProc(func(state, chunk, meta rtfs.Value) (rtfs.Value, error) {
			if path(chunk, "n") == rtfs.Int(2) && calls.Load() == 2 {
				broken.Store(false) // the third call works: a transient failure
			}
			return proc.Call(context.Background(), state, chunk, meta)
		})
		id := f.start(StartRequest{goProc: fixing, OnError: &ErrorPolicy{Retry: 3, Backoff: time.Millisecond}})
		for n := 1; n <= 3; n++ {
			f.Send(id, `{"n":`+stream.Itoa(int64(n))+`}`)
		}
		f.processed(id, 3)
		if got := seenInts(f.stateOf(id)); !reflect.DeepEqual(got, []int64{1, 2, 3}) || calls.Load() != 3 {
			t.Fatalf("seen %v after %d calls of chunk 2", got, calls.Load())
		}
	})
	t.Run("then skip", func(t *testing.T) {
		f := newFixture(t, Options{})
		var calls atomic.Int64
		var broken atomic.Bool
		broken.Store(true)
		id := f.start(StartRequest{goProc: flaky(2, &broken, &calls), OnError: &ErrorPolicy{Retry: 2, Backoff: time.Millisecond, Then: ThenSkip}})
		for n := 1; n <= 3; n++ {
			f.Send(id, `{"n":`+stream.Itoa(int64(n))+`}`)
		}
		f.processed(id, 2)
		if got := seenInts(f.stateOf(id)); !reflect.DeepEqual(got, []int64{1, 3}) || calls.Load() != 3 {
			t.Fatalf("seen %v after %d calls of chunk 2", got, calls.Load())
		}
		dls, err := f.p.DeadLetters(context.Background(), id)
		if err != nil || len(dls) != 1 || dls[0].Seq != 2 || dls[0].Attempts != 3 {
			t.Fatalf("dead letters %+v, %v", dls, err)
		}
	})
	t.Run("then end", func(t *testing.T) {
		f := newFixture(t, Options{})
		var calls atomic.Int64
		var broken atomic.Bool
		broken.Store(true)
		id := f.start(StartRequest{goProc: flaky(2, &broken, &calls), OnError: &ErrorPolicy{Retry: 1, Then: ThenEnd}})
		f.Send(id, `{"n":1}`)
		f.Send(id, `{"n":2}`)
		st := f.Await(id)
		if st.State != StateError || st.Message != "processor go-proc failed on chunk 2: sensor offline" || calls.Load() != 2 {
			t.Fatalf("status %+v after %d calls", st, calls.Load())
		}
	})
	for _, tc := range []struct{ src, want string }{
		{`{:retry -1}`, ":retry must be an int from 0 to 100, got int -1"},
		{`{:backoff-ms "x"}`, ":backoff-ms must be an int"},
		{`{:then :later}`, ":then must be :hold, :skip or :end, got keyword :later"},
		{`{:retries 3}`, "unknown key keyword :retries; the keys are :retry :backoff-ms :then"},
		{`[:skip]`, "must be a map such as {:retry 3 :backoff-ms 200 :then :skip}"},
	} {
		prog := compileGlobals(t, "(def x "+tc.src+")")
		v, _ := prog.Get("x")
		if _, err := ParseErrorPolicy(v); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseErrorPolicy(%s) = %v, want %q", tc.src, err, tc.want)
		}
	}
	g := compileGlobals(t, countSrc)
	f := newFixture(t, Options{})
	_, err := f.caps.Call(context.Background(), &capabilities.Call{ID: CapStart, Args: []rtfs.Value{rtfs.MapOf(
		rtfs.Keyword("endpoint"), rtfs.String("x"), rtfs.Keyword("transport"), rtfs.Keyword("mock"),
		rtfs.Keyword("processor"), rtfs.Symbol("proc"), rtfs.Keyword("on-error"), rtfs.MapOf(rtfs.Keyword("then"), rtfs.Keyword("never")))}, Globals: g})
	if err == nil || !strings.Contains(err.Error(), "on-error") || !strings.Contains(err.Error(), ":then must be") {
		t.Fatalf("start with a bad :on-error = %v", err)
	}
}

// fixedSrc is the repaired processor of the upgrade tests: oldProcSrc's
// twin, logging :fixed, that handles the chunk the broken one throws on.
const (
	brokenProcSrc = `
(defn proc [state chunk meta]
  (let [n (get-in chunk [:chunk :n] (:n chunk))]
    (when (= n 7) (throw (ex-info "cannot handle chunk 7" {:n n})))
    {:state {:sum (+ (:sum state) n) :log (conj (:log state) [:old n])} :output n}))`
	fixedProcSrc = `
(defn proc [state chunk meta]
  (let [n (get-in chunk [:chunk :n] (:n chunk))]
    {:state {:sum (+ (:sum state) n) :log (conj (:log state) [:new n])} :output n}))`
)

// checkRepaired checks that a repaired stream's state logs chunks 1..6 by
// the broken processor and 7..last by the fixed one (chunk 7 once), with
// the sum of 1..last.
func checkRepaired(t *testing.T, state rtfs.Value, last int) {
	t.Helper()
	log, _ := path(state, "log").(*rtfs.Vector)
	if log == nil || log.Len() != last {
		t.Fatalf("log %v, want %d entries", path(state, "log"), last)
	}
	for i := 0; i < last; i++ {
		who := rtfs.Keyword("old")
		if i >= 6 {
			who = "new"
		}
		if want := rtfs.NewVector(who, rtfs.Int(i+1)); !rtfs.Equal(log.Index(i), want) {
			t.Fatalf("log[%d] = %v, want %v (log %v)", i, log.Index(i), want, log)
		}
	}
	if sum := path(state, "sum"); sum != rtfs.Int(last*(last+1)/2) {
		t.Fatalf(":sum %v, want %d", sum, last*(last+1)/2)
	}
}

// A processor bug on chunk 7 of a source that cannot replay (journal
// mode) is repaired by Upgrade then Resume: chunk 7 is processed once, by
// the new processor, from the state after chunk 6.
func TestFailureRepairedByUpgradeJournal(t *testing.T) {
	f := newFixture(t, Options{Store: persistence.NewMemStore()})
	f.start(StartRequest{StreamID: "bug", Processor: rtfs.Symbol("proc"), Globals: compileGlobals(t, brokenProcSrc),
		InitialState: rtfs.MapOf(rtfs.Keyword("sum"), rtfs.Int(0), rtfs.Keyword("log"), rtfs.NewVector())})
	for n := 1; n <= 10; n++ {
		if err := sendN(t, f.mock, "bug", n); err != nil {
			t.Fatal(err)
		}
	}
	st := f.waitState("bug", StateFailed)
	if !strings.Contains(st.Failure.Error, "cannot handle chunk 7") || !strings.Contains(st.Failure.Error, "new.rtfs") && !strings.Contains(st.Failure.Error, ":4:") {
		t.Fatalf("failure %+v: want the thrown message and the form's position", st.Failure)
	}
	// The upgrade stops the stream: chunks 8 to 10 must be journaled (and
	// queued) by then, since the mock source cannot send again a chunk that
	// was on its way at the stop (its Send returns before Deliver).
	f.waitFor("chunks 8 to 10 queued behind the failed chunk", func() bool {
		return path(f.Inspect("bug"), "stats", "queued-chunks") == rtfs.Int(3)
	})
	res, err := f.p.Upgrade(context.Background(), Upgrade{StreamID: "bug", Program: newProgram(t, fixedProcSrc)})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != StateFailed {
		t.Fatalf("upgrade result %+v", res)
	}
	st = f.waitState("bug", StateFailed) // still held, by the new processor now
	if st.Failure == nil || st.Failure.Seq != 7 {
		t.Fatalf("after the upgrade: %+v", st)
	}
	if _, err := f.p.Resume(t.Context(), "bug"); err != nil {
		t.Fatal(err)
	}
	f.processed("bug", 10)
	checkRepaired(t, f.stateOf("bug"), 10)
}

// The same bug on a source that replays from its cursor (the reference
// server's counter over SSE): the held chunk is not passed by the cursor,
// and after the upgrade the source sends it again; the result is exact.
func TestFailureRepairedByUpgradeSSE(t *testing.T) {
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	f := newFixture(t, Options{Store: persistence.NewMemStore(), ServerURL: srv.URL() + "/sse",
		Transports: catalogOf(map[string]transport.StreamTransport{"sse": &sse.Transport{}})})
	f.start(StartRequest{StreamID: "sse-bug", Endpoint: "counter.v1", Transport: "sse", Processor: rtfs.Symbol("proc"),
		Globals:      compileGlobals(t, brokenProcSrc),
		InitialState: rtfs.MapOf(rtfs.Keyword("sum"), rtfs.Int(0), rtfs.Keyword("log"), rtfs.NewVector()),
		Config:       rtfs.MapOf(rtfs.Keyword("limit"), rtfs.Int(12))})
	st := f.waitState("sse-bug", StateFailed)
	if st.Failure.Seq != 7 {
		t.Fatalf("failure %+v", st.Failure)
	}
	if c := path(f.Inspect("sse-bug"), "cursor"); c != rtfs.String("6") {
		t.Fatalf("cursor while failed = %v, want 6 (the chunk before)", c)
	}
	if _, err := f.p.Upgrade(context.Background(), Upgrade{StreamID: "sse-bug", Program: newProgram(t, fixedProcSrc)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.p.Resume(t.Context(), "sse-bug"); err != nil {
		t.Fatal(err)
	}
	if st := f.Await("sse-bug"); st.State != StateCompleted {
		t.Fatalf("status %+v", st)
	}
	checkRepaired(t, f.stateOf("sse-bug"), 12)
}

// A failed stream recovered after a restart comes back failed, with its
// failure; Resume retries its chunk from the journal, and Skip (before
// the chunk is back in memory) sets it aside when it comes.
func TestFailureSurvivesRestart(t *testing.T) {
	for _, skip := range []bool{false, true} {
		t.Run(map[bool]string{false: "resume", true: "skip"}[skip], func(t *testing.T) {
			mem := persistence.NewMemStore()
			ps := newPersisted(t, mem)
			ps.f.start(StartRequest{StreamID: "bug", Processor: rtfs.Symbol("proc"), Globals: compileGlobals(t, brokenProcSrc),
				InitialState: rtfs.MapOf(rtfs.Keyword("sum"), rtfs.Int(0), rtfs.Keyword("log"), rtfs.NewVector())})
			for n := 1; n <= 9; n++ {
				if err := sendN(t, ps.f.mock, "bug", n); err != nil {
					t.Fatal(err)
				}
			}
			before := ps.f.waitState("bug", StateFailed)
			// Chunks 8 and 9 may still be on their way from the source
			// when chunk 7 fails: the restart keeps what was queued (and
			// so journaled), and the mock source cannot send them again.
			ps.f.waitFor("chunks 8 and 9 queued behind the failed one", func() bool {
				return path(ps.f.Inspect("bug"), "stats", "queued-chunks") == rtfs.Int(2)
			})
			if err := ps.f.p.Close(); err != nil {
				t.Fatal(err)
			}
			if !skip {
				// Offline, as the command line does on a data directory.
				res, err := UpgradeStored(context.Background(), mem, Upgrade{StreamID: "bug", Program: newProgram(t, fixedProcSrc)})
				if err != nil || res.State != StateFailed {
					t.Fatalf("UpgradeStored of a failed stream = %+v, %v", res, err)
				}
			}
			ps.open()
			if err := ps.f.p.Recover(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := ps.f.waitState("bug", StateFailed)
			if !reflect.DeepEqual(st.Failure, before.Failure) {
				t.Fatalf("failure after recovery %+v, before %+v", st.Failure, before.Failure)
			}
			if skip {
				if _, err := ps.f.p.Skip(t.Context(), "bug"); err != nil {
					t.Fatal(err)
				}
				ps.f.processed("bug", 8)
				state := ps.f.stateOf("bug")
				if sum := path(state, "sum"); sum != rtfs.Int(45-7) {
					t.Fatalf("sum %v, want every chunk but 7 (%v)", sum, state)
				}
				dls, err := ps.f.p.DeadLetters(context.Background(), "bug")
				if err != nil || len(dls) != 1 || dls[0].Seq != 7 || path(dls[0].Chunk.V, "n") != rtfs.Int(7) {
					t.Fatalf("dead letters %+v, %v", dls, err)
				}
				return
			}
			if _, err := ps.f.p.Resume(t.Context(), "bug"); err != nil {
				t.Fatal(err)
			}
			ps.f.processed("bug", 9)
			checkRepaired(t, ps.f.stateOf("bug"), 9)
		})
	}
}

// A processor bug on a line of an :exec source (journal mode, a process
// that cannot be stopped and started again) is repaired by Upgrade, which
// swaps the held stream's processor in place, then Resume: every line
// once, the failed one and those after it by the new processor.
func TestFailureRepairedByUpgradeExec(t *testing.T) {
	const broken = `
(defn proc [state chunk meta]
  (when (= (:line chunk) "3") (throw "cannot handle line 3"))
  {:state (update state :lines conj [:old (:line chunk)])})`
	const fixed = `
(defn proc [state chunk meta]
  {:state (update state :lines conj [:new (:line chunk)])})`
	f := newFixture(t, Options{Store: persistence.NewMemStore(), Transports: transport.NewCatalog(texec.Kind())})
	g := compileGlobals(t, broken)
	if _, err := f.p.Start(execRequest(t, g, "lines", execKeys(t, "for i in 1 2 3 4 5; do echo $i; done", nil))); err != nil {
		t.Fatal(err)
	}
	st := f.waitState("lines", StateFailed)
	if st.Failure.Seq != 3 {
		t.Fatalf("failure %+v", st.Failure)
	}
	res, err := f.p.Upgrade(context.Background(), Upgrade{StreamID: "lines", Program: newProgram(t, fixed)})
	if err != nil || res.State != StateFailed || res.To.Hash == res.From.Hash {
		t.Fatalf("Upgrade = %+v, %v", res, err)
	}
	if in := f.Inspect("lines"); path(in, "programs").(*rtfs.Vector).Len() != 2 {
		t.Fatalf("programs after the swap: %v", path(in, "programs"))
	}
	if _, err := f.p.Resume(t.Context(), "lines"); err != nil {
		t.Fatal(err)
	}
	if st := f.Await("lines"); st.State != StateCompleted {
		t.Fatalf("status %+v", st)
	}
	want := `[[:old "1"] [:old "2"] [:new "3"] [:new "4"] [:new "5"]]`
	if got := path(f.stateOf("lines"), "lines").String(); got != want {
		t.Fatalf("lines %s, want %s", got, want)
	}
}

// A source that gave up after its retries (the server went away) holds
// the stream as failed, kind :source; once the server is back, Resume
// connects again from the stream's cursor, and the result is exact.
func TestSourceGaveUpHeldThenResumed(t *testing.T) {
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(srv.URL(), "http://")
	f := newFixture(t, Options{Store: persistence.NewMemStore(), ServerURL: srv.URL() + "/sse", RetryAttempts: 1,
		Transports: catalogOf(map[string]transport.StreamTransport{"sse": &sse.Transport{}})})
	const limit = 60
	f.start(StartRequest{StreamID: "gone", Endpoint: "counter.v1", Transport: "sse", Processor: rtfs.Symbol("proc"),
		Globals:      compileGlobals(t, fixedProcSrc),
		InitialState: rtfs.MapOf(rtfs.Keyword("sum"), rtfs.Int(0), rtfs.Keyword("log"), rtfs.NewVector()),
		Config:       rtfs.MapOf(rtfs.Keyword("limit"), rtfs.Int(limit), rtfs.Keyword("interval_ms"), rtfs.Int(20))})
	f.waitFor("some chunks", func() bool { return path(f.Inspect("gone"), "stats", "processed-chunks").(rtfs.Int) >= 5 })
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	st := f.waitState("gone", StateFailed)
	if st.Failure == nil || st.Failure.Kind != FailureSource || st.Failure.Seq != 0 || !strings.Contains(st.Failure.Error, "gave up after 1 retries") {
		t.Fatalf("status %+v, failure %+v", st, st.Failure)
	}
	if _, err := f.p.Skip(t.Context(), "gone"); err == nil {
		t.Fatal("Skip of a stream held by its source succeeded")
	}
	back := localserver.New(localserver.Options{})
	if err := back.Start(addr); err != nil {
		t.Fatalf("the server cannot come back on %s: %v", addr, err)
	}
	defer back.Close()
	if _, err := f.p.Resume(t.Context(), "gone"); err != nil {
		t.Fatal(err)
	}
	if st := f.Await("gone"); st.State != StateCompleted {
		t.Fatalf("status %+v", st)
	}
	state := f.stateOf("gone")
	log := path(state, "log").(*rtfs.Vector)
	if log.Len() != limit || path(state, "sum") != rtfs.Int(limit*(limit+1)/2) {
		t.Fatalf("after the resume: %d chunks, sum %v; want each of %d once", log.Len(), path(state, "sum"), limit)
	}
}

// boundedStore is a MemStore that refuses a commit of more operations than
// it says one holds, as Badger refuses a transaction too big.
type boundedStore struct {
	*persistence.MemStore
	ops     int
	commits atomic.Int64
}

func (s *boundedStore) BatchLimits() (ops, bytes int) { return s.ops, 1 << 20 }

func (s *boundedStore) Commit(ctx context.Context, b *persistence.Batch) error {
	if b.Len() > s.ops {
		return fmt.Errorf("%d operations: %w", b.Len(), persistence.ErrBatchTooLarge)
	}
	s.commits.Add(1)
	return s.MemStore.Commit(ctx, b)
}

// RemoveStored deletes a stream with more dead letters than one commit of
// its store holds, in batches the store takes: nothing of it is left, and
// its id can be used again. A stream that fits is removed in one commit.
func TestRemoveStoredManyDeadLetters(t *testing.T) {
	store := &boundedStore{MemStore: persistence.NewMemStore(), ops: 12}
	ps := newPersisted(t, store)
	var broken atomic.Bool
	var calls atomic.Int64
	broken.Store(true)
	id := ps.f.start(StartRequest{StreamID: "many", goProc: flaky(3, &broken, &calls)})
	for n := 1; n <= 4; n++ {
		ps.f.Send(id, `{"n":`+stream.Itoa(int64(n))+`}`)
	}
	ps.f.waitState(id, StateFailed)
	if _, err := ps.f.p.Skip(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	ps.f.processed(id, 3)
	if err := ps.f.p.Close(); err != nil {
		t.Fatal(err)
	}
	// 40 more dead letters, as a stream that set aside many chunks has.
	dls, err := StoredDeadLetters(context.Background(), store, id)
	if err != nil || len(dls) != 1 {
		t.Fatalf("dead letters %+v, %v", dls, err)
	}
	for seq := int64(100); seq < 140; seq++ {
		dl := dls[0]
		dl.Seq = seq
		r, err := stream.NewDeadLetterRecord(&dl)
		if err != nil {
			t.Fatal(err)
		}
		var b persistence.Batch
		b.Put(stream.DeadLetterKey(id, seq), r.Encode())
		must(t, store.Commit(context.Background(), &b))
	}
	if dls, err := StoredDeadLetters(context.Background(), store, id); err != nil || len(dls) != 41 {
		t.Fatalf("%d dead letters stored, %v; want 41", len(dls), err)
	}
	before := store.commits.Load()
	if _, err := RemoveStored(context.Background(), store, id, true); err != nil {
		t.Fatalf("RemoveStored: %v", err)
	}
	if n := store.commits.Load() - before; n < 4 {
		t.Errorf("removed in %d commits, want at least 4 of at most 12 deletes", n)
	}
	if left := dump(t, store); strings.Contains(left, "dead/") || strings.Contains(left, "stream/"+id) {
		t.Fatalf("rm left records of the stream:\n%s", left)
	}
	if _, err := StoredDeadLetters(context.Background(), store, id); !errors.Is(err, ErrNoStoredStream) {
		t.Fatalf("after rm: %v, want no such stream", err)
	}

	// A stream whose records fit in one commit goes in one.
	ps.open()
	id = ps.f.start(StartRequest{StreamID: "few", goProc: flaky(0, &broken, &calls)})
	ps.f.Send(id, `{"n":1}`)
	ps.f.processed(id, 1)
	if err := ps.f.p.Close(); err != nil {
		t.Fatal(err)
	}
	before = store.commits.Load()
	if _, err := RemoveStored(context.Background(), store, id, true); err != nil {
		t.Fatal(err)
	}
	if n := store.commits.Load() - before; n != 1 {
		t.Errorf("a small stream removed in %d commits, want 1", n)
	}
}

// Starting a stream under the id of a failed stream of the store names the
// repairs of the chunk it is held on.
func TestStartRefusesFailedID(t *testing.T) {
	ps := newPersisted(t, persistence.NewMemStore())
	var broken atomic.Bool
	var calls atomic.Int64
	broken.Store(true)
	id := ps.f.start(StartRequest{StreamID: "held", goProc: flaky(2, &broken, &calls)})
	ps.f.Send(id, `{"n":1}`)
	ps.f.Send(id, `{"n":2}`)
	ps.f.waitState(id, StateFailed)
	must(t, ps.f.p.Close())
	ps.open()
	_, err := ps.f.p.Start(StartRequest{StreamID: "held", Endpoint: "e", Transport: "mock", goProc: counter()})
	wantErrContains(t, err, `a stream with id "held" exists in the store, failed on chunk 2 (processor go-proc failed on chunk 2: sensor offline): rtfshost resume held retries the chunk (upgrade it first to fix the processor), rtfshost resume held --skip sets the chunk aside and goes on`)
}
