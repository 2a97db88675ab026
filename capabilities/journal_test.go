package capabilities_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/rtfs"
)

// journalSrc makes host calls whose answers it uses: a value, an error it
// catches, a map, then a last call it waits on (as a program parks on
// :mcp.stream.await).
const journalSrc = `
(def a (call :twice 21))
(def b (try (call :fail {:why "no"}) (catch e (ex-message e))))
(def c (call :info {:k [1 2 3]}))
(def d (call :last {:a a}))
[a b c d]`

// serveJournal answers journalSrc's calls; last's answer comes from last.
func serveJournal(last rtfs.Value) capabilities.Server {
	return func(_ context.Context, out rtfs.Outcome) (rtfs.Value, error) {
		switch out.Call.Capability {
		case "twice":
			return rtfs.Int(2 * int64(out.Call.Args[0].(rtfs.Int))), nil
		case "fail":
			return nil, errors.New("refused")
		case "info":
			return rtfs.MapOf(rtfs.Keyword("n"), rtfs.Int(3), rtfs.Keyword("s"), rtfs.String("x")), nil
		}
		return last, nil
	}
}

func mustCompile(t testing.TB, name, src string) *rtfs.Program {
	t.Helper()
	p, err := rtfs.Compile(name, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// recordUntilLast drives prog with a journal and takes the snapshot while
// the last call is served, as the host does when a program parks.
func recordUntilLast(t *testing.T, prog *rtfs.Program) (snap []byte, want rtfs.Value) {
	t.Helper()
	ctx := context.Background()
	j := &capabilities.Journal{}
	serve := serveJournal(rtfs.String("done"))
	th := rtfs.NewThread(rtfs.Limits{})
	out, err := th.Run(ctx, prog)
	out, err = capabilities.Drive(ctx, th, out, err, j.Serve(func(ctx context.Context, out rtfs.Outcome) (rtfs.Value, error) {
		if out.Call.Capability == "last" {
			snap = j.Snapshot()
		}
		return serve(ctx, out)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if j.Len() != 4 {
		t.Fatalf("journal holds %d calls, want 4", j.Len())
	}
	return snap, out.Value
}

// TestJournalReplay: a run replayed from its source and its journal comes
// back to the pending call with the same state (caught errors included), and
// resumed there it ends with the recorded run's value.
func TestJournalReplay(t *testing.T) {
	prog := mustCompile(t, "j.rtfs", journalSrc)
	snap, want := recordUntilLast(t, prog)
	rec, err := capabilities.DecodeJournal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Calls() != 3 || rec.Pending() != "last" || rec.Broken() != "" {
		t.Fatalf("record: %d calls, pending %q, broken %q", rec.Calls(), rec.Pending(), rec.Broken())
	}
	// Another compilation of the same source (as another compiler would
	// make) replays the record.
	again := mustCompile(t, "j.rtfs", journalSrc)
	ctx := context.Background()
	th := rtfs.NewThread(rtfs.Limits{})
	served := 0
	out, err := capabilities.Replay(ctx, th, again, func(i int, c *rtfs.HostCall) (capabilities.ReplayStep, error) {
		served++
		return rec.Next(i, c)
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Call == nil || out.Call.Capability != "last" || served != 4 {
		t.Fatalf("replay stopped at %v after %d calls", out.Call, served)
	}
	got, err := th.Resume(ctx, out.Continuation, rtfs.String("done"))
	if err != nil {
		t.Fatal(err)
	}
	if !rtfs.Equal(got.Value, want) {
		t.Fatalf("replayed run ends with %v, the recorded one with %v", got.Value, want)
	}
	if !strings.Contains(got.Value.String(), `"fail: refused"`) {
		t.Fatalf("the caught error's message differs: %v", got.Value)
	}
}

// TestJournalNondeterminism: a replay that makes another call, the same call
// with other arguments, fewer or more calls than the record stops with a
// *NondeterminismError saying which.
func TestJournalNondeterminism(t *testing.T) {
	snap, _ := recordUntilLast(t, mustCompile(t, "j.rtfs", journalSrc))
	rec, err := capabilities.DecodeJournal(snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"other capability", strings.Replace(journalSrc, ":info", ":other", 1), "host call 3 is :other at j.rtfs:4:8, the record holds :info"},
		{"other arguments", strings.Replace(journalSrc, "[1 2 3]", "[1 2 4]", 1), "host call 3, :info at j.rtfs:4:8, has other arguments"},
		{"pending differs", strings.Replace(journalSrc, "{:a a}", "{:a 0}", 1), "host call 4, :last at j.rtfs:5:8, has other arguments"},
		{"run ends early", "(call :twice 21)", "the run ended after 1 host calls"},
		{"more calls", "(call :twice 21) (try (call :fail {:why \"no\"}) (catch e e)) (call :info {:k [1 2 3]}) (call :extra) (call :last {:a 42})", "host call 4 is :extra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prog := mustCompile(t, "j.rtfs", tc.src)
			_, err := capabilities.Replay(context.Background(), rtfs.NewThread(rtfs.Limits{}), prog, rec.Next)
			var ne *capabilities.NondeterminismError
			if !errors.As(err, &ne) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a NondeterminismError with %q", err, tc.want)
			}
		})
	}
	// A record without a pending call expects the run's end.
	j := &capabilities.Journal{}
	prog := mustCompile(t, "e.rtfs", "(call :twice 1)")
	th := rtfs.NewThread(rtfs.Limits{})
	out, err := th.Run(context.Background(), prog)
	if _, err = capabilities.Drive(context.Background(), th, out, err, j.Serve(serveJournal(rtfs.Nil))); err != nil {
		t.Fatal(err)
	}
	done, err := capabilities.DecodeJournal(j.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	end, err := capabilities.Replay(context.Background(), th, prog, done.Next)
	if err != nil || end.Value != rtfs.Int(2) {
		t.Fatalf("replay to the end: %v, %v", end.Value, err)
	}
}

// TestJournalUnrecordable: an answer that holds a function cannot be
// recorded; the journal says so and a replay past it fails with
// ErrBrokenJournal, never with a guess.
func TestJournalUnrecordable(t *testing.T) {
	prog := mustCompile(t, "f.rtfs", "(def f (call :fn)) (call :after) (call :last)")
	fnProg := mustCompile(t, "g.rtfs", "(fn [x] x)")
	fnOut, err := rtfs.NewThread(rtfs.Limits{}).Run(context.Background(), fnProg)
	if err != nil {
		t.Fatal(err)
	}
	j := &capabilities.Journal{}
	var snap []byte
	th := rtfs.NewThread(rtfs.Limits{})
	out, err := th.Run(context.Background(), prog)
	_, err = capabilities.Drive(context.Background(), th, out, err, j.Serve(func(_ context.Context, out rtfs.Outcome) (rtfs.Value, error) {
		switch out.Call.Capability {
		case "fn":
			return fnOut.Value, nil
		case "last":
			snap = j.Snapshot()
		}
		return rtfs.Nil, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := capabilities.DecodeJournal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rec.Broken(), "the answer of :fn at f.rtfs:1:8 cannot be recorded") {
		t.Fatalf("broken = %q", rec.Broken())
	}
	_, err = capabilities.Replay(context.Background(), rtfs.NewThread(rtfs.Limits{}), prog, rec.Next)
	if !errors.Is(err, capabilities.ErrBrokenJournal) {
		t.Fatalf("err = %v, want ErrBrokenJournal", err)
	}
}

// TestDecodeJournalCorrupt: every truncation and a bad version are errors,
// never a panic.
func TestDecodeJournalCorrupt(t *testing.T) {
	snap, _ := recordUntilLast(t, mustCompile(t, "j.rtfs", journalSrc))
	for n := 0; n < len(snap); n++ {
		if _, err := capabilities.DecodeJournal(snap[:n]); err == nil {
			t.Fatalf("a journal cut at %d of %d bytes decoded", n, len(snap))
		}
	}
	bad := append([]byte{9}, snap[1:]...)
	if _, err := capabilities.DecodeJournal(bad); err == nil || !strings.Contains(err.Error(), "format version 9") {
		t.Fatalf("err = %v", err)
	}
	if _, err := capabilities.DecodeJournal(append(snap, 0)); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Fatalf("err = %v", err)
	}
}

// BenchmarkHostCallJournal measures what recording adds to a host call: one
// op is one host call of a loop whose answers are a small map (as a stream
// handle or a status is), served from Go, without and with a journal. It
// reports the journal's bytes per call.
func BenchmarkHostCallJournal(b *testing.B) {
	const calls = 1000
	prog := mustCompile(b, "bench.rtfs", fmt.Sprintf(`
(loop [i 0 acc 0]
  (if (< i %d)
    (let [r (call :mcp.stream.status {:stream-id "sensor-1" :n i})]
      (recur (inc i) (+ acc (:processed r))))
    acc))`, calls))
	answer := rtfs.MapOf(rtfs.Keyword("stream-id"), rtfs.String("sensor-1"), rtfs.Keyword("state"), rtfs.Keyword("active"),
		rtfs.Keyword("processed"), rtfs.Int(7))
	serve := func(context.Context, rtfs.Outcome) (rtfs.Value, error) { return answer, nil }
	ctx := context.Background()
	for _, mode := range []string{"plain", "journal"} {
		b.Run(mode, func(b *testing.B) {
			th := rtfs.NewThread(rtfs.Limits{})
			var bytes, n int
			b.ReportAllocs()
			for i := 0; i < b.N; i += calls {
				var j *capabilities.Journal
				if mode == "journal" {
					j = &capabilities.Journal{}
				}
				out, err := th.Run(ctx, prog)
				out, err = capabilities.Drive(ctx, th, out, err, j.Serve(serve))
				if err != nil || out.Value != rtfs.Int(7*calls) {
					b.Fatal(out.Value, err)
				}
				if j != nil {
					bytes += len(j.Snapshot())
					n += j.Len()
				}
			}
			if n > 0 {
				b.ReportMetric(float64(bytes)/float64(n), "journal-B/call")
			}
		})
	}
}

// BenchmarkJournalRecord measures recording alone, without the VM: one op
// records one call whose arguments are a fresh two-key map (its hash not
// cached yet, as a program's arguments are) and whose answer is a
// three-key map. It reports the journal's bytes per call.
func BenchmarkJournalRecord(b *testing.B) {
	const batch = 1000
	answer := rtfs.MapOf(rtfs.Keyword("stream-id"), rtfs.String("sensor-1"), rtfs.Keyword("state"), rtfs.Keyword("active"),
		rtfs.Keyword("processed"), rtfs.Int(7))
	serve := func(context.Context, rtfs.Outcome) (rtfs.Value, error) { return answer, nil }
	outs := make([]rtfs.Outcome, batch)
	ctx := context.Background()
	var bytes, calls int
	b.ReportAllocs()
	for i := 0; i < b.N; i += batch {
		b.StopTimer()
		for k := range outs {
			outs[k] = rtfs.Outcome{Call: &rtfs.HostCall{Capability: "mcp.stream.status",
				Args: []rtfs.Value{rtfs.MapOf(rtfs.Keyword("stream-id"), rtfs.String("sensor-1"), rtfs.Keyword("n"), rtfs.Int(i+k))}}}
		}
		j := &capabilities.Journal{}
		rec := j.Serve(serve)
		b.StartTimer()
		for k := range outs {
			if _, err := rec(ctx, outs[k]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		bytes += len(j.Snapshot())
		calls += j.Len()
		b.StartTimer()
	}
	b.ReportMetric(float64(bytes)/float64(calls), "journal-B/call")
}

// segStore keeps a journal's segments as a store would, by (ID, First),
// and gives them back in order.
type segStore map[string]map[int]capabilities.JournalSegment

func (s segStore) put(seg capabilities.JournalSegment) {
	if seg.Calls == 0 {
		return
	}
	if s[seg.ID] == nil {
		s[seg.ID] = map[int]capabilities.JournalSegment{}
	}
	seg.Entries = append([]byte(nil), seg.Entries...)
	s[seg.ID][seg.First] = seg
}

func (s segStore) read(id string, calls int) ([]capabilities.JournalSegment, error) {
	var list []capabilities.JournalSegment
	for first := 0; first < 1<<20 && len(list) < len(s[id]); first++ {
		if seg, ok := s[id][first]; ok {
			list = append(list, seg)
		}
	}
	return list, nil
}

// TestJournalAppendedHeads: a journal stored by appending (Unstored,
// Stored) and referred to by heads taken at every call decodes, at each
// head, to the record a snapshot taken there gives: same calls, same
// pending call, same replay. A head's size does not grow with the entries,
// each entry is stored once, and a record read from a head goes on under
// the same ID with its entries stored.
func TestJournalAppendedHeads(t *testing.T) {
	prog := mustCompile(t, "j.rtfs", journalSrc)
	ctx := context.Background()
	j := &capabilities.Journal{}
	store := segStore{}
	var heads, snaps [][]byte
	stored := 0
	serve := serveJournal(rtfs.String("done"))
	th := rtfs.NewThread(rtfs.Limits{})
	out, err := th.Run(ctx, prog)
	_, err = capabilities.Drive(ctx, th, out, err, j.Serve(func(ctx context.Context, out rtfs.Outcome) (rtfs.Value, error) {
		seg := j.Unstored()
		if seg.First != stored {
			t.Fatalf("unstored entries begin at %d, %d are stored", seg.First, stored)
		}
		store.put(seg)
		heads, snaps = append(heads, j.Head()), append(snaps, j.Snapshot())
		j.Stored(seg)
		stored += seg.Calls
		return serve(ctx, out)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(heads) != 4 || stored != 3 || len(store[j.ID()]) != 3 {
		t.Fatalf("%d heads, %d entries stored in %d segments", len(heads), stored, len(store[j.ID()]))
	}
	for i, h := range heads {
		if len(h) > 48 {
			t.Fatalf("head %d is %d bytes", i, len(h))
		}
		rec, err := capabilities.DecodeJournalFrom(h, store.read)
		if err != nil {
			t.Fatalf("head %d: %v", i, err)
		}
		want, err := capabilities.DecodeJournal(snaps[i])
		if err != nil {
			t.Fatal(err)
		}
		if rec.Calls() != i || rec.Calls() != want.Calls() || rec.Pending() != want.Pending() {
			t.Fatalf("head %d: %d calls pending %q, the snapshot %d pending %q", i, rec.Calls(), rec.Pending(), want.Calls(), want.Pending())
		}
		got, err := capabilities.Replay(ctx, rtfs.NewThread(rtfs.Limits{}), mustCompile(t, "j.rtfs", journalSrc), rec.Next)
		if err != nil || got.Call == nil || got.Call.Capability != want.Pending() {
			t.Fatalf("head %d replays to %v, %v", i, got.Call, err)
		}
		if _, ok := capabilities.JournalHeadID(h); ok != (i > 0) {
			t.Fatalf("head %d: JournalHeadID says holds entries = %v", i, ok)
		}
	}
	// A run that goes on from the last head stores only what it adds.
	rec, err := capabilities.DecodeJournalFrom(heads[3], store.read)
	if err != nil {
		t.Fatal(err)
	}
	again := rec.Journal()
	if again.ID() != j.ID() || again.Len() != 3 {
		t.Fatalf("the journal goes on as %s with %d calls, want %s with 3", again.ID(), again.Len(), j.ID())
	}
	if seg := again.Unstored(); seg.First != 3 || seg.Calls != 0 {
		t.Fatalf("unstored %+v, want none from 3", seg)
	}
	// A snapshot's record goes on under an ID of its own, nothing stored.
	snapRec, err := capabilities.DecodeJournal(snaps[3])
	if err != nil {
		t.Fatal(err)
	}
	if fresh := snapRec.Journal(); fresh.ID() == j.ID() || fresh.Unstored().First != 0 || fresh.Unstored().Calls != 3 {
		t.Fatalf("a snapshot's journal goes on as %s, unstored %+v", fresh.ID(), fresh.Unstored())
	}
}

// TestJournalHeadMissingSegments: a head whose entries the store does not
// hold (deleted, or not read at all) is an error naming what is missing;
// segments that begin before the ones a run wrote when it went on from an
// earlier point are skipped.
func TestJournalHeadMissingSegments(t *testing.T) {
	j := &capabilities.Journal{}
	store := segStore{}
	prog := mustCompile(t, "m.rtfs", "(call :twice 1) (call :twice 2) (call :twice 3) (call :last)")
	var head []byte
	th := rtfs.NewThread(rtfs.Limits{})
	out, err := th.Run(context.Background(), prog)
	_, err = capabilities.Drive(context.Background(), th, out, err, j.Serve(func(ctx context.Context, out rtfs.Outcome) (rtfs.Value, error) {
		seg := j.Unstored()
		store.put(seg)
		j.Stored(seg)
		head = j.Head()
		return serveJournal(rtfs.Nil)(ctx, out)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := capabilities.DecodeJournal(head); err == nil || !strings.Contains(err.Error(), "refers to 3 stored entries") {
		t.Fatalf("a head without its segments: %v", err)
	}
	// A segment that begins inside the one before it (left by a run that
	// went on from an earlier point) is skipped.
	segs := store[j.ID()]
	whole := segs[0]
	whole.Calls, whole.Entries = 2, append(append([]byte(nil), segs[0].Entries...), segs[1].Entries...)
	segs[0] = whole
	if rec, err := capabilities.DecodeJournalFrom(head, store.read); err != nil || rec.Calls() != 3 {
		t.Fatalf("with a segment inside another: %v", err)
	}
	delete(segs, 0)
	if _, err := capabilities.DecodeJournalFrom(head, store.read); err == nil || !strings.Contains(err.Error(), "entries from 0 are missing") {
		t.Fatalf("a head whose second segment is gone: %v", err)
	}
	for n := 0; n < len(head); n++ {
		if _, err := capabilities.DecodeJournalFrom(head[:n], store.read); err == nil {
			t.Fatalf("a head cut at %d of %d bytes decoded", n, len(head))
		}
	}
}
