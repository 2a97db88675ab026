package provider

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/rtfs"
)

func kw(s string) rtfs.Value { return rtfs.Keyword(s) }

// call dispatches a capability as a program would, with globals g.
func (f *fixture) Call(g *rtfs.Globals, id string, arg rtfs.Value) (rtfs.Value, error) {
	args := []rtfs.Value{}
	if arg != nil {
		args = append(args, arg)
	}
	return f.caps.Call(context.Background(), &capabilities.Call{ID: id, Args: args, Globals: g})
}

// The capability path: start returns a handle map and the stream keeps
// running after the caller drops it (fixes D4); status, pause, resume,
// inspect, cancel and await work on it.
func TestStreamCapabilities(t *testing.T) {
	f := newFixture(t, Options{})
	g := compileGlobals(t, weatherChunkSrc)
	h, err := f.Call(g, CapStart, rtfs.MapOf(kw("endpoint"), rtfs.String("weather.monitor.v1"), kw("processor"), rtfs.Symbol("process-weather-chunk"),
		kw("initial-state"), rtfs.MapOf(kw("count"), rtfs.Int(0)), kw("transport"), kw("mock"), kw("queue-capacity"), rtfs.Int(8),
		kw("config"), rtfs.MapOf(kw("city"), rtfs.String("Paris"))))
	if err != nil {
		t.Fatal(err)
	}
	id := string(path(h, "stream-id").(rtfs.String))
	if !strings.HasPrefix(id, "weather.monitor.v1-") || len(id) != len("weather.monitor.v1-")+8 || path(h, "status") != kw("active") || path(h, "endpoint") != rtfs.String("weather.monitor.v1") {
		t.Fatalf("handle = %v", h)
	}
	idArg := rtfs.MapOf(kw("stream-id"), rtfs.String(id))
	if v, err := f.Call(nil, CapPause, idArg); err != nil || path(v, "state") != kw("paused") || path(v, "stream-id") != rtfs.String(id) {
		t.Fatalf("pause = %v, %v", v, err)
	}
	f.Send(id, `{"seq":0}`)
	if v, err := f.Call(nil, CapResume, idArg); err != nil || path(v, "state") != kw("active") {
		t.Fatalf("resume = %v, %v", v, err)
	}
	f.Send(id, `{"seq":1}`)
	v, err := f.Call(nil, CapInspect, rtfs.MapOf(kw("stream-id"), rtfs.String(id), kw("include-queue"), rtfs.False))
	if err != nil || path(v, "queue-capacity") != rtfs.Int(8) || path(v, "queue") != nil || path(v, "current-state") == nil {
		t.Fatalf("inspect = %v, %v", v, err)
	}
	if sum, err := f.Call(nil, CapInspect, nil); err != nil || path(sum, "total") != rtfs.Int(1) {
		t.Fatalf("inspect summary = %v, %v", sum, err)
	}
	await, err := f.caps.Dispatch(context.Background(), &capabilities.Call{ID: CapAwait, Args: []rtfs.Value{idArg}})
	if err != nil || !await.Parked() {
		t.Fatalf("await = %+v, %v; want a parked answer", await, err)
	}
	f.Send(id, `{"seq":2}`)
	f.Send(id, `{"seq":3}`)
	res, err := await.Wait(context.Background())
	if err != nil || !rtfs.Equal(res, rtfs.MapOf(kw("final-count"), rtfs.Int(3))) {
		t.Fatalf("await = %v, %v", res, err)
	}
	st, err := f.Call(nil, CapStatus, idArg)
	if err != nil || path(st, "state") != kw("completed") || path(st, "end-reason") != kw("processor") || !rtfs.Equal(path(st, "result"), res) {
		t.Fatalf("status = %v, %v", st, err)
	}
	if _, err := f.Call(nil, CapPause, idArg); err == nil || !strings.Contains(err.Error(), "capability :mcp.stream.pause: key :stream-id: cannot pause stream") {
		t.Fatalf("pause of a completed stream = %v", err)
	}
}

// Dispatch errors name the capability and the key.
func TestStreamCapabilityErrors(t *testing.T) {
	f := newFixture(t, Options{})
	g := compileGlobals(t, weatherChunkSrc)
	ok := rtfs.MapOf(kw("endpoint"), rtfs.String("e"), kw("processor"), rtfs.Symbol("process-weather-chunk"), kw("transport"), kw("mock"))
	cases := []struct {
		id   string
		arg  rtfs.Value
		want string
	}{
		{CapStart, rtfs.MapOf(kw("processor"), rtfs.Symbol("p")), "capability :mcp.stream.start: key :endpoint: must not be empty: give an endpoint"},
		{CapStart, ok.Assoc(kw("processor"), rtfs.Symbol("missing")), `capability :mcp.stream.start: key :processor: no function named "missing"`},
		{CapStart, ok.Assoc(kw("queue-capacity"), rtfs.Int(0)), "key :queue-capacity: must be a positive int, got 0"},
		{CapStart, ok.Assoc(kw("initial_state"), rtfs.Int(0)), "unknown key :initial_state (did you mean :initial-state?)"},
		{CapStart, ok.Assoc(kw("transport"), kw("carrier-pigeon")), "key :transport: no transport :carrier-pigeon (this host has :mock)"},
		{CapInspect, rtfs.MapOf(kw("stream-id"), rtfs.String("nope")), `capability :mcp.stream.inspect: key :stream-id: no stream with id "nope"`},
		{CapInspect, rtfs.MapOf(kw("include-state"), rtfs.String("yes")), "key :include-state: expected bool, got string"},
		{CapCancel, rtfs.MapOf(), "capability :mcp.stream.cancel: key :stream-id: required string is missing"},
		{CapAwait, rtfs.MapOf(kw("stream-id"), rtfs.String("nope")), `capability :mcp.stream.await: key :stream-id: no stream with id "nope"`},
	}
	for _, tc := range cases {
		_, err := f.Call(g, tc.id, tc.arg)
		var ce *capabilities.Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: error %v, want %q", tc.id, tc.arg, err, tc.want)
		}
	}
	h, err := f.Call(g, CapStart, ok)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Call(nil, CapAwait, rtfs.MapOf(kw("stream-id"), path(h, "stream-id"), kw("timeout-ms"), rtfs.Int(10)))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not end within 10 ms") {
		t.Errorf("await with a timeout = %v", err)
	}
	if _, err := f.Call(nil, CapCancel, rtfs.MapOf(kw("stream-id"), path(h, "stream-id"))); err != nil {
		t.Fatal(err)
	}
	_, err = f.Call(nil, CapAwait, rtfs.MapOf(kw("stream-id"), path(h, "stream-id")))
	if !errors.As(err, new(*StreamError)) || !strings.Contains(err.Error(), "was cancelled") {
		t.Errorf("await of a cancelled stream = %v", err)
	}
}

// WithStreamID gives a start's arguments a fresh id before the start, as
// the start would name it (its endpoint, else its command), and keeps one
// they name.
func TestWithStreamID(t *testing.T) {
	p := New(Options{})
	defer p.Close()
	args, id := p.WithStreamID([]rtfs.Value{rtfs.MapOf(rtfs.Keyword("endpoint"), rtfs.String("http://x/sse/weather.monitor.v1"))})
	if !strings.HasPrefix(id, "weather.monitor.v1-") || len(id) != len("weather.monitor.v1-")+8 {
		t.Fatalf("id = %q", id)
	}
	if v, _ := args[0].(*rtfs.Map).GetKeyword("stream-id"); v != rtfs.String(id) {
		t.Errorf("args = %v", args[0])
	}
	if _, id := p.WithStreamID([]rtfs.Value{rtfs.MapOf(rtfs.Keyword("transport"), rtfs.Keyword("exec"), rtfs.Keyword("command"), rtfs.String("/bin/sh"))}); !strings.HasPrefix(id, "sh-") {
		t.Errorf("a process stream's id %q, want it named after its command", id)
	}
	if kept, id := p.WithStreamID([]rtfs.Value{rtfs.MapOf(rtfs.Keyword("stream-id"), rtfs.String("mine"))}); id != "mine" || len(kept) != 1 {
		t.Errorf("explicit id: %q", id)
	}
	if _, id := p.WithStreamID([]rtfs.Value{rtfs.Int(5)}); id != "" {
		t.Errorf("non-map argument got id %q", id)
	}
}
