package syntax

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readTestdata parses every testdata/*.rtfs file.
func readTestdata(t testing.TB) map[string][]Node {
	t.Helper()
	files, err := filepath.Glob("testdata/*.rtfs")
	if err != nil || len(files) < 10 {
		t.Fatalf("testdata files: %v %v", files, err)
	}
	out := map[string][]Node{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		nodes, err := Parse(filepath.Base(f), src)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(nodes) == 0 {
			t.Fatalf("%s: no forms", f)
		}
		out[filepath.Base(f)] = nodes
	}
	return out
}

// TestStreamingFilesReadAndRoundTrip reads the streaming programs of
// testdata (processors, start and inspect calls) and the grammar samples,
// and checks that every form prints back to source that reads to an equal
// form.
func TestStreamingFilesReadAndRoundTrip(t *testing.T) {
	for name, nodes := range readTestdata(t) {
		for _, n := range nodes {
			back, err := Parse("back.rtfs", []byte(n.String()))
			if err != nil || len(back) != 1 || !equalNode(n, back[0]) {
				t.Errorf("%s: %s does not read back (%v)", name, n, err)
			}
		}
	}
}

// find returns the first form in n (pre-order) for which f is true.
func find(n Node, f func(Node) bool) Node {
	if f(n) {
		return n
	}
	for _, c := range children(n) {
		if r := find(c, f); r != nil {
			return r
		}
	}
	return nil
}

// TestStreamingProcessorShapes: the reader keeps what matters of the
// streaming programs' forms.
func TestStreamingProcessorShapes(t *testing.T) {
	all := readTestdata(t)
	// A processor's signature: (defn name [state chunk metadata] :[ :map {... :action :[ :enum ...] ...} ] body)
	defn := all["stream_processor_signature.rtfs"][0].(*List)
	if len(defn.Elems) != 5 || defn.Elems[0].String() != "defn" || defn.Elems[2].String() != "[state chunk metadata]" {
		t.Fatalf("the processor's defn = %s", defn)
	}
	ret, ok := defn.Elems[3].(*TypeExpr)
	if !ok {
		t.Fatalf("the processor's return type is %T", defn.Elems[3])
	}
	want := ":[:map {:state :any :action :[:enum :continue :pause :resume :cancel :complete] :output :any :config :[:map {:buffer_size :int :timeout_ms :int}]}]"
	if ret.String() != want {
		t.Errorf("the processor's return type = %s\nwant %s", ret, want)
	}
	if p := ret.Pos(); p.Line != 3 || p.Col != 3 || p.Filename() != "stream_processor_signature.rtfs" {
		t.Errorf("the processor's return type at %v, want 3:3", p)
	}
	// A start call may quote the processor's name.
	q := find(all["stream_initiation.rtfs"][0], func(n Node) bool {
		l, ok := n.(*List)
		return ok && len(l.Elems) == 2 && l.Elems[0].String() == "quote"
	})
	if q == nil || q.String() != "(quote process-weather-chunks)" {
		t.Errorf("the quoted processor = %v", q)
	}
	// The resilient processor catches with (catch Exception e ...).
	c := find(all["stream_resilient_processor.rtfs"][0], func(n Node) bool {
		l, ok := n.(*List)
		return ok && len(l.Elems) > 2 && l.Elems[0].String() == "catch"
	})
	if c == nil || !strings.HasPrefix(c.String(), "(catch Exception e (let [error-count") {
		t.Errorf("the resilient processor's catch = %v", c)
	}
	// The weather aggregator is a defn and a def.
	ex := all["stream_weather_aggregator.rtfs"]
	if len(ex) != 2 || ex[0].(*List).Elems[1].String() != "weather-aggregator" || ex[1].(*List).Elems[1].String() != "weather-stream" {
		t.Errorf("the weather aggregator's forms = %v", ex)
	}
	// The backpressure processor's cond has three clauses.
	cond := find(all["stream_backpressure_processor.rtfs"][0], func(n Node) bool {
		l, ok := n.(*List)
		return ok && len(l.Elems) > 0 && l.Elems[0].String() == "cond"
	})
	if cond == nil || len(cond.(*List).Elems) != 7 {
		t.Errorf("the backpressure processor's cond = %v", cond)
	}
}

func TestGrammarSamples(t *testing.T) {
	nodes := readTestdata(t)["grammar_forms.rtfs"]
	var got []string
	for _, n := range nodes {
		got = append(got, n.String())
	}
	joined := strings.Join(got, "\n")
	for _, want := range []string{
		"(def x :int 42)",
		`(def ^{:doc "a counter"} counter 0)`,
		"(defn ^{:private true} add [a :int b :int & more :int] :int (apply + a b more))",
		"(fn [s c m] :[:map {:state :any :action :keyword}] {:state s :action :continue})",
		"(let [x :foo] x)",
		"(defn versioned [] (com.acme:v1.0/fn :com.acme:v1.0/kw :my.ns/foo a.b/c))",
		"(map (fn [%1] (+ %1 1)) [1 2 3])",
		"(reduce (fn [%1 %2] (+ %1 %2)) 0 (quote (1 2 3)))",
		"(apply (fn [& %&] (count %&)) 1 2 [3])",
		"(deref (deref box))",
		"(quasiquote (a (unquote b) (unquote-splicing c)))",
		`#{1 2 :three "four"}`,
		`[1.5 1000.0 -0.0025 7 0 ##Inf ##-Inf ##NaN "tab\tnewline\nquote\"backslash\\unicodeé"]`,
		"(λ [x] x)",
		`(defn ^{:delegation :local-model :delegation-target "phi-3"} summarize [text :string] :string text)`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("grammar_forms.rtfs lacks %s; read:\n%s", want, joined)
		}
	}
}
