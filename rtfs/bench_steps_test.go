package rtfs

import (
	"context"
	"testing"
)

// stepCostPrograms are programs whose work is mostly one kind of builtin,
// with the VM's own loop first for reference.
var stepCostPrograms = []struct{ name, src string }{
	{"vm-loop", `(loop [i 0] (if (< i 1000000) (recur (+ i 1)) i))`},
	{"vec-range", `(count (vec (range 1000000)))`},
	{"set", `(count (set (range 300000)))`},
	{"zipmap", `(count (zipmap (range 300000) (range 300000)))`},
	{"frequencies", `(count (frequencies (map (fn [i] (mod i 1000)) (range 300000))))`},
	{"distinct", `(count (distinct (range 300000)))`},
	{"group-by", `(count (group-by (fn [i] (mod i 10000)) (range 100000)))`},
	{"conj-set", `(count (reduce (fn [s i] (conj s i)) #{} (range 100000)))`},
	{"assoc-vector", `(count (reduce (fn [v i] (assoc v i 0)) (vec (range 100000)) (range 100000)))`},
	{"equal", `(let [a (vec (range 300000)) b (vec (range 300000))] (= a b))`},
	{"sort", `(count (sort (reverse (vec (range 300000)))))`},
	{"str", `(count (str (vec (range 300000))))`},
	{"index-of", `(let [s (apply str (repeat 100000 "abcdefghij"))] (index-of s "z"))`},
	{"re-seq", `(let [s (apply str (repeat 100000 "abc def "))] (count (re-seq #"\w+" s)))`},
	{"re-find-groups", `(let [s (apply str (repeat 100000 "abcdefgh"))] (re-find #"(a|b)+(x|y)" s))`},
	{"split-regex", `(let [s (apply str (repeat 100000 "a1,b2;c3 "))] (count (clojure.string/split s #"[,; ]")))`},
	{"take-range", `(count (take 1000000 (range)))`},
	{"take-iterate", `(count (take 100000 (iterate inc 0)))`},
	{"sorted-set", `(count (apply sorted-set (range 3000)))`},
	{"union", `(count (clojure.set/union (set (range 300000)) (set (range 150000 450000))))`},
}

// BenchmarkStepCost reports, for each program, the time of one charged
// step (ns/step): the VM's instruction against the builtins' units of work.
// docs/security.md quotes the spread: a budget of steps is a budget of time
// within about an order of magnitude, whichever builtins a program uses.
func BenchmarkStepCost(b *testing.B) {
	for _, p := range stepCostPrograms {
		b.Run(p.name, func(b *testing.B) {
			prog := mustCompile(b, p.src)
			th := NewThread(Limits{MaxSteps: 1 << 50, MaxMemory: -1})
			var steps int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := th.Run(context.Background(), prog); err != nil {
					b.Fatal(err)
				}
				steps += th.steps + th.work
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/step")
		})
	}
}
