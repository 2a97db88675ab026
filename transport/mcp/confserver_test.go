package mcp

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
)

// confServer is the hand-written server of the conformance table. It speaks
// either Streamable HTTP (the call's stream is the tools/call POST's SSE
// answer, resumed by GET with Last-Event-ID) or the legacy HTTP+SSE
// transport (everything arrives as message events on one GET stream), so
// that one script drives the same behaviour over both transports.
type confServer struct {
	legacy bool
	// connectFail lists statuses answered to the first connection attempts:
	// the initialize POST (Streamable) or the SSE GET (legacy).
	connectFail []int
	// prelude, for legacy, writes the GET stream's start on the n-th
	// successful attempt (from 1), before the endpoint event; cut ends the
	// stream there.
	prelude func(n int) (text string, cut bool)
	// script writes the call's stream once tools/call arrives.
	script func(c *callWriter)
	// resume answers a Streamable GET with Last-Event-ID; nil means 405.
	resume func(c *callWriter, lastID string)
	// smallBuffers shrinks the kernel send buffers of accepted connections.
	smallBuffers bool

	http     *httptest.Server
	log      wireLog
	stop     chan struct{} // closed at cleanup: ends every GET stream
	mu       sync.Mutex
	attempts int
	token    string
	resumes  []string // Last-Event-ID of each resume GET
	conns    map[string]*legacyConn
	open     atomic.Int32 // GET streams being served
}

// legacyConn is one legacy GET stream: POST handlers queue writes on it,
// which its GET handler runs.
type legacyConn struct {
	jobs chan func(http.ResponseWriter) (end bool)
	done chan struct{}
}

// callWriter writes a call's stream for either transport.
type callWriter struct {
	w     http.ResponseWriter
	tok   string
	ended bool
}

func (c *callWriter) raw(s string) error {
	if _, err := io.WriteString(c.w, s); err != nil {
		return err
	}
	c.w.(http.Flusher).Flush()
	return nil
}

// progress writes a progress notification with SSE id id.
func (c *callWriter) progress(id string, p float64) { writeSSE(c.w, id, progressMsg(c.tok, p)) }

// result writes the tool's result.
func (c *callWriter) result() { writeSSE(c.w, "r", resultMsg("done", false)) }

// drop cuts the connection mid-stream.
func (c *callWriter) drop() { panic(http.ErrAbortHandler) }

// end ends the stream cleanly: for Streamable returning from the script
// does; for legacy the GET response ends.
func (c *callWriter) end() { c.ended = true }

func newConfServer(t *testing.T, s *confServer) *confServer {
	t.Helper()
	s.stop = make(chan struct{})
	s.conns = map[string]*legacyConn{}
	s.http = httptest.NewUnstartedServer(s.log.record(http.HandlerFunc(s.serve), nil))
	if s.smallBuffers {
		s.http.Listener = smallBufListener{s.http.Listener}
	}
	s.http.Start()
	t.Cleanup(s.http.Close)
	t.Cleanup(func() { close(s.stop) }) // runs first
	return s
}

func (s *confServer) spec() transport.Spec {
	u := s.http.URL + "/mcp"
	if s.legacy {
		u = s.http.URL + "/sse"
	}
	return transport.Spec{StreamID: "conf", Endpoint: "tool", RetryAttempts: 3, HTTP: transport.HTTP{ServerURL: u, Client: s.http.Client()}}
}

// connects is the number of connection attempts the transport made.
func (s *confServer) connects() int {
	if s.legacy {
		return s.log.count("GET")
	}
	return s.log.count("POST initialize")
}

func (s *confServer) resumeIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.resumes...)
}

// failAttempt answers the next connection attempt with a connectFail
// status, reporting whether it did.
func (s *confServer) failAttempt(w http.ResponseWriter) bool {
	s.mu.Lock()
	n := s.attempts
	s.attempts++
	s.mu.Unlock()
	if n < len(s.connectFail) {
		http.Error(w, "refused (test)", s.connectFail[n])
		return true
	}
	return false
}

func (s *confServer) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && s.legacy:
		s.legacyGET(w, r)
	case r.Method == http.MethodGet:
		s.streamableGET(w, r)
	case r.Method == http.MethodPost:
		s.post(w, r)
	default:
		http.Error(w, "method", http.StatusMethodNotAllowed)
	}
}

func (s *confServer) streamableGET(w http.ResponseWriter, r *http.Request) {
	last := r.Header.Get(headerLastEventID)
	if last == "" || s.resume == nil {
		http.Error(w, "no GET stream", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	s.resumes = append(s.resumes, last)
	tok := s.token
	s.mu.Unlock()
	s.open.Add(1)
	defer s.open.Add(-1)
	sseHeaders(w)
	s.resume(&callWriter{w: w, tok: tok}, last)
}

func (s *confServer) legacyGET(w http.ResponseWriter, r *http.Request) {
	if s.failAttempt(w) {
		return
	}
	s.open.Add(1)
	defer s.open.Add(-1)
	s.mu.Lock()
	id := fmt.Sprint(s.attempts)
	lc := &legacyConn{jobs: make(chan func(http.ResponseWriter) bool, 8), done: make(chan struct{})}
	s.conns[id] = lc
	s.mu.Unlock()
	defer close(lc.done)
	sseHeaders(w)
	if s.prelude != nil {
		text, cut := s.prelude(s.okAttempt(id))
		fmt.Fprint(w, text)
		w.(http.Flusher).Flush()
		if cut {
			return
		}
	}
	fmt.Fprintf(w, "event: endpoint\ndata: /message?c=%s\n\n", id)
	w.(http.Flusher).Flush()
	for {
		select {
		case job := <-lc.jobs:
			if job(w) {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		}
	}
}

// okAttempt returns the number of the successful legacy GET id (from 1).
func (s *confServer) okAttempt(id string) int {
	var n int
	fmt.Sscan(id, &n)
	return n - len(s.connectFail)
}

func (s *confServer) post(w http.ResponseWriter, r *http.Request) {
	m, ok := readPosted(w, r)
	if !ok {
		return
	}
	if m.Method == methodToolsCall {
		s.mu.Lock()
		s.token = m.Params.Meta.ProgressToken
		s.mu.Unlock()
	}
	if s.legacy {
		s.legacyPOST(w, r, m.Method)
		return
	}
	switch m.Method {
	case methodInitialize:
		if s.failAttempt(w) {
			return
		}
		w.Header().Set("Content-Type", contentJSON)
		w.Header().Set(headerSession, "conf-session")
		fmt.Fprint(w, initializeResult(version20250618))
	case methodToolsCall:
		s.open.Add(1)
		defer s.open.Add(-1)
		sseHeaders(w)
		s.script(&callWriter{w: w, tok: m.Params.Meta.ProgressToken})
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

func initializeResult(version string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":%q,"capabilities":{},"serverInfo":{"name":"conf","version":"1"}}}`, version)
}

// legacyPOST queues the answer to one message on its GET stream.
func (s *confServer) legacyPOST(w http.ResponseWriter, r *http.Request, method string) {
	s.mu.Lock()
	lc := s.conns[r.URL.Query().Get("c")]
	tok := s.token
	s.mu.Unlock()
	if lc == nil {
		http.Error(w, "unknown session", http.StatusNotFound)
		return
	}
	var job func(http.ResponseWriter) bool
	switch method {
	case methodInitialize:
		job = func(w http.ResponseWriter) bool {
			writeSSE(w, "", initializeResult(legacyVersion))
			return false
		}
	case methodToolsCall:
		job = func(w http.ResponseWriter) bool {
			c := &callWriter{w: w, tok: tok}
			s.script(c)
			return c.ended
		}
	}
	if job != nil {
		select {
		case lc.jobs <- job:
		case <-lc.done:
			http.Error(w, "stream gone", http.StatusNotFound)
			return
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

// waitStreamsClosed waits until the server serves no stream any more: the
// transport closed every connection it streamed on.
func (s *confServer) waitStreamsClosed(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); s.open.Load() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams still open after Run returned", s.open.Load())
		}
	}
}

// smallBufListener shrinks the kernel send buffer of accepted connections so
// that a server's writes block soon after its client stops reading.
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

// smallBufClient is an HTTP client whose connections have small kernel
// receive buffers. The caller closes its idle connections.
func smallBufClient() (*http.Client, *http.Transport) {
	dialer := &net.Dialer{}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetReadBuffer(16 << 10)
		}
		return c, err
	}}
	return &http.Client{Transport: tr}, tr
}

// fakeClock is the transports' shared test clock.
type fakeClock = retry.FakeClock

// startRun runs run in a goroutine; the returned function waits for its
// result.
func startRun(run func() error) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- run() }()
	return func() error { return <-done }
}
