package provider

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// The processors of the upgrade tests log which of them handled each
// chunk: the old one adds n, the new one 10 × n.
const (
	oldProcSrc = `
(defn proc [state chunk meta]
  {:state {:sum (+ (:sum state) (:n chunk)) :log (conj (:log state) [:old (:n chunk)])}})`
	newProcSrc = `
(def factor 10)
(defn proc [state chunk meta]
  {:state {:sum (+ (:sum state) (* factor (:n chunk))) :log (conj (:log state) [:new (:n chunk)])}})`
)

func startLogged(t *testing.T, f *fixture, id string) {
	t.Helper()
	f.start(StartRequest{StreamID: id, Processor: rtfs.Symbol("proc"), Globals: compileGlobals(t, oldProcSrc),
		InitialState: rtfs.MapOf(rtfs.Keyword("sum"), rtfs.Int(0), rtfs.Keyword("log"), rtfs.NewVector())})
}

// sendN sends chunk {"n":n} with id n to stream id's current source.
func sendN(t *testing.T, mk *mock.Transport, id string, n int) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return mk.Source(id).Send(ctx, transport.Chunk{Data: []byte(`{"n":` + strconv.Itoa(n) + `}`), ID: strconv.Itoa(n)})
}

func newProgram(t *testing.T, src string) *rtfs.Program {
	t.Helper()
	p, err := rtfs.Compile("new.rtfs", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkLog checks that stream id's log says: chunks 1..k by the old
// processor, k+1..last by the new one, each once, in order; and that :sum
// agrees.
func checkLog(t *testing.T, state rtfs.Value, k, last int) {
	t.Helper()
	var items []rtfs.Value
	sum := 0
	for n := 1; n <= last; n++ {
		who := "old"
		if n > k {
			who = "new"
			sum += 10 * n
		} else {
			sum += n
		}
		items = append(items, rtfs.NewVector(rtfs.Keyword(who), rtfs.Int(n)))
	}
	want := rtfs.MapOf(rtfs.Keyword("sum"), rtfs.Int(sum), rtfs.Keyword("log"), rtfs.NewVector(items...))
	if !rtfs.Equal(state, want) {
		t.Fatalf("state\n%v\nwant\n%v", state, want)
	}
}

// On a data directory no provider runs, a paused stream gets the new
// processor: the old one's effect up to the pause, the new one's after,
// and its history of programs lists both.
func TestUpgradeStoredPausedStream(t *testing.T) {
	mem := persistence.NewMemStore()
	ps := newPersisted(t, mem)
	startLogged(t, ps.f, "s")
	for n := 1; n <= 3; n++ {
		must(t, sendN(t, ps.f.mock, "s", n))
	}
	ps.f.processed("s", 3)
	if _, err := ps.f.p.Pause(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	must(t, ps.f.p.Close())

	res, err := UpgradeStored(context.Background(), mem, Upgrade{StreamID: "s", Program: newProgram(t, newProcSrc)})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != StatePaused || res.To.Processor != "proc" || res.From.Hash == res.To.Hash || res.To.File != "new.rtfs" {
		t.Fatalf("result %+v", res)
	}
	ps.restart()
	if st, _ := ps.f.p.Status(t.Context(), "s"); st.State != StatePaused {
		t.Fatalf("after the swap the stream is %s, want still paused", st.State)
	}
	progs := path(ps.f.Inspect("s"), "programs").(*rtfs.Vector)
	if progs.Len() != 2 || path(progs.Index(1), "hash") != rtfs.String(res.To.Hash) || path(progs.Index(0), "hash") != rtfs.String(res.From.Hash) {
		t.Fatalf(":programs = %v", progs)
	}
	if _, err := ps.f.p.Resume(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	for n := 4; n <= 5; n++ {
		must(t, sendN(t, ps.f.mock, "s", n))
	}
	ps.f.processed("s", 5)
	checkLog(t, ps.f.stateOf("s"), 3, 5)
}

// A swap that the stream or the program does not allow changes nothing in
// the store, and says why.
func TestUpgradeStoredRefusals(t *testing.T) {
	mem := persistence.NewMemStore()
	ps := newPersisted(t, mem)
	startLogged(t, ps.f, "s")
	must(t, sendN(t, ps.f.mock, "s", 1))
	ps.f.processed("s", 1)
	g := compileGlobals(t, oldProcSrc)
	fn, _ := g.Get("proc")
	ps.f.start(StartRequest{StreamID: "fn-state", Processor: rtfs.Symbol("proc"), Globals: g, InitialState: rtfs.MapOf(rtfs.Keyword("f"), fn)})
	if _, err := ps.f.p.Pause(t.Context(), "fn-state"); err != nil {
		t.Fatal(err)
	}
	ended := ps.f.start(StartRequest{StreamID: "ended", Processor: rtfs.Symbol("proc"), Globals: compileGlobals(t, oldProcSrc)})
	if _, err := ps.f.p.Cancel(t.Context(), ended); err != nil {
		t.Fatal(err)
	}
	ps.f.Await(ended)
	must(t, ps.f.p.Close())
	before := dump(t, mem)
	for _, tc := range []struct {
		name, id, src, proc, want string
	}{
		{"no such function", "s", newProcSrc, "other", `no function named "other" is defined in new.rtfs`},
		{"not a function", "s", newProcSrc, "factor", `"factor" is int 10, not a function`},
		{"wrong arity", "s", "(defn proc [a] a)", "", "proc cannot be called as (processor state chunk metadata)"},
		{"host call", "s", "(println 1) (defn proc [s c] {:state s})", "", "its top level calls :ccos.io.log at new.rtfs:1:1"},
		{"ended", "ended", newProcSrc, "", "it has ended (cancelled)"},
		{"missing", "nope", newProcSrc, "", "no such stream"},
		{"function in the state", "fn-state", newProcSrc, "", "its state cannot be carried over to new.rtfs (does it hold a function of the old program?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := UpgradeStored(context.Background(), mem, Upgrade{StreamID: tc.id, Program: newProgram(t, tc.src), Processor: tc.proc})
			wantErrContains(t, err, tc.want)
			if tc.name != "missing" && !errors.Is(err, ErrCannotUpgrade) {
				t.Errorf("err %v does not wrap ErrCannotUpgrade", err)
			}
			if after := dump(t, mem); after != before {
				t.Fatal("a refused swap changed the store")
			}
		})
	}
}

// dump is the store's content, for comparisons.
func dump(t *testing.T, st persistence.Store) string {
	t.Helper()
	var b strings.Builder
	must(t, st.Scan(context.Background(), nil, func(k, v []byte) error {
		b.WriteString(string(k) + "=" + string(v) + "\n")
		return nil
	}))
	return b.String()
}

// A running stream gets its new processor between two chunks while its
// producer goes on sending: every chunk is handled once, in order, the old
// processor's up to the swap and the new one's after; a subscription and an
// Await made before the swap follow the stream through it.
func TestUpgradeLiveStream(t *testing.T) {
	mem := persistence.NewMemStore()
	f := newFixture(t, Options{Store: mem})
	startLogged(t, f, "live")
	sub, err := f.p.Subscribe("live", SubscribeOptions{Buffer: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	awaited := make(chan error, 1)
	go func() { _, err := f.p.Await(context.Background(), "live"); awaited <- err }()

	const last, gate = 300, 200
	produced := make(chan error, 1)
	upgraded := make(chan struct{})
	go func() { produced <- produce(f.mock, "live", last, gate, upgraded) }()
	f.waitFor("some chunks", func() bool { return path(f.Inspect("live"), "stats", "processed-chunks").(rtfs.Int) >= 20 })
	res, err := f.p.Upgrade(context.Background(), Upgrade{StreamID: "live", Program: newProgram(t, newProcSrc)})
	close(upgraded)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != StateActive {
		t.Fatalf("result %+v", res)
	}
	if err := <-produced; err != nil {
		t.Fatal(err, f.Inspect("live"))
	}
	f.processed("live", last)
	state := f.stateOf("live")
	log := path(state, "log").(*rtfs.Vector)
	k := 0
	for k < log.Len() && path(log.Index(k)) != nil && log.Index(k).(*rtfs.Vector).Index(0) == rtfs.Keyword("old") {
		k++
	}
	if k < 20 || k > gate {
		t.Fatalf("the swap came after chunk %d", k)
	}
	checkLog(t, state, k, last)
	if _, err := f.p.Cancel(t.Context(), "live"); err != nil {
		t.Fatal(err)
	}
	if err := <-awaited; err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("Await across the swap = %v, want the cancelled end", err)
	}
	for ev := range sub.C() {
		if ev.Kind == EventEnd {
			if ev.Status.State != StateCancelled {
				t.Fatalf("the subscription ended with %+v", ev.Status)
			}
			return
		}
	}
	t.Fatal("the subscription closed without the stream's end")
}

// produce sends chunks 1..last to stream id like a pipe that cannot
// replay: when the stream stops to restart (an upgrade), it sends again
// after the cursor the restarted stream reports. It sends nothing after
// chunk gate before open is closed.
func produce(mk *mock.Transport, id string, last, gate int, open <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 1
	for n <= last {
		src := mk.Source(id)
		select {
		case <-src.Started():
		case <-ctx.Done():
			return ctx.Err()
		}
		if c := src.Cursor(); c != "" {
			from, err := strconv.Atoi(c)
			if err != nil {
				return err
			}
			n = from + 1
		}
		for ; n <= last; n++ {
			if n == gate+1 {
				select {
				case <-open:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			err := src.Send(ctx, transport.Chunk{Data: []byte(`{"n":` + strconv.Itoa(n) + `}`), ID: strconv.Itoa(n)})
			if errors.Is(err, mock.ErrEnded) {
				break // the stream restarts: take its new source
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// A live swap that fails changes nothing: the stream goes on with its old
// processor.
func TestUpgradeLiveRefused(t *testing.T) {
	f := newFixture(t, Options{Store: persistence.NewMemStore()})
	startLogged(t, f, "s")
	must(t, sendN(t, f.mock, "s", 1))
	f.processed("s", 1)
	_, err := f.p.Upgrade(context.Background(), Upgrade{StreamID: "s", Program: newProgram(t, newProcSrc), Processor: "nope"})
	wantErrContains(t, err, `no function named "nope"`)
	must(t, sendN(t, f.mock, "s", 2))
	f.processed("s", 2)
	checkLog(t, f.stateOf("s"), 2, 2)
	noStore := newFixture(t, Options{})
	startLogged(t, noStore, "s")
	_, err = noStore.p.Upgrade(context.Background(), Upgrade{StreamID: "s", Program: newProgram(t, newProcSrc)})
	wantErrContains(t, err, "keeps no store")
}
