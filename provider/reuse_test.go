package provider

import (
	"fmt"
	"testing"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/rtfs"
)

// A processor that only reads its chunk lets the stream decode later chunks
// into the maps of earlier ones; one that keeps its chunks gets maps of
// their own, which stay as they were. Either way every chunk is processed
// with its own content (the queue fills, so maps go round many times).
func TestChunkMapsReused(t *testing.T) {
	g := compileGlobals(t, `
(defn reads [s c] {:state (+ s (:n c)) :output (get c :n)})
(defn keeps [s c] {:state (conj s c) :output (:n c)})`)
	const n = 2000
	for _, tc := range []struct {
		proc    string
		initial rtfs.Value
		reuse   bool
	}{
		{"reads", rtfs.Int(0), true},
		{"keeps", rtfs.NewVector(), false},
	} {
		f := newFixture(t, Options{QueueCapacity: 16})
		id := f.start(StartRequest{Processor: rtfs.Symbol(tc.proc), Globals: g, InitialState: tc.initial})
		s, err := f.p.lookup(id)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Proc.(*stream.RTFSProcessor).KeepsChunk; got == tc.reuse {
			t.Fatalf("%s: keepsChunk = %v", tc.proc, got)
		}
		reused := false
		for i := 1; i <= n; i++ {
			f.Send(id, fmt.Sprintf(`{"n":%d,"tag":"t%d"}`, i, i%7))
			if !reused && s.Spare.Load() != nil {
				reused = true
			}
		}
		f.mock.Source(id).Close()
		if st := f.Await(id); st.State != StateCompleted || st.Result != rtfs.Int(n) {
			t.Fatalf("%s: status %+v", tc.proc, st)
		}
		if reused != tc.reuse {
			t.Errorf("%s: a chunk map was handed back for reuse = %v, want %v", tc.proc, reused, tc.reuse)
		}
		state := f.stateOf(id)
		if tc.proc == "reads" {
			if state != rtfs.Int(n*(n+1)/2) {
				t.Errorf("reads: state %v, want %d", state, n*(n+1)/2)
			}
			continue
		}
		v := state.(*rtfs.Vector)
		for i := 0; i < v.Len(); i++ {
			want := fmt.Sprintf(`{:n %d :tag "t%d"}`, i+1, (i+1)%7)
			if got := v.Index(i).String(); got != want {
				t.Fatalf("keeps: chunk %d in the state is %s, want %s", i, got, want)
			}
		}
	}
}

// Chunks that Inspect handed out are never decoded into again, however
// long the caller keeps them.
func TestInspectedChunksNotReused(t *testing.T) {
	g := compileGlobals(t, `(defn reads [s c] {:state (+ s (:n c))})`)
	f := newFixture(t, Options{QueueCapacity: 8})
	id := f.start(StartRequest{Processor: rtfs.Symbol("reads"), Globals: g, InitialState: rtfs.Int(0)})
	if _, err := f.p.Pause(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		f.Send(id, fmt.Sprintf(`{"n":%d}`, i))
	}
	s, _ := f.p.lookup(id)
	f.waitFor("three queued chunks", func() bool { s.Mu.Lock(); defer s.Mu.Unlock(); return s.Queue.Len() == 3 })
	queue, _ := f.Inspect(id).GetKeyword("queue")
	var shown []rtfs.Value
	for i := 0; i < queue.(*rtfs.Vector).Len(); i++ {
		c, _ := queue.(*rtfs.Vector).Index(i).(*rtfs.Map).GetKeyword("chunk")
		shown = append(shown, c)
	}
	if len(shown) != 3 {
		t.Fatalf("inspect shows %d queued chunks, want 3", len(shown))
	}
	if _, err := f.p.Resume(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	for i := 4; i <= 200; i++ {
		f.Send(id, fmt.Sprintf(`{"n":%d}`, i))
	}
	f.mock.Source(id).Close()
	if st := f.Await(id); st.State != StateCompleted || f.stateOf(id) != rtfs.Int(200*201/2) {
		t.Fatalf("status %+v, state %v", st, f.stateOf(id))
	}
	for i, c := range shown {
		if want := fmt.Sprintf("{:n %d}", i+1); c.String() != want {
			t.Errorf("inspected chunk %d is now %s, want %s", i, c, want)
		}
	}
}
