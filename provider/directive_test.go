package provider

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

func ints(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// Continue and an absent action both keep going (fixes D1); a clean source
// end completes the stream with the last output as its result.
func TestContinueAndSourceEnd(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter()})
	f.Send(id, `{"n":1}`)
	f.Send(id, `{"n":2,"reply":"continue"}`)
	f.Send(id, `{"n":3}`)
	f.mock.Source(id).Close()
	st := f.Await(id)
	if st.State != StateCompleted || st.EndReason != "source-ended" {
		t.Fatalf("status = %+v, want completed by source-ended", st)
	}
	if !rtfs.Equal(st.Result, rtfs.MapOf(rtfs.Keyword("count"), rtfs.Int(3))) {
		t.Errorf("result = %v, want the last output {:count 3}", st.Result)
	}
	if got := seenInts(f.stateOf(id)); !reflect.DeepEqual(got, ints(1, 3)) {
		t.Errorf("seen = %v", got)
	}
	m := f.Inspect(id)
	if path(m, "stats", "processed-chunks") != rtfs.Int(3) || path(m, "cursor") != rtfs.String("2") {
		t.Errorf("stats = %v cursor = %v", path(m, "stats"), path(m, "cursor"))
	}
}

// The backpressure contract: a paused stream queues chunks until the queue is
// full, then the transport blocks (the mock producer's Send does not return);
// resume drains the backlog in order at once and releases the producer; every
// chunk is processed exactly once and none is dropped.
func TestPauseBlocksProducerAndResumeDrainsInOrder(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter(), QueueCapacity: 4})
	f.Send(id, `{"n":0,"reply":"pause"}`)
	f.waitFor("pause", func() bool { st, _ := f.p.Status(t.Context(), id); return st.State == StatePaused })
	for n := 1; n <= 5; n++ { // 4 fill the queue, the 5th is held by the blocked Deliver
		f.Send(id, fmt.Sprintf(`{"n":%d}`, n))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := f.mock.Source(id).Send(ctx, transport.Chunk{Data: []byte(`{"n":6}`)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send on a full paused stream = %v, want it to block", err)
	}
	m := f.Inspect(id)
	if path(m, "stats", "queued-chunks") != rtfs.Int(4) || path(m, "stats", "processed-chunks") != rtfs.Int(1) {
		t.Fatalf("while paused: stats = %v", path(m, "stats"))
	}
	if q := path(m, "queue").(*rtfs.Vector); q.Len() != 4 || !rtfs.Equal(path(q.Index(0), "chunk", "n"), rtfs.Int(1)) {
		t.Fatalf("queue = %v", q)
	}
	if _, err := f.p.Resume(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	f.Send(id, `{"n":6}`)
	f.mock.Source(id).Close()
	st := f.Await(id)
	if st.State != StateCompleted {
		t.Fatalf("status = %+v", st)
	}
	m = f.Inspect(id)
	if got := seenInts(path(m, "current-state")); !reflect.DeepEqual(got, ints(0, 6)) {
		t.Errorf("processed %v, want 0..6 once each in order", got)
	}
	if path(m, "dropped-chunks") != rtfs.Int(0) || path(m, "stats", "processed-chunks") != rtfs.Int(7) {
		t.Errorf("dropped = %v, stats = %v", path(m, "dropped-chunks"), path(m, "stats"))
	}
}

// While paused, a control chunk from the source (string key and value) jumps
// the queue; its own action applies since the processor names none.
func TestControlChunkJumpsQueueWhilePaused(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter(), QueueCapacity: 2})
	f.Send(id, `{"n":0,"reply":"pause"}`)
	f.waitFor("pause", func() bool { st, _ := f.p.Status(t.Context(), id); return st.State == StatePaused })
	f.Send(id, `{"n":1}`)
	f.Send(id, `{"n":2}`)
	f.Send(id, `{"n":99,"action":"resume"}`) // the queue is full: it is accepted anyway
	f.Send(id, `{"n":3}`)
	f.mock.Source(id).Close()
	if st := f.Await(id); st.State != StateCompleted {
		t.Fatalf("status = %+v", st)
	}
	if got := seenInts(f.stateOf(id)); !reflect.DeepEqual(got, []int64{0, 99, 1, 2, 3}) {
		t.Errorf("processing order = %v, want the control chunk first", got)
	}
}

// T13 with the queue: a cancel control chunk while paused clears the queue,
// counts the dropped chunks and stops the transport; later chunks are refused.
func TestCancelControlChunkDropsAndCounts(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter(), QueueCapacity: 3})
	f.Send(id, `{"n":0,"reply":"pause"}`)
	f.waitFor("pause", func() bool { st, _ := f.p.Status(t.Context(), id); return st.State == StatePaused })
	for n := 1; n <= 3; n++ {
		f.Send(id, fmt.Sprintf(`{"n":%d}`, n))
	}
	src := f.mock.Source(id)
	f.Send(id, `{"n":7,"action":"cancel"}`)
	st := f.Await(id)
	<-src.Ended()
	if st.State != StateCancelled || st.EndReason != "control-chunk" {
		t.Fatalf("status = %+v", st)
	}
	m := f.Inspect(id)
	if path(m, "dropped-chunks") != rtfs.Int(3) || path(m, "stats", "queued-chunks") != rtfs.Int(0) {
		t.Errorf("dropped = %v, queued = %v", path(m, "dropped-chunks"), path(m, "stats", "queued-chunks"))
	}
	if got := seenInts(path(m, "current-state")); !reflect.DeepEqual(got, []int64{0, 7}) {
		t.Errorf("processed %v", got)
	}
	err := src.Send(context.Background(), transport.Chunk{Data: []byte(`{"n":8}`)})
	if !isEnded(err) {
		t.Errorf("Send after cancel = %v, want the ended error", err)
	}
	if _, err := f.p.Await(context.Background(), id); !errors.As(err, new(*StreamError)) {
		t.Errorf("Await on a cancelled stream = %v", err)
	}
}

// T3: a complete control chunk completes the stream with its output as the
// result; the processor's own :complete does too, with :end-reason
// :processor. Nothing runs after completion.
func TestComplete(t *testing.T) {
	for _, tc := range []struct{ chunk, reason string }{
		{`{"n":3,"action":"complete"}`, "control-chunk"},
		{`{"n":3,"reply":"complete"}`, "processor"},
	} {
		f := newFixture(t, Options{})
		id := f.start(StartRequest{goProc: counter()})
		f.Send(id, `{"n":1}`)
		f.Send(id, `{"n":2}`)
		src := f.mock.Source(id)
		f.Send(id, tc.chunk)
		st := f.Await(id)
		<-src.Ended()
		if st.State != StateCompleted || st.EndReason != tc.reason {
			t.Fatalf("%s: status = %+v", tc.chunk, st)
		}
		if !rtfs.Equal(st.Result, rtfs.MapOf(rtfs.Keyword("count"), rtfs.Int(3))) {
			t.Errorf("result = %v", st.Result)
		}
		err := src.Send(context.Background(), transport.Chunk{Data: []byte(`{"n":4}`)})
		if !isEnded(err) {
			t.Errorf("Send after complete = %v", err)
		}
		if got := seenInts(f.stateOf(id)); !reflect.DeepEqual(got, ints(1, 3)) {
			t.Errorf("seen = %v", got)
		}
		v, err := f.p.Await(context.Background(), id)
		if err != nil || !rtfs.Equal(v, st.Result) {
			t.Errorf("Await = %v, %v", v, err)
		}
	}
}

// T6: an unknown action puts the stream in :error naming the valid ones, and
// the state stays the last good one.
func TestUnknownActionIsAnError(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter(), OnError: endOnError})
	f.Send(id, `{"n":1}`)
	f.Send(id, `{"n":2,"reply":"explode"}`)
	st := f.Await(id)
	want := "processor go-proc on chunk 2: unknown action keyword :explode; valid actions are :continue :pause :resume :cancel :complete"
	if st.State != StateError || st.Message != want {
		t.Fatalf("status = %+v\nwant message %q", st, want)
	}
	if got := seenInts(f.stateOf(id)); !reflect.DeepEqual(got, []int64{1}) {
		t.Errorf("state after the error = %v, want the state after chunk 1", got)
	}
	_, err := f.p.Await(context.Background(), id)
	wantErrContains(t, err, "unknown action")
}

// T9 and friends: a processor error or a non-map result holds the stream
// as failed with the message; the last good state is kept.
func TestProcessorFailuresKeepLastGoodState(t *testing.T) {
	cases := []struct {
		name string
		res  rtfs.Value
		err  error
		want string
	}{
		{"non-map", rtfs.Int(42), nil, "processor go-proc returned an invalid shape on chunk 2: expected a map {:state :action :output}, got int 42"},
		{"go error", nil, errors.New("bad reading"), "processor go-proc failed on chunk 2: bad reading"},
		{"bad config", rtfs.MapOf(rtfs.Keyword("action"), rtfs.Keyword("pause"), rtfs.Keyword("config"), rtfs.Int(3)), nil, ":config must be a map, got int 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			calls := 0
			id := f.start(StartRequest{InitialState: rtfs.MapOf(rtfs.Keyword("v"), rtfs.Int(0)), goProc: goProc(func(state, chunk, meta rtfs.Value) (rtfs.Value, error) {
				calls++
				if calls == 1 {
					return rtfs.MapOf(rtfs.Keyword("state"), rtfs.MapOf(rtfs.Keyword("v"), rtfs.Int(1))), nil
				}
				return tc.res, tc.err
			})})
			f.Send(id, `{}`)
			f.Send(id, `{}`)
			st := f.waitState(id, StateFailed)
			if !contains(st.Message, tc.want) || st.Failure == nil || st.Failure.Seq != 2 || st.Failure.Error != st.Message {
				t.Fatalf("status = %+v, want message with %q", st, tc.want)
			}
			if !rtfs.Equal(f.stateOf(id), rtfs.MapOf(rtfs.Keyword("v"), rtfs.Int(1))) {
				t.Errorf("state = %v, want the last good {:v 1}", f.stateOf(id))
			}
		})
	}
}

func contains(s, sub string) bool { return len(sub) == 0 || len(s) >= len(sub) && indexOf(s, sub) >= 0 }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// A pause with :config {:resume-after-ms n} resumes by itself.
func TestPauseResumesAfterConfiguredDelay(t *testing.T) {
	f := newFixture(t, Options{})
	first := true
	id := f.start(StartRequest{goProc: goProc(func(state, chunk, meta rtfs.Value) (rtfs.Value, error) {
		res := rtfs.MapOf(rtfs.Keyword("state"), state.(*rtfs.Map).Assoc(rtfs.Keyword("last"), path(chunk, "n")))
		if first {
			first = false
			res = res.Assoc(rtfs.Keyword("action"), rtfs.Keyword("pause")).
				Assoc(rtfs.Keyword("config"), rtfs.MapOf(rtfs.Keyword("resume-after-ms"), rtfs.Int(150)))
		}
		return res, nil
	})})
	start := time.Now()
	f.Send(id, `{"n":1}`)
	f.Send(id, `{"n":2}`)
	f.mock.Source(id).Close()
	st := f.Await(id)
	if st.State != StateCompleted || !rtfs.Equal(path(f.stateOf(id), "last"), rtfs.Int(2)) {
		t.Fatalf("status = %+v, state = %v", st, f.stateOf(id))
	}
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Errorf("the stream finished after %v, before its pause of 150 ms ended", el)
	}
}

// A paused stream whose source ended waits for resume before draining its
// backlog and completing; a source failure ends it in :error with the
// transport's message once the queue is processed.
func TestSourceEndAndFailureAfterBacklog(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter()})
	f.Send(id, `{"n":0,"reply":"pause"}`)
	f.Send(id, `{"n":1}`)
	f.Send(id, `{"n":2}`)
	f.mock.Source(id).Close()
	f.waitFor("transport end", func() bool { return path(f.Inspect(id), "transport", "task-active") == rtfs.False })
	if st, _ := f.p.Status(t.Context(), id); st.State != StatePaused {
		t.Fatalf("status after the source ended = %+v, want still paused with a backlog", st)
	}
	if _, err := f.p.Resume(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if st := f.Await(id); st.State != StateCompleted || !reflect.DeepEqual(seenInts(f.stateOf(id)), ints(0, 2)) {
		t.Fatalf("status = %+v, seen = %v", st, seenInts(f.stateOf(id)))
	}

	id2 := f.start(StartRequest{goProc: counter()})
	f.Send(id2, `{"n":1}`)
	f.mock.Source(id2).Fail(errors.New("connection reset by peer"))
	st := f.Await(id2)
	if st.State != StateError || !contains(st.Message, "transport: stream "+id2+": mock: connection reset by peer") {
		t.Fatalf("status = %+v", st)
	}
	if !reflect.DeepEqual(seenInts(f.stateOf(id2)), []int64{1}) {
		t.Errorf("the chunk before the failure was not processed")
	}
}

// T5: the prototype's :stop is not one of the five directives. A chunk with
// action "stop" is plain data (the stream goes on); a processor that returns
// :stop puts the stream in :error naming the valid actions.
func TestStopIsNotADirective(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter(), OnError: endOnError})
	f.Send(id, `{"n":1,"action":"stop"}`)
	f.Send(id, `{"n":2}`)
	f.Send(id, `{"n":3,"reply":"stop"}`)
	st := f.Await(id)
	if st.State != StateError || !contains(st.Message, "unknown action keyword :stop; valid actions are "+stream.ValidActions) {
		t.Fatalf("status = %+v", st)
	}
	if got := seenInts(f.stateOf(id)); !reflect.DeepEqual(got, []int64{1, 2}) {
		t.Errorf("seen = %v, want the stop chunk processed as data", got)
	}
}

func TestControlAction(t *testing.T) {
	s, k := func(x string) rtfs.Value { return rtfs.String(x) }, func(x string) rtfs.Value { return rtfs.Keyword(x) }
	cases := []struct {
		chunk rtfs.Value
		want  stream.Action
	}{
		{rtfs.MapOf(k("action"), k("pause")), stream.ActPause},
		{rtfs.MapOf(k("action"), s("resume")), stream.ActResume},
		{rtfs.MapOf(s("action"), s("cancel")), stream.ActCancel},
		{rtfs.MapOf(s("action"), k("complete")), stream.ActComplete},
		{rtfs.MapOf(k("action"), s("continue"), k("n"), rtfs.Int(1)), stream.ActContinue},
		{rtfs.MapOf(k("action"), s("stop")), stream.ActNone},
		{rtfs.MapOf(k("action"), rtfs.Int(1)), stream.ActNone},
		{rtfs.MapOf(k("kind"), k("pause")), stream.ActNone},
		{rtfs.String(`{"action":"pause"}`), stream.ActNone},
		{rtfs.NewVector(k("action"), k("pause")), stream.ActNone},
	}
	for _, c := range cases {
		if got := stream.ControlAction(c.chunk); got != c.want {
			t.Errorf("controlAction(%v) = %d, want %d", c.chunk, got, c.want)
		}
	}
}

// A control chunk is found from its raw bytes, escaped keys included.
func TestControlFromBytes(t *testing.T) {
	cases := []struct {
		data  string
		event string
		want  stream.Action
	}{
		{`{"action":"pause"}`, "", stream.ActPause},
		{`{ "n": 1, "action" : "resume" }`, "", stream.ActResume},
		{`{"\u0061ction":"cancel"}`, "", stream.ActCancel},
		{`{"n":1,"reaction":"pause"}`, "", stream.ActNone},
		{`{"n":1}`, "", stream.ActNone},
		{`action pause`, "", stream.ActNone},
		{`{"message":"{\"action\":\"pause\"}"}`, "progress", stream.ActNone},
	}
	for _, c := range cases {
		var dec rtfs.JSONDecoder
		if got := stream.ControlAction(stream.DecodeChunkInto(&dec, []byte(c.data), c.event, nil)); got != c.want {
			t.Errorf("control action of %s = %d, want %d", c.data, got, c.want)
		}
	}
}
