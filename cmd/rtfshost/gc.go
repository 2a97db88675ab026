package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// The garbage collector's settings of the rtfshost binary (the library
// leaves them to its embedder; docs/performance.md has the figures). A
// host's live heap is small for a few streams (a few MiB for a busy one),
// and Go's default target collects whenever the heap has grown by as much
// again, at least every 4 MiB: a chunk path that allocates some 200 bytes
// per chunk then collects hundreds of times a second, and the cores spend
// that time in the collector together. The binary makes a collection
// rarer while the live heap is small. With thousands of live streams
// (some 80 KiB each over SSE) the live heap is hundreds of MiB, and five
// times that would be most of a small machine's memory: there the binary
// lets the heap grow by gcHeadroom between collections, not by a multiple
// of itself, and pays with more frequent collections.
const (
	// gcPercent is the GOGC the binary sets while the live heap is at
	// most gcHeadroom/4: the heap may grow to five times its live part
	// (16 MiB at least) between collections.
	gcPercent = 400
	// gcHeadroom is how much the heap may grow beyond its live part
	// between collections once that is larger: after each collection
	// GOGC becomes 100·gcHeadroom/live, between gcMinPercent and
	// gcPercent (gcTune).
	gcHeadroom = 128 << 20
	// gcMinPercent is the lowest GOGC gcTune sets: the collector never
	// runs more often than every quarter of the live heap allocated.
	gcMinPercent = 25
	// gcCgroupShare and gcMachineShare are the shares of the memory
	// the process may use that become GOMEMLIMIT: of the container's
	// (cgroup) limit, leaving room for what the Go runtime does not
	// count (Badger's memory-mapped files, the kernel's buffers); or, on
	// a machine without one, of its physical memory, which other programs
	// share.
	gcCgroupShare  = 0.9
	gcMachineShare = 0.5
)

// gcMemory is the memory limit the binary's GOMEMLIMIT derives from.
var gcMemory = memlimit.ApplyFallback(
	memlimit.ApplyRatio(memlimit.FromCgroup, gcCgroupShare),
	memlimit.ApplyRatio(memlimit.FromSystem, gcMachineShare))

// setGCDefaults sets GOGC to gcPercent and GOMEMLIMIT from gcMemory, unless
// the environment sets either (lookupEnv is os.LookupEnv; the runtime has
// then applied what it says, and the binary changes nothing). The raised
// target goes only with a limit: when no memory size is found (or
// AUTOMEMLIMIT=off, which memlimit honours), both stay at Go's defaults.
// main calls it first, before the runtime has anything to collect.
func setGCDefaults(lookupEnv func(string) (string, bool)) {
	for _, name := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, ok := lookupEnv(name); ok {
			return
		}
	}
	limit, err := memlimit.Set(memlimit.WithRatio(1), memlimit.WithProvider(gcMemory))
	if err != nil || limit <= 0 || limit == math.MaxInt64 {
		return
	}
	debug.SetGCPercent(gcPercent)
	(&gcTuner{percent: gcPercent}).arm()
}

// gcPercentFor is the GOGC for a live heap of live bytes: gcPercent, or
// less for a heap larger than gcHeadroom/4, so that the next collection
// comes when gcHeadroom more has been allocated, never below gcMinPercent.
func gcPercentFor(live uint64) int {
	if live == 0 {
		return gcPercent
	}
	return int(max(gcMinPercent, min(gcPercent, 100*gcHeadroom/live)))
}

// A gcTuner sets GOGC after each collection from the live heap it left
// (gcPercentFor). It runs in a finalizer, on the runtime's finalizer
// goroutine, and lives as long as the process: the binary's main arms
// it once. Cost: a read of one runtime metric per collection, and a
// SetGCPercent when the percentage moves by more than an eighth.
type gcTuner struct {
	percent int // the GOGC set last
}

// arm makes tune run after the next collection: a new object that nothing
// references, whose finalizer runs once a collection has found it
// unreachable.
func (t *gcTuner) arm() {
	runtime.SetFinalizer(&gcSentinel{t}, func(s *gcSentinel) { s.t.tune() })
}

// A gcSentinel is the object whose finalizer marks a collection. It has a
// field so that it is not a zero-size object, which finalizers ignore.
type gcSentinel struct{ t *gcTuner }

// tune adjusts GOGC and arms the next tune.
func (t *gcTuner) tune() {
	t.adjust()
	t.arm()
}

// adjust sets GOGC from the live heap the last collection left.
func (t *gcTuner) adjust() {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	if p := gcPercentFor(s[0].Value.Uint64()); 8*abs(p-t.percent) > t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
}

func abs(n int) int { return max(n, -n) }
