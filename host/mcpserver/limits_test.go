package mcpserver

import (
	"context"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// The budgets of docs/security.md as an MCP client meets them: rtfs.eval of a
// program that burns CPU or memory ends in a limit error within the server's
// budgets, and the server's heap is back down afterwards.
func TestEvalBudgets(t *testing.T) {
	f := newFixture(t, Options{Limits: rtfs.Limits{MaxMemory: 256 << 20, MaxDuration: 10 * time.Second}})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	for _, tc := range []struct{ name, program, want string }{
		{"sort in a loop", `(loop [i 0 acc 0] (if (< i 200) (recur (inc i) (+ acc (count (sort (vec (range 1000000)))))) acc))`, "steps limit"},
		{"into doubling", `(count (reduce (fn [v _] (into v v)) [1] (range 24)))`, "limit of"},
		{"four large vectors", `(let [a (vec (range 16000000)) b (vec (range 16000000)) c (vec (range 16000000)) d (vec (range 16000000))] (count d))`, "limit of"},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": tc.program}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := text(t, res); !res.IsError || !strings.Contains(got, tc.want) {
			t.Errorf("%s: isError %v, text %q; want an error with %q", tc.name, res.IsError, got, tc.want)
		}
	}
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if h := s[0].Value.Uint64(); h > 300<<20 {
		t.Errorf("heap after the refused programs: %d MiB, want under 300 MiB", h>>20)
	}
}

func TestEvalTimeLimit(t *testing.T) {
	f := newFixture(t, Options{Limits: rtfs.Limits{MaxSteps: 1 << 60, MaxDuration: 100 * time.Millisecond}})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": `(loop [i 0] (recur (inc i)))`}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); !res.IsError || !strings.Contains(got, "time limit of 100ms exceeded") {
		t.Errorf("endless loop: isError %v, %q", res.IsError, got)
	}
}

func TestCallsPerSessionCap(t *testing.T) {
	f := newFixture(t, Options{MaxCallsPerSession: 1})
	ctx := context.Background()
	cs := f.connectSession(ctx, nil, nil)
	program := counterProgram + `
(call :mcp.stream.start {:endpoint "counter" :processor step :transport :mock :stream-id "cap1" :initial-state 0})
(call :mcp.stream.await {:stream-id "cap1"})`
	first := callAsync(ctx, cs, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": program}})
	deadline := time.Now().Add(hangGuard)
	for {
		if _, err := f.host.Provider().Status(ctx, "cap1"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first call never started its stream")
		}
		time.Sleep(time.Millisecond)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": "(+ 1 2)"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); !res.IsError || !strings.Contains(got, "1 tool calls in flight") {
		t.Errorf("second call while the first runs: isError %v, %q", res.IsError, got)
	}
	// Another session has a count of its own.
	other := f.connectSession(ctx, nil, nil)
	if res, err := other.CallTool(ctx, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": "(+ 1 2)"}}); err != nil || res.IsError {
		t.Errorf("another session's call: %v %+v", err, res)
	}
	f.feed(ctx, "cap1", end)
	if r := await(t, first); r.err != nil || r.res.IsError {
		t.Fatalf("first call: %v %+v", r.err, r.res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": "(+ 1 2)"}})
	if err != nil || res.IsError || text(t, res) != "3" {
		t.Errorf("a call after the first ended: %v %+v", err, res)
	}
}

// An rtfs.eval of a value JSON cannot hold answers JSON anyway: NaN is null
// and a function its printed form, in place.
func TestEvalValuesJSONCannotHold(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	cs := f.connect(ctx, nil, nil)
	for program, want := range map[string]string{
		"##NaN":                          "null",
		"(defn f [] 1) f":                `"#<fn f>"`,
		"{:avg (/ 0.0 0) :n 2 :s \"<\"}": `{"avg":null,"n":2,"s":"<"}`,
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": program}})
		if err != nil {
			t.Fatal(err)
		}
		if got := text(t, res); res.IsError || got != want {
			t.Errorf("rtfs.eval %s = %s (isError %v), want %s", program, got, res.IsError, want)
		}
	}
}

// The JSON of a value that shares structure is written in full. rtfs.eval of
// this program answered 175 MB under a 1 MiB memory budget; its result is now
// an error that names the limit.
const sharedProgram = `(let [a (vec (range 100)) b (vec (repeat 300 a))] (vec (repeat 1000 b)))`

func TestEvalResultWithinTheOutputLimit(t *testing.T) {
	for _, tc := range []struct {
		limits rtfs.Limits
		src    string
		want   string
	}{
		{rtfs.Limits{MaxMemory: 1 << 20}, sharedProgram, "output limit of 1048576 bytes exceeded"},
		{rtfs.Limits{MaxOutput: 16 << 20}, sharedProgram, "output limit of 16777216 bytes exceeded"},
		{rtfs.Limits{MaxOutput: 64 << 10}, `(vec (range 100000))`, "output limit of 65536 bytes exceeded"},
	} {
		f := newFixture(t, Options{Limits: tc.limits})
		ctx := context.Background()
		cs := f.connect(ctx, nil, nil)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": tc.src}})
		if err != nil {
			t.Fatal(err)
		}
		got := text(t, res)
		if !res.IsError || !strings.Contains(got, tc.want) || !strings.Contains(got, "too large to send") || len(got) > 1024 {
			t.Errorf("%+v: isError %v, %d bytes: %.300q; want an error naming %q", tc.limits, res.IsError, len(got), got, tc.want)
		}
	}
	// A value within the limit is sent whole.
	f := newFixture(t, Options{Limits: rtfs.Limits{MaxOutput: 64 << 10}})
	cs := f.connect(context.Background(), nil, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": `(vec (range 1000))`}})
	if err != nil || res.IsError || len(text(t, res)) != 3891 {
		t.Errorf("a 3891-byte value: %v, isError %v, %d bytes", err, res.IsError, len(text(t, res)))
	}
}

func TestStreamOutputWithinTheOutputLimit(t *testing.T) {
	// A processor whose second output shares structure past the limit: the
	// stream ends in :error naming the limit, keeps the state of its first
	// chunk, and the client never receives the output.
	limits := rtfs.Limits{MaxOutput: 64 << 10}
	f := newFixtureOpen(t, Options{Limits: limits}, func(ho host.Options) (*host.Host, error) {
		ho.Streams.Limits = limits
		return host.New(ho)
	})
	ctx := context.Background()
	log := newProgressLog()
	cs := f.connect(ctx, log, nil)
	program := `
(defn step [state chunk]
  (if (= (:value chunk) 2)
    {:state (+ state 100) :output (let [a (vec (range 100)) b (vec (repeat 300 a))] (vec (repeat 1000 b)))}
    {:state (+ state 1) :output {:n (:value chunk)}}))
(call :mcp.stream.start {:endpoint "big" :processor step :transport :mock :stream-id "big1" :initial-state 0 :on-error {:then :end}})
(call :mcp.stream.await {:stream-id "big1"})`
	params := &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": program}}
	params.SetProgressToken(1)
	ch := callAsync(ctx, cs, params)
	f.feed(ctx, "big1", values(2)...)
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	st, err := f.host.Provider().Status(ctx, "big1")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != provider.StateError || !strings.Contains(st.Message, "output limit of 65536 bytes exceeded") || !strings.Contains(st.Message, "too large to send") {
		t.Fatalf("stream: %s %q; want :error naming the limit", st.State, st.Message)
	}
	in, err := f.host.Provider().Info("big1", provider.InspectOptions{})
	if err != nil || in.CurrentState == nil || in.CurrentState.V != rtfs.Int(1) {
		t.Fatalf("state after the refused output: %v (%v), want the first chunk's 1", in.CurrentState, err)
	}
	for _, n := range log.snapshot() {
		if len(n.Message) > 1024 {
			t.Fatalf("a %d-byte notification reached the client", len(n.Message))
		}
	}
	if len(text(t, r.res)) > 4096 {
		t.Fatalf("the call's result is %d bytes", len(text(t, r.res)))
	}
}
