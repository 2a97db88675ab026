package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/persistence/storetest"
	"github.com/rtfshost/rtfshost/rtfs"
)

// A disk about to refuse writes holds the stream as failed (kind store,
// "no space left") before any commit is refused; nothing is lost, and
// Resume once space is back carries on exactly, through a restart too.
func TestLowDiskHoldsStream(t *testing.T) {
	g := compileGlobals(t, countSrc)
	mem := persistence.NewMemStore()
	fs := storetest.NewFaultStore(mem)
	ps := newPersisted(t, fs)
	id := startCount(ps.f, g, "low-disk", rtfs.Symbol("proc"))
	ps.f.Send(id, `{"n":1}`)
	ps.f.processed(id, 1)

	fs.SetLowSpace(true)
	ps.f.Send(id, `{"n":2}`)
	ps.f.Send(id, `{"n":3}`)
	var st Status
	waitUntil(t, "the stream to be held for lack of space", func() bool {
		st, _ = ps.f.p.Status(t.Context(), id)
		return st.State == StateFailed
	})
	if st.Failure == nil || st.Failure.Kind != FailureStore || !strings.Contains(st.Message, "no space left") {
		t.Fatalf("held: %+v, want a store failure saying no space left", st)
	}
	if c := path(ps.f.stateOf(id), "sum"); c != rtfs.Int(1) {
		t.Fatalf(":sum while held = %v, want 1 (no chunk taken)", c)
	}
	if _, failures := fs.Counts(); failures != 0 {
		t.Fatalf("%d commits failed: holding must come before any refusal", failures)
	}
	// Still short: Resume holds it again at once.
	if _, err := ps.f.p.Resume(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the stream to be held again", func() bool {
		st, _ = ps.f.p.Status(t.Context(), id)
		return st.State == StateFailed
	})

	fs.SetLowSpace(false)
	if _, err := ps.f.p.Resume(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	ps.f.processed(id, 3)
	if c, n := path(ps.f.stateOf(id), "sum"), path(ps.f.stateOf(id), "count"); c != rtfs.Int(6) || n != rtfs.Int(3) {
		t.Fatalf(":sum, :count after resume = %v, %v, want 6, 3 (1+2+3, each once)", c, n)
	}
	must(t, ps.f.p.ps.Com.Flush(context.Background()))
	ps.restart()
	if c, n := path(ps.f.stateOf(id), "sum"), path(ps.f.stateOf(id), "count"); c != rtfs.Int(6) || n != rtfs.Int(3) {
		t.Fatalf(":sum, :count after a restart = %v, %v, want 6, 3", c, n)
	}
}
