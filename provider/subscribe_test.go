package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
)

// A lossless subscriber with a tiny buffer receives every output in order
// and then the end; the stream waits for it instead of dropping.
func TestLosslessSubscriber(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter()})
	sub, err := f.p.Subscribe(id, SubscribeOptions{Buffer: 1, Lossless: true})
	if err != nil {
		t.Fatal(err)
	}
	all, err := f.p.Subscribe("", SubscribeOptions{Buffer: 100, Lossless: true})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for n := 1; n <= 20; n++ {
			_ = f.mock.Source(id).Send(context.Background(), rtfsChunk(n))
		}
		f.mock.Source(id).Close()
	}()
	var counts []int64
	var end Event
	for ev := range sub.C() {
		if ev.Kind == EventEnd {
			end = ev
			continue
		}
		counts = append(counts, int64(path(ev.Output, "count").(rtfs.Int)))
	}
	if len(counts) != 20 || counts[0] != 1 || counts[19] != 20 {
		t.Fatalf("outputs = %v", counts)
	}
	for i := range counts {
		if counts[i] != int64(i+1) {
			t.Fatalf("outputs out of order: %v", counts)
		}
	}
	if end.Status.State != StateCompleted || sub.Dropped() != 0 {
		t.Errorf("end = %+v, dropped = %d", end, sub.Dropped())
	}
	all.Close()
	n := 0
	for ev := range all.C() {
		if ev.StreamID != id {
			t.Errorf("event of %s", ev.StreamID)
		}
		n++
	}
	if n != 21 {
		t.Errorf("the all-streams subscription got %d events, want 21", n)
	}
	late, err := f.p.Subscribe(id, SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ev, ok := <-late.C(); !ok || ev.Kind != EventEnd || ev.Status.State != StateCompleted {
		t.Errorf("a subscription to an ended stream got %+v, %v", ev, ok)
	}
}

// A subscriber that never reads cannot hold the stream up beyond its buffer:
// events beyond it are dropped and counted.
func TestDroppingSubscriber(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter()})
	sub, err := f.p.Subscribe(id, SubscribeOptions{Buffer: 2})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 10; n++ {
		f.send(id, fmt.Sprintf(`{"n":%d}`, n))
	}
	f.mock.Source(id).Close()
	if st := f.await(id); st.State != StateCompleted {
		t.Fatalf("status = %+v", st)
	}
	if sub.Dropped() != 9 { // 10 outputs + the end, 2 buffered
		t.Errorf("dropped = %d, want 9", sub.Dropped())
	}
	var got []Event
	for ev := range sub.C() {
		got = append(got, ev)
	}
	if len(got) != 2 || path(got[0].Output, "count") != rtfs.Int(1) {
		t.Errorf("buffered events = %+v", got)
	}
}

// Closing a lossless subscription releases a stream blocked on it.
func TestClosingLosslessSubscriptionReleasesStream(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter()})
	sub, err := f.p.Subscribe(id, SubscribeOptions{Buffer: 1, Lossless: true})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		f.send(id, fmt.Sprintf(`{"n":%d}`, n))
	}
	// Output 1 fills the buffer, output 2 blocks the worker.
	f.waitFor("a blocked publish", func() bool { return path(f.inspect(id), "stats", "processed-chunks") == rtfs.Int(2) })
	time.Sleep(10 * time.Millisecond)
	if path(f.inspect(id), "stats", "processed-chunks") != rtfs.Int(2) {
		t.Fatal("the stream went on although its lossless subscriber is full")
	}
	sub.Close()
	f.mock.Source(id).Close()
	if st := f.await(id); st.State != StateCompleted || path(f.stateOf(id), "count") != rtfs.Int(3) {
		t.Fatalf("status = %+v", st)
	}
}

func TestUnknownStreamErrors(t *testing.T) {
	f := newFixture(t, Options{})
	if _, err := f.p.Subscribe("nope", SubscribeOptions{}); err == nil {
		t.Error("Subscribe to an unknown stream succeeded")
	}
	if err := f.p.Deliver(context.Background(), "nope", rtfsChunk(1)); err == nil {
		t.Error("Deliver to an unknown stream succeeded")
	}
	if _, err := f.p.Done("nope"); err == nil {
		t.Error("Done of an unknown stream succeeded")
	}
	f.p.Close()
	if _, err := f.p.Subscribe("", SubscribeOptions{}); err != ErrClosed {
		t.Errorf("Subscribe after Close = %v", err)
	}
}
