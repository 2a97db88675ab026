package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(tallied{m})
}

// tallied runs the tests, then, with -v, prints what the schema check
// validated (schema_test.go).
type tallied struct{ m *testing.M }

func (t tallied) Run() int {
	code := t.m.Run()
	if testing.Verbose() {
		printSchemaTally(os.Stdout)
	}
	return code
}

// hangGuard bounds every wait of a test, so that a bug fails the test
// instead of hanging it; no test relies on it for timing.
const hangGuard = 20 * time.Second

// counterProgram's processor counts chunks; a chunk {"kind": "end"}
// completes the stream with the count, and {"kind": "boom"} throws.
const counterProgram = `
(defn step [state chunk meta]
  (let [n (+ state 1)]
    (cond
      (= (:kind chunk) "end")  {:state n :action :complete :output {:total n}}
      (= (:kind chunk) "boom") (throw "boom at chunk")
      :else                    {:state n :output {:n n :value (:value chunk)}})))
`

// fixture is a host on the mock transport, a Server on it, and an
// in-process HTTP server on 127.0.0.1 serving it.
type fixture struct {
	t    *testing.T
	mock *mock.Transport
	host *host.Host
	srv  *Server
	ts   *httptest.Server
	// stdout is the host's Stdout: what programs print that no call routes
	// to its client.
	stdout *lockedBuffer
	closed sync.Once
}

// shutDown closes the fixture as serve closes when it is told to stop:
// the MCP server, its HTTP server, then the host (which, in a cluster,
// hands its streams over). The test's cleanup calls it too.
func (f *fixture) shutDown() {
	f.closed.Do(func() {
		f.srv.Close()
		f.ts.Close()
		f.host.Close()
	})
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	return newFixtureStore(t, opts, nil)
}

// newFixtureStore is newFixture with the host's store (nil: none); the
// caller closes the store after the fixture.
func newFixtureStore(t *testing.T, opts Options, store persistence.Store) *fixture {
	t.Helper()
	return newFixtureOpen(t, opts, func(ho host.Options) (*host.Host, error) {
		ho.Store = store
		return host.New(ho)
	})
}

// newFixtureOpen is newFixture with the host made by open from the
// fixture's host options (its mock transport and stdout).
func newFixtureOpen(t *testing.T, opts Options, open func(host.Options) (*host.Host, error)) *fixture {
	t.Helper()
	// Every message the server sends is checked against the schemas of
	// its revision (schema_test.go), once the server is closed.
	return buildFixture(t, opts, open, checkerFor(t).wrap)
}

// buildFixture is newFixtureOpen with the server's handler wrapped by wrap:
// the schema check for a test, nothing for a benchmark, which measures the
// server alone.
func buildFixture(t *testing.T, opts Options, open func(host.Options) (*host.Host, error), wrap func(http.Handler) http.Handler) *fixture {
	t.Helper()
	f := &fixture{t: t, mock: &mock.Transport{}, stdout: &lockedBuffer{}}
	h, err := open(host.Options{
		Streams: provider.Options{Transports: transport.NewCatalog(mock.Kind(f.mock))},
		Stdout:  f.stdout,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.host = h
	opts.Host = h
	if opts.Delivery == nil && opts.ProgressInterval == 0 {
		// The protocol's tests see one notification per output, at once;
		// those of delivery set their policy.
		opts.Delivery = &everyOutput
	}
	f.srv, err = New(opts)
	if err != nil {
		h.Close()
		t.Fatal(err)
	}
	f.ts = httptest.NewServer(wrap(f.srv.Handler()))
	t.Cleanup(f.shutDown)
	return f
}

// everyOutput is the delivery policy of one notification per output, at
// once.
var everyOutput = provider.Delivery{Normal: provider.Throttle{Interval: 0, MaxBatch: 1}, Low: provider.Throttle{Interval: 0, MaxBatch: 1}}

// progressLog records the progress notifications a client receives.
type progressLog struct {
	mu   sync.Mutex
	list []*mcp.ProgressNotificationParams
	wake chan struct{}
}

func newProgressLog() *progressLog { return &progressLog{wake: make(chan struct{}, 1)} }

func (p *progressLog) handler(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	p.list = append(p.list, req.Params)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *progressLog) snapshot() []*mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), p.list...)
}

// waitFor waits until at least n notifications have arrived.
func (p *progressLog) waitFor(t *testing.T, n int) []*mcp.ProgressNotificationParams {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		if l := p.snapshot(); len(l) >= n {
			return l
		}
		select {
		case <-p.wake:
		case <-deadline:
			t.Fatalf("got %d progress notifications, want %d", len(p.snapshot()), n)
		}
	}
}

// connect connects a go-sdk client to the fixture's Streamable HTTP endpoint.
func (f *fixture) connect(ctx context.Context, log *progressLog, hc *http.Client) *mcp.ClientSession {
	f.t.Helper()
	return connectTo(ctx, f.t, &mcp.StreamableClientTransport{Endpoint: f.ts.URL + PathStreamable, HTTPClient: hc}, log)
}

// connectSession connects a client of revision 2025-11-25, which has
// sessions (go-sdk's default client speaks 2026-07-28, which has none).
func (f *fixture) connectSession(ctx context.Context, log *progressLog, hc *http.Client) *mcp.ClientSession {
	f.t.Helper()
	return connectVersion(ctx, f.t, &mcp.StreamableClientTransport{Endpoint: f.ts.URL + PathStreamable, HTTPClient: hc}, log, "2025-11-25")
}

func connectTo(ctx context.Context, t *testing.T, tr mcp.Transport, log *progressLog) *mcp.ClientSession {
	t.Helper()
	return connectVersion(ctx, t, tr, log, "")
}

// connectVersion connects a go-sdk client that asks for protocol revision
// version ("": go-sdk's newest).
func connectVersion(ctx context.Context, t *testing.T, tr mcp.Transport, log *progressLog, version string) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if log != nil {
		opts.ProgressNotificationHandler = log.handler
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts)
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { closeWithin(t, cs) })
	return cs
}

// closeWithin closes cs, or reports that it did not close within the hang
// guard: a call still in flight (a test that failed before its stream
// ended) keeps the session open until the server ends the call, which the
// fixture's own cleanup, run after this one, does.
func closeWithin(t *testing.T, cs *mcp.ClientSession) {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		cs.Close()
	}()
	select {
	case <-closed:
	case <-time.After(hangGuard):
		t.Errorf("the client session did not close within %v: a call is still in flight", hangGuard)
	}
}

// callAsync calls a tool on its own goroutine; the result arrives on the
// returned channel.
func callAsync(ctx context.Context, cs *mcp.ClientSession, params *mcp.CallToolParams) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, params)
		ch <- callResult{res, err}
	}()
	return ch
}

type callResult struct {
	res *mcp.CallToolResult
	err error
}

func await(t *testing.T, ch <-chan callResult) callResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(hangGuard):
		t.Fatal("the tool call did not return")
	}
	return callResult{}
}

// text returns the one text block of a result.
func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d content blocks, want 1: %+v", len(res.Content), res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

// decode decodes the text of res as JSON into a generic value.
func decode(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(text(t, res)), &m); err != nil {
		t.Fatalf("result text is not a JSON object: %v\n%s", err, text(t, res))
	}
	return m
}

// feed sends chunks to the mock source of stream id. A chunk the stream
// does not take within the hang guard fails the test.
func (f *fixture) feed(ctx context.Context, id string, chunks ...any) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, hangGuard)
	defer cancel()
	src := f.mock.Source(id)
	for _, c := range chunks {
		if err := src.SendJSON(ctx, "", c); err != nil {
			f.t.Errorf("feed %s: %v", id, err)
			return
		}
	}
}

// values returns chunks {"value": i} for i in 1..n.
func values(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"value": i + 1}
	}
	return out
}

var end = map[string]any{"kind": "end"}

// startParams returns the arguments of an mcp.stream.start of counterProgram
// on the mock stream id.
func startArgs(id string) map[string]any {
	return map[string]any{
		"program": counterProgram, "processor": "step", "endpoint": "counter",
		"transport": "mock", "stream-id": id, "initial-state": 0,
	}
}

// rawPost posts a JSON-RPC message with the given headers and returns the
// response and its body.
func rawPost(t *testing.T, url string, body string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// withToken is an http.Client that sends a bearer token.
func withToken(token string) *http.Client {
	return &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// cancelledEnds cancels a call in flight (cancel sends
// notifications/cancelled), checks that the call failed and that stream id
// ended cancelled by the request, and returns that status.
func (f *fixture) cancelledEnds(t *testing.T, cancel context.CancelFunc, ch <-chan callResult, id string) {
	t.Helper()
	cancel()
	if r := await(t, ch); r.err == nil {
		t.Fatalf("cancelled call returned %+v", r.res)
	}
	done, err := f.host.Provider().Done(id)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatal("the stream did not end after notifications/cancelled")
	}
	st, _ := f.host.Provider().Status(t.Context(), id)
	if st.State != provider.StateCancelled || st.EndReason != "request" {
		t.Errorf("stream status %+v, want cancelled by request", st)
	}
}
