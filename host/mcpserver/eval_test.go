package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestEvalValue(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	for _, tc := range []struct{ program, want string }{
		{`(+ 1 2)`, `3`},
		{`{:a [1 2 :x] :my.ns/k nil}`, `{"a":[1,2,"x"],"my.ns/k":null}`},
		{`(defn sq [x] (* x x)) (map sq [1 2 3])`, `[1,4,9]`},
		{`"text"`, `"text"`},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": tc.program}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError || text(t, res) != tc.want {
			t.Errorf("eval %s = %s (isError %v), want %s", tc.program, text(t, res), res.IsError, tc.want)
		}
	}
}

func TestEvalErrors(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	for _, tc := range []struct{ program, want string }{
		{"(defn f [x]\n  (count x))\n(f 5)", "eval.rtfs:2:"},
		{"(let [x 1]", "eval.rtfs:1:"},
		{"   ", "the program is empty"},
		{`(call :no.such.capability 1)`, "no.such.capability"},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": tc.program}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.Contains(text(t, res), tc.want) {
			t.Errorf("eval %q = %s (isError %v), want an error mentioning %q", tc.program, text(t, res), res.IsError, tc.want)
		}
	}
}

// TestEvalStartAwait: a program that starts a stream and awaits it; its
// outputs come as progress notifications, its value is the stream's result.
func TestEvalStartAwait(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	log := newProgressLog()
	cs := f.connect(ctx, log, nil)
	program := counterProgram + `
(let [h (call :mcp.stream.start {:endpoint "counter" :processor step :transport :mock
                                 :stream-id "ev1" :initial-state 0})]
  (call :mcp.stream.await {:stream-id (:stream-id h)}))`
	params := &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": program}}
	params.SetProgressToken(7)
	ch := callAsync(ctx, cs, params)
	f.feed(ctx, "ev1", append(values(3), end)...)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.res.IsError || text(t, r.res) != `{"total":4}` {
		t.Fatalf("eval = %s (isError %v)", text(t, r.res), r.res.IsError)
	}
	notes := log.waitFor(t, 4)
	for i, n := range notes {
		if n.Progress != float64(i+1) || fmt.Sprint(n.ProgressToken) != "7" {
			t.Errorf("notification %d: progress %v token %v", i, n.Progress, n.ProgressToken)
		}
	}
	if notes[0].Message != `{"n":1,"value":1}` || notes[3].Message != `{"total":4}` {
		t.Errorf("messages %q ... %q", notes[0].Message, notes[3].Message)
	}
	outs, ok := r.res.Meta[metaOutputs].([]any)
	if !ok || len(outs) != 4 {
		t.Errorf("_meta outputs = %v", r.res.Meta[metaOutputs])
	}
}

func TestEvalTimeout(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	program := counterProgram + `
(call :mcp.stream.start {:endpoint "counter" :processor step :transport :mock :stream-id "ev2" :initial-state 0})
(call :mcp.stream.await {:stream-id "ev2"})`
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": program, "timeout-ms": 40}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(t, res), "timed out after 40 ms") {
		t.Errorf("eval = %s (isError %v)", text(t, res), res.IsError)
	}
	if st, err := f.host.Provider().Status(ctx, "ev2"); err != nil || st.State != "cancelled" {
		t.Errorf("stream after the timeout: %+v %v", st, err)
	}
}

// TestEvalCancelled: cancelling an rtfs.eval call that is parked on
// :mcp.stream.await cancels the stream the program started.
func TestEvalCancelled(t *testing.T) {
	f := newFixture(t, Options{})
	log := newProgressLog()
	cs := f.connect(context.Background(), log, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	program := counterProgram + `
(call :mcp.stream.start {:endpoint "counter" :processor step :transport :mock :stream-id "ev3" :initial-state 0})
(call :mcp.stream.await {:stream-id "ev3"})`
	params := &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": program}}
	params.SetProgressToken("e")
	ch := callAsync(ctx, cs, params)
	f.feed(context.Background(), "ev3", values(1)...)
	log.waitFor(t, 1)
	f.cancelledEnds(t, cancel, ch, "ev3")
}
