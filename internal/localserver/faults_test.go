package localserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestDropAfter(t *testing.T) {
	s, c := startServer(t, Options{})
	for _, tc := range []struct {
		query string
		want  int // chunk events before the drop
	}{
		{"limit=6&drop_after=3", 3},
		{"limit=6&drop_after=0", 0},
		{"limit=3&drop_after=3", 3}, // the drop replaces the terminal event
	} {
		evs, err := stream(t, c, s.URL()+"/sse/weather.monitor.v1?interval_ms=0&"+tc.query)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%s: stream ended with %v, want an unexpected EOF", tc.query, err)
		}
		if len(evs) != tc.want {
			t.Fatalf("%s: got %d events before the drop, want %d: %+v", tc.query, len(evs), tc.want, evs)
		}
		for i, ev := range evs {
			if ev.event != "chunk" || ev.id != itoa(i+1) {
				t.Fatalf("%s: event %d is %+v", tc.query, i, ev)
			}
		}
	}
	if got := s.Stats().Drops; got != 3 {
		t.Fatalf("Stats().Drops = %d, want 3", got)
	}
}

// TestDropOnceThenResume scripts what a resuming client sees: the first
// request breaks after 3 chunks, the reconnect with the same URL and
// Last-Event-ID gets the rest, with no gap and no duplicate.
func TestDropOnceThenResume(t *testing.T) {
	s, c := startServer(t, Options{})
	url := s.URL() + "/sse/weather.monitor.v1?limit=8&interval_ms=0&drop_after=3&drop_times=1"
	first, err := stream(t, c, url)
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(first) != 3 {
		t.Fatalf("first request: %d events, %v; want 3 and a drop", len(first), err)
	}
	rest, err := stream(t, c, url, "Last-Event-ID", first[2].id)
	if err != nil {
		t.Fatalf("resumed request: %v", err)
	}
	checkStream(t, rest, "weather.monitor.v1", 4, 8)
	// The budget is per URL: another URL drops again.
	other, err := stream(t, c, url+"&size=1")
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(other) != 3 {
		t.Fatalf("other URL: %d events, %v; want its own drop", len(other), err)
	}
}

// TestRepeatedDropsStillProgress checks that a drop_after without a budget
// drops every response, each one after new chunks when the client resumes.
func TestRepeatedDropsStillProgress(t *testing.T) {
	s, c := startServer(t, Options{})
	url := s.URL() + "/sse/counter.v1?limit=7&drop_after=2"
	var got []string
	last := ""
	for i := range 4 {
		evs, err := stream(t, c, url, "Last-Event-ID", last)
		if i < 3 && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("request %d: want a drop, got %v", i+1, err)
		}
		if i == 3 {
			if err != nil {
				t.Fatalf("last request: %v", err)
			}
			checkStream(t, evs, "counter.v1", 7, 7)
			evs = evs[:1]
		}
		for _, ev := range evs {
			got = append(got, ev.id)
			last = ev.id
		}
	}
	if strings.Join(got, ",") != "1,2,3,4,5,6,7" {
		t.Fatalf("ids across reconnects: %v", got)
	}
}

func TestFail(t *testing.T) {
	s, c := startServer(t, Options{})
	code, body := status(t, c, s.URL()+"/sse/weather.monitor.v1?fail=404")
	if code != http.StatusNotFound || !strings.Contains(body, "injected failure fail=404 on /sse/weather.monitor.v1") {
		t.Fatalf("fail=404: %d %q", code, body)
	}
	resp := get(t, c, s.URL()+"/sse/weather.monitor.v1?fail=401")
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("fail=401: %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	url := s.URL() + "/sse/docs.search.v1?interval_ms=0&fail=500&fail_times=2"
	for i := range 2 {
		if code, _ := status(t, c, url); code != http.StatusInternalServerError {
			t.Fatalf("request %d: %d, want 500", i+1, code)
		}
	}
	evs, err := stream(t, c, url)
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, evs, "docs.search.v1", 1, 2)
	if got := s.Stats().InjectedFailures; got != 4 {
		t.Fatalf("Stats().InjectedFailures = %d, want 4", got)
	}
}

// TestFailThenDropBudgets checks that budgets are used up only by requests
// that reach the fault: two failures, then one drop, then a normal stream.
func TestFailThenDropBudgets(t *testing.T) {
	s, c := startServer(t, Options{})
	url := s.URL() + "/sse/counter.v1?limit=4&fail=503&fail_times=2&drop_after=1&drop_times=1"
	for range 2 {
		if code, _ := status(t, c, url); code != http.StatusServiceUnavailable {
			t.Fatalf("got %d, want 503", code)
		}
	}
	evs, err := stream(t, c, url)
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(evs) != 1 {
		t.Fatalf("third request: %d events, %v; want 1 and a drop", len(evs), err)
	}
	evs, err = stream(t, c, url, "Last-Event-ID", "1")
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, evs, "counter.v1", 2, 4)
}

func TestOptionsFaultsApplyToEveryStream(t *testing.T) {
	s, c := startServer(t, Options{Faults: Faults{Fail: 503}})
	if code, _ := status(t, c, s.URL()+"/sse/counter.v1"); code != http.StatusServiceUnavailable {
		t.Fatalf("got %d, want 503 from Options.Faults", code)
	}
	evs, err := stream(t, c, s.URL()+"/sse/counter.v1?limit=2&fail=0")
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, evs, "counter.v1", 1, 2)
	if code, _ := status(t, c, s.URL()+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d; faults must only touch streams", code)
	}
}

func TestOversized(t *testing.T) {
	s, c := startServer(t, Options{})
	const size = 70_000
	evs, err := stream(t, c, s.URL()+"/sse/weather.monitor.v1?limit=2&interval_ms=0&oversized=70000")
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, evs, "weather.monitor.v1", 1, 2)
	if len(evs[0].data) != size {
		t.Fatalf("first event data is %d bytes, want %d", len(evs[0].data), size)
	}
	if e := decodeEnvelope(t, evs[0].data); strings.Trim(e.OversizedPad, "x") != "" || len(e.OversizedPad) < size-400 {
		t.Fatalf("oversized_pad has %d bytes", len(e.OversizedPad))
	}
	if len(evs[1].data) > 400 {
		t.Fatalf("second event is %d bytes; only the first is oversized", len(evs[1].data))
	}
	// A size below the natural size leaves the event padded minimally.
	evs, err = stream(t, c, s.URL()+"/sse/counter.v1?limit=1&oversized=10")
	if err != nil {
		t.Fatal(err)
	}
	if e := decodeEnvelope(t, evs[0].data); e.OversizedPad != "" || e.Seq != 1 {
		t.Fatalf("small oversized: %+v", e)
	}
}

// TestStall checks that a stall holds the stream after stall_after chunks
// (the stream neither continues nor ends), and that the stall's budget lets
// the next request through.
func TestStall(t *testing.T) {
	s, c := startServer(t, Options{})
	url := s.URL() + "/sse/counter.v1?limit=5&stall_ms=600000&stall_after=2&stall_times=1"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	type result struct {
		evs []sseEvent
		err error
	}
	done := make(chan result, 1)
	var firstTwo = make(chan struct{})
	go func() {
		evs, err := readEvents(&signalAfter{r: resp.Body, marker: "id: 2\n", signal: firstTwo})
		done <- result{evs, err}
	}()
	select {
	case <-firstTwo:
	case r := <-done:
		t.Fatalf("stream ended before the stall: %+v %v", r.evs, r.err)
	}
	select {
	case r := <-done:
		t.Fatalf("stream went on during a 10-minute stall: %+v %v", r.evs, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	r := <-done
	if len(r.evs) != 2 || r.err == nil {
		t.Fatalf("stalled stream: %+v %v; want 2 chunks and a cancelled read", r.evs, r.err)
	}
	evs, err := stream(t, c, url)
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, evs, "counter.v1", 1, 5)
}

// signalAfter closes signal once marker has passed through Read.
type signalAfter struct {
	r      io.Reader
	marker string
	seen   string
	signal chan struct{}
}

func (s *signalAfter) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if s.signal != nil {
		s.seen += string(p[:n])
		if strings.Contains(s.seen, s.marker) {
			close(s.signal)
			s.signal = nil
		}
	}
	return n, err
}

func TestOrigin(t *testing.T) {
	s, c := startServer(t, Options{})
	for _, origin := range []string{"http://evil.example", "null", "http://127.0.0.1.evil.example", "file://", "http://10.0.0.1:2025"} {
		for _, path := range []string{"/sse/counter.v1", "/healthz", "/datasets", "/mcp", "/mcp-sse", "/nope"} {
			code, body := status(t, c, s.URL()+path, "Origin", origin)
			if code != http.StatusForbidden || !strings.Contains(body, "is not a loopback origin") {
				t.Errorf("Origin %q on %s: %d %q, want 403", origin, path, code, body)
			}
		}
	}
	for _, origin := range []string{"http://127.0.0.1:8080", "http://localhost", "https://localhost:3000", "http://[::1]:9"} {
		if code, body := status(t, c, s.URL()+"/healthz", "Origin", origin); code != http.StatusOK {
			t.Errorf("Origin %q: %d %q, want 200", origin, code, body)
		}
	}
}

func TestStartRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "[::]:0", "example.com:0"} {
		s := New(Options{})
		err := s.Start(addr)
		if !errors.Is(err, ErrNotLoopback) || !strings.Contains(err.Error(), addr) {
			t.Errorf("Start(%q) = %v, want ErrNotLoopback naming the address", addr, err)
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}
	if err := New(Options{}).Start("nonsense"); err == nil || !strings.Contains(err.Error(), `"nonsense"`) {
		t.Errorf("Start(nonsense) = %v", err)
	}
}

func TestStartReportsAddressInUse(t *testing.T) {
	a, _ := startServer(t, Options{})
	b := New(Options{})
	defer b.Close()
	addr := strings.TrimPrefix(a.URL(), "http://")
	err := b.Start(addr)
	if !errors.Is(err, ErrAddrInUse) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Start on a taken address: %v, want ErrAddrInUse", err)
	}
	if b.URL() != "" {
		t.Fatalf("URL() = %q after a failed Start", b.URL())
	}
	if err := a.Start("127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "already started") {
		t.Fatalf("second Start: %v", err)
	}
	l := New(Options{})
	defer l.Close()
	if err := l.Start("localhost:0"); err != nil {
		t.Fatalf("Start(localhost:0): %v", err)
	}
}

func TestToolArgs(t *testing.T) {
	got, err := toolArgs(json.RawMessage(`{"limit":5,"interval_ms":"7","size":1.5,"x":[1]}`))
	if err != nil || got["limit"] != "5" || got["interval_ms"] != "7" || got["size"] != "1.5" || got["x"] != "[1]" {
		t.Fatalf("toolArgs: %v %v", got, err)
	}
	if _, err := toolArgs(json.RawMessage(`[1]`)); err == nil || !strings.Contains(err.Error(), "JSON object") {
		t.Fatalf("toolArgs of an array: %v", err)
	}
}
