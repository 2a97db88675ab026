package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rtfshost/rtfshost/provider"
)

func TestToolsList(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" {
			t.Errorf("tool %s has no description", tool.Name)
		}
		schema, ok := tool.InputSchema.(map[string]any)
		if !ok || schema["type"] != "object" {
			t.Errorf("tool %s: input schema %v is not an object schema", tool.Name, tool.InputSchema)
			continue
		}
		if schema["additionalProperties"] != false {
			t.Errorf("tool %s: schema admits unknown arguments", tool.Name)
		}
	}
	sort.Strings(names)
	want := []string{ToolCancel, ToolInspect, ToolPause, ToolResume, ToolStart, ToolStatus, ToolEval, ToolRemove, ToolUpgrade, ToolDeadLetters}
	sort.Strings(want)
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}
	for _, tool := range res.Tools {
		if tool.Name != ToolStart {
			continue
		}
		req := tool.InputSchema.(map[string]any)["required"]
		if fmt.Sprint(req) != "[program processor]" {
			t.Errorf("mcp.stream.start requires %v", req)
		}
		// The initial-state argument takes any JSON value, and its
		// schema says so (a form-building client then sends 0 as a
		// number).
		props := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
		if typ := fmt.Sprint(props["initial-state"].(map[string]any)["type"]); !strings.Contains(typ, "number") || !strings.Contains(typ, "object") {
			t.Errorf("initial-state's schema type is %s", typ)
		}
	}
}

// TestStartProgressAndResult starts a stream with a progress token: every
// output arrives as a notification, in order, with a rising progress, and
// the call ends with the buffered result.
func TestStartProgressAndResult(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	log := newProgressLog()
	cs := f.connect(ctx, log, nil)
	params := &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("s1")}
	params.SetProgressToken("tok-1")
	ch := callAsync(ctx, cs, params)
	f.feed(ctx, "s1", append(values(5), end)...)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.res.IsError {
		t.Fatalf("isError: %s", text(t, r.res))
	}
	got := decode(t, r.res)
	if got["state"] != "completed" || got["stream-id"] != "s1" || got["end-reason"] != "processor" {
		t.Errorf("result = %v", got)
	}
	if fmt.Sprint(got["result"]) != "map[total:6]" {
		t.Errorf("result.result = %v, want {total 6}", got["result"])
	}
	outs, _ := got["outputs"].([]any)
	if len(outs) != 6 || got["output-count"] != 6.0 {
		t.Fatalf("outputs = %v (count %v), want 6", outs, got["output-count"])
	}
	notes := log.waitFor(t, 6)
	if len(notes) != 6 {
		t.Fatalf("got %d notifications, want 6", len(notes))
	}
	for i, n := range notes {
		if n.ProgressToken != "tok-1" {
			t.Errorf("notification %d: token %v", i, n.ProgressToken)
		}
		if n.Progress != float64(i+1) {
			t.Errorf("notification %d: progress %v, want %d", i, n.Progress, i+1)
		}
		want := fmt.Sprintf(`{"n":%d,"value":%d}`, i+1, i+1)
		if i == 5 {
			want = `{"total":6}`
		}
		if n.Message != want {
			t.Errorf("notification %d: message %s, want %s", i, n.Message, want)
		}
		if n.Meta[metaStream] != "s1" {
			t.Errorf("notification %d: _meta %v", i, n.Meta)
		}
		outJSON, _ := json.Marshal(outs[i])
		if string(outJSON) != n.Message {
			t.Errorf("output %d in the result %s differs from its notification %s", i, outJSON, n.Message)
		}
	}
}

// TestStartWithoutToken gets the single buffered result and no notification.
func TestStartWithoutToken(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	log := newProgressLog()
	cs := f.connect(ctx, log, nil)
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("quiet")})
	f.feed(ctx, "quiet", append(values(3), end)...)
	r := await(t, ch)
	if r.err != nil || r.res.IsError {
		t.Fatalf("err %v, result %+v", r.err, r.res)
	}
	if got := decode(t, r.res); got["output-count"] != 4.0 || got["progress-notifications"] != 0.0 {
		t.Errorf("result = %v", got)
	}
	if n := len(log.snapshot()); n != 0 {
		t.Errorf("%d notifications without a progress token", n)
	}
}

func TestStartProcessorErrorIsError(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	args := startArgs("bad")
	args["on-error"] = map[string]any{"then": "end"} // the stream ends in error instead of being held
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: ToolStart, Arguments: args})
	f.feed(ctx, "bad", map[string]any{"value": 1}, map[string]any{"kind": "boom"})
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.res.IsError {
		t.Fatalf("isError not set: %s", text(t, r.res))
	}
	got := decode(t, r.res)
	msg, _ := got["message"].(string)
	if got["state"] != "error" || !strings.Contains(msg, "boom at chunk") || !strings.Contains(msg, "mcp-stream.rtfs:") {
		t.Errorf("result = %v; want state error and the processor's message with its position", got)
	}
	if outs := got["outputs"].([]any); len(outs) != 1 {
		t.Errorf("outputs = %v, want the one before the error", outs)
	}
}

// A processor that throws holds its stream as failed; the tools show the
// failure (status, inspect), mcp.stream.resume with skip sets the chunk
// aside, mcp.stream.dead-letters lists it, and the stream goes on to its
// end, which the waiting start call then returns.
func TestFailedStreamRepairedByTools(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("held")})
	f.feed(ctx, "held", map[string]any{"value": 1}, map[string]any{"kind": "boom", "value": 2}, map[string]any{"value": 3})
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %s", tool, err, text(t, res))
		}
		return decode(t, res)
	}
	var st map[string]any
	waitFor(t, "the stream to fail", func() bool {
		st = call(ToolStatus, map[string]any{"stream-id": "held"})
		return st["state"] == "failed"
	})
	fl, _ := st["failure"].(map[string]any)
	if fl["kind"] != "processor" || fl["seq"] != 2.0 || !strings.Contains(fmt.Sprint(fl["error"]), "boom at chunk") {
		t.Fatalf("status %v", st)
	}
	in := call(ToolInspect, map[string]any{"stream-id": "held"})
	if in["failure"].(map[string]any)["seq"] != 2.0 || in["dead-letters"].(map[string]any)["count"] != 0.0 {
		t.Fatalf("inspect failure %v dead-letters %v", in["failure"], in["dead-letters"])
	}
	if st := call(ToolResume, map[string]any{"stream-id": "held", "skip": true}); st["state"] != "active" {
		t.Fatalf("resume skip: %v", st)
	}
	dl := call(ToolDeadLetters, map[string]any{"stream-id": "held"})
	list, _ := dl["dead-letters"].([]any)
	if dl["count"] != 1.0 || len(list) != 1 || list[0].(map[string]any)["seq"] != 2.0 ||
		list[0].(map[string]any)["chunk"].(map[string]any)["value"] != 2.0 {
		t.Fatalf("dead letters %v", dl)
	}
	f.feed(ctx, "held", end)
	r := await(t, ch)
	if r.err != nil || r.res.IsError {
		t.Fatalf("start: %v %s", r.err, text(t, r.res))
	}
	if got := decode(t, r.res); got["state"] != "completed" || fmt.Sprint(got["result"]) != "map[total:3]" {
		t.Fatalf("result %v: want the chunks but the skipped one", got)
	}
}

func TestStartProgramErrors(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	for _, tc := range []struct {
		name    string
		program string
		proc    string
		want    []string
	}{
		{"compile", "(defn step [s c m]\n  (let [x 1] x)", "step", []string{"mcp-stream.rtfs:"}},
		{"runtime", "(defn step [s c m] s)\n(+ 1 \"a\")", "step", []string{"mcp-stream.rtfs:2:", "+"}},
		{"undefined processor", "(defn step [s c m] s)", "nope", []string{"processor", "nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := startArgs("never")
			args["program"], args["processor"] = tc.program, tc.proc
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolStart, Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError {
				t.Fatalf("isError not set: %s", text(t, res))
			}
			for _, w := range tc.want {
				if !strings.Contains(text(t, res), w) {
					t.Errorf("message %q does not mention %q", text(t, res), w)
				}
			}
		})
	}
	if ids := f.host.Provider().StreamIDs(); len(ids) != 0 {
		t.Errorf("failed starts left streams %v", ids)
	}
}

func TestStartTimeout(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	args := startArgs("slow")
	args["timeout-ms"] = 30
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolStart, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	got := decode(t, res)
	if !res.IsError || got["state"] != "cancelled" || !strings.Contains(fmt.Sprint(got["error"]), "timed out after 30 ms") {
		t.Errorf("isError %v, result %v", res.IsError, got)
	}
	st, err := f.host.Provider().Status(ctx, "slow")
	if err != nil || st.State != provider.StateCancelled {
		t.Errorf("stream status %+v, %v; want cancelled", st, err)
	}
}

// TestInvalidParams: an unknown tool and arguments that are not an object
// are JSON-RPC errors -32602 in every revision. Arguments that the tool's
// input refuses are -32602 naming the argument up to 2025-06-18, and from
// 2025-11-25 on a tool execution error (isError, with the same text) that
// a model can act on.
func TestInvalidParams(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	missing := startArgs("x")
	delete(missing, "processor")
	wrongType := startArgs("x")
	wrongType["queue-capacity"] = "big"
	unknown := startArgs("x")
	unknown["colour"] = "red"
	badEnum := startArgs("x")
	badEnum["transport"] = "carrier-pigeon"
	cases := []struct {
		name     string
		tool     string
		args     any
		want     string
		protocol bool // a protocol error in every revision
	}{
		{"unknown tool", "mcp.stream.explode", map[string]any{}, `unknown tool "mcp.stream.explode"`, true},
		{"missing", ToolStart, missing, `argument "processor": missing required argument`, false},
		{"type", ToolStart, wrongType, `argument "queue-capacity": expected an integer, got string`, false},
		{"unknown argument", ToolStart, unknown, `argument "colour": unknown argument`, false},
		{"enum", ToolStart, badEnum, `"carrier-pigeon" is not one of mock`, false},
		{"status without id", ToolStatus, map[string]any{}, `tool "mcp.stream.status": argument "stream-id": missing`, false},
		{"not an object", ToolEval, []int{1}, `arguments must be a JSON object, got array`, true},
		{"negative timeout", ToolEval, map[string]any{"program": "1", "timeout-ms": -5}, `must be at least 0, got -5`, false},
	}
	for _, version := range []string{"2025-06-18", "2025-11-25", ""} {
		cs := connectVersion(ctx, t, &mcp.StreamableClientTransport{Endpoint: f.ts.URL + PathStreamable}, nil, version)
		for _, tc := range cases {
			t.Run(version+"/"+tc.name, func(t *testing.T) {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
				if tc.protocol || version == "2025-06-18" {
					var je *jsonrpc.Error
					if !errors.As(err, &je) {
						t.Fatalf("error %v (%T), result %+v; want a JSON-RPC error", err, err, res)
					}
					if je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(je.Message, tc.want) {
						t.Errorf("error %d %q, want -32602 mentioning %q", je.Code, je.Message, tc.want)
					}
					return
				}
				if err != nil || res == nil || !res.IsError || len(res.Content) != 1 {
					t.Fatalf("result %+v, error %v; want an isError result", res, err)
				}
				if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, tc.want) {
					t.Errorf("isError text %q, want it to mention %q", text, tc.want)
				}
			})
		}
	}
}

func TestInspectStatusCancel(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	args := startArgs("ins")
	args["detach"] = true
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolStart, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("start: %v %+v", err, res)
	}
	if h := decode(t, res); h["stream-id"] != "ins" || h["status"] != "active" {
		t.Fatalf("handle = %v", h)
	}
	f.feed(ctx, "ins", values(2)...)
	// The mock hands a chunk over before the processor ran; a third send
	// returns only once the second is in the queue, and the status call
	// below observes the processed chunks through inspect.
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tool, err, res)
		}
		return decode(t, res)
	}
	one := call(ToolInspect, map[string]any{"stream-id": "ins", "include-queue": false})
	if one["stream-id"] != "ins" || one["processor"] != "step" || one["endpoint"] != "counter" {
		t.Errorf("inspect = %v", one)
	}
	if _, ok := one["queue"]; ok {
		t.Error("include-queue false left the queue in")
	}
	if _, ok := one["current-state"]; !ok {
		t.Error("inspect has no current-state")
	}
	sum := call(ToolInspect, map[string]any{})
	if sum["total"] != 1.0 || len(sum["streams"].([]any)) != 1 {
		t.Errorf("summary = %v", sum)
	}
	if st := call(ToolStatus, map[string]any{"stream-id": "ins"}); st["state"] != "active" {
		t.Errorf("status = %v", st)
	}
	if st := call(ToolPause, map[string]any{"stream-id": "ins"}); st["state"] != "paused" {
		t.Errorf("pause = %v", st)
	}
	if st := call(ToolResume, map[string]any{"stream-id": "ins"}); st["state"] != "active" {
		t.Errorf("resume = %v", st)
	}
	if st := call(ToolCancel, map[string]any{"stream-id": "ins"}); st["state"] != "cancelled" || st["end-reason"] != "request" {
		t.Errorf("cancel = %v", st)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolStatus, Arguments: map[string]any{"stream-id": "ghost"}})
	if err != nil || !res.IsError || !strings.Contains(text(t, res), `"ghost"`) {
		t.Errorf("status of an unknown stream: %v %+v", err, res)
	}
}

// TestDuplicateStreamID: a second call that starts a stream with the id of
// a running one fails, and the first call still gets its stream's end.
func TestDuplicateStreamID(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	first := callAsync(ctx, cs, &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("dup")})
	f.feed(ctx, "dup", values(1)...) // returns once the stream runs
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("dup")})
	if err != nil || !res.IsError || !strings.Contains(text(t, res), `"dup"`) {
		t.Fatalf("second start: %v %+v", err, res)
	}
	f.feed(ctx, "dup", end)
	r := await(t, first)
	if r.err != nil || r.res.IsError {
		t.Fatalf("first call: %v %+v", r.err, r.res)
	}
	if got := decode(t, r.res); got["output-count"] != 2.0 {
		t.Errorf("first call's result = %v", got)
	}
}

// TestOutputBound: beyond MaxBufferedOutputs the result counts the outputs
// it leaves out; the count of outputs stays whole.
func TestOutputBound(t *testing.T) {
	f := newFixture(t, Options{MaxBufferedOutputs: 2})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("bound")})
	f.feed(ctx, "bound", append(values(3), end)...)
	r := await(t, ch)
	if r.err != nil || r.res.IsError {
		t.Fatalf("call: %v %+v", r.err, r.res)
	}
	got := decode(t, r.res)
	if len(got["outputs"].([]any)) != 2 || got["output-count"] != 4.0 || got["outputs-truncated"] != 2.0 {
		t.Errorf("result = %v", got)
	}
}

// TestRemove: mcp.stream.remove forgets an ended stream, so that its id can
// be used again; an unfinished one needs force.
func TestRemove(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	start := func() *mcp.CallToolResult {
		ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("rm-1")})
		f.feed(ctx, "rm-1", end)
		return await(t, ch).res
	}
	if res := start(); res.IsError {
		t.Fatalf("first start: %s", text(t, res))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolRemove, Arguments: map[string]any{"stream-id": "rm-1"}})
	if err != nil || res.IsError || !strings.Contains(text(t, res), `"removed":true`) {
		t.Fatalf("remove: %v %+v", err, res)
	}
	if _, err := f.host.Provider().Status(ctx, "rm-1"); err == nil {
		t.Error("the removed stream is still known")
	}
	if res := start(); res.IsError {
		t.Fatalf("the id could not be used again: %s", text(t, res))
	}
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolRemove, Arguments: map[string]any{"stream-id": "nope"}})
	if !res.IsError {
		t.Error("removing an unknown stream succeeded")
	}
}

// TestToolScopes: every tool names the OAuth scope it needs, and it
// agrees with its annotations: a tool that only reads needs ScopeRead,
// every other ScopeWrite (the zero value, so a new tool that says nothing
// cannot be called with a token that may only read).
func TestToolScopes(t *testing.T) {
	f := newFixture(t, Options{})
	if len(f.srv.tools) == 0 {
		t.Fatal("no tools")
	}
	for _, tool := range f.srv.tools {
		want := ScopeWrite
		if tool.readOnly {
			want = ScopeRead
		}
		if got := tool.scope.name(); got != want {
			t.Errorf("%s needs %s; its readOnly annotation (%v) says %s", tool.name, got, tool.readOnly, want)
		}
	}
	if (toolSpec{}).scope.name() != ScopeWrite {
		t.Error("a tool spec that names no scope does not need ScopeWrite")
	}
}
