package provider

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"
	"github.com/rtfshost/rtfshost/rtfs"
)

// out is an output event of stream "s".
func out(seq int64, prio Priority, kind string) Event {
	return Event{Kind: EventOutput, StreamID: "s", Seq: seq, Output: rtfs.Int(seq), Priority: prio, OutputKind: kind}
}

// shape renders batches as "P[seq*count ...]" per batch: P is the first
// letter of the priority, E the end; "+d" the drops it reports.
func shape(bs []Batch) string {
	var parts []string
	for _, b := range bs {
		if b.End != nil {
			parts = append(parts, "E")
			continue
		}
		s := strings.ToUpper(b.Priority.String()[:1]) + "["
		for i, o := range b.Outputs {
			if i > 0 {
				s += " "
			}
			s += fmt.Sprint(o.Seq)
			if o.Count > 1 {
				s += fmt.Sprintf("*%d", o.Count)
			}
		}
		s += "]"
		if b.Dropped > 0 {
			s += fmt.Sprintf("+%d", b.Dropped)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

var t0 = time.Unix(1_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// TestOutboxNormalThrottle: the first normal output goes at once; the next
// ones wait for the interval, or go as soon as a batch of ten is full.
func TestOutboxNormalThrottle(t *testing.T) {
	o := NewOutbox(OutboxOptions{})
	o.Add(out(0, PriorityNormal, ""))
	if got := shape(o.Take(at(0), nil)); got != "N[0]" {
		t.Fatalf("first output: %s", got)
	}
	for i := int64(1); i <= 3; i++ {
		o.Add(out(i, PriorityNormal, ""))
	}
	if got := shape(o.Take(at(100), nil)); got != "" {
		t.Fatalf("before the interval: %s", got)
	}
	if next, ok := o.Next(); !ok || !next.Equal(at(200)) {
		t.Fatalf("next due %v %v, want %v", next, ok, at(200))
	}
	if got := shape(o.Take(at(200), nil)); got != "N[1 2 3]" {
		t.Fatalf("at the interval: %s", got)
	}
	for i := int64(4); i < 4+25; i++ {
		o.Add(out(i, PriorityNormal, ""))
	}
	// 25 wait: the full batches go at once, the rest waits.
	if got := shape(o.Take(at(210), nil)); got != "N[4 5 6 7 8 9 10 11 12 13] N[14 15 16 17 18 19 20 21 22 23]" {
		t.Fatalf("full batches: %s", got)
	}
	if got := shape(o.Take(at(409), nil)); got != "" {
		t.Fatalf("the rest before the interval: %s", got)
	}
	if got := shape(o.Take(at(410), nil)); got != "N[24 25 26 27 28]" {
		t.Fatalf("the rest: %s", got)
	}
}

// TestOutboxImmediateInOrder: an immediate output goes at once and alone,
// after the outputs held before it, which go with it in order; it is never
// coalesced.
func TestOutboxImmediateInOrder(t *testing.T) {
	o := NewOutbox(OutboxOptions{})
	o.Add(out(0, PriorityLow, ""))
	o.Take(at(0), nil) // the low interval starts
	o.Add(out(1, PriorityNormal, ""))
	o.Take(at(1), nil) // the normal one too
	o.Add(out(2, PriorityLow, ""))
	o.Add(out(3, PriorityNormal, ""))
	o.Add(out(4, PriorityImmediate, "alert"))
	o.Add(out(5, PriorityImmediate, "alert"))
	o.Add(out(6, PriorityLow, ""))
	if got := shape(o.Take(at(2), nil)); got != "L[2] N[3] I[4] I[5]" {
		t.Fatalf("immediate: %s", got)
	}
	// The low one after them waits a second from the last low batch.
	if got := shape(o.Take(at(1001), nil)); got != "" {
		t.Fatalf("the low one after them waits for its interval: %s", got)
	}
	if got := shape(o.Take(at(1002), nil)); got != "L[6]" {
		t.Fatalf("low at its interval: %s", got)
	}
}

// TestOutboxLowFlood: a flood of low outputs becomes one batch per second
// of the twenty newest, the rest dropped and counted; immediate ones in
// the flood go alone and in order.
func TestOutboxLowFlood(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter()})
	s, _ := f.p.lookup(id)
	o := NewOutbox(OutboxOptions{})
	var bs []Batch
	seq := int64(0)
	for ms := 0; ms < 3000; ms += 10 {
		for range 10 {
			ev := out(seq, PriorityLow, "")
			if seq%500 == 250 {
				ev.Priority = PriorityImmediate
			}
			ev = stream.WithSource(ev, &s.Out)
			o.Add(ev)
			seq++
		}
		for _, b := range o.Take(at(ms), nil) {
			b.Outputs = append([]Output(nil), b.Outputs...) // valid until the next Take
			bs = append(bs, b)
		}
	}
	bs = append(bs, o.Drain(nil)...)
	var imm []int64
	lows, dropped := 0, int64(0)
	for _, b := range bs {
		dropped += b.Dropped
		switch b.Priority {
		case PriorityImmediate:
			if len(b.Outputs) != 1 {
				t.Fatalf("an immediate batch carries %d outputs", len(b.Outputs))
			}
			imm = append(imm, b.Outputs[0].Seq)
		case PriorityLow:
			lows++
			if len(b.Outputs) > 20 {
				t.Fatalf("a low batch of %d", len(b.Outputs))
			}
		}
	}
	if fmt.Sprint(imm) != "[250 750 1250 1750 2250 2750]" {
		t.Errorf("immediate outputs %v", imm)
	}
	// Each immediate output takes the lows held before it along.
	if lows > 3+6 {
		t.Errorf("%d low batches for 3 s of flood", lows)
	}
	in := s.Info(InspectOptions{}, time.Now())
	if in.Stats.DroppedOutputs.Low != dropped || dropped < 2500 || in.Stats.DroppedOutputs.Normal != 0 {
		t.Errorf("dropped %d reported, inspect %+v", dropped, in.Stats.DroppedOutputs)
	}
}

// TestOutboxCoalesce: consecutive outputs of one :kind and priority become
// one with the count and the last value; another kind, priority or an
// output without a kind in between starts anew.
func TestOutboxCoalesce(t *testing.T) {
	o := NewOutbox(OutboxOptions{})
	o.Add(out(0, PriorityNormal, "x"))
	o.Take(at(0), nil)
	for i, k := range []string{"read", "read", "read", "", "read", "write", "write"} {
		o.Add(out(int64(i+1), PriorityNormal, k))
	}
	o.Add(out(8, PriorityLow, "write"))
	o.Add(out(9, PriorityImmediate, "write"))
	o.Add(out(10, PriorityImmediate, "write"))
	bs := o.Take(at(1), nil)
	if got := shape(bs); got != "N[3*3 4 5 7*2] L[8] I[9] I[10]" {
		t.Fatalf("coalesced: %s", got)
	}
	if v := bs[0].Outputs[0]; v.Value != rtfs.Int(3) || v.Kind != "read" {
		t.Fatalf("a coalesced output carries the last value: %+v", v)
	}
}

// TestOutboxEndAndPolicy: a stream's :delivery overrides the Outbox's;
// full batches go at once and the rest waits for the interval; a stream's
// end comes after everything it published; Drain hands everything out.
func TestOutboxEndAndPolicy(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter(), Delivery: &Delivery{Normal: Throttle{Interval: time.Hour, MaxBatch: 2}, Low: Throttle{Interval: -1}}})
	s, _ := f.p.lookup(id)
	o := NewOutbox(OutboxOptions{})
	add := func(from, to int64) {
		for i := from; i < to; i++ {
			ev := out(i, PriorityNormal, "")
			ev = stream.WithSource(ev, &s.Out)
			o.Add(ev)
		}
	}
	add(0, 1)
	if got := shape(o.Take(at(0), nil)); got != "N[0]" {
		t.Fatalf("the first output: %s", got)
	}
	add(1, 6)
	if got := shape(o.Take(at(1), nil)); got != "N[1 2] N[3 4]" {
		t.Fatalf("the stream's full batches of 2: %s", got)
	}
	if got := shape(o.Take(at(60_000), nil)); got != "" {
		t.Fatalf("the stream's hour: %s", got)
	}
	o.Add(Event{Kind: EventEnd, StreamID: "s", Seq: -1, Status: Status{StreamID: "s", State: StateCompleted}})
	if got := shape(o.Take(at(60_001), nil)); got != "N[5] E" {
		t.Fatalf("the end: %s", got)
	}
	if _, ok := o.Next(); ok {
		t.Fatal("something is still held")
	}
	o.Add(out(7, PriorityNormal, ""))
	o.Add(out(8, PriorityNormal, ""))
	if got := shape(o.Drain(nil)); got != "N[7 8]" {
		t.Fatalf("drain: %s", got)
	}
}

// TestOutboxCut: more immediate and normal outputs held than MaxPending
// cut the subscriber off: everything held is dropped and counted, by
// priority, and nothing more is taken.
func TestOutboxCut(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter()})
	s, _ := f.p.lookup(id)
	o := NewOutbox(OutboxOptions{MaxPending: 5, Delivery: &Delivery{Normal: Throttle{Interval: time.Hour, MaxBatch: 100}, Low: Throttle{Interval: -1}}})
	for i := range int64(7) {
		ev := out(i, PriorityNormal, "")
		if i == 3 {
			ev.Priority = PriorityLow
		}
		ev = stream.WithSource(ev, &s.Out)
		o.Add(ev)
	}
	if o.Err() == nil || !strings.Contains(o.Err().Error(), "more than 5 immediate and normal outputs behind") {
		t.Fatalf("Err = %v", o.Err())
	}
	o.Add(stream.WithSource(Event{Kind: EventOutput, StreamID: "s", Output: rtfs.Int(1), Priority: PriorityImmediate}, &s.Out))
	if got := shape(o.Take(at(1), nil)); got != "" {
		t.Fatalf("after the cut: %s", got)
	}
	d := s.Info(InspectOptions{}, time.Now()).Stats.DroppedOutputs
	if d != (DroppedOutputsInfo{Immediate: 1, Normal: 6, Low: 1}) {
		t.Fatalf("dropped %+v", d)
	}
}

// TestOutboxDropKeepsProgress: a low output dropped hands the progress it
// carried to the next one, so that the subscriber still learns it.
func TestOutboxDropKeepsProgress(t *testing.T) {
	o := NewOutbox(OutboxOptions{})
	o.Add(out(0, PriorityLow, ""))
	o.Take(at(0), nil)
	total := 2.0
	first := out(1, PriorityLow, "")
	first.Progress = &ProgressInfo{Total: &total}
	o.Add(first)
	for i := int64(2); i < 30; i++ {
		o.Add(out(i, PriorityLow, ""))
	}
	bs := o.Take(at(1000), nil)
	if len(bs) != 1 || bs[0].Dropped != 9 || bs[0].Progress == nil || *bs[0].Progress.Total != 2 {
		t.Fatalf("batches %s, progress %+v", shape(bs), bs[0].Progress)
	}
}
