package lint

import (
	"context"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/capabilities"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startCalls is a registry with a start call shaped like the provider's:
// :processor required, a few optional keys, nothing else allowed.
func startCalls(t *testing.T) *capabilities.Registry {
	t.Helper()
	reg := capabilities.NewRegistry()
	err := reg.Register(capabilities.Capability{
		ID: "mcp.stream.start",
		Input: &capabilities.Schema{Type: "map", Keys: []capabilities.Key{
			{Name: "endpoint", Type: "string"},
			{Name: "processor", Type: "fn|symbol|string", Required: true},
			{Name: "initial-state", Type: "any"},
		}},
		Handler: func(context.Context, *capabilities.Call) (capabilities.Answer, error) {
			return capabilities.Answer{}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestCheckFindsWhatARunWould: each source holds one mistake a run stops
// on; Check reports it at its line and column with the message given.
func TestCheckFindsWhatARunWould(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // "line:col: message fragment"
	}{
		{"arity of a defined function", "(defn add [a b] (+ a b))\n(add 1)",
			[]string{"2:2: add: expected 2 arguments, got 1 (defined at line 1)"}},
		{"arity on a path not taken", "(defn add [a b] (+ a b))\n(if false (add 1 2 3) 0)",
			[]string{"2:12: add: expected 2 arguments, got 3"}},
		{"arity through ->", "(defn add [a b] (+ a b))\n(-> 1 (add 2) (add 3 4))",
			[]string{"2:16: add: expected 2 arguments, got 3"}},
		{"arity through ->> with a bare step", "(defn add [a b] (+ a b))\n(->> 1 add)",
			[]string{"2:8: add: expected 2 arguments, got 1"}},
		{"several arities", "(defn f ([a] a) ([a b & more] b))\n(f)",
			[]string{"2:2: f: expected 1 or at least 2 arguments, got 0"}},
		{"variadic", "(defn f [a & more] a)\n(f)", []string{"2:2: f: expected at least 1 argument, got 0"}},
		{"def of a fn", "(def f (fn [a] a))\n(f 1 2)", []string{"2:2: f: expected 1 argument, got 2"}},
		{"typed parameters", "(defn f [a :int b :[:vector :int]] a)\n(f 1)", []string{"2:2: f: expected 2 arguments, got 1"}},
		{"every undefined symbol", "(defn f [] (foo 1))\n(if true 1 (bar))",
			[]string{"1:13: undefined symbol foo", "2:13: undefined symbol bar"}},
		{"start without :processor", `(call :mcp.stream.start {:endpoint "x"})`,
			[]string{"1:25: capability :mcp.stream.start: key :processor: required fn or symbol or string is missing"}},
		{"start with an unknown key", "(defn p [s c] {:state s})\n(call :mcp.stream.start {:processor p :initial_state {}})",
			[]string{"2:39: capability :mcp.stream.start: unknown key :initial_state (did you mean :initial-state?)"}},
		{"processor of one parameter", "(defn p [s] {:state s})\n(call :mcp.stream.start {:processor p})",
			[]string{"2:37: processor p takes 1 argument; a processor takes 2 or 3"}},
		{"processor of four parameters, anonymous", "(call :mcp.stream.start {:processor (fn [a b c d] a)})",
			[]string{"1:37: the anonymous processor takes 4 arguments"}},
		{"processor named by a string the file does not define", `(call :mcp.stream.start {:processor "agg"})`,
			[]string{`1:37: processor: no function named "agg" is defined in t.rtfs`}},
		{"processor named by a quoted symbol", "(defn p [s c m] {:state s})\n(call :mcp.stream.start {:processor 'q})",
			[]string{`2:38: processor: no function named "q" is defined`}},
		{"unknown host call", "(call :mcp.stream.strat {})",
			[]string{"1:7: unknown host call :mcp.stream.strat (did you mean :mcp.stream.start?)"}},
		{"syntax error", "(defn f [", []string{"1:9: unterminated vector"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probs := Check("t.rtfs", []byte(tc.src), startCalls(t))
			if len(probs) != len(tc.want) {
				t.Fatalf("got %d problems %v, want %d %q", len(probs), probs, len(tc.want), tc.want)
			}
			for i, p := range probs {
				if !strings.HasPrefix(p.Error(), "t.rtfs:"+tc.want[i][:strings.Index(tc.want[i], ": ")]) ||
					!strings.Contains(p.Error(), tc.want[i][strings.Index(tc.want[i], ": ")+2:]) {
					t.Errorf("problem %d: %s, want %s", i, p.Error(), tc.want[i])
				}
			}
		})
	}
}

// TestCheckLeavesCorrectProgramsAlone: what a run accepts, Check accepts,
// including calls a local binding shadows and processors given by name.
func TestCheckLeavesCorrectProgramsAlone(t *testing.T) {
	for _, src := range []string{
		"(defn add [a b] (+ a b))\n(let [add (fn [x] x)] (add 1))",
		"(defn add [a b] (+ a b))\n(defn g [add] (add 1))",
		"(defn add [a b] (+ a b))\n(cond-> 1 true (add 2))",
		"(defn add [a b] (+ a b))\n(as-> 1 x (add x 2))",
		"(defn add [a b] (+ a b))\n'(add 1)",
		"(defn add [a b] (+ a b))\n(map add [1] [2])",
		"(defn p [s c] {:state s})\n(call :mcp.stream.start {:processor p :endpoint \"x\"})",
		"(defn p [s c m] {:state s})\n(call :mcp.stream.start {:processor \"p\"})",
		"(defn p [s c m] {:state s})\n(defn start [f] (call :mcp.stream.start {:processor f}))\n(start p)",
		"(defn p [s c m] {:state s})\n(call :mcp.stream.start (merge {:processor p} {:bogus 1}))",
		"(defn f ([a] a) ([a b] b))\n(f 1) (f 1 2)",
	} {
		if probs := Check("t.rtfs", []byte(src), startCalls(t)); len(probs) != 0 {
			t.Errorf("%s: %v", src, probs)
		}
	}
}

// TestCheckTestFiles: a test file compiles with its test forms expanded,
// so deftest and is are no undefined symbols, and what is undefined is.
func TestCheckTestFiles(t *testing.T) {
	if probs := Check("../testrunner/testdata/pass_test.rtfs", mustRead(t, "../testrunner/testdata/pass_test.rtfs"), nil); len(probs) != 0 {
		t.Errorf("pass_test.rtfs: %v", probs)
	}
	probs := Check("x_test.rtfs", []byte("(deftest a (is (= 1 (nope))))\n(deftest b (is (zilch)))"), nil)
	if len(probs) != 2 || probs[0].Msg != "undefined symbol nope" || probs[1].Msg != "undefined symbol zilch" {
		t.Errorf("%v", probs)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
