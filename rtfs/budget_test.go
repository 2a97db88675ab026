package rtfs

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

// Programs whose builtins do work far larger than their one VM step, and
// collections far larger than a call should hold. Each must end in a typed
// *LimitError instead of burning CPU or memory for seconds.

// runLimited runs src on a fresh Thread with l and returns the run's error.
func runLimited(t *testing.T, ctx context.Context, l Limits, src string) error {
	t.Helper()
	p := mustCompile(t, src)
	out, err := NewThread(l).Run(ctx, p)
	if err == nil {
		t.Fatalf("%s: ran to %v, want a limit error", src, out.Value)
	}
	return err
}

func wantLimit(t *testing.T, err error, kinds ...string) *LimitError {
	t.Helper()
	var le *LimitError
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T) is not a *LimitError", err, err)
	}
	for _, k := range kinds {
		if le.Limit == k {
			return le
		}
	}
	t.Fatalf("limit %q (%v), want one of %q", le.Limit, err, kinds)
	return nil
}

func TestBudgetSortCountsItsWork(t *testing.T) {
	// 200 sorts of a million elements: each sort alone is ~20M steps of
	// work, twice the default budget, so the first one is refused before
	// it starts.
	src := `(loop [i 0 acc 0]
	  (if (< i 200)
	    (recur (inc i) (+ acc (count (sort (vec (range 1000000))))))
	    acc))`
	le := wantLimit(t, runLimited(t, context.Background(), Limits{}, src), LimitSteps)
	if le.Max != DefaultMaxSteps {
		t.Errorf("max = %d, want the default %d", le.Max, DefaultMaxSteps)
	}
}

func TestBudgetIntoDoubling(t *testing.T) {
	src := `(count (reduce (fn [v _] (into v v)) [1] (range 24)))`
	// With the default step budget the doubling is stopped by steps: into
	// charges for every element it adds.
	wantLimit(t, runLimited(t, context.Background(), Limits{}, src), LimitSteps)
	// With steps unbounded, the memory budget stops it.
	le := wantLimit(t, runLimited(t, context.Background(), Limits{MaxSteps: 1 << 50, MaxMemory: 64 << 20}, src), LimitMemory)
	if le.Max != 64<<20 {
		t.Errorf("max = %d, want %d", le.Max, 64<<20)
	}
}

func TestBudgetMemoryKeepsHeapBounded(t *testing.T) {
	// Four 16M-element vectors would need well over a gibibyte; a 256 MiB
	// budget refuses the first vector, and once the run has failed nothing
	// of it stays alive.
	src := `(let [a (vec (range 16000000))
	              b (vec (range 16000000))
	              c (vec (range 16000000))
	              d (vec (range 16000000))]
	          (+ (count a) (count b) (count c) (count d)))`
	l := Limits{MaxSteps: 1 << 50, MaxMemory: 256 << 20}
	wantLimit(t, runLimited(t, context.Background(), l, src), LimitMemory)
	runtime.GC()
	if h := heapBytes(); h > 300<<20 {
		t.Errorf("heap after the failed run: %d MiB, want under 300 MiB", h>>20)
	}
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestBudgetStringBuilding(t *testing.T) {
	// str of a large collection is refused while printing it, not after.
	src := `(count (str (vec (range 1000000))))`
	wantLimit(t, runLimited(t, context.Background(), Limits{MaxSteps: 1 << 50, MaxMemory: 1 << 20}, src), LimitMemory, LimitCollectionSize)
}

func TestBudgetCollectionLiteralsCount(t *testing.T) {
	// Literals and small builtins charge memory too: a loop that keeps
	// building vectors runs out of its memory budget, not only its steps.
	src := `(loop [i 0 acc []] (if (< i 100000) (recur (inc i) [i i i i i i i i acc]) (count acc)))`
	wantLimit(t, runLimited(t, context.Background(), Limits{MaxSteps: 1 << 50, MaxMemory: 1 << 20}, src), LimitMemory)
}

func TestBudgetDefaultsAllowOrdinaryWork(t *testing.T) {
	// The budgets must not get in the way of ordinary programs: sorting
	// and summing 100,000 elements fits the default budgets.
	p := mustCompile(t, `(reduce + 0 (sort (vec (range 100000))))`)
	out := mustRun(t, NewThread(Limits{}), p)
	if out.Value != Int(4999950000) {
		t.Errorf("got %v", out.Value)
	}
}

func TestBudgetCancelStopsALongBuiltin(t *testing.T) {
	// A sort of 8M elements takes seconds; a cancel a little after it
	// started must end it with the context's error (the sort looks at the
	// context every few thousand comparisons), not with a result.
	p := mustCompile(t, `(count (sort (reverse (vec (range 8000000)))))`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := NewThread(Limits{MaxSteps: 1 << 50, MaxMemory: -1}).Run(ctx, p)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	var le *LimitError
	if errors.As(err, &le) {
		t.Fatalf("a cancel reported as a limit: %v", err)
	}
}

func TestBudgetChargeIsUncatchable(t *testing.T) {
	// A limit hit inside a builtin cannot be caught by RTFS code.
	src := `(try (count (sort (vec (range 1000000)))) (catch e :caught))`
	wantLimit(t, runLimited(t, context.Background(), Limits{MaxSteps: 100000}, src), LimitSteps)
}

func TestBudgetResetsBetweenRuns(t *testing.T) {
	// The charge of one run does not carry into the next on the same Thread.
	th := NewThread(Limits{MaxSteps: 1 << 50, MaxMemory: 8 << 20})
	p := mustCompile(t, `(count (vec (range 300000)))`) // ~4.8 MB charged per run
	for i := 0; i < 5; i++ {
		if out := mustRun(t, th, p); out.Value != Int(300000) {
			t.Fatalf("run %d: %v", i, out.Value)
		}
	}
}

func TestBudgetTime(t *testing.T) {
	// A CPU-bound loop with a huge step budget stops at its time limit.
	src := `(loop [i 0] (if (< i 1000000000000) (recur (inc i)) i))`
	le := wantLimit(t, runLimited(t, context.Background(), Limits{MaxSteps: 1 << 62, MaxDuration: 50 * time.Millisecond}, src), LimitTime)
	if time.Duration(le.Max) != 50*time.Millisecond || le.Error() != "time limit of 50ms exceeded" {
		t.Errorf("limit error %+v: %v", le, le)
	}
}

// Builtins that compare, search, hash or print cost one step per element
// they handle, and a value that shares structure costs what its expanded
// form would.

// chargedSteps runs src with budgets too large to matter and returns the
// steps it was charged: the VM's and the builtins'.
func chargedSteps(t *testing.T, src string) int64 {
	t.Helper()
	th := NewThread(Limits{MaxSteps: 1 << 50, MaxMemory: -1})
	mustRun(t, th, mustCompile(t, src))
	return th.steps + th.work
}

// twoVectors binds a and b to two distinct, equal vectors of n ints.
func twoVectors(n int, body string) string {
	return fmt.Sprintf(`(let [a (vec (range %d)) b (vec (range %d))] %s)`, n, n, body)
}

func TestBudgetComparisonsCountTheirElements(t *testing.T) {
	const n = 200_000
	base := chargedSteps(t, twoVectors(n, `nil`))
	for _, body := range []string{
		`(= a b)`, `(apply = [a b])`, `(not= a b)`, `(compare a b)`,
		`(contains? #{a} b)`, `(get {a 1} b)`, `(find {a 1} b)`, `({a 1} b)`, `(#{a} b)`,
		`(distinct [a b])`, `(dedupe [a b])`, `(sort [a b])`, `(= {:k a} {:k b})`,
		`(= #{a} #{b})`, `(count (hash-set a b))`, `(count (frequencies [a b]))`,
	} {
		got := chargedSteps(t, twoVectors(n, body)) - base
		if got < n {
			t.Errorf("%s: charged %d steps, want at least one per element pair (%d)", body, got, n)
		}
	}
}

func TestBudgetRepeatedComparisonsStop(t *testing.T) {
	// When a comparison cost one step, 1,000 comparisons of two
	// million-element vectors ran 88 s on a 10M-step budget.
	for _, cmp := range []string{`(= a b)`, `(compare a b)`, `(contains? s b)`} {
		src := twoVectors(1_000_000, fmt.Sprintf(`(let [s #{a}] (loop [i 0] (if (< i 1000) (do %s (recur (inc i))) i)))`, cmp))
		l := Limits{MaxDuration: time.Minute} // a guard: the steps must stop it first
		wantLimit(t, runLimited(t, context.Background(), l, src), LimitSteps)
	}
}

// sharedPair binds a and b to two distinct, equal values of 2^60 elements
// that take 60 vectors each: only the shared structure is in memory.
const sharedPair = `(loop [i 0 a [1] b [1]] (if (< i 60) (recur (inc i) [a a] [b b]) %s))`

func TestBudgetSharedStructureCostsItsExpandedForm(t *testing.T) {
	for _, body := range []string{
		`(= a b)`, `(apply = [a b])`, `(compare a b)`, `(contains? #{a} b)`, `(get {a 1} b)`,
		`(= #{a} #{b})`, `(distinct [a b])`, `(dedupe [a b])`, `(sort [a b])`, `(hash-set a b)`,
		`(frequencies [a b])`, `(str a)`, `(pr-str a)`, `(to-json a)`, `(format "%s" a)`,
		`(flatten a)`, `(count (join "," a))`, `(assert false a)`,
	} {
		src := fmt.Sprintf(sharedPair, body)
		l := Limits{MaxDuration: time.Minute} // a guard: the steps must stop it first
		wantLimit(t, runLimited(t, context.Background(), l, src), LimitSteps, LimitMemory, LimitCollectionSize)
	}
}

func TestBudgetTextSearchesCountTheText(t *testing.T) {
	// A 4 MB string: each search reads it, a step per 16 bytes.
	const n = 1 << 22
	s := fmt.Sprintf(`(let [s (apply str (repeat %d "a"))] %%s)`, n/1024)
	s = fmt.Sprintf(s, `(let [s (apply str (repeat 1024 s))] %s)`)
	base := chargedSteps(t, fmt.Sprintf(s, `nil`))
	for _, body := range []string{
		`(index-of s "b")`, `(last-index-of s "b")`, `(includes? s "b")`, `(count s)`,
		`(string-length s)`, `(subs s 1 2)`, `(split s "b")`, `(blank? s)`, `(parse-int s)`,
		`(upper-case s)`, `(replace s "b" "c")`, `(get s 4194300)`,
	} {
		got := chargedSteps(t, fmt.Sprintf(s, body)) - base
		if got < n/textStepBytes {
			t.Errorf("%s: charged %d steps, want at least %d (a step per %d bytes)", body, got, n/textStepBytes, textStepBytes)
		}
	}
}

func TestBudgetBuildersLookAtTheClock(t *testing.T) {
	// Unchecked, the set and zipmap builtins ran 12-14 s under a 2 s call
	// timeout.
	// Called straight on a large vector, a builtin that builds a set or a
	// map must notice a 1 ms time limit itself.
	xs := make([]Value, 2_000_000)
	for i := range xs {
		xs[i] = Int(i)
	}
	v := vectorOwned(xs)
	p := mustCompile(t, `nil`)
	g := mustRun(t, NewThread(Limits{}), p).Globals
	for _, name := range []string{"set", "zipmap", "frequencies", "distinct", "into"} {
		args := []Value{v}
		switch name {
		case "zipmap":
			args = []Value{v, v}
		case "into":
			args = []Value{emptySet, v}
		}
		th := NewThread(Limits{MaxSteps: 1 << 50, MaxMemory: -1, MaxDuration: time.Millisecond})
		_, err := th.Call(context.Background(), g, lookupBuiltin(name), args...)
		wantLimit(t, err, LimitTime)
	}
}
