package localserver

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type reading struct {
	City         *string  `json:"city"`
	TemperatureC *float64 `json:"temperature_c"`
	HumidityPct  *int     `json:"humidity_pct"`
	Conditions   *string  `json:"conditions"`
}

func TestSSEWeatherWireFormat(t *testing.T) {
	s, c := startServer(t, Options{})
	resp := get(t, c, s.URL()+"/sse/weather.monitor.v1?limit=8&interval_ms=0", "Accept", "text/event-stream")
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q, want text/event-stream", ct)
	}
	evs, err := readEvents(resp.Body)
	if err != nil {
		t.Fatalf("stream ended with %v, want a clean end", err)
	}
	envs := checkStream(t, evs, "weather.monitor.v1", 1, 8)
	cities := map[string]bool{}
	for i, e := range envs {
		var r reading
		if err := json.Unmarshal(e.Chunk, &r); err != nil {
			t.Fatalf("chunk %d: %v", i+1, err)
		}
		if r.City == nil || r.TemperatureC == nil || r.HumidityPct == nil || r.Conditions == nil {
			t.Fatalf("chunk %d lacks a reading field: %s", i+1, e.Chunk)
		}
		cities[*r.City] = true
		if got, err := time.Parse(time.RFC3339Nano, e.GeneratedAt); err != nil || !got.Equal(fixedNow()) {
			t.Fatalf("chunk %d: generated_at %q (%v), want %v", i+1, e.GeneratedAt, err, fixedNow())
		}
		if e.Trace.Source != "rtfshost-localserver" || e.Trace.Version == "" {
			t.Fatalf("chunk %d: trace %+v", i+1, e.Trace)
		}
	}
	if len(cities) != 6 {
		t.Fatalf("8 readings covered %d cities, want 6: %v", len(cities), cities)
	}
	// The seventh reading revisits the first city with a different reading.
	var r1, r7 reading
	_ = json.Unmarshal(envs[0].Chunk, &r1)
	_ = json.Unmarshal(envs[6].Chunk, &r7)
	if *r1.City != *r7.City || *r1.TemperatureC == *r7.TemperatureC {
		t.Fatalf("reading 7 %s should be %s again with another temperature than reading 1 %s", envs[6].Chunk, *r1.City, envs[0].Chunk)
	}
}

func TestSSEDefaultLimits(t *testing.T) {
	s, c := startServer(t, Options{})
	for endpoint, want := range map[string]int{
		"weather.monitor.v1": 6, "docs.search.v1": 2, "news.digest.v1": 3, "counter.v1": 100,
	} {
		evs, err := stream(t, c, s.URL()+"/sse/"+endpoint+"?interval_ms=0")
		if err != nil {
			t.Fatalf("%s: %v", endpoint, err)
		}
		checkStream(t, evs, endpoint, 1, want)
	}
}

func TestSSEIsDeterministic(t *testing.T) {
	s, c := startServer(t, Options{})
	for _, endpoint := range []string{"weather.monitor.v1", "docs.search.v1", "news.digest.v1", "counter.v1"} {
		url := s.URL() + "/sse/" + endpoint + "?interval_ms=0&limit=13&size=5"
		a, errA := stream(t, c, url)
		b, errB := stream(t, c, url)
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v, %v", endpoint, errA, errB)
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s: event %d differs between runs:\n%+v\n%+v", endpoint, i, a[i], b[i])
			}
		}
	}
}

func TestSSECounter(t *testing.T) {
	s, c := startServer(t, Options{})
	evs, err := stream(t, c, s.URL()+"/sse/counter.v1?limit=100&size=10")
	if err != nil {
		t.Fatal(err)
	}
	envs := checkStream(t, evs, "counter.v1", 1, 100)
	sum := 0
	for _, e := range envs {
		var ch struct {
			N   int    `json:"n"`
			Pad string `json:"pad"`
		}
		if err := json.Unmarshal(e.Chunk, &ch); err != nil {
			t.Fatal(err)
		}
		if ch.Pad != strings.Repeat("x", 10) {
			t.Fatalf("pad %q, want 10 bytes", ch.Pad)
		}
		sum += ch.N
	}
	if sum != 5050 {
		t.Fatalf("sum of n = %d, want 5050", sum)
	}
}

func TestSSEResumeFromLastEventID(t *testing.T) {
	s, c := startServer(t, Options{})
	url := s.URL() + "/sse/weather.monitor.v1?limit=6&interval_ms=0"
	full, err := stream(t, c, url)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := stream(t, c, url, "Last-Event-ID", "3")
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, evs, "weather.monitor.v1", 4, 6)
	for i, ev := range evs[:3] {
		if ev != full[3+i] {
			t.Fatalf("replayed event %s differs from the first delivery:\n%+v\n%+v", ev.id, ev, full[3+i])
		}
	}
	evs, err = stream(t, c, url, "Last-Event-ID", "6")
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, evs, "weather.monitor.v1", 7, 6)

	for _, bad := range []struct{ id, want string }{
		{"abc", `Last-Event-ID "abc"`},
		{"-1", `Last-Event-ID "-1"`},
		{"7", "beyond the stream's last id 6"},
	} {
		code, body := status(t, c, url, "Last-Event-ID", bad.id)
		if code != http.StatusBadRequest || !strings.Contains(body, bad.want) {
			t.Errorf("Last-Event-ID %s: %d %q, want 400 mentioning %q", bad.id, code, body, bad.want)
		}
	}
}

func TestSSERetryField(t *testing.T) {
	s, c := startServer(t, Options{})
	evs, err := stream(t, c, s.URL()+"/sse/docs.search.v1?interval_ms=0&retry_ms=1500")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 || evs[0].retry != "1500" || evs[0].data != "" {
		t.Fatalf("want a retry: 1500 block first, then 2 chunks and a status: %+v", evs)
	}
	checkStream(t, evs[1:], "docs.search.v1", 1, 2)
}

func TestNotFound(t *testing.T) {
	s, c := startServer(t, Options{})
	for _, tc := range []struct{ path, want string }{
		{"/sse/nope.v1", `unknown endpoint "nope.v1"; known endpoints: [counter.v1 docs.search.v1 news.digest.v1 weather.monitor.v1]`},
		{"/sse/", `unknown endpoint ""`},
		{"/datasets/nope.v1", `unknown endpoint "nope.v1"`},
		{"/elsewhere", "no route /elsewhere"},
	} {
		code, body := status(t, c, s.URL()+tc.path)
		if code != http.StatusNotFound || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %q, want 404 containing %q", tc.path, code, body, tc.want)
		}
	}
}

func TestBadParameters(t *testing.T) {
	s, c := startServer(t, Options{})
	for _, tc := range []struct{ query, want string }{
		{"limit=abc", `parameter limit="abc": not an integer`},
		{"limit=-1", "parameter limit=-1: out of range"},
		{"interval_ms=1e3", `parameter interval_ms="1e3": not an integer`},
		{"size=999999999999", "parameter size=999999999999: out of range"},
		{"fail=200", "parameter fail=200: want an HTTP error status 400..599"},
		{"drop_after=x", `parameter drop_after="x"`},
	} {
		code, body := status(t, c, s.URL()+"/sse/counter.v1?"+tc.query)
		if code != http.StatusBadRequest || !strings.Contains(body, "/sse/counter.v1: "+tc.want) {
			t.Errorf("?%s: %d %q, want 400 containing %q", tc.query, code, body, tc.want)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/sse/counter.v1", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET" {
		t.Fatalf("POST: %d Allow %q, want 405 Allow GET", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestUnknownParametersAreIgnored(t *testing.T) {
	s, c := startServer(t, Options{})
	evs, err := stream(t, c, s.URL()+"/sse/news.digest.v1?interval_ms=0&city=Paris&queue-capacity=5")
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, evs, "news.digest.v1", 1, 3)
}

func TestDatasetsAndHealth(t *testing.T) {
	s, c := startServer(t, Options{})
	code, body := status(t, c, s.URL()+"/healthz")
	if code != http.StatusOK || !strings.Contains(body, `"ok"`) {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	code, body = status(t, c, s.URL()+"/datasets")
	var list []datasetInfo
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil {
		t.Fatalf("/datasets: %d %v %q", code, err, body)
	}
	if len(list) != 4 || list[3].Endpoint != "weather.monitor.v1" || list[3].DefaultLimit != 6 ||
		list[3].SSEPath != "/sse/weather.monitor.v1" || list[0].DefaultIntervalMS != 0 {
		t.Fatalf("/datasets: %+v", list)
	}
	code, body = status(t, c, s.URL()+"/datasets/weather.monitor.v1?limit=7")
	var envs []envelope
	if err := json.Unmarshal([]byte(body), &envs); code != http.StatusOK || err != nil || len(envs) != 7 || envs[6].Seq != 7 {
		t.Fatalf("/datasets/weather.monitor.v1: %d %v %q", code, err, body)
	}
	code, body = status(t, c, s.URL()+"/datasets/counter.v1?limit=20000")
	if code != http.StatusBadRequest || !strings.Contains(body, "at most 10000") {
		t.Fatalf("huge listing: %d %q", code, body)
	}
}

func TestCloseEndsLiveStreams(t *testing.T) {
	s := New(Options{})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp := get(t, c, s.URL()+"/sse/counter.v1?limit=1000&interval_ms=60000")
	defer resp.Body.Close()
	buf := make([]byte, 64)
	if _, err := io.ReadAtLeast(resp.Body, buf, 10); err != nil {
		t.Fatalf("first event: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("stream ended cleanly after Close, want a broken stream")
	}
	if err := s.Start("127.0.0.1:0"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestHandlerMountedElsewhere serves Handler from another HTTP server and
// checks that Close still ends its live streams.
func TestHandlerMountedElsewhere(t *testing.T) {
	s := New(Options{})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	c := ts.Client()
	evs, err := stream(t, c, ts.URL+"/sse/docs.search.v1?interval_ms=0")
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, evs, "docs.search.v1", 1, 2)
	resp := get(t, c, ts.URL+"/sse/counter.v1?limit=100&interval_ms=60000")
	defer resp.Body.Close()
	buf := make([]byte, 16)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // returns only once the stream's handler has
		t.Fatal(err)
	}
	if code, body := status(t, c, ts.URL+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "closing") {
		t.Fatalf("after Close: %d %q, want 503", code, body)
	}
}

// TestSSEWithInterval streams with a pause between chunks (flushed one by
// one) and checks the stream is the same as without.
func TestSSEWithInterval(t *testing.T) {
	s, c := startServer(t, Options{})
	paced, err := stream(t, c, s.URL()+"/sse/news.digest.v1?limit=5&interval_ms=2")
	if err != nil {
		t.Fatal(err)
	}
	fast, err := stream(t, c, s.URL()+"/sse/news.digest.v1?limit=5&interval_ms=0")
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, paced, "news.digest.v1", 1, 5)
	for i := range paced {
		if paced[i] != fast[i] {
			t.Fatalf("event %d differs with an interval: %+v vs %+v", i, paced[i], fast[i])
		}
	}
	evs, err := stream(t, c, s.URL()+"/sse/weather.monitor.v1?limit=0")
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, evs, "weather.monitor.v1", 1, 0)
}

// TestSSEGeneratedAtPerWrite: the events of one write carry one
// generated_at, the time the first of them was built; with an interval
// every event is a write of its own and reads the clock.
func TestSSEGeneratedAtPerWrite(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	tick := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return fixedNow().Add(time.Duration(calls) * time.Second)
	}
	s, c := startServer(t, Options{Now: tick})
	const n = 2000 // about 12 writes of 32 KiB
	evs, err := stream(t, c, s.URL()+"/sse/counter.v1?limit="+strconv.Itoa(n)+"&size=100")
	if err != nil {
		t.Fatal(err)
	}
	envs := checkStream(t, evs, "counter.v1", 1, n)
	stamps := map[string]int{}
	for i, e := range envs {
		if i > 0 && e.GeneratedAt < envs[i-1].GeneratedAt {
			t.Fatalf("chunk %d: generated_at %s before chunk %d's %s", i+1, e.GeneratedAt, i, envs[i-1].GeneratedAt)
		}
		stamps[e.GeneratedAt]++
	}
	mu.Lock()
	got := calls
	mu.Unlock()
	if writes := n * 300 / flushThreshold; len(stamps) != got || got < writes/2 || got > 2*writes {
		t.Fatalf("%d chunks in about %d writes: %d distinct generated_at, %d clock readings", n, writes, len(stamps), got)
	}

	mu.Lock()
	calls = 0
	mu.Unlock()
	paced, err := stream(t, c, s.URL()+"/sse/counter.v1?limit=5&interval_ms=1")
	if err != nil {
		t.Fatal(err)
	}
	stamps = map[string]int{}
	for _, e := range checkStream(t, paced, "counter.v1", 1, 5) {
		stamps[e.GeneratedAt]++
	}
	if len(stamps) != 5 {
		t.Fatalf("5 paced chunks carry %d distinct generated_at, want 5", len(stamps))
	}
}
