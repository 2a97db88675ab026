package sse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
	"github.com/rtfshost/rtfshost/transport/transporttest"
)

// conformanceCase is one behaviour every run of the SSE transport must show,
// in the style of Redpanda Connect's StreamTestDefinitions. Each case starts
// its own misbehaving server and is followed by a goroutine leak check.
type conformanceCase struct {
	name string
	run  func(t *testing.T)
}

func TestConformance(t *testing.T) {
	cases := []conformanceCase{
		{"OpenClose", testOpenClose},
		{"OrderedDelivery", testOrderedDelivery},
		{"ResumeAfterDrop", testResumeAfterDrop},
		{"ResumeOffByOneServer", testResumeOffByOne},
		{"ResumeIDlessEvents", testResumeIDless},
		{"StartFromSynthesizedCursor", testStartFromSynthesized},
		{"EventOver64KiB", testEventOver64KiB},
		{"OversizedEventPermanent", testOversized},
		{"CommentOverLimitSkipped", testLongComment},
		{"RetryFieldHonoured", testRetryField},
		{"EOFBeforeEndReconnects", testEOFReconnects},
		{"Status401NotRetried", test401},
		{"Status500BackoffSequence", test500Backoff},
		{"Status429RetryAfter", test429RetryAfter},
		{"Status408Retried", test408},
		{"CancelMidBackoff", testCancelMidBackoff},
		{"CancelWhileConnecting", testCancelConnecting},
		{"CancelWhileReading", testCancelReading},
		{"CancelWhileDelivering", testCancelDelivering},
		{"Backpressure", testBackpressure},
		{"StreakResetAfterData", testStreakReset},
		{"StreakWithoutDataGivesUp", testStreakGivesUp},
		{"AuthHeaderSentNeverShown", testAuthSecret},
		{"URLSecretsNeverShown", testURLSecrets},
		{"NotEventStreamPermanent", testContentType},
		{"SinkErrorEndsRun", testSinkError},
		{"EmptyDataNotChunks", testEmptyData},
		{"StatusEventsOtherThanComplete", testOtherStatus},
		{"URLAndQuery", testURLAndQuery},
		{"BadSpec", testBadSpec},
		{"RepeatedRunsLeakNothing", testRepeatedRuns},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent() // the goroutines from before the case
			t.Run("case", c.run)             // servers close in the case's cleanup
			goleak.VerifyNone(t, before)
		})
	}
}

func testOpenClose(t *testing.T) {
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sseHeaders(w)
		send(w, chunks(1, 3)+complete)
	})
	sink := &recSink{}
	if err := new(Transport).Run(context.Background(), specFor(ts), "", sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.ids(); !reflect.DeepEqual(got, seqIDs(1, 3)) {
		t.Fatalf("ids = %v", got)
	}
	h := ts.header(0)
	ts.mu.Lock()
	method := ts.methods[0]
	ts.mu.Unlock()
	if method != http.MethodGet {
		t.Errorf("method = %s, want GET", method)
	}
	if h.Get("Accept") != "text/event-stream" || h.Get("Last-Event-ID") != "" {
		t.Errorf("request headers: Accept %q, Last-Event-ID %q", h.Get("Accept"), h.Get("Last-Event-ID"))
	}
	if ts.conns() != 1 {
		t.Errorf("connections = %d, want 1", ts.conns())
	}
}

func testOrderedDelivery(t *testing.T) {
	const n = 2000
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		sseHeaders(w)
		send(w, chunks(1, n)+complete)
	})
	sink := &recSink{}
	if err := new(Transport).Run(context.Background(), specFor(ts), "", sink); err != nil {
		t.Fatal(err)
	}
	got := sink.got()
	if len(got) != n {
		t.Fatalf("got %d chunks, want %d", len(got), n)
	}
	for i, c := range got {
		want := rec{ID: fmt.Sprint(i + 1), Event: "chunk", Data: fmt.Sprintf(`{"seq":%d}`, i+1)}
		if c != want {
			t.Fatalf("chunk %d = %+v, want %+v", i, c, want)
		}
	}
}

// resumeServer sends ids 1..5 and a partial event, drops, then serves the rest
// after Last-Event-ID; replayFrom shifts what it resends (0: exact, -1:
// also the last seen event).
func resumeServer(t *testing.T, replayShift int) *testServer {
	return newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sseHeaders(w)
		if n == 1 {
			send(w, chunks(1, 5)+"id: 6\ndata: {\"seq\":")
			drop()
		}
		var last int
		fmt.Sscan(r.Header.Get("Last-Event-ID"), &last)
		send(w, chunks(last+1+replayShift, 10)+complete)
	})
}

func testResumeAfterDrop(t *testing.T) {
	ts := resumeServer(t, 0)
	sink := &recSink{}
	clk := &fakeClock{}
	if err := (&Transport{policy: retry.Policy{Clock: clk}}).Run(context.Background(), specFor(ts), "", sink); err != nil {
		t.Fatal(err)
	}
	if got := sink.ids(); !reflect.DeepEqual(got, seqIDs(1, 10)) {
		t.Fatalf("ids = %v, want 1..10 once each", got)
	}
	if got := ts.header(1).Get("Last-Event-ID"); got != "5" {
		t.Errorf("Last-Event-ID on reconnect = %q, want 5", got)
	}
	if len(sink.reconnects) != 1 || sink.reconnects[0].Attempt != 1 || sink.reconnects[0].Delay != retry.DefaultInitial {
		t.Errorf("reconnects = %+v, want one attempt after %v", sink.reconnects, retry.DefaultInitial)
	}
}

func testResumeOffByOne(t *testing.T) {
	ts := resumeServer(t, -1) // resends id 5
	sink := &recSink{}
	if err := (&Transport{policy: retry.Policy{Clock: &fakeClock{}}}).Run(context.Background(), specFor(ts), "", sink); err != nil {
		t.Fatal(err)
	}
	if got := sink.ids(); !reflect.DeepEqual(got, seqIDs(1, 10)) {
		t.Fatalf("ids = %v, want 1..10 once each", got)
	}
}

// idlessServer sends "id: 3" then id-less events; it replays from
// Last-Event-ID like a log would.
func idlessServer(t *testing.T, dropAfter int) *testServer {
	events := []string{"id: 3\ndata: a\n\n", "data: b\n\n", ": comment\n\n", "data: c\n\n", "data: d\n\n"}
	return newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sseHeaders(w)
		from := 0
		if r.Header.Get("Last-Event-ID") == "3" {
			from = 1
		}
		if n == 1 && dropAfter > 0 {
			send(w, strings.Join(events[from:dropAfter], ""))
			drop()
		}
		if n == 2 && dropAfter > 0 {
			drop() // a second failure before anything new: the resume point holds
		}
		send(w, strings.Join(events[from:], "")+complete)
	})
}

func testResumeIDless(t *testing.T) {
	ts := idlessServer(t, 4) // drops after a, b, comment
	sink := &recSink{}
	if err := (&Transport{policy: retry.Policy{Clock: &fakeClock{}}}).Run(context.Background(), specFor(ts), "", sink); err != nil {
		t.Fatal(err)
	}
	want := []rec{{"3", "", "a"}, {"3+1", "", "b"}, {"3+2", "", "c"}, {"3+3", "", "d"}}
	if got := sink.got(); !reflect.DeepEqual(got, want) {
		t.Fatalf("chunks = %+v, want %+v", got, want)
	}
}

func testStartFromSynthesized(t *testing.T) {
	ts := idlessServer(t, 0)
	sink := &recSink{}
	if err := new(Transport).Run(context.Background(), specFor(ts), "3+2", sink); err != nil {
		t.Fatal(err)
	}
	if got := ts.header(0).Get("Last-Event-ID"); got != "3" {
		t.Errorf("Last-Event-ID = %q, want the real id 3", got)
	}
	if got := sink.got(); !reflect.DeepEqual(got, []rec{{"3+3", "", "d"}}) {
		t.Fatalf("chunks = %+v, want only d after cursor 3+2", got)
	}
}

func testEventOver64KiB(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		sseHeaders(w)
		send(w, "id: 1\ndata: "+big+"\n\n"+chunks(2, 2)+complete)
	})
	sink := &recSink{}
	if err := new(Transport).Run(context.Background(), specFor(ts), "", sink); err != nil {
		t.Fatal(err)
	}
	got := sink.got()
	if len(got) != 2 || got[0].Data != big || got[1].ID != "2" {
		t.Fatalf("got %d chunks", len(got))
	}
	if ts.conns() != 1 {
		t.Errorf("connections = %d, want 1 (no reconnect loop)", ts.conns())
	}
}

func testOversized(t *testing.T) {
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		sseHeaders(w)
		send(w, chunks(1, 1)+"id: 2\ndata: "+strings.Repeat("y", 8192)+"\n\n"+complete)
	})
	spec := specFor(ts)
	spec.MaxEventBytes = 4096
	sink := &recSink{}
	err := (&Transport{policy: retry.Policy{Clock: &fakeClock{}}}).Run(context.Background(), spec, "", sink)
	if !errors.Is(err, transport.ErrEventTooLarge) || !transport.IsPermanent(err) {
		t.Fatalf("err = %v, want a permanent ErrEventTooLarge", err)
	}
	if !strings.Contains(err.Error(), "4096") || !strings.Contains(err.Error(), `after cursor "1"`) {
		t.Errorf("error %q should name the limit and where", err)
	}
	if ts.conns() != 1 || len(sink.reconnects) != 0 {
		t.Errorf("connections = %d, reconnects %d; want 1 and 0", ts.conns(), len(sink.reconnects))
	}
	if got := sink.ids(); !reflect.DeepEqual(got, []string{"1"}) {
		t.Errorf("ids = %v", got)
	}
}

// testLongComment: a 1 MiB comment line, as a keep-alive padder might send,
// is discarded; the limit applies to the event fields only.
func testLongComment(t *testing.T) {
	note := ":" + strings.Repeat("k", 1<<20) + "\n"
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		sseHeaders(w)
		send(w, note+chunks(1, 1)+"id: 2\n"+note+"event: chunk\ndata: {\"seq\":2}\n\n"+note+complete)
	})
	spec := specFor(ts)
	spec.MaxEventBytes = 4096
	sink := &recSink{}
	if err := (&Transport{policy: retry.Policy{Clock: &fakeClock{}}}).Run(context.Background(), spec, "", sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.ids(); !reflect.DeepEqual(got, seqIDs(1, 2)) {
		t.Fatalf("ids = %v", got)
	}
	if ts.conns() != 1 || len(sink.reconnects) != 0 {
		t.Errorf("connections = %d, reconnects %d; want 1 and 0", ts.conns(), len(sink.reconnects))
	}
}

func testRetryField(t *testing.T) {
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sseHeaders(w)
		if n == 1 {
			send(w, "retry: 1234\n\n"+chunks(1, 1))
			drop()
		}
		send(w, chunks(2, 2)+complete)
	})
	clk := &fakeClock{}
	sink := &recSink{}
	if err := (&Transport{policy: retry.Policy{Clock: clk}}).Run(context.Background(), specFor(ts), "", sink); err != nil {
		t.Fatal(err)
	}
	if got := clk.Waits(); !reflect.DeepEqual(got, []time.Duration{1234 * time.Millisecond}) {
		t.Fatalf("waits = %v, want [1.234s]", got)
	}
	if got := sink.ids(); !reflect.DeepEqual(got, seqIDs(1, 2)) {
		t.Fatalf("ids = %v", got)
	}
}

func testEOFReconnects(t *testing.T) {
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sseHeaders(w)
		if n == 1 {
			send(w, chunks(1, 2)) // a clean end of the body, no terminal event
			return
		}
		send(w, chunks(3, 4)+complete)
	})
	sink := &recSink{}
	if err := (&Transport{policy: retry.Policy{Clock: &fakeClock{}}}).Run(context.Background(), specFor(ts), "", sink); err != nil {
		t.Fatal(err)
	}
	if got := sink.ids(); !reflect.DeepEqual(got, seqIDs(1, 4)) {
		t.Fatalf("ids = %v", got)
	}
	if ts.conns() != 2 || ts.header(1).Get("Last-Event-ID") != "2" {
		t.Fatalf("conns %d, second Last-Event-ID %q", ts.conns(), ts.header(1).Get("Last-Event-ID"))
	}
	if c := sink.reconnects[0].Cause; c == nil || !strings.Contains(c.Error(), "before the terminal status event") {
		t.Errorf("cause = %v", c)
	}
}

func statusServer(t *testing.T, code int, okAfter int) *testServer {
	return newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if okAfter == 0 || n <= okAfter {
			if code == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "2")
			}
			http.Error(w, "echo "+r.Header.Get("Authorization"), code)
			return
		}
		sseHeaders(w)
		send(w, chunks(1, 1)+complete)
	})
}

func test401(t *testing.T) {
	ts := statusServer(t, http.StatusUnauthorized, 0)
	sink := &recSink{}
	err := (&Transport{policy: retry.Policy{Clock: &fakeClock{}}}).Run(context.Background(), specFor(ts), "", sink)
	var te *transport.Error
	if !errors.As(err, &te) || te.Status != 401 || !te.Permanent || te.StreamID != "s1" {
		t.Fatalf("err = %#v, want a permanent 401 *transport.Error", err)
	}
	if ts.conns() != 1 || len(sink.reconnects) != 0 {
		t.Fatalf("connections = %d, reconnects = %d; want 1, 0", ts.conns(), len(sink.reconnects))
	}
}

func test500Backoff(t *testing.T) {
	ts := statusServer(t, http.StatusInternalServerError, 0)
	spec := specFor(ts)
	spec.RetryAttempts = 7
	clk := &fakeClock{}
	sink := &recSink{}
	err := (&Transport{policy: retry.Policy{Clock: clk}}).Run(context.Background(), spec, "", sink)
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second,
		2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	if got := clk.Waits(); !reflect.DeepEqual(got, want) {
		t.Fatalf("waits = %v, want %v", got, want)
	}
	var te *transport.Error
	if !errors.As(err, &te) || te.Status != 500 || te.Permanent || !strings.Contains(err.Error(), "gave up after 7 retries") {
		t.Fatalf("err = %v", err)
	}
	if ts.conns() != 8 {
		t.Errorf("connections = %d, want 8", ts.conns())
	}
	for i, r := range sink.reconnects {
		if r.Attempt != i+1 || r.Delay != want[i] || r.Cause == nil {
			t.Errorf("reconnect %d = %+v", i, r)
		}
	}
}

func test429RetryAfter(t *testing.T) {
	ts := statusServer(t, http.StatusTooManyRequests, 1)
	clk := &fakeClock{}
	sink := &recSink{}
	if err := (&Transport{policy: retry.Policy{Clock: clk}}).Run(context.Background(), specFor(ts), "", sink); err != nil {
		t.Fatal(err)
	}
	if got := clk.Waits(); !reflect.DeepEqual(got, []time.Duration{2 * time.Second}) {
		t.Fatalf("waits = %v, want the Retry-After [2s]", got)
	}
}

func test408(t *testing.T) {
	ts := statusServer(t, http.StatusRequestTimeout, 2)
	sink := &recSink{}
	if err := (&Transport{policy: retry.Policy{Clock: &fakeClock{}}}).Run(context.Background(), specFor(ts), "", sink); err != nil {
		t.Fatal(err)
	}
	if ts.conns() != 3 || len(sink.got()) != 1 {
		t.Fatalf("connections %d, chunks %d", ts.conns(), len(sink.got()))
	}
}

func testCancelMidBackoff(t *testing.T) {
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sseHeaders(w)
		send(w, "retry: 60000\n\n") // then EOF: the next wait is a minute
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	sink := &recSink{reconnecting: func(int) { close(ready) }}
	wait := startRun(ctx, new(Transport), specFor(ts), "", sink) // the real clock
	transporttest.CancelEnds(t, cancel, ready, wait)
	if sink.reconnects[0].Delay != time.Minute {
		t.Errorf("delay = %v, want 1m from retry:", sink.reconnects[0].Delay)
	}
}

func testCancelConnecting(t *testing.T) {
	ready := make(chan struct{})
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		close(ready)
		<-r.Context().Done() // never answers
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	transporttest.CancelEnds(t, cancel, ready, startRun(ctx, new(Transport), specFor(ts), "", &recSink{}))
}

func testCancelReading(t *testing.T) {
	ready := make(chan struct{})
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sseHeaders(w)
		send(w, chunks(1, 1))
		<-r.Context().Done() // stalls mid-stream
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := &recSink{deliver: func(context.Context, transport.Chunk) error { close(ready); return nil }}
	transporttest.CancelEnds(t, cancel, ready, startRun(ctx, new(Transport), specFor(ts), "", sink))
}

func testCancelDelivering(t *testing.T) {
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sseHeaders(w)
		send(w, chunks(1, 3)+complete)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	sink := &recSink{deliver: func(ctx context.Context, _ transport.Chunk) error {
		close(ready)
		<-ctx.Done() // a full queue
		return ctx.Err()
	}}
	transporttest.CancelEnds(t, cancel, ready, startRun(ctx, new(Transport), specFor(ts), "", sink))
}

func testStreakReset(t *testing.T) {
	// Each failure streak is a drop after one new event followed by one 500:
	// two retries per streak are enough only if the streak resets on data.
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n%2 == 0 {
			http.Error(w, "busy", http.StatusInternalServerError)
			return
		}
		sseHeaders(w)
		seq := (n + 1) / 2
		if seq == 4 {
			send(w, complete)
			return
		}
		send(w, chunks(seq, seq))
		drop()
	})
	spec := specFor(ts)
	spec.RetryAttempts = 2
	clk := &fakeClock{}
	sink := &recSink{}
	if err := (&Transport{policy: retry.Policy{Clock: clk}}).Run(context.Background(), spec, "", sink); err != nil {
		t.Fatalf("Run: %v (the streak did not reset)", err)
	}
	ms := 250 * time.Millisecond
	want := []time.Duration{ms, 2 * ms, ms, 2 * ms, ms, 2 * ms}
	if got := clk.Waits(); !reflect.DeepEqual(got, want) {
		t.Fatalf("waits = %v, want %v", got, want)
	}
	if got := sink.ids(); !reflect.DeepEqual(got, seqIDs(1, 3)) {
		t.Fatalf("ids = %v", got)
	}
}

func testStreakGivesUp(t *testing.T) {
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n > 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		sseHeaders(w)
		send(w, chunks(1, 1))
		drop()
	})
	spec := specFor(ts)
	spec.RetryAttempts = 2
	clk := &fakeClock{}
	err := (&Transport{policy: retry.Policy{Clock: clk}}).Run(context.Background(), spec, "", &recSink{})
	var te *transport.Error
	if !errors.As(err, &te) || te.Status != 503 || te.Permanent {
		t.Fatalf("err = %v, want the last 503 after giving up", err)
	}
	if ts.conns() != 3 || len(clk.Waits()) != 2 {
		t.Fatalf("connections %d waits %v; want 3 and two waits", ts.conns(), clk.Waits())
	}
}

func testAuthSecret(t *testing.T) {
	const secret = "s3cr3t-t0ken"
	for _, code := range []int{http.StatusUnauthorized, http.StatusBadGateway} {
		ts := statusServer(t, code, 0)
		spec := specFor(ts)
		spec.HTTP.Header = http.Header{"Authorization": {"Bearer " + secret}}
		var logs bytes.Buffer
		spec.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		err := (&Transport{policy: retry.Policy{Clock: &fakeClock{}}}).Run(context.Background(), spec, "", &recSink{})
		if err == nil {
			t.Fatal("Run succeeded against a failing server")
		}
		if got := ts.header(0).Get("Authorization"); got != "Bearer "+secret {
			t.Fatalf("Authorization sent = %q", got)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
			t.Fatalf("the secret leaked: error %q, logs %q", err, logs.String())
		}
		if code == http.StatusBadGateway && !strings.Contains(logs.String(), "reconnecting") {
			t.Errorf("no reconnect logged: %q", logs.String())
		}
	}
}

// A server URL may carry a password or a key in its query: errors and logs
// show neither, whether the server answers an error status or cannot be
// reached at all.
func testURLSecrets(t *testing.T) {
	const secret = "qu3ry-s3cret"
	ts := statusServer(t, http.StatusUnauthorized, 0)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, base := range []string{ts.URL, closed.URL} {
		u, _ := url.Parse(base)
		u.User = url.UserPassword("user", secret)
		spec := transport.Spec{Endpoint: "ep", HTTP: transport.HTTP{ServerURL: u.String() + "/sse?token=" + secret}}
		var logs bytes.Buffer
		spec.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		err := (&Transport{policy: retry.Policy{Clock: &fakeClock{}}}).Run(context.Background(), spec, "", &recSink{})
		if err == nil {
			t.Fatalf("%s: Run succeeded", base)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
			t.Fatalf("%s: the secret leaked: error %q, logs %q", base, err, logs.String())
		}
		if !strings.Contains(err.Error(), "token=") {
			t.Errorf("%s: the error %q does not show the URL's query keys", base, err)
		}
	}
}

func testContentType(t *testing.T) {
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"data":1}`))
	})
	err := (&Transport{policy: retry.Policy{Clock: &fakeClock{}}}).Run(context.Background(), specFor(ts), "", &recSink{})
	if !transport.IsPermanent(err) || !strings.Contains(err.Error(), `"application/json"`) {
		t.Fatalf("err = %v, want a permanent error naming the content type", err)
	}
	if ts.conns() != 1 {
		t.Fatalf("connections = %d", ts.conns())
	}
}

func testSinkError(t *testing.T) {
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sseHeaders(w)
		send(w, chunks(1, 5)+complete)
	})
	stop := errors.New("stream cancelled by the host")
	sink := &recSink{deliver: func(_ context.Context, c transport.Chunk) error {
		if c.ID == "3" {
			return stop
		}
		return nil
	}}
	err := (&Transport{policy: retry.Policy{Clock: &fakeClock{}}}).Run(context.Background(), specFor(ts), "", sink)
	if err != stop {
		t.Fatalf("err = %v, want the sink's error unchanged", err)
	}
	if ts.conns() != 1 || !reflect.DeepEqual(sink.ids(), seqIDs(1, 2)) {
		t.Fatalf("connections %d, ids %v", ts.conns(), sink.ids())
	}
}

func testEmptyData(t *testing.T) {
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sseHeaders(w)
		if n == 1 {
			// a priming event (id, empty data), comments, a retry-only block
			send(w, "id: 9\ndata:\n\n: ping\n\nretry: 5\n\nevent: x\n\n")
			return
		}
		send(w, "data: a\n\n"+complete)
	})
	clk := &fakeClock{}
	sink := &recSink{}
	if err := (&Transport{policy: retry.Policy{Clock: clk}}).Run(context.Background(), specFor(ts), "", sink); err != nil {
		t.Fatal(err)
	}
	if got := sink.got(); !reflect.DeepEqual(got, []rec{{"9+1", "", "a"}}) {
		t.Fatalf("chunks = %+v", got)
	}
	if got := ts.header(1).Get("Last-Event-ID"); got != "9" {
		t.Errorf("Last-Event-ID = %q, want 9 from the priming event", got)
	}
	if got := clk.Waits(); !reflect.DeepEqual(got, []time.Duration{5 * time.Millisecond}) {
		t.Errorf("waits = %v", got)
	}
}

func testOtherStatus(t *testing.T) {
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sseHeaders(w)
		send(w, "id: 1\nevent: status\ndata: {\"status\":\"running\"}\n\n"+
			"id: 2\nevent: status\ndata: not json\n\n"+
			"id: 3\nevent: status\ndata: {\"status\":\"complete\",\"total\":2}\n\n"+
			chunks(4, 4)) // never read: the stream ended at id 3
	})
	sink := &recSink{}
	if err := new(Transport).Run(context.Background(), specFor(ts), "", sink); err != nil {
		t.Fatal(err)
	}
	if got := sink.ids(); !reflect.DeepEqual(got, seqIDs(1, 2)) {
		t.Fatalf("ids = %v, want the two non-terminal status events", got)
	}
}

func testURLAndQuery(t *testing.T) {
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sseHeaders(w)
		send(w, complete)
	})
	tests := []struct {
		server, endpoint string
		query            map[string]string
		want             string
	}{
		{ts.URL + "/sse/", "/weather.v1", map[string]string{"city": "Paris", "b": "x y"}, "/sse/weather.v1?b=x+y&city=Paris"},
		{"", ts.URL + "/other?a=1", map[string]string{"b": "2"}, "/other?a=1&b=2"},
		{"http://unused.invalid", ts.URL + "/abs", nil, "/abs"},
		// A query on the server URL stays the query; the endpoint joins the path.
		{ts.URL + "/sse?tenant=a", "counter.v1", map[string]string{"limit": "2"}, "/sse/counter.v1?limit=2&tenant=a"},
	}
	for i, tt := range tests {
		spec := transport.Spec{Endpoint: tt.endpoint, HTTP: transport.HTTP{ServerURL: tt.server, Query: tt.query}}
		if err := new(Transport).Run(context.Background(), spec, "", &recSink{}); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		ts.mu.Lock()
		got := ts.urls[i]
		ts.mu.Unlock()
		if got != tt.want {
			t.Errorf("case %d: requested %q, want %q", i, got, tt.want)
		}
	}
}

func testBadSpec(t *testing.T) {
	ok := transport.Spec{Endpoint: "ep", HTTP: transport.HTTP{ServerURL: "http://127.0.0.1:1/sse"}}
	tests := []struct {
		name   string
		edit   func(*transport.Spec)
		nilSnk bool
		want   string
	}{
		{"empty endpoint", func(s *transport.Spec) { s.Endpoint = "" }, false, "endpoint is empty"},
		{"no server", func(s *transport.Spec) { s.HTTP.ServerURL = "" }, false, "server URL is empty"},
		{"bad scheme", func(s *transport.Spec) { s.HTTP.ServerURL = "ftp://x" }, false, `scheme "ftp" is not http or https`},
		{"bad URL", func(s *transport.Spec) { s.HTTP.ServerURL = "http://[::1" }, false, "missing ']' in host"},
		{"negative attempts", func(s *transport.Spec) { s.RetryAttempts = -1 }, false, "RetryAttempts is -1"},
		{"negative size", func(s *transport.Spec) { s.MaxEventBytes = -5 }, false, "MaxEventBytes is -5"},
		{"nil sink", func(*transport.Spec) {}, true, "sink is nil"},
	}
	for _, tt := range tests {
		spec := ok
		tt.edit(&spec)
		var sink transport.Sink = &recSink{}
		if tt.nilSnk {
			sink = nil
		}
		err := new(Transport).Run(context.Background(), spec, "", sink)
		var te *transport.Error
		if !errors.As(err, &te) || !te.Permanent || te.Op != "config" || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want a permanent config error containing %q", tt.name, err, tt.want)
		}
	}
}

// testRepeatedRuns starts and abandons many streams (the r3labs
// SubscribeChan/Unsubscribe cycle leaked a goroutine each time); the leak
// check after the case proves every Run cleaned up.
func testRepeatedRuns(t *testing.T) {
	ts := newTestServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		sseHeaders(w)
		send(w, chunks(1, 1))
		<-r.Context().Done()
	})
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		sink := &recSink{deliver: func(context.Context, transport.Chunk) error { cancel(); return nil }}
		if err := new(Transport).Run(ctx, specFor(ts), "", sink); !errors.Is(err, context.Canceled) {
			t.Fatalf("run %d: %v", i, err)
		}
	}
}
