package mcpserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/host/observe"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// observedFixture is a fixture whose host and server report to an
// Observer with an in-memory span recorder, and which serves /metrics as a
// Route.
func observedFixture(t *testing.T, token string) (*fixture, *observe.Observer, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs, err := observe.New(observe.Options{Tracer: tp, SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, mock: &mock.Transport{}}
	f.host, err = host.New(host.Options{
		Streams: provider.Options{Transports: transport.NewCatalog(mock.Kind(f.mock)), Observer: obs},
		Stdout:  io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := obs.Attach(f.host.Provider()); err != nil {
		t.Fatal(err)
	}
	f.srv, err = New(Options{Host: f.host, Observer: obs, Token: token,
		Routes: []Route{{Pattern: "/metrics", Handler: obs.Handler()}}})
	if err != nil {
		f.host.Close()
		t.Fatal(err)
	}
	f.ts = httptest.NewServer(checkerFor(t).wrap(f.srv.Handler()))
	t.Cleanup(func() {
		f.srv.Close()
		f.ts.Close()
		f.host.Close()
	})
	return f, obs, rec
}

// TestToolCallSpanAndMetrics calls mcp.stream.start with a traceparent in
// _meta: the call's span continues the caller's trace and carries the MCP
// attributes (the JSON-RPC id included), the stream's span is its child,
// and the calls are counted by tool and outcome.
func TestToolCallSpanAndMetrics(t *testing.T) {
	f, _, rec := observedFixture(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cs := f.connect(ctx, nil, nil)
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	go func() {
		src := f.mock.Source("traced")
		for _, c := range []string{`{"value":1}`, `{"kind":"end"}`} {
			if err := src.Send(ctx, transport.Chunk{Data: []byte(c)}); err != nil {
				return
			}
		}
	}()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name: ToolStart,
		Arguments: map[string]any{"program": counterProgram, "processor": "step", "endpoint": "traced.v1",
			"transport": "mock", "stream-id": "traced", "initial-state": 0},
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + parentID + "-01"},
	})
	if err != nil || res.IsError {
		t.Fatalf("mcp.stream.start: %v %+v", err, res)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolStatus, Arguments: map[string]any{"stream-id": "nope"}}); err != nil {
		t.Fatal(err)
	}
	// Under the client's revision (2026-07-28) a refused argument is a
	// tool execution error; the call is counted invalid all the same.
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolStatus, Arguments: map[string]any{}}); err != nil || !res.IsError {
		t.Fatalf("a call without its required argument: %+v, %v; want an isError result", res, err)
	}

	var call, stream sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "tools/call " + ToolStart:
			call = s
		case "rtfshost.stream traced.v1":
			stream = s
		}
	}
	if call == nil || stream == nil {
		t.Fatalf("spans missing: call %v, stream %v", call != nil, stream != nil)
	}
	if call.SpanContext().TraceID().String() != traceID || call.Parent().SpanID().String() != parentID {
		t.Errorf("call span: trace %s parent %s, want %s %s", call.SpanContext().TraceID(), call.Parent().SpanID(), traceID, parentID)
	}
	attrs := map[attribute.Key]string{}
	for _, kv := range call.Attributes() {
		attrs[kv.Key] = kv.Value.String()
	}
	if attrs["mcp.method.name"] != "tools/call" || attrs["gen_ai.tool.name"] != ToolStart ||
		attrs["mcp.session.id"] != cs.ID() || attrs["jsonrpc.request.id"] == "" {
		t.Errorf("call span attributes %v", attrs)
	}
	if stream.Parent().SpanID() != call.SpanContext().SpanID() {
		t.Error("the stream's span is not the tool call's child")
	}

	metrics := get(t, f.ts.URL+"/metrics", nil)
	for _, want := range []string{
		`rtfshost_mcp_calls_total{outcome="ok",tool="mcp.stream.start"} 1`,
		`rtfshost_mcp_calls_total{outcome="error",tool="mcp.stream.status"} 1`,
		`rtfshost_mcp_calls_total{outcome="invalid",tool="mcp.stream.status"} 1`,
		`rtfshost_chunks_processed_total{endpoint="traced.v1",transport="mock"} 2`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestRoutesAreGuarded checks that a Route is behind the token, the Origin
// check and the Host check (DNS rebinding), and that a Public one skips
// the token only.
func TestRoutesAreGuarded(t *testing.T) {
	const token = "0123456789abcdef0123"
	f, _, _ := observedFixture(t, token)
	for _, c := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"no token", nil, http.StatusUnauthorized},
		{"token", map[string]string{"Authorization": "Bearer " + token}, http.StatusOK},
		{"foreign origin", map[string]string{"Authorization": "Bearer " + token, "Origin": "http://evil.example"}, http.StatusForbidden},
		{"rebound host", map[string]string{"Authorization": "Bearer " + token, "Host": "evil.example"}, http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodGet, f.ts.URL+"/metrics", nil)
		for k, v := range c.header {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
	h := Guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }), token, nil)
	ts := httptest.NewServer(h)
	defer ts.Close()
	resp, err := http.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("Guard without the token: %d", resp.StatusCode)
	}
}

func get(t *testing.T, url string, header map[string]string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}
