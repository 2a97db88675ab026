package sse

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is the transports' shared test clock.
type fakeClock = retry.FakeClock

// rec is a delivered chunk, copied.
type rec struct{ ID, Event, Data string }

// reconnect is one ReconnectObserver call.
type reconnect struct {
	Attempt int
	Delay   time.Duration
	Cause   error
}

// recSink records chunks and reconnects. deliver, if set, runs before a chunk
// is recorded and can block or fail; reconnecting, if set, runs on each
// Reconnecting call.
type recSink struct {
	mu           sync.Mutex
	chunks       []rec
	reconnects   []reconnect
	deliver      func(ctx context.Context, c transport.Chunk) error
	reconnecting func(attempt int)
}

func (s *recSink) Deliver(ctx context.Context, c transport.Chunk) error {
	if s.deliver != nil {
		if err := s.deliver(ctx, c); err != nil {
			return err
		}
	}
	if c.ReceivedAt.IsZero() {
		return fmt.Errorf("chunk %q has no ReceivedAt", c.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chunks = append(s.chunks, rec{ID: c.ID, Event: c.Event, Data: string(c.Data)})
	return nil
}

func (s *recSink) Reconnecting(attempt int, delay time.Duration, cause error) {
	s.mu.Lock()
	s.reconnects = append(s.reconnects, reconnect{attempt, delay, cause})
	s.mu.Unlock()
	if s.reconnecting != nil {
		s.reconnecting(attempt)
	}
}

func (s *recSink) got() []rec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rec(nil), s.chunks...)
}

func (s *recSink) ids() []string {
	var ids []string
	for _, c := range s.got() {
		ids = append(ids, c.ID)
	}
	return ids
}

// script serves the n-th connection (from 1) to a test server.
type script func(w http.ResponseWriter, r *http.Request, n int)

// testServer is an httptest server on 127.0.0.1:0 that runs a script and
// records each request's headers.
type testServer struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
	urls    []string
	methods []string
}

func newTestServer(t *testing.T, s script) *testServer {
	t.Helper()
	ts := &testServer{}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ts.headers = append(ts.headers, r.Header.Clone())
		ts.urls = append(ts.urls, r.URL.RequestURI())
		ts.methods = append(ts.methods, r.Method)
		n := len(ts.headers)
		ts.mu.Unlock()
		s(w, r, n)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *testServer) conns() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.headers)
}

func (ts *testServer) header(i int) http.Header {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.headers[i]
}

// sseHeaders starts a 200 text/event-stream response.
func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// send writes raw SSE text and flushes it.
func send(w http.ResponseWriter, text string) {
	io.WriteString(w, text)
	w.(http.Flusher).Flush()
}

// chunks returns SSE text for chunk events with ids from..to.
func chunks(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "id: %d\nevent: chunk\ndata: {\"seq\":%d}\n\n", i, i)
	}
	return b.String()
}

const complete = "event: status\ndata: {\"status\":\"complete\"}\n\n"

// drop aborts the connection without ending the chunked body.
func drop() { panic(http.ErrAbortHandler) }

// seqIDs returns "from".."to" as strings.
func seqIDs(from, to int) []string {
	var ids []string
	for i := from; i <= to; i++ {
		ids = append(ids, fmt.Sprint(i))
	}
	return ids
}

// spec returns a Spec for endpoint "ep" on ts.
func specFor(ts *testServer) transport.Spec {
	return transport.Spec{StreamID: "s1", Endpoint: "ep", HTTP: transport.HTTP{ServerURL: ts.URL + "/sse"}}
}

// startRun runs tr.Run in a goroutine that the test owns; wait returns its
// error.
func startRun(ctx context.Context, tr *Transport, spec transport.Spec, cursor string, sink transport.Sink) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, spec, cursor, sink) }()
	return func() error { return <-done }
}
