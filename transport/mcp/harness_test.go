package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(stdioServerEnv); mode != "" {
		os.Exit(stdioServerMain(mode))
	}
	if os.Getenv(conformanceClientEnv) != "" {
		os.Exit(conformanceClientMain())
	}
	goleak.VerifyTestMain(m)
}

// leakCheck verifies, after every other cleanup of t, that no goroutine
// leaked.
func leakCheck(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// fastPolicy keeps reconnect waits short in tests.
var fastPolicy = retry.Policy{Initial: time.Millisecond, Max: 16 * time.Millisecond}

// recSink records delivered chunks (with copied data) and reconnects.
type recSink struct {
	mu      sync.Mutex
	chunks  []transport.Chunk
	delays  []time.Duration
	onChunk func(n int, c transport.Chunk) error
	onRetry func(attempt int)
}

func (s *recSink) Deliver(ctx context.Context, c transport.Chunk) error {
	c.Data = bytes.Clone(c.Data)
	s.mu.Lock()
	s.chunks = append(s.chunks, c)
	n := len(s.chunks)
	s.mu.Unlock()
	if s.onChunk != nil {
		return s.onChunk(n, c)
	}
	return nil
}

func (s *recSink) Reconnecting(attempt int, d time.Duration, cause error) {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	if s.onRetry != nil {
		s.onRetry(attempt)
	}
}

func (s *recSink) events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.chunks {
		out = append(out, c.Event)
	}
	return out
}

// progressValues returns the progress of every progress chunk.
func (s *recSink) progressValues(t *testing.T) []float64 {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []float64
	for _, c := range s.chunks {
		if c.Event != "progress" {
			continue
		}
		var p struct {
			Progress float64 `json:"progress"`
		}
		if err := json.Unmarshal(c.Data, &p); err != nil {
			t.Fatalf("progress chunk %q: %v", c.Data, err)
		}
		out = append(out, p.Progress)
	}
	return out
}

func (s *recSink) last() transport.Chunk {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.chunks) == 0 {
		return transport.Chunk{}
	}
	return s.chunks[len(s.chunks)-1]
}

// wireLog records the requests a test server saw, in order, as
// "METHOD jsonrpc-method" (or "GET last-event-id=...").
type wireLog struct {
	mu    sync.Mutex
	reqs  []string
	posts []wirePost
}

// wirePost is one POSTed JSON-RPC message as the server received it.
type wirePost struct {
	method string
	header http.Header
	body   []byte
}

// postsOf returns the POSTs of a JSON-RPC method, in order.
func (w *wireLog) postsOf(method string) []wirePost {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []wirePost
	for _, p := range w.posts {
		if p.method == method {
			out = append(out, p)
		}
	}
	return out
}

// meta returns the params._meta of a POSTed message.
func (p wirePost) meta(t *testing.T) map[string]any {
	t.Helper()
	var m struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(p.body, &m); err != nil {
		t.Fatalf("%s body %s: %v", p.method, p.body, err)
	}
	return m.Params.Meta
}

func (w *wireLog) add(s string) {
	w.mu.Lock()
	w.reqs = append(w.reqs, s)
	w.mu.Unlock()
}

func (w *wireLog) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.reqs...)
}

func (w *wireLog) count(s string) int {
	n := 0
	for _, r := range w.all() {
		if r == s {
			n++
		}
	}
	return n
}

// record wraps h, logging each request; intercept may answer a request
// itself (returning true).
func (w *wireLog) record(h http.Handler, intercept func(http.ResponseWriter, *http.Request, string) bool) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		entry := r.Method
		switch r.Method {
		case http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			_ = json.Unmarshal(body, &m)
			entry += " " + m.Method
			w.mu.Lock()
			w.posts = append(w.posts, wirePost{method: m.Method, header: r.Header.Clone(), body: body})
			w.mu.Unlock()
			if m.Method == methodCancelled {
				entry += " " + string(m.Params)
			}
		case http.MethodGet:
			if id := r.Header.Get(headerLastEventID); id != "" {
				entry += " resume"
			}
		}
		w.add(entry)
		if intercept != nil && intercept(rw, r, entry) {
			return
		}
		h.ServeHTTP(rw, r)
	})
}

// sdkServer is go-sdk's own MCP server on an httptest server.
type sdkServer struct {
	srv       *sdk.Server
	http      *httptest.Server
	log       wireLog
	calls     atomic.Int32
	produced  atomic.Int64 // progress notifications the endless tool sent
	cancelled chan struct{}
	intercept func(http.ResponseWriter, *http.Request, string) bool
}

type sdkConfig struct {
	version   string // the only protocol version the server speaks
	json      bool   // JSONResponse mode
	noStore   bool   // no event store: nothing is replayed or resumable
	legacy    bool   // serve the 2024-11-05 SSE handler instead
	stateless bool   // a stateless handler: with version 2026-07-28, a server of that revision only
	// keepAlive pings the client at this interval; two missed pings in a
	// row close the session.
	keepAlive time.Duration
	intercept func(http.ResponseWriter, *http.Request, string) bool
}

type countArgs struct {
	N    int  `json:"n"`
	Fail bool `json:"fail,omitempty"`
}

// newSDKServer starts go-sdk's server with the tools of addRequestTools
// and four more: "endless" sends
// progress notifications until its context ends; "count" sends n
// progress notifications then a text result (or an isError result when fail
// is set), and "count-idempotent" is the same tool annotated idempotentHint
// true; "block" sends one progress notification and waits for its context
// to end, reporting that on cancelled.
func newSDKServer(t testing.TB, cfg sdkConfig) *sdkServer {
	t.Helper()
	s := &sdkServer{cancelled: make(chan struct{}, 1), intercept: cfg.intercept}
	opts := &sdk.ServerOptions{KeepAlive: cfg.keepAlive, KeepAliveFailureThreshold: 2}
	if cfg.version != "" {
		opts.SupportedProtocolVersions = []string{cfg.version}
	}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, opts)
	addRequestTools(s.srv)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "count"}, s.count)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "count-idempotent", Annotations: &sdk.ToolAnnotations{IdempotentHint: true}}, s.count)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "block"}, s.block)
	sdk.AddTool(s.srv, &sdk.Tool{Name: "endless"}, func(ctx context.Context, req *sdk.CallToolRequest, _ map[string]any) (*sdk.CallToolResult, any, error) {
		return endless(ctx, req, func() { s.produced.Add(1) })
	})
	var h http.Handler
	if cfg.legacy {
		h = sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return s.srv }, nil)
	} else {
		opts := &sdk.StreamableHTTPOptions{EventStore: sdk.NewMemoryEventStore(nil), JSONResponse: cfg.json, Stateless: cfg.stateless}
		if cfg.noStore || cfg.stateless {
			opts.EventStore = nil
		}
		h = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, opts)
	}
	s.http = httptest.NewServer(s.log.record(h, cfg.intercept))
	t.Cleanup(func() {
		for ss := range s.srv.Sessions() {
			ss.Close()
		}
		s.http.Close()
	})
	return s
}

func (s *sdkServer) count(ctx context.Context, req *sdk.CallToolRequest, in countArgs) (*sdk.CallToolResult, any, error) {
	s.calls.Add(1)
	for i := 1; i <= in.N; i++ {
		err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
			ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: float64(in.N),
			Message: fmt.Sprintf("step %d", i)})
		if err != nil && ctx.Err() != nil {
			return nil, nil, err
		}
	}
	if in.Fail {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "boom: bad input"}}}, nil, nil
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("counted %d", in.N)}}}, nil, nil
}

func (s *sdkServer) block(ctx context.Context, req *sdk.CallToolRequest, _ map[string]any) (*sdk.CallToolResult, any, error) {
	s.calls.Add(1)
	_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
		ProgressToken: req.Params.GetProgressToken(), Progress: 1, Message: "waiting"})
	<-ctx.Done()
	s.cancelled <- struct{}{}
	return nil, nil, ctx.Err()
}

func (s *sdkServer) spec(tool, args string) transport.Spec {
	return transport.Spec{StreamID: "s1", Endpoint: tool, Arguments: []byte(args), RetryAttempts: 8, HTTP: transport.HTTP{ServerURL: s.http.URL + "/mcp", Client: s.http.Client()}}
}

// cutter is a RoundTripper that cuts the response body of the first
// tools/call POST (or with onGET, of the first GET) after the given number
// of SSE events, as a dropped connection would.
type cutter struct {
	base  http.RoundTripper
	after int
	onGET bool
	used  atomic.Bool
}

func (c *cutter) RoundTrip(req *http.Request) (*http.Response, error) {
	isCall := false
	if req.Method == http.MethodPost && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
		isCall = bytes.Contains(body, []byte(`"tools/call"`))
	}
	if c.onGET {
		isCall = req.Method == http.MethodGet
	}
	resp, err := c.base.RoundTrip(req)
	if err != nil || !isCall || c.used.Swap(true) {
		return resp, err
	}
	resp.Body = &cutBody{rc: resp.Body, left: c.after}
	return resp, nil
}

type cutBody struct {
	rc     io.ReadCloser
	left   int
	prevNL bool
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := b.rc.Read(p)
	for i := 0; i < n; i++ {
		switch p[i] {
		case '\n':
			if b.prevNL {
				b.left--
				if b.left == 0 {
					return i + 1, nil
				}
			}
			b.prevNL = true
		case '\r':
		default:
			b.prevNL = false
		}
	}
	return n, err
}

func (b *cutBody) Close() error { return b.rc.Close() }
