package main

import (
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// The binary raises GOGC and sets GOMEMLIMIT from the machine's or the
// container's memory when the environment sets neither, and leaves both to
// the environment when it sets one (read from a serve child's /metrics).
func TestGCDefaults(t *testing.T) {
	machine, err := gcMemory()
	if err != nil {
		t.Fatalf("no memory size on this machine: %v", err)
	}
	for _, name := range []string{"GOGC", "GOMEMLIMIT", "AUTOMEMLIMIT"} {
		t.Setenv(name, "") // restored after the test
		os.Unsetenv(name)
	}
	for _, tc := range []struct {
		env     []string
		percent float64
		limit   float64
	}{
		{nil, gcPercent, float64(machine)},
		{[]string{"GOGC=150"}, 150, math.MaxInt64},
		{[]string{"GOMEMLIMIT=1GiB"}, 100, 1 << 30},
	} {
		for _, kv := range tc.env {
			name, value, _ := strings.Cut(kv, "=")
			t.Setenv(name, value)
		}
		percent, limit := childGC(t)
		if percent != tc.percent || limit != tc.limit {
			t.Errorf("environment %v: GOGC %v, GOMEMLIMIT %v; want %v, %v", tc.env, percent, limit, tc.percent, tc.limit)
		}
		for _, kv := range tc.env {
			name, _, _ := strings.Cut(kv, "=")
			os.Unsetenv(name)
		}
	}
}

// childGC starts rtfshost serve as a child process and reads the garbage
// collector's settings from its metrics.
func childGC(t *testing.T) (percent, limit float64) {
	t.Helper()
	base, stop := startServeChild(t, "", "serve", "--listen", "127.0.0.1:0")
	defer stop()
	resp, err := http.Get(strings.TrimSuffix(base, "/mcp") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	read := func(name string) float64 {
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("no %s in /metrics:\n%s", name, body)
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return read("go_gc_gogc_percent"), read("go_gc_gomemlimit_bytes")
}

// The binary's GOGC follows the live heap: gcPercent while it is small,
// then what lets the heap grow by gcHeadroom, never below gcMinPercent;
// adjust sets it from the heap a collection left.
func TestGCTuner(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, gcPercent}, {4 << 20, gcPercent}, {gcHeadroom / 4, gcPercent}, {gcHeadroom, 100},
		{2 * gcHeadroom, 50}, {4 * gcHeadroom, gcMinPercent}, {64 * gcHeadroom, gcMinPercent},
	} {
		if got := gcPercentFor(tc.live); got != tc.want {
			t.Errorf("live heap %d MiB: GOGC %d, want %d", tc.live>>20, got, tc.want)
		}
	}
	old := debug.SetGCPercent(gcPercent)
	defer debug.SetGCPercent(old)
	live := make([]byte, gcHeadroom) // the live heap is now more than gcHeadroom
	for i := range live {
		live[i] = byte(i)
	}
	runtime.GC()
	tu := &gcTuner{percent: gcPercent}
	tu.adjust()
	got := debug.SetGCPercent(gcPercent)
	runtime.KeepAlive(live)
	if got != tu.percent || got >= 100 || got < gcMinPercent {
		t.Fatalf("with a live heap over %d MiB GOGC is %d (the tuner says %d), want %d to 99", gcHeadroom>>20, got, tu.percent, gcMinPercent)
	}
}
