package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
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
		f.Send(id, fmt.Sprintf(`{"n":%d}`, n))
	}
	f.mock.Source(id).Close()
	if st := f.Await(id); st.State != StateCompleted {
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
		f.Send(id, fmt.Sprintf(`{"n":%d}`, n))
	}
	// Output 1 fills the buffer, output 2 blocks the worker.
	f.waitFor("a blocked publish", func() bool { return path(f.Inspect(id), "stats", "processed-chunks") == rtfs.Int(2) })
	time.Sleep(10 * time.Millisecond)
	if path(f.Inspect(id), "stats", "processed-chunks") != rtfs.Int(2) {
		t.Fatal("the stream went on although its lossless subscriber is full")
	}
	sub.Close()
	f.mock.Source(id).Close()
	if st := f.Await(id); st.State != StateCompleted || path(f.stateOf(id), "count") != rtfs.Int(3) {
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
	if _, err := f.p.Info("nope", InspectOptions{}); !errors.Is(err, ErrNoStream) || err.Error() != `no stream with id "nope"` {
		t.Errorf("Info of an unknown stream: %v, want ErrNoStream", err)
	}
	f.p.Close()
	if _, err := f.p.Subscribe("", SubscribeOptions{}); err != ErrClosed {
		t.Errorf("Subscribe after Close = %v", err)
	}
}

// eventLog collects what a Receive subscription gets.
type eventLog struct {
	mu  sync.Mutex
	evs []Event
}

func (l *eventLog) receive(ev Event) {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
}

func (l *eventLog) events() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.evs...)
}

// A Pending subscription made before its stream starts gets every event of
// the stream, the first output included, through Receive on the stream's
// goroutine, in order; one closed before the stream starts gets nothing.
func TestPendingSubscription(t *testing.T) {
	f := newFixture(t, Options{})
	var log, closed eventLog
	sub, err := f.p.Subscribe("later", SubscribeOptions{Pending: true, Receive: log.receive})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	gone, err := f.p.Subscribe("later", SubscribeOptions{Pending: true, Receive: closed.receive})
	if err != nil {
		t.Fatal(err)
	}
	gone.Close()
	if _, err := f.p.Subscribe("later", SubscribeOptions{}); err == nil {
		t.Error("a subscription to an unknown id without Pending succeeded")
	}
	f.start(StartRequest{StreamID: "later", goProc: counter()})
	for n := 1; n <= 3; n++ {
		f.Send("later", fmt.Sprintf(`{"n":%d}`, n))
	}
	f.mock.Source("later").Close()
	f.Await("later")
	evs := log.events()
	if len(evs) != 4 || evs[3].Kind != EventEnd || evs[3].Status.State != StateCompleted {
		t.Fatalf("events = %+v", evs)
	}
	for i, ev := range evs[:3] {
		if ev.Kind != EventOutput || path(ev.Output, "count") != rtfs.Int(i+1) {
			t.Errorf("event %d = %+v", i, ev)
		}
	}
	if got := closed.events(); len(got) != 0 {
		t.Errorf("a subscription closed before the stream started got %+v", got)
	}
	if _, ok := <-gone.C(); ok {
		t.Error("a closed Receive subscription's channel is open")
	}
}

// A Pending subscription to the id of a stream recovered as ended gets its
// end at once; Close of the provider closes those still waiting.
func TestPendingSubscriptionRecoveredAndClosed(t *testing.T) {
	ps := newPersisted(t, persistence.NewMemStore())
	f := ps.f
	startCount(f, compileGlobals(t, countSrc), "done", rtfs.Symbol("proc"))
	f.Send("done", `{"n":1}`)
	f.mock.Source("done").Close()
	f.Await("done")
	if err := f.p.Close(); err != nil {
		t.Fatal(err)
	}
	ps.open()
	var log eventLog
	ended, err := ps.f.p.Subscribe("done", SubscribeOptions{Pending: true, Receive: log.receive})
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := ps.f.p.Subscribe("never", SubscribeOptions{Pending: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.f.p.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if evs := log.events(); len(evs) != 1 || evs[0].Kind != EventEnd || evs[0].Status.State != StateCompleted {
		t.Errorf("the recovered ended stream's subscriber got %+v", evs)
	}
	ended.Close()
	ps.f.p.Close()
	select {
	case _, ok := <-waiting.C():
		if ok {
			t.Error("a waiting subscription got an event")
		}
	case <-time.After(10 * time.Second):
		t.Error("Close left a Pending subscription open")
	}
	if _, err := ps.f.p.Subscribe("x", SubscribeOptions{Pending: true}); err != ErrClosed {
		t.Errorf("a Pending subscription after Close: %v", err)
	}
}

// A subscription with Changes gets EventChange when the stream it waited
// for starts, for each chunk processed without an output, and on pause and
// resume, besides the outputs and the end; one without Changes gets only
// those. Once the Changes subscriptions are closed, streams look for none.
func TestChangeEvents(t *testing.T) {
	f := newFixture(t, Options{})
	quiet := goProc(func(state, chunk, meta rtfs.Value) (rtfs.Value, error) {
		res := rtfs.MapOf(rtfs.Keyword("state"), state)
		if path(chunk, "n") == rtfs.Int(2) {
			res = res.Assoc(rtfs.Keyword("output"), rtfs.String("two"))
		}
		return res, nil
	})
	var changes, plain eventLog
	sub, err := f.p.Subscribe("ch", SubscribeOptions{Pending: true, Changes: true, Receive: changes.receive})
	if err != nil {
		t.Fatal(err)
	}
	other, err := f.p.Subscribe("ch", SubscribeOptions{Pending: true, Receive: plain.receive})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if n := f.p.changeSubs.Load(); n != 1 {
		t.Fatalf("%d subscriptions counted as wanting changes, want 1", n)
	}
	f.start(StartRequest{StreamID: "ch", goProc: quiet})
	for n := 1; n <= 3; n++ {
		f.Send("ch", fmt.Sprintf(`{"n":%d}`, n))
	}
	waitUntil(t, "the three chunks", func() bool { return len(changes.events()) >= 4 })
	if _, err := f.p.Pause(t.Context(), "ch"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.p.Resume(t.Context(), "ch"); err != nil {
		t.Fatal(err)
	}
	f.mock.Source("ch").Close()
	f.Await("ch")
	var kinds []EventKind
	for _, ev := range changes.events() {
		kinds = append(kinds, ev.Kind)
	}
	want := []EventKind{EventChange, EventChange, EventOutput, EventChange, EventChange, EventChange, EventEnd}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("events with Changes: %v, want %v (start, chunk 1, output of 2, chunk 3, pause, resume, end)", kinds, want)
	}
	var plainKinds []EventKind
	for _, ev := range plain.events() {
		plainKinds = append(plainKinds, ev.Kind)
	}
	if fmt.Sprint(plainKinds) != fmt.Sprint([]EventKind{EventOutput, EventEnd}) {
		t.Errorf("events without Changes: %v, want the output and the end", plainKinds)
	}
	sub.Close()
	if n := f.p.changeSubs.Load(); n != 0 {
		t.Errorf("%d subscriptions counted as wanting changes after Close, want 0", n)
	}
	if _, err := f.p.Subscribe("nope", SubscribeOptions{Changes: true}); err == nil || f.p.changeSubs.Load() != 0 {
		t.Errorf("a refused subscription: %v, %d counted", err, f.p.changeSubs.Load())
	}
}

// TestStreamIDBounded: a stream id longer than MaxStreamIDLength is
// refused wherever an id is given (start, subscribe even for a stream not
// yet started, status, info, control, removal), with an error that names
// the length and quotes only the id's start; an id of the maximum length
// works; an id made from a long endpoint stays within the maximum.
func TestStreamIDBounded(t *testing.T) {
	f := newFixture(t, Options{})
	long := strings.Repeat("x", 4<<20)
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrStreamIDTooLong) || len(err.Error()) > 300 || !strings.Contains(err.Error(), "4194304 bytes") {
			t.Errorf("%s with a 4 MiB id: %.300v, want ErrStreamIDTooLong naming the length", what, err)
		}
	}
	_, err := f.p.Start(StartRequest{goProc: counter(), Endpoint: "e", Transport: "mock", StreamID: long})
	check("Start", err)
	_, err = f.p.Subscribe(long, SubscribeOptions{Pending: true})
	check("Subscribe (pending)", err)
	_, err = f.p.Status(t.Context(), long)
	check("Status", err)
	_, err = f.p.Info(long, InspectOptions{})
	check("Info", err)
	_, err = f.p.Pause(t.Context(), long)
	check("Pause", err)
	_, err = f.p.Cancel(t.Context(), long)
	check("Cancel", err)
	_, err = f.p.Remove(context.Background(), long, true)
	check("Remove", err)
	_, err = f.p.Start(StartRequest{goProc: counter(), Endpoint: "e", Transport: "mock", StreamID: strings.Repeat("y", MaxStreamIDLength+1)})
	if !errors.Is(err, ErrStreamIDTooLong) {
		t.Errorf("Start with an id one byte too long: %v", err)
	}
	atMax := strings.Repeat("z", MaxStreamIDLength)
	if id := f.start(StartRequest{goProc: counter(), StreamID: atMax}); id != atMax {
		t.Errorf("Start with an id of the maximum length gave %q", id)
	}
	if id := f.p.NewStreamID(strings.Repeat("e", 10000)); len(id) > MaxStreamIDLength {
		t.Errorf("NewStreamID of a long endpoint: %d bytes", len(id))
	}
}
