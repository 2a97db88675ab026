package provider

import (
	"context"
	"reflect"
	"testing"

	"github.com/rtfshost/rtfshost/rtfs"
)

// A stream's timeline holds its start, the directives applied (not the
// plain chunks, nor a request that changes nothing) with who gave them and
// on which chunk, and its end; an ended stream has an end time.
func TestTimeline(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter(), InitialState: rtfs.MapOf()})
	f.Send(id, `{"n":1}`)
	f.Send(id, `{"action":"pause"}`)
	f.waitFor("paused", func() bool { st, _ := f.p.Status(t.Context(), id); return st.State == StatePaused })
	for _, op := range []func(context.Context, string) (Status, error){f.p.Resume, f.p.Resume, f.p.Cancel} {
		if _, err := op(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	f.Await(id)
	events, dropped, err := f.p.Timeline(id)
	if err != nil || dropped != 0 {
		t.Fatal(err, dropped)
	}
	var got []TimelineEvent
	for _, ev := range events {
		if ev.AtEpochMs <= 0 {
			t.Errorf("%+v has no time", ev)
		}
		ev.AtEpochMs = 0
		got = append(got, ev)
	}
	want := []TimelineEvent{
		{Kind: "start"},
		{Kind: "pause", Source: "control-chunk", Chunk: 2},
		{Kind: "resume", Source: "request"},
		{Kind: "cancel", Source: "request"},
		{Kind: "end", Message: "cancelled (request)"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("timeline\n got %+v\nwant %+v", got, want)
	}
	if in, _ := f.p.Info(id, InspectOptions{}); in.EndedAtEpochMs == nil || *in.EndedAtEpochMs < in.StartedAtEpochMs {
		t.Errorf("ended at %v, started at %d", in.EndedAtEpochMs, in.StartedAtEpochMs)
	}
}
