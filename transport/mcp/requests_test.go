package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/transport"
)

// Server-to-client requests: the tools the test servers (go-sdk over
// Streamable HTTP, legacy SSE and stdio) share, and the tests that the
// client answers what they ask, on every transport.

type slowArgs struct {
	N       int `json:"n"`
	EveryMs int `json:"every_ms"`
}

// slowTool sends n progress notifications, one every every_ms, then a
// result: a call that outlives several KeepAlive pings.
func slowTool(ctx context.Context, req *sdk.CallToolRequest, in slowArgs) (*sdk.CallToolResult, any, error) {
	for i := 1; i <= in.N; i++ {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(time.Duration(in.EveryMs) * time.Millisecond):
		}
		if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
			Progress: float64(i), Total: float64(in.N)}); err != nil {
			return nil, nil, err
		}
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("slept %d times", in.N)}}}, nil, nil
}

// askTimeout bounds each request the ask tool sends: far longer than any
// test's context, so a request the client leaves unanswered fails the test
// through its context, never through this timeout.
const askTimeout = 5 * time.Minute

// askAnswers is what the ask tool reports, as the JSON text of its result.
type askAnswers struct {
	//lint:ignore SA1019 roots and sampling are deprecated from MCP 2026-07-28; the client answers them for the revisions before it
	Roots  []*sdk.Root `json:"roots"`
	Elicit askError    `json:"elicit"`
	Sample askError    `json:"sample"`
}

// askError is how one request failed: the JSON-RPC error the client sent
// (code and message), or, for a refusal by the server's own SDK, code 0.
type askError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

func askErrorOf(err error) askError {
	if err == nil {
		return askError{Message: "no error"}
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return askError{Code: we.Code, Message: we.Message}
	}
	return askError{Message: err.Error()}
}

// askTool asks the client for its roots, to elicit and to sample, during
// the call, and returns what each gave (askAnswers).
func askTool(ctx context.Context, req *sdk.CallToolRequest, _ map[string]any) (*sdk.CallToolResult, any, error) {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	var a askAnswers
	//lint:ignore SA1019 roots and sampling are deprecated from MCP 2026-07-28; the client answers them for the revisions before it
	roots, err := req.Session.ListRoots(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("roots/list: %w", err)
	}
	a.Roots = roots.Roots
	_, err = req.Session.Elicit(ctx, &sdk.ElicitParams{Message: "continue?",
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}})
	a.Elicit = askErrorOf(err)
	//lint:ignore SA1019 roots and sampling are deprecated from MCP 2026-07-28; the client answers them for the revisions before it
	msgs := []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: "hi"}}}
	//lint:ignore SA1019 roots and sampling are deprecated from MCP 2026-07-28; the client answers them for the revisions before it
	_, err = req.Session.CreateMessage(ctx, &sdk.CreateMessageParams{MaxTokens: 10, Messages: msgs})
	a.Sample = askErrorOf(err)
	b, _ := json.Marshal(a)
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}, nil, nil
}

// addRequestTools adds slow and ask to srv.
func addRequestTools(srv *sdk.Server) {
	sdk.AddTool(srv, &sdk.Tool{Name: "slow"}, slowTool)
	sdk.AddTool(srv, &sdk.Tool{Name: "ask"}, askTool)
}

// askResult decodes the ask tool's answers from the result chunk.
func askResult(t *testing.T, sink *recSink) askAnswers {
	t.Helper()
	last := sink.last()
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	var a askAnswers
	if last.Event != "result" || json.Unmarshal(last.Data, &res) != nil || len(res.Content) != 1 ||
		json.Unmarshal([]byte(res.Content[0].Text), &a) != nil {
		t.Fatalf("last chunk %q %s: want the ask tool's result", last.Event, last.Data)
	}
	return a
}

// checkAsked checks the ask tool's answers: the roots as configured, the
// elicitation refused by go-sdk itself, without asking, since the client
// declares no elicitation capability (the client's own refusal is checked
// on the wire by TestServerRequestsOnTheWire), and the sampling request
// refused by the client with -32601 and a message saying why.
func checkAsked(t *testing.T, a askAnswers, roots []Root) {
	t.Helper()
	var got []Root
	for _, r := range a.Roots {
		got = append(got, Root{URI: r.URI, Name: r.Name})
	}
	if !slices.Equal(got, roots) {
		t.Errorf("roots/list answered %+v, want %+v", got, roots)
	}
	if a.Elicit != (askError{Message: "client does not support elicitation"}) {
		t.Errorf("elicitation: %+v, want go-sdk's refusal for a client without the capability", a.Elicit)
	}
	if a.Sample.Code != codeMethodNotFound || !strings.Contains(a.Sample.Message, "sampling is not supported") {
		t.Errorf("sampling: %+v, want -32601 saying sampling is not supported", a.Sample)
	}
}

// runWithin runs a call to its end within a test context (30 s: far less
// than askTimeout, far more than any call here takes) and returns what it
// delivered; an error fails the test.
func runWithin(t *testing.T, tr transport.StreamTransport, spec transport.Spec) *recSink {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink := &recSink{}
	if err := tr.Run(ctx, spec, "", sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sink
}

// httpModes are the go-sdk HTTP servers the request tests run on: where a
// server request travels differs in each (the call's stream, the
// standalone stream, the legacy SSE stream).
var httpModes = []struct {
	name string
	cfg  sdkConfig
}{{"mcp SSE", sdkConfig{}}, {"mcp JSON", sdkConfig{json: true}}, {"mcp-sse", sdkConfig{legacy: true}}}

// testRoots are the roots the tests configure.
var testRoots = []Root{{URI: "file:///srv/data", Name: "data"}, {URI: "file:///tmp/x"}}

// TestServerRequestsAnswered: a go-sdk server that asks for roots, to
// elicit and to sample during a call gets its answers at once, over
// Streamable HTTP (SSE and JSON-response modes, where the requests come on
// the call's stream or the standalone one), legacy SSE and stdio. A request
// left unanswered would block the tool for askTimeout, far past the
// test's context.
func TestServerRequestsAnswered(t *testing.T) {
	run := func(t *testing.T, tr transport.StreamTransport, spec transport.Spec, roots []Root) {
		t.Helper()
		checkAsked(t, askResult(t, runWithin(t, tr, spec)), roots)
	}
	for _, mode := range httpModes {
		t.Run(mode.name, func(t *testing.T) {
			for _, roots := range [][]Root{nil, testRoots} {
				t.Run(fmt.Sprintf("%d roots", len(roots)), func(t *testing.T) {
					leakCheck(t)
					s := newSDKServer(t, mode.cfg)
					spec := s.spec("ask", "")
					var tr transport.StreamTransport = Streamable{policy: fastPolicy}
					spec.Config = &StreamableConfig{Roots: roots}
					if mode.cfg.legacy {
						tr = LegacySSE{policy: fastPolicy}
						spec.HTTP.ServerURL = s.http.URL + "/mcp-sse"
						spec.Config = &LegacyConfig{Roots: roots}
					}
					run(t, tr, spec, roots)
					if n := len(s.log.postsOf("")); n < 2 {
						t.Errorf("%d answers POSTed, want one for roots/list and one for sampling", n)
					}
				})
			}
		})
	}
	t.Run("stdio", func(t *testing.T) {
		rootsKey, _ := json.Marshal([]any{"file:///srv/data", map[string]string{"uri": "file:///tmp/x"}})
		run(t, new(Stdio), stdioSpec(t, "ask", "", nil, map[string]string{"roots": string(rootsKey)}),
			[]Root{{URI: "file:///srv/data"}, {URI: "file:///tmp/x"}})
	})
}

// TestKeepAliveAnswered: a go-sdk server with KeepAlive closes a session
// whose client misses two pings in a row; a call that outlives many pings
// completes over :mcp (both response modes), :mcp-sse and :stdio, because
// every ping is answered.
func TestKeepAliveAnswered(t *testing.T) {
	const keepAlive = 150 * time.Millisecond
	args := `{"n":15,"every_ms":100}` // 1.5 s: ten pings
	check := func(t *testing.T, tr transport.StreamTransport, spec transport.Spec) {
		t.Helper()
		sink := runWithin(t, tr, spec)
		if got := sink.progressValues(t); !slices.Equal(got, wantProgress(15)) || sink.last().Event != "result" {
			t.Fatalf("progress %v, last event %q", got, sink.last().Event)
		}
	}
	for _, mode := range httpModes {
		t.Run(mode.name, func(t *testing.T) {
			leakCheck(t)
			cfg := mode.cfg
			cfg.keepAlive = keepAlive
			s := newSDKServer(t, cfg)
			spec := s.spec("slow", args)
			var tr transport.StreamTransport = Streamable{policy: fastPolicy}
			if cfg.legacy {
				tr = LegacySSE{policy: fastPolicy}
				spec.HTTP.ServerURL = s.http.URL + "/mcp-sse"
			}
			check(t, tr, spec)
			pings := 0
			for _, p := range s.log.postsOf("") {
				var m rpcMessage
				if json.Unmarshal(p.body, &m) == nil && string(m.Result) == "{}" && m.Error == nil {
					pings++
				}
				if !mode.cfg.legacy && p.header.Get(headerSession) == "" {
					t.Errorf("an answer was POSTed without %s", headerSession)
				}
			}
			if pings < 3 {
				t.Errorf("%d pings answered during a call of ten KeepAlive intervals", pings)
			}
		})
	}
	t.Run("stdio", func(t *testing.T) {
		check(t, new(Stdio), stdioSpec(t, "slow", args, map[string]string{keepAliveEnv: keepAlive.String()}, nil))
	})
}

// TestServerRequestsOnTheWire: over Streamable HTTP every server request on
// the call's stream is answered by a POST to the endpoint carrying the
// session id: ping with {}, roots/list with the roots, elicitation,
// sampling and unknown methods with -32601 saying why.
func TestServerRequestsOnTheWire(t *testing.T) {
	leakCheck(t)
	f := newFakeServer(t, &fakeServer{version: version20251125, call: func(w http.ResponseWriter, tok string) {
		sseHeaders(w)
		for i, method := range []string{methodPing, methodRootsList, methodElicitation, methodSampling, "x/unknown"} {
			writeSSE(w, fmt.Sprintf("e%d", i), fmt.Sprintf(`{"jsonrpc":"2.0","id":"srv-%d","method":%q,"params":{}}`, i, method))
		}
		writeSSE(w, "r", resultMsg("done", false))
	}})
	spec := f.spec().build(func(s *specT) { s.Config = &StreamableConfig{Roots: testRoots[:1]} })
	if err := (Streamable{policy: fastPolicy}).Run(context.Background(), spec, "", &recSink{}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := map[string]string{}
	for _, p := range f.log.postsOf("") {
		if s := p.header.Get(headerSession); s != "sess-1" {
			t.Errorf("answer POSTed with session %q", s)
		}
		var m struct {
			ID     string          `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *rpcError       `json:"error"`
		}
		if err := json.Unmarshal(p.body, &m); err != nil {
			t.Fatalf("answer %s: %v", p.body, err)
		}
		if m.Error != nil {
			got[m.ID] = fmt.Sprintf("%d %s", m.Error.Code, m.Error.Message)
		} else {
			got[m.ID] = string(m.Result)
		}
	}
	want := map[string]string{
		"srv-0": `{}`,
		"srv-1": `{"roots":[{"uri":"file:///srv/data","name":"data"}]}`,
		"srv-2": "-32601 elicitation is not supported",
		"srv-3": "-32601 sampling is not supported",
		"srv-4": `-32601 method not found: this client does not offer "x/unknown"`,
	}
	for id, w := range want {
		if !strings.HasPrefix(got[id], w) {
			t.Errorf("answer to %s = %q, want %q...", id, got[id], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("answers %v", got)
	}
	var init struct {
		Params struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		} `json:"params"`
	}
	if posts := f.log.postsOf(methodInitialize); len(posts) != 1 || json.Unmarshal(posts[0].body, &init) != nil ||
		string(init.Params.Capabilities["roots"]) != "{}" || len(init.Params.Capabilities) != 1 {
		t.Errorf("initialize declares %v, want roots only", init.Params.Capabilities)
	}
}

// TestRootsKey: :roots takes file:// URIs or {uri, name} maps, on all
// three transports; anything else is an error naming the entry.
func TestRootsKey(t *testing.T) {
	good := `["file:///a", {"uri": "file:///b", "name": "b"}]`
	want := []Root{{URI: "file:///a"}, {URI: "file:///b", Name: "b"}}
	for _, k := range []transport.Kind{StreamableKind(), LegacyKind(), StdioKind()} {
		keys := map[string]json.RawMessage{"roots": json.RawMessage(good), "command": json.RawMessage(`"x"`)}
		cfg, err := k.Configure(keys)
		if err != nil {
			t.Fatalf("%s: %v", k.Name, err)
		}
		var got []Root
		switch c := cfg.(type) {
		case *StreamableConfig:
			got = c.Roots
		case *LegacyConfig:
			got = c.Roots
		case *StdioConfig:
			got = c.Roots
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: roots %+v", k.Name, got)
		}
	}
	for raw, msg := range map[string]string{
		`"file:///a"`:            ":roots: want a vector",
		`["http://x/"]`:          `entry 0: "http://x/" is not a file:// URI`,
		`["file:///a", 3]`:       "entry 1: want a file:// URI or a map",
		`[{"name": "no uri"}]`:   `entry 0: "" is not a file:// URI`,
		`[{"uri": ["file:"]}]`:   "entry 0: want a file:// URI or a map",
		`["file:///ok", "/tmp"]`: `entry 1: "/tmp" is not a file:// URI`,
	} {
		_, err := StreamableKind().Configure(map[string]json.RawMessage{"roots": json.RawMessage(raw)})
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf(":roots %s: err = %v, want %q", raw, err, msg)
		}
	}
}
