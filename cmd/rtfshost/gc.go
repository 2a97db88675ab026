package main

import (
	"math"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// The garbage collector's settings of the rtfshost binary (the library
// leaves them to its embedder; docs/performance.md has the figures). A
// host's live heap is small (a few MiB for a busy stream, about 15 KiB per
// idle one), and Go's default target collects whenever the heap has grown
// by as much again, at least every 4 MiB: a chunk path that allocates some
// 200 bytes per chunk then collects hundreds of times a second, and the
// cores spend that time in the collector together. The binary makes a
// collection rarer, and bounds what that costs in memory.
const (
	// gcPercent is the GOGC the binary sets: the heap may grow to five
	// times its live part (16 MiB at least) between collections.
	gcPercent = 400
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
}
