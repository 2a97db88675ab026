package provider

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
)

// phasesSrc reports its progress: the chunk {"m": "id"} reaches milestone
// id, {"p": n} reports :progress {:done n}, {"bad": ...} returns the result
// the chunk names; every chunk outputs it, with the chunk's priority and
// kind.
const phasesSrc = `
(defn proc [state chunk meta]
  (cond
    (:m chunk) {:state state :output (:m chunk) :milestone (keyword (:m chunk)) :kind :phase}
    (:p chunk) {:state state :progress {:done (:p chunk) :message (str "step " (:p chunk))}}
    (= (:bad chunk) "priority") {:state state :output 1 :priority :urgent}
    (= (:bad chunk) "milestone") {:state state :milestone :nowhere}
    (= (:bad chunk) "progress") {:state state :progress {:done -1}}
    (= (:bad chunk) "kind") {:state state :output 1 :kind 3}
    :else {:state state :output chunk :priority (keyword (:prio chunk "normal")) :kind (:kind chunk)}))`

var testMilestones = []Milestone{
	{ID: "scan", Weight: 0.25, Estimated: 1000 * time.Millisecond},
	{ID: "build", Weight: 0.5, Estimated: 4000 * time.Millisecond},
	{ID: "report", Weight: 0.25},
}

// TestResultDeliveryKeys: a result's :priority and :kind reach the
// subscribers with its output; :milestone and :progress move the stream's
// :progress, published with the output or, without one, as EventProgress.
func TestResultDeliveryKeys(t *testing.T) {
	f := newFixture(t, Options{})
	g := compileGlobals(t, phasesSrc)
	id := f.p.NewStreamID("p")
	sub, err := f.p.Subscribe(id, SubscribeOptions{Pending: true, Buffer: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	f.start(StartRequest{StreamID: id, Processor: rtfs.Symbol("proc"), Globals: g, Milestones: testMilestones})
	in := f.mustInfo(t, id)
	if p := in.Progress; p == nil || p.Done != 0 || *p.Total != 1 || *p.Fraction != 0 || p.EtaMs == nil || *p.EtaMs > 5000 {
		t.Fatalf("progress before any milestone: %+v", in.Progress)
	}
	f.Send(id, `{"prio":"immediate","kind":"alert","x":1}`)
	f.Send(id, `{"prio":"low"}`)
	f.Send(id, `{"m":"build"}`)
	f.Send(id, `{"p":0.9}`)
	// The first output carries the progress too: its total is known.
	want := []string{"output immediate alert 0", "output low ", "output normal phase 0.5", "progress normal  0.9"}
	for i, w := range want {
		ev := <-sub.C()
		got := "output"
		if ev.Kind == EventProgress {
			got = "progress"
		}
		got += " " + ev.Priority.String() + " " + ev.OutputKind
		if ev.Progress != nil {
			got += " " + strconv.FormatFloat(ev.Progress.Done, 'g', -1, 64)
		}
		if got != w {
			t.Errorf("event %d: %q, want %q", i, got, w)
		}
	}
	in = f.mustInfo(t, id)
	p := in.Progress
	if p.Done != 0.9 || *p.Fraction != 0.9 || p.Message != "step 0.9" || p.Milestone != "build" || p.EtaMs == nil {
		t.Fatalf("progress %+v", p)
	}
	v := f.Inspect(id)
	if got := path(v, "progress", "milestone"); got != rtfs.Keyword("build") {
		t.Errorf("inspect :progress :milestone = %v", got)
	}
	// The milestone is in the stream's timeline, once.
	f.Send(id, `{"m":"build"}`)
	<-sub.C()
	events, _, err := f.p.Timeline(id)
	if err != nil {
		t.Fatal(err)
	}
	var milestones []string
	for _, ev := range events {
		if ev.Kind == "milestone" {
			milestones = append(milestones, ev.Message)
		}
	}
	if strings.Join(milestones, " ") != "build" {
		t.Errorf("timeline milestones %v, want [build] once", milestones)
	}

	for bad, msg := range map[string]string{
		"priority":  ":priority must be :immediate, :normal or :low, got keyword :urgent",
		"milestone": ":milestone keyword :nowhere is not one of the stream's :milestones (:scan :build :report)",
		"progress":  ":progress :done must be a non-negative number",
		"kind":      ":kind must be a keyword or a string, got int 3",
	} {
		id := f.start(StartRequest{Processor: rtfs.Symbol("proc"), Globals: g, Milestones: testMilestones, OnError: endOnError})
		f.Send(id, `{"bad":"`+bad+`"}`)
		if st := f.Await(id); st.State != StateError || !strings.Contains(st.Message, msg) {
			t.Errorf("bad %s: %+v", bad, st)
		}
	}
}

// TestETA: the ETA is the elapsed time per unit of work done times the
// work left, less the time since the last step; before any step, the
// estimates of the milestones left; 0 once all is done.
func TestETA(t *testing.T) {
	f := newFixture(t, Options{})
	s := stream.NewStream(&f.p.env, "x", stream.Definition{Milestones: testMilestones}, counter())
	defer s.Cancel()
	now := time.Unix(1000, 0)
	s.Started = now
	eta := func(at time.Time) int64 {
		in := s.ProgressInfoLocked(at)
		if in.EtaMs == nil {
			return -1
		}
		return *in.EtaMs
	}
	if got := eta(now.Add(2 * time.Second)); got != 3000 {
		t.Errorf("from the estimates: %d ms, want 5000-2000", got)
	}
	if _, err := s.ApplyProgressLocked(rtfs.Keyword("scan"), nil, now.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// 10 s for 0.25: 30 s for the 0.75 left; 4 s later, 26 s.
	if got := eta(now.Add(14 * time.Second)); got != 26000 {
		t.Errorf("after a quarter in 10 s: %d ms", got)
	}
	if _, err := s.ApplyProgressLocked(nil, rtfs.MapOf(rtfs.Keyword("done"), rtfs.Int(1)), now.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := eta(now.Add(21 * time.Second)); got != 0 {
		t.Errorf("all done: %d ms", got)
	}
	if _, err := s.ApplyProgressLocked(nil, rtfs.MapOf(rtfs.Keyword("total"), rtfs.Int(4)), now.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	// 1 of 4 in 20 s: 60 s left.
	if got := eta(now.Add(20 * time.Second)); got != 60000 {
		t.Errorf("explicit total: %d ms", got)
	}
}

// TestProgressSurvivesRestart: a stream's milestones, :delivery and
// progress, and the outputs its subscribers dropped, are stored with it:
// after a restart the recovered stream shows them and goes on from there.
func TestProgressSurvivesRestart(t *testing.T) {
	ps := newPersisted(t, persistence.NewMemStore())
	g := compileGlobals(t, phasesSrc)
	d := Delivery{Normal: Throttle{Interval: 50 * time.Millisecond, MaxBatch: 3}, Low: Throttle{Interval: -1}}
	id := ps.f.start(StartRequest{StreamID: "phases", Processor: rtfs.Symbol("proc"), Globals: g, Milestones: testMilestones, Delivery: &d})
	ps.f.Send(id, `{"m":"scan"}`)
	ps.f.Send(id, `{"m":"report"}`)
	ps.f.processed(id, 2)
	s, _ := ps.f.p.lookup(id)
	s.Out.OutputDropped(PriorityLow, 7)
	ps.f.Send(id, `{"x":1}`) // a snapshot after the drop
	ps.f.processed(id, 3)
	before := ps.f.mustInfo(t, id).Progress
	ps.restart()
	after := ps.f.mustInfo(t, id)
	if p := after.Progress; p == nil || p.Done != 0.5 || *p.Total != 1 || p.Milestone != "report" || (before.EtaMs == nil) != (p.EtaMs == nil) {
		t.Fatalf("progress after the restart %+v, before %+v", after.Progress, before)
	}
	if after.Stats.DroppedOutputs.Low != 7 {
		t.Errorf("dropped outputs after the restart: %+v", after.Stats.DroppedOutputs)
	}
	s, _ = ps.f.p.lookup(id)
	if s.Def.Delivery == nil || *s.Def.Delivery != d || len(s.Def.Milestones) != 3 || s.Def.Milestones[1] != testMilestones[1] {
		t.Fatalf("definition after the restart: %+v %+v", s.Def.Delivery, s.Def.Milestones)
	}
	ps.f.Send(id, `{"m":"scan"}`) // reached already: no change
	ps.f.Send(id, `{"m":"build"}`)
	ps.f.processed(id, 5)
	if p := ps.f.mustInfo(t, id).Progress; p.Done != 1 || *p.EtaMs != 0 {
		t.Fatalf("progress after the last milestone: %+v", p)
	}
}

// fixtureBeforeProgress is a store written before streams kept a delivery
// record (their progress, milestones and dropped outputs): a count stream
// ("running", countSrc) interrupted after three chunks {"n": 1..3}, and one
// completed ("done", {:total 2}).
const fixtureBeforeProgress = "testdata/store-before-progress.json"

// TestStoredFixtureBeforeProgress recovers that store: the streams have no
// progress and no dropped outputs, and the running one goes on from its
// third chunk.
func TestStoredFixtureBeforeProgress(t *testing.T) {
	ps := newPersisted(t, loadFixture(t, fixtureBeforeProgress))
	ps.restart()
	done := ps.f.mustInfo(t, "done")
	if done.Status.State != StateCompleted || done.Progress != nil || done.Stats.DroppedOutputs != (DroppedOutputsInfo{}) {
		t.Fatalf("the completed stream: %+v", done)
	}
	if got := done.Result.V.String(); got != "{:total 2}" {
		t.Errorf("its result %s", got)
	}
	running := ps.f.mustInfo(t, "running")
	if running.Status.State != StateActive || running.Progress != nil || running.Stats.ProcessedChunks != 3 {
		t.Fatalf("the running stream: %+v", running)
	}
	ps.f.Send("running", `{"n": 4}`)
	ps.f.Send("running", `{"done": true}`)
	if st := ps.f.Await("running"); st.State != StateCompleted || st.Result.String() != "{:total 5}" {
		t.Fatalf("the running stream went on to %+v", st)
	}
	if sum := path(ps.f.stateOf("running"), "sum"); sum != rtfs.Int(10) {
		t.Errorf("its sum %v, want 1+2+3+4", sum)
	}
}

// mustInfo is Info, failing the test on an error.
func (f *fixture) mustInfo(t *testing.T, id string) StreamInfo {
	t.Helper()
	in, err := f.p.Info(id, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestDeliveryRecord: the delivery record round-trips; a truncated one is a
// corrupt record naming its key; KeyOwner names its stream.
func TestDeliveryRecord(t *testing.T) {
	d := Delivery{Normal: Throttle{Interval: time.Second, MaxBatch: 3}, Low: Throttle{Interval: -1}}
	r := stream.DeliveryRecord{Delivery: &d, Milestones: testMilestones,
		Progress:   stream.Progress{Known: true, Done: 0.75, Total: 1, Message: "m", Milestone: "build", Reached: []bool{true, true, false}, At: time.UnixMilli(99)},
		OutDropped: [3]int64{0, 1, 5}}
	key := stream.DeliveryKey("k")
	full := r.Encode()
	var back stream.DeliveryRecord
	if err := back.Decode(key, full); err != nil {
		t.Fatal(err)
	}
	if *back.Delivery != d || len(back.Milestones) != 3 || back.Milestones[1] != testMilestones[1] || back.OutDropped != r.OutDropped ||
		back.Progress.Done != 0.75 || back.Progress.Milestone != "build" || !back.Progress.Reached[1] || back.Progress.Reached[2] || back.Progress.At.UnixMilli() != 99 {
		t.Fatalf("round trip: %+v", back)
	}
	_, payload, _ := persistence.DecodeRecord(key, full, stream.KindDelivery, stream.RecordVersion)
	for n := 0; n < len(payload); n++ {
		var cr *persistence.CorruptRecordError
		err := (&stream.DeliveryRecord{}).Decode(key, persistence.EncodeRecord(stream.KindDelivery, stream.RecordVersion, payload[:n]))
		if !errors.As(err, &cr) || !strings.Contains(err.Error(), `"delivery/k"`) {
			t.Fatalf("truncated at %d: %v", n, err)
		}
	}
	if id, ok := KeyOwner(key); !ok || id != "k" {
		t.Fatalf("KeyOwner(%q) = %q %v", key, id, ok)
	}
}
