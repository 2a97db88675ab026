// Command ratios reads the benchmark output that run.sh collects, one file
// per engine and round (DIR/<engine>.<round>.txt, as `go test -bench`
// prints it), and prints each benchmark's median ns per chunk and chunks/s,
// then rtfshost's figures as ratios to the peers': each ratio is taken
// round by round (the two benchmarks ran one after the other) and the
// median of those is printed, so that a drift of the machine's speed
// during the run moves both sides alike. Last come the 100-stream
// benchmarks at -cpu 1 and 2: throughput, each engine's scaling from one
// core to two, and rtfshost's throughput over the peers'.
//
// Usage: go run ./cmd/ratios DIR
package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// pairs are the comparisons printed: rtfshost's benchmark, the peer's, and
// what the ratio says.
var pairs = []struct{ ours, peer, what string }{
	{"PipelineRTFS", "BenthosPipeline", "whole pipeline, rtfshost vs Benthos (mapping)"},
	{"PipelineRTFS", "StarlarkPipeline", "whole pipeline, rtfshost vs Starlark in a minimal host"},
	{"ProcessorCall", "StarlarkCall", "processor call alone, RTFS vs Starlark"},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ratios DIR")
		os.Exit(2)
	}
	rounds, err := read(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratios:", err)
		os.Exit(1)
	}
	all := map[string][]float64{}
	for _, r := range rounds {
		for name, ns := range r {
			all[name] = append(all[name], ns)
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		if !strings.Contains(n, "@") { // the same figures under their GOMAXPROCS
			names = append(names, n)
		}
	}
	sort.Strings(names)
	fmt.Printf("%d rounds\n\n", len(rounds))
	fmt.Printf("%-20s %16s %14s   %s\n", "benchmark", "median ns/chunk", "chunks/s", "min–max ns")
	for _, n := range names {
		v := all[n]
		lo, hi := minMax(v)
		m := median(v)
		fmt.Printf("%-20s %16.0f %14.0f   %.0f–%.0f\n", n, m, 1e9/m, lo, hi)
	}
	fmt.Println()
	fmt.Println("host overhead per chunk (pipeline minus processor call, medians of per-round differences):")
	for _, h := range [][3]string{{"rtfshost", "PipelineRTFS", "ProcessorCall"}, {"Starlark minimal host", "StarlarkPipeline", "StarlarkCall"}} {
		var d []float64
		for _, r := range rounds {
			a, okA := r[h[1]]
			b, okB := r[h[2]]
			if okA && okB {
				d = append(d, a-b)
			}
		}
		if len(d) > 0 {
			fmt.Printf("  %-22s %6.0f ns\n", h[0], median(d))
		}
	}
	fmt.Println()
	fmt.Printf("%-58s %s\n", "rtfshost time per chunk / peer's (< 1: rtfshost faster)", "median ratio (min–max)")
	for _, p := range pairs {
		var ratios []float64
		for _, r := range rounds {
			a, okA := r[p.ours]
			b, okB := r[p.peer]
			if okA && okB && b > 0 {
				ratios = append(ratios, a/b)
			}
		}
		if len(ratios) == 0 {
			fmt.Printf("%-58s missing\n", p.what)
			continue
		}
		lo, hi := minMax(ratios)
		fmt.Printf("%-58s %.2f× (%.2f–%.2f)\n", p.what, median(ratios), lo, hi)
	}
	printMany(rounds)
}

// many are the multi-stream benchmarks (100 streams at once), each run at
// -cpu 1 and 2: rtfshost's first.
var many = []struct{ who, bench string }{
	{"rtfshost", "PipelinePersist/100-streams/none/cursor"},
	{"Benthos (100 pipelines)", "BenthosStreams"},
	{"Starlark (100 hosts)", "StarlarkStreams"},
}

// printMany prints the multi-stream throughput at one and two Ps, each
// engine's scaling (its ns/chunk at -cpu 1 over -cpu 2, round by round) and
// rtfshost's throughput over each peer's at each -cpu.
func printMany(rounds []map[string]float64) {
	perRound := func(a, b string) []float64 {
		var v []float64
		for _, r := range rounds {
			x, okA := r[a]
			y, okB := r[b]
			if okA && okB && y > 0 {
				v = append(v, x/y)
			}
		}
		return v
	}
	fmt.Println()
	fmt.Println("100 streams at once (medians; scaling = chunks/s at -cpu 2 over -cpu 1, round by round):")
	fmt.Printf("  %-24s %14s %14s %10s\n", "", "-cpu 1", "-cpu 2", "scaling")
	for _, m := range many {
		var one, two []float64
		for _, r := range rounds {
			if v, ok := r[m.bench+"@1"]; ok {
				one = append(one, 1e9/v)
			}
			if v, ok := r[m.bench+"@2"]; ok {
				two = append(two, 1e9/v)
			}
		}
		sc := perRound(m.bench+"@1", m.bench+"@2")
		if len(one) == 0 || len(two) == 0 || len(sc) == 0 {
			fmt.Printf("  %-24s missing\n", m.who)
			continue
		}
		fmt.Printf("  %-24s %14.0f %14.0f %9.2f×\n", m.who, median(one), median(two), median(sc))
	}
	for _, m := range many[1:] {
		for _, p := range []string{"1", "2"} {
			if r := perRound(m.bench+"@"+p, many[0].bench+"@"+p); len(r) > 0 {
				fmt.Printf("  rtfshost chunks/s over %s's at -cpu %s: %.2f×\n", m.who, p, median(r))
			}
		}
	}
}

// read returns, per round, each benchmark's ns/op.
func read(dir string) ([]map[string]float64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.*.txt"))
	if err != nil {
		return nil, err
	}
	byRound := map[int]map[string]float64{}
	for _, f := range files {
		parts := strings.Split(filepath.Base(f), ".")
		round, err := strconv.Atoi(parts[len(parts)-2])
		if err != nil {
			continue
		}
		if byRound[round] == nil {
			byRound[round] = map[string]float64{}
		}
		if err := parse(f, byRound[round]); err != nil {
			return nil, err
		}
	}
	if len(byRound) == 0 {
		return nil, fmt.Errorf("no benchmark output in %s", dir)
	}
	keys := make([]int, 0, len(byRound))
	for k := range byRound {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	out := make([]map[string]float64, len(keys))
	for i, k := range keys {
		out[i] = byRound[k]
	}
	return out, nil
}

// parse reads "BenchmarkX-2  N  123 ns/op ..." lines into into, under the
// benchmark's name and under the name with "@" and its GOMAXPROCS (the -N
// suffix; none is 1).
func parse(file string, into map[string]float64) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name, procs := strings.TrimPrefix(fields[0], "Benchmark"), "1"
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name, procs = name[:i], name[i+1:]
			}
		}
		for i := 2; i+1 < len(fields); i++ {
			if fields[i+1] == "ns/op" {
				v, err := strconv.ParseFloat(fields[i], 64)
				if err != nil {
					return fmt.Errorf("%s: %w", file, err)
				}
				into[name] = v
				into[name+"@"+procs] = v
			}
		}
	}
	return sc.Err()
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func minMax(v []float64) (float64, float64) {
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}
