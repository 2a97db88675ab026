package rtfs

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// The builtins of the Clojure idioms (lazy sequences, sorted collections,
// regexes, clojure.set) pay through charge.go like the others: called
// straight on large values, each stops at a small step budget, and with the
// steps unbounded each notices a 1 ms time limit itself (it looks at the
// clock as it walks). testdata/clj_budget.rtfs has the same from RTFS.

// bigCljArgs returns, for each builtin, arguments whose work is far beyond
// a million steps.
func bigCljArgs() map[string][]Value {
	xs := make([]Value, 300_000)
	for i := range xs {
		xs[i] = Int(i)
	}
	ys := make([]Value, len(xs))
	for i := range ys {
		ys[i] = Int(i + len(xs)/2)
	}
	a, b := NewSet(xs...), NewSet(ys...)
	text := String(strings.Repeat("ab cd ", 1_000_000))
	re, _ := NewRegex(`\w+`)
	sep, _ := NewRegex(`[ ]`)
	return map[string][]Value{
		"clojure.set/union":        {a, b},
		"clojure.set/intersection": {a, b},
		"clojure.set/difference":   {a, b},
		"clojure.set/subset?":      {a, NewSet(append(xs[:len(xs):len(xs)], Int(-1))...)},
		"sorted-set":               xs[:30_000],
		"sorted-map":               pairsOf(xs[:30_000]),
		"re-seq":                   {re, text},
		"clojure.string/split":     {text, sep},
		"clojure.string/replace":   {text, re, String("x")},
		"take":                     {Int(100_000_000), newRange(Int(0), Int(1))},
		"doall":                    {lazyRun(slices.Repeat([]Value{Int(7)}, 3_000_000), Nil)},
		"clojure.string/escape":    {text, MapOf(String("a"), String("&a;"), String(" "), String("_"))},
		"print-str":                {NewVector(xs...)},
		"prn-str":                  {NewVector(xs...)},
		"upper-case":               {text},
		".toUpperCase":             {text},
		".indexOf":                 {text, String("zz")},
		".length":                  {text},
	}
}

func TestBudgetCljBuiltinsStopAtTheStepLimit(t *testing.T) {
	p := mustCompile(t, `nil`)
	g := mustRun(t, NewThread(Limits{}), p).Globals
	for name, args := range bigCljArgs() {
		th := NewThread(Limits{MaxSteps: 100_000, MaxMemory: -1})
		start := time.Now()
		_, err := th.Call(context.Background(), g, lookupBuiltin(name), args...)
		if le := wantLimit(t, err, LimitSteps); le.Max != 100_000 {
			t.Errorf("%s: max %d", name, le.Max)
		}
		t.Logf("%s: stopped after %v", name, time.Since(start))
	}
	// The lazy sequences that RTFS functions compute: the prelude's steps.
	for _, src := range []string{
		`(count (take 100000000 (iterate inc 0)))`,
		`(count (take 100000000 (map inc (range))))`,
		`(first (drop 100000000 (iterate inc 0)))`,
		`(count (take 100000000 (partition 2 1 (range))))`,
		`(count (take 100000000 (partition-all 3 (range))))`,
		`(first (drop 100000000 (dedupe (range))))`,
		`(count (take 100000000 (distinct (range))))`,
		`(count (take 100000000 (reductions + (range))))`,
		`(count (take 100000000 (interpose 0 (range))))`,
		`(count (take 100000000 (sequence (map inc) (range))))`,
		`(count (take 100000000 (tree-seq (constantly true) (fn [n] [(inc n)]) 0)))`,
		`(with-out-str (dotimes [i 100000000] (print i)))`,
	} {
		wantLimit(t, runLimited(t, context.Background(), Limits{MaxSteps: 100_000, MaxMemory: -1}, src), LimitSteps)
	}
}

func TestBudgetCljBuiltinsLookAtTheClock(t *testing.T) {
	p := mustCompile(t, `nil`)
	g := mustRun(t, NewThread(Limits{}), p).Globals
	for name, args := range bigCljArgs() {
		switch name {
		case "re-seq", "clojure.string/split", "clojure.string/replace":
			// RE2 cannot be interrupted: a search looks at the clock
			// before it starts and after it ends, and its length is
			// bounded by the step budget it is charged up front.
			continue
		case "upper-case", ".toUpperCase", ".indexOf", ".length":
			// One pass of Go's over a text, charged up front by its
			// bytes like every text function (charge.go's scanText).
			continue
		}
		th := NewThread(Limits{MaxSteps: 1 << 50, MaxMemory: -1, MaxDuration: time.Millisecond})
		start := time.Now()
		_, err := th.Call(context.Background(), g, lookupBuiltin(name), args...)
		wantLimit(t, err, LimitTime)
		t.Logf("%s: stopped after %v", name, time.Since(start))
	}
	wantLimit(t, runLimited(t, context.Background(), Limits{MaxSteps: 1 << 50, MaxMemory: -1, MaxDuration: time.Millisecond},
		`(count (take 100000000 (iterate inc 0)))`), LimitTime)
}

func TestBudgetCljGoAPIIsUncharged(t *testing.T) {
	// The Go API compares and hashes lazy sequences and sorted collections
	// without a budget: what a host does with a value is its own.
	xs := make([]Value, 10_000)
	for i := range xs {
		xs[i] = Int(i)
	}
	l := lazyRun(xs, Nil)
	if !Equal(l, vectorOwned(xs)) || Hash(l) != Hash(listOwned(xs)) {
		t.Fatal("a lazy sequence of computed elements differs from the list of them")
	}
	s, err := newSorted(nil, nil, pairsOf(xs[:2000]))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Compare(NewVector(Int(1)), NewVector(Int(0), Int(0))); err != nil || c != -1 {
		t.Fatalf("Compare orders vectors by length first: %d, %v", c, err)
	}
	if s.Len() != 2000 || !Equal(s, MapOf(pairsOf(xs[:2000])...)) {
		t.Fatal("a sorted map built outside a run")
	}
}
