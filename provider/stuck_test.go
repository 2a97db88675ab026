package provider

import (
	"testing"

	"github.com/rtfshost/rtfshost/rtfs"
)

// Stuck names a stream its processor paused with no :resume-after-ms whose
// source can resume it no more, whatever its queue holds: a source that
// has sent no control chunk; not one that has sent some (its next one
// may resume the stream) until its queue is full; and never a stream that
// a pause call paused (whoever paused it resumes it).
func TestStuck(t *testing.T) {
	f := newFixture(t, Options{})
	state := func() rtfs.Value { return rtfs.MapOf() }
	quiet := f.start(StartRequest{goProc: counter(), InitialState: state(), StreamID: "quiet"})
	talker := f.start(StartRequest{goProc: counter(), InitialState: state(), StreamID: "talker", QueueCapacity: 2})
	asked := f.start(StartRequest{goProc: counter(), InitialState: state(), StreamID: "asked"})

	f.Send(quiet, `{"n":1,"reply":"pause"}`) // the processor pauses; its source is still there
	f.Send(talker, `{"action":"continue"}`)  // a control chunk: this source may resume it
	f.Send(talker, `{"n":2,"reply":"pause"}`)
	f.Send(asked, `{"n":1}`)
	if _, err := f.p.Pause(t.Context(), asked); err != nil {
		t.Fatal(err)
	}
	paused := func(id string) func() bool {
		return func() bool { st, _ := f.p.Status(t.Context(), id); return st.State == StatePaused }
	}
	for _, id := range []string{quiet, talker, asked} {
		f.waitFor(id+" paused", paused(id))
	}
	if got := stuckIDs(f.p.Stuck()); len(got) != 1 || got[0] != quiet {
		t.Fatalf("stuck %v, want only %s (its source sent no control chunk)", got, quiet)
	}
	f.Send(talker, `{"n":3}`)
	f.Send(talker, `{"n":4}`) // its queue is full now: nothing of its source reaches it
	f.waitFor("talker stuck", func() bool { return len(f.p.Stuck()) == 2 })
	if got := stuckIDs(f.p.Stuck()); got[0] != quiet || got[1] != talker {
		t.Fatalf("stuck %v, want %s and %s", got, quiet, talker)
	}
}

func stuckIDs(list []StuckStream) []string {
	var ids []string
	for _, s := range list {
		ids = append(ids, s.StreamID)
	}
	return ids
}
