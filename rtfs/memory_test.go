package rtfs

import (
	"context"
	"runtime"
	"testing"
)

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// maxLiveFactor bounds the live heap a value holds against what building
// it was charged: docs/security.md gives it, with Go's own factor, as what
// a call may take beyond its memory budget.
const maxLiveFactor = 1.5

// The memory budget charges what values take on the heap (charge.go): a
// run that builds a value and keeps it must have been charged at least
// about what the value holds alive. Programs that build the kinds of value
// there are, each large enough to measure. The log shows the figures
// (run with -v): live heap and all the allocation, garbage included,
// against the charge.
func TestMemoryChargeMatchesTheHeap(t *testing.T) {
	for _, src := range []string{
		`(vec (range 1000000))`,
		`(reduce conj [] (range 300000))`,
		`(mapv (fn [i] (* 1.5 i)) (range 300000))`,
		`(loop [i 0 l ()] (if (< i 300000) (recur (inc i) (cons i l)) l))`,
		`(set (range 300000))`,
		`(zipmap (map str (range 200000)) (range 200000))`,
		`(into {} (map (fn [i] [i i]) (range 200000)))`,
		`(frequencies (map (fn [i] (mod i 1000)) (range 300000)))`,
		`(group-by (fn [i] (mod i 1000)) (range 200000))`,
		`(reduce (fn [s i] (conj s i)) #{} (range 100000))`,
		`(str (vec (range 300000)))`,
		`(mapv str (range 200000))`,
		`(vec (repeat 1000000 [1 2]))`,
	} {
		p := mustCompile(t, src)
		th := NewThread(Limits{MaxSteps: 1 << 50, MaxMemory: -1})
		before := heapInUse()
		var total0, total1 runtime.MemStats
		runtime.ReadMemStats(&total0)
		out, err := th.Run(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&total1)
		after := heapInUse()
		runtime.KeepAlive(out.Value)
		live := int64(after) - int64(before)
		t.Logf("%-75s charged %7d KiB, live %7d KiB (%.2f), allocated %7d KiB (%.2f)", src, th.mem>>10, live>>10,
			float64(live)/float64(th.mem), (total1.TotalAlloc-total0.TotalAlloc)>>10, float64(total1.TotalAlloc-total0.TotalAlloc)/float64(th.mem))
		if float64(live) > maxLiveFactor*float64(th.mem) {
			t.Errorf("%s: holds %d KiB alive, charged %d KiB: more than %.1f times its charge", src, live>>10, th.mem>>10, maxLiveFactor)
		}
	}
}
