package localserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressLog collects the progress notifications a client receives.
type progressLog struct {
	mu    sync.Mutex
	got   []*mcp.ProgressNotificationParams
	first chan struct{} // closed on the first notification
	added chan struct{} // signalled after each notification
}

func newProgressLog() *progressLog {
	return &progressLog{first: make(chan struct{}), added: make(chan struct{}, 1)}
}

func (l *progressLog) handle(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.got) == 0 {
		close(l.first)
	}
	l.got = append(l.got, r.Params)
	select {
	case l.added <- struct{}{}:
	default:
	}
}

// waitFor returns the notifications once there are at least n. go-sdk's
// client hands notifications to the handler asynchronously, so they may
// arrive after CallTool has returned.
func (l *progressLog) waitFor(t *testing.T, n int) []*mcp.ProgressNotificationParams {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		if got := l.snapshot(); len(got) >= n {
			return got
		}
		select {
		case <-l.added:
		case <-timeout:
			t.Fatalf("got %d progress notifications, want %d", len(l.snapshot()), n)
		}
	}
}

func (l *progressLog) snapshot() []*mcp.ProgressNotificationParams {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), l.got...)
}

type transportKind int

const (
	streamable transportKind = iota
	legacySSE
)

func (k transportKind) String() string { return [...]string{"streamable", "legacy-sse"}[k] }

// connect opens an MCP client session on the server's /mcp (streamable) or
// /mcp-sse (legacy) route, with query appended to the endpoint URL. It is
// closed when the test ends, before the server.
func connect(t testing.TB, s *Server, c *http.Client, kind transportKind, query string, log *progressLog) *mcp.ClientSession {
	t.Helper()
	var tr mcp.Transport
	switch kind {
	case streamable:
		tr = &mcp.StreamableClientTransport{Endpoint: s.URL() + "/mcp" + query, HTTPClient: c}
	case legacySSE:
		tr = &mcp.SSEClientTransport{Endpoint: s.URL() + "/mcp-sse" + query, HTTPClient: c}
	}
	return connectTransport(t, tr, log)
}

// connectTransport opens an MCP client session over tr, closed when the test
// ends.
func connectTransport(t testing.TB, tr mcp.Transport, log *progressLog) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "localserver-test", Version: "1"},
		&mcp.ClientOptions{ProgressNotificationHandler: log.handle})
	cs, err := client.Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callParams(tool, token string, args map[string]any) *mcp.CallToolParams {
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if token != "" {
		p.SetProgressToken(token)
	}
	return p
}

func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d contents, want 1: %+v", len(res.Content), res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("result content is %T, want text", res.Content[0])
	}
	return tc.Text
}

// checkProgress asserts that got are the chunks 1..n of endpoint, in order.
func checkProgress(t *testing.T, got []*mcp.ProgressNotificationParams, endpoint, token string, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("got %d progress notifications, want %d", len(got), n)
	}
	for i, p := range got {
		seq := i + 1
		if p.ProgressToken != token || p.Progress != float64(seq) || p.Total != float64(n) {
			t.Fatalf("notification %d: token %v progress %v total %v, want %s %d %d", i, p.ProgressToken, p.Progress, p.Total, token, seq, n)
		}
		if e := decodeEnvelope(t, p.Message); e.Endpoint != endpoint || e.Seq != seq {
			t.Fatalf("notification %d: message %s", i, p.Message)
		}
	}
}

func TestMCPToolsStreamProgress(t *testing.T) {
	for _, kind := range []transportKind{streamable, legacySSE} {
		t.Run(kind.String(), func(t *testing.T) {
			s, c := startServer(t, Options{})
			log := newProgressLog()
			cs := connect(t, s, c, kind, "", log)
			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			if strings.Join(names, " ") != "counter.v1 docs.search.v1 news.digest.v1 weather.monitor.v1" {
				t.Fatalf("tools: %v", names)
			}
			res, err := cs.CallTool(context.Background(),
				callParams("weather.monitor.v1", "tok-1", map[string]any{"limit": 7, "interval_ms": 0}))
			if err != nil {
				t.Fatal(err)
			}
			var sum summary
			if err := json.Unmarshal([]byte(resultText(t, res)), &sum); err != nil || res.IsError ||
				sum != (summary{Endpoint: "weather.monitor.v1", Status: "complete", ChunksSent: 7}) {
				t.Fatalf("result %+v (%v), summary %+v", res, err, sum)
			}
			checkProgress(t, log.waitFor(t, 7), "weather.monitor.v1", "tok-1", 7)
		})
	}
}

// TestMCPMessagesMatchSSE checks that a tool's progress messages are the
// same chunk data as the raw SSE events.
func TestMCPMessagesMatchSSE(t *testing.T) {
	s, c := startServer(t, Options{})
	log := newProgressLog()
	cs := connect(t, s, c, streamable, "", log)
	if _, err := cs.CallTool(context.Background(), callParams("counter.v1", "t", map[string]any{"limit": "4", "size": 3})); err != nil {
		t.Fatal(err)
	}
	evs, err := stream(t, c, s.URL()+"/sse/counter.v1?limit=4&size=3")
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range log.waitFor(t, 4) {
		if p.Message != evs[i].data {
			t.Fatalf("chunk %d: MCP message %s, SSE data %s", i+1, p.Message, evs[i].data)
		}
	}
}

func TestMCPWithoutProgressToken(t *testing.T) {
	s, c := startServer(t, Options{})
	log := newProgressLog()
	cs := connect(t, s, c, streamable, "", log)
	res, err := cs.CallTool(context.Background(), callParams("news.digest.v1", "", map[string]any{"interval_ms": 0}))
	if err != nil || res.IsError || !strings.Contains(resultText(t, res), `"chunks_sent":3`) {
		t.Fatalf("result %+v, %v", res, err)
	}
	if n := len(log.snapshot()); n != 0 {
		t.Fatalf("%d progress notifications without a progress token", n)
	}
}

func TestMCPToolFaults(t *testing.T) {
	s, c := startServer(t, Options{})
	log := newProgressLog()
	cs := connect(t, s, c, streamable, "", log)
	args := map[string]any{"limit": 2, "interval_ms": 0, "fail": 500, "fail_times": 1}
	res, err := cs.CallTool(context.Background(), callParams("docs.search.v1", "a", args))
	if err != nil || !res.IsError || resultText(t, res) != "localserver: injected failure fail=500 on tool docs.search.v1" {
		t.Fatalf("first call: %+v, %v; want an isError result", res, err)
	}
	res, err = cs.CallTool(context.Background(), callParams("docs.search.v1", "b", args))
	if err != nil || res.IsError {
		t.Fatalf("second call: %+v, %v; want success once fail_times is spent", res, err)
	}
	checkProgress(t, log.waitFor(t, 2), "docs.search.v1", "b", 2)

	log2 := newProgressLog()
	cs2 := connect(t, s, c, streamable, "", log2)
	if _, err := cs2.CallTool(context.Background(), callParams("counter.v1", "c", map[string]any{"limit": 2, "oversized": 100000})); err != nil {
		t.Fatal(err)
	}
	got := log2.waitFor(t, 2)
	if len(got) != 2 || len(got[0].Message) != 100000 || len(got[1].Message) > 200 {
		t.Fatalf("oversized: %d notifications, first %d bytes", len(got), len(got[0].Message))
	}
}

func TestMCPBadArguments(t *testing.T) {
	s, c := startServer(t, Options{})
	cs := connect(t, s, c, streamable, "", newProgressLog())
	_, err := cs.CallTool(context.Background(), callParams("counter.v1", "t", map[string]any{"limit": "lots"}))
	if err == nil || !strings.Contains(err.Error(), `tool counter.v1: arguments: parameter limit="lots": not an integer`) {
		t.Fatalf("bad limit: %v", err)
	}
	_, err = cs.CallTool(context.Background(), callParams("nope.v1", "t", nil))
	if err == nil || !strings.Contains(err.Error(), "nope.v1") {
		t.Fatalf("unknown tool: %v", err)
	}
}

// TestMCPCancelReachesTool cancels a call after its first chunk and checks
// that the tool handler's context was cancelled.
func TestMCPCancelReachesTool(t *testing.T) {
	for _, kind := range []transportKind{streamable, legacySSE} {
		t.Run(kind.String(), func(t *testing.T) {
			returned := make(chan error, 1)
			s, c := startServer(t, Options{OnToolReturn: func(tool string, err error) {
				if tool == "counter.v1" {
					returned <- err
				}
			}})
			log := newProgressLog()
			cs := connect(t, s, c, kind, "", log)
			ctx, cancel := context.WithCancel(context.Background())
			callErr := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, callParams("counter.v1", "tok", map[string]any{"limit": 1000000, "interval_ms": 20}))
				callErr <- err
			}()
			<-log.first
			cancel()
			if err := <-callErr; !errors.Is(err, context.Canceled) {
				t.Fatalf("CallTool after cancel: %v", err)
			}
			if err := <-returned; !errors.Is(err, context.Canceled) {
				t.Fatalf("tool returned %v, want context.Canceled", err)
			}
			if st := s.Stats(); st.ToolCalls != 1 || st.ToolsCancelled != 1 || st.ToolsCompleted != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestMCPResumeAfterDrop drops the tools/call response stream after two
// progress events; go-sdk's client resumes it with GET and Last-Event-ID
// from the event store, so every chunk arrives once, in order.
func TestMCPResumeAfterDrop(t *testing.T) {
	s, c := startServer(t, Options{})
	log := newProgressLog()
	cs := connect(t, s, c, streamable, "?drop_after=2&drop_times=1", log)
	res, err := cs.CallTool(context.Background(), callParams("weather.monitor.v1", "r", map[string]any{"limit": 6, "interval_ms": 0}))
	if err != nil || res.IsError {
		t.Fatalf("call across a drop: %+v, %v", res, err)
	}
	checkProgress(t, log.waitFor(t, 6), "weather.monitor.v1", "r", 6)
	if got := s.Stats().Drops; got != 1 {
		t.Fatalf("Stats().Drops = %d, want 1", got)
	}
}

func TestMCPRouteFaults(t *testing.T) {
	s, c := startServer(t, Options{})
	code, body := status(t, c, s.URL()+"/mcp?drop_after=0")
	if code != http.StatusBadRequest || !strings.Contains(body, "drop_after=0") {
		t.Fatalf("drop_after=0: %d %q", code, body)
	}
	code, body = status(t, c, s.URL()+"/mcp-sse?fail=401")
	if code != http.StatusUnauthorized || !strings.Contains(body, "injected failure fail=401 on /mcp-sse") {
		t.Fatalf("fail=401: %d %q", code, body)
	}
	tr := &mcp.StreamableClientTransport{Endpoint: s.URL() + "/mcp?fail=500", HTTPClient: c, MaxRetries: -1}
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	if cs, err := client.Connect(context.Background(), tr, nil); err == nil {
		cs.Close()
		t.Fatal("connect succeeded through fail=500")
	}
	if got := s.Stats().InjectedFailures; got < 2 {
		t.Fatalf("Stats().InjectedFailures = %d, want the 401 and at least one 500", got)
	}
}

// TestCloseWithLiveMCPSession closes the server while a tool call is
// running; Close must return and leave no goroutine behind (TestMain checks).
func TestCloseWithLiveMCPSession(t *testing.T) {
	for _, kind := range []transportKind{streamable, legacySSE} {
		t.Run(kind.String(), func(t *testing.T) {
			returned := make(chan error, 1)
			s := New(Options{OnToolReturn: func(_ string, err error) { returned <- err }})
			if err := s.Start("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			c := &http.Client{Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			log := newProgressLog()
			var tr mcp.Transport = &mcp.SSEClientTransport{Endpoint: s.URL() + "/mcp-sse", HTTPClient: c}
			if kind == streamable {
				// No client retries: they would only slow the test down.
				tr = &mcp.StreamableClientTransport{Endpoint: s.URL() + "/mcp", HTTPClient: c, MaxRetries: -1}
			}
			cs := connectTransport(t, tr, log)
			callErr := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(context.Background(), callParams("counter.v1", "x", map[string]any{"limit": 1000000, "interval_ms": 50}))
				callErr <- err
			}()
			<-log.first
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := <-returned; err == nil {
				t.Fatal("tool completed although the server closed")
			}
			if err := <-callErr; err == nil {
				t.Fatal("CallTool succeeded although the server closed")
			}
		})
	}
}

// TestMCPStall checks that a stall from the tool's arguments holds the call
// after stall_after chunks until it is cancelled, and that stall_times lets
// the next identical call through.
func TestMCPStall(t *testing.T) {
	returned := make(chan error, 2)
	s, c := startServer(t, Options{OnToolReturn: func(_ string, err error) { returned <- err }})
	args := map[string]any{"limit": 3, "interval_ms": 0, "stall_ms": 600000, "stall_after": 1, "stall_times": 1}
	log := newProgressLog()
	cs := connect(t, s, c, streamable, "", log)
	ctx, cancel := context.WithCancel(context.Background())
	callErr := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, callParams("counter.v1", "s1", args))
		callErr <- err
	}()
	<-log.first
	select {
	case err := <-returned:
		t.Fatalf("tool returned %v during a 10-minute stall", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if err := <-callErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("stalled call: %v", err)
	}
	if err := <-returned; !errors.Is(err, context.Canceled) {
		t.Fatalf("stalled tool returned %v", err)
	}
	if n := len(log.snapshot()); n != 1 {
		t.Fatalf("%d notifications before the stall, want 1", n)
	}
	log2 := newProgressLog()
	cs2 := connect(t, s, c, streamable, "", log2)
	if _, err := cs2.CallTool(context.Background(), callParams("counter.v1", "s2", args)); err != nil {
		t.Fatalf("second call: %v", err)
	}
	checkProgress(t, log2.waitFor(t, 3), "counter.v1", "s2", 3)
}

// TestMCPLegacyDrop drops the legacy transport's event stream; the session
// cannot resume, so the pending call fails instead of hanging.
func TestMCPLegacyDrop(t *testing.T) {
	s, c := startServer(t, Options{})
	log := newProgressLog()
	cs := connect(t, s, c, legacySSE, "?drop_after=2", log)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, callParams("counter.v1", "d", map[string]any{"limit": 5, "interval_ms": 1}))
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call over a dropped legacy stream: %v, want a connection error", err)
	}
	if got := s.Stats().Drops; got != 1 {
		t.Fatalf("Stats().Drops = %d, want 1", got)
	}
	if n := len(log.snapshot()); n > 2 {
		t.Fatalf("%d notifications arrived through a stream dropped after 2", n)
	}
}
