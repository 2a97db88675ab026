// Command schedtrace reads a Go execution trace of one of the provider's
// pipeline benchmarks and says, for each goroutine of the pipeline, how
// long it ran, how long it was runnable without running (waiting for a P),
// how long it was blocked, why it stopped running, who made it runnable
// again and how often it moved to another P; and for the whole trace, how
// often an idle P was started (each start wakes an OS thread: on a virtual
// machine the costliest part of a hand-off) and how long one, or more than
// one, of the pipeline's goroutines ran at once. It answers the question
// the wall-clock figure host-ns/chunk cannot: is the time a chunk takes
// spent working, or waiting for the scheduler?
//
//	go test -run '^$' -bench '^BenchmarkPipelineRTFS$' -benchtime 300000x \
//	    -trace /tmp/pipeline.trace ./provider
//	(cd bench/peers && go run ./cmd/schedtrace /tmp/pipeline.trace)
//
// A goroutine is given a role by the functions on its own stack when it
// stops running: "worker" (stream.(*Stream).work), "transport"
// (stream.(*Stream).runTransport) or "producer" (the benchmark's loop,
// provider.runPipeline); -role NAME=FUNC adds others. Goroutines whose
// lifetime in the trace is shorter than -min are left out (the benchmark's
// first, one-chunk run). The trace is parsed with golang.org/x/exp/trace.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// roleFlag collects -role NAME=FUNC pairs.
type roleFlag [][2]string

func (r *roleFlag) String() string { return fmt.Sprint(*r) }

func (r *roleFlag) Set(v string) error {
	name, fn, ok := strings.Cut(v, "=")
	if !ok || name == "" || fn == "" {
		return fmt.Errorf("-role %q: want NAME=FUNC", v)
	}
	*r = append(*r, [2]string{name, fn})
	return nil
}

func main() {
	roles := roleFlag{
		{"worker", "stream.(*Stream).work"},
		{"transport", "stream.(*Stream).runTransport"},
		{"producer", "provider.runPipeline"},
	}
	flag.Var(&roles, "role", "NAME=FUNC: a goroutine with FUNC on its stack has role NAME (repeatable)")
	minLife := flag.Duration("min", 20*time.Millisecond, "leave out goroutines that live shorter than this in the trace")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: schedtrace [-role NAME=FUNC]... [-min D] TRACE")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "schedtrace:", err)
		os.Exit(1)
	}
	defer f.Close()
	tr, err := analyze(f, roles)
	if err != nil {
		fmt.Fprintf(os.Stderr, "schedtrace: %s: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}
	report(os.Stdout, tr, *minLife)
}

// A traceSummary is what analyze finds in a trace: the goroutines that
// have a role, and what the scheduler did around them.
type traceSummary struct {
	gs []*goroutine
	// pStarts counts the Ps that went from idle to running: each is an
	// OS thread woken (or started) to run goroutines on an idle P.
	pStarts int
	// concurrent[n] is how long exactly n goroutines with a role ran at
	// once (n >= 1).
	concurrent map[int]time.Duration
}

// A goroutine is what the trace says of one goroutine of a role.
type goroutine struct {
	id          trace.GoID
	role        string
	first, last trace.Time
	state       trace.GoState
	since       trace.Time
	in          map[trace.GoState]time.Duration // time spent in each state
	stopped     map[string]int                  // why it stopped running: "to-state reason at frame"
	wokenBy     map[string]int                  // who made it runnable: "role at frame"
	lastP       trace.ProcID                    // the P it last ran on (-1 before it ran)
	moved       int                             // how often it ran on another P than the last time
	runs        []span                          // when it ran
}

// A span is an interval of a goroutine's running.
type span struct{ from, to trace.Time }

// analyze reads the trace in r and returns what it says of the goroutines
// that have a role.
func analyze(r io.Reader, roles roleFlag) (*traceSummary, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	all := map[trace.GoID]*goroutine{}
	get := func(id trace.GoID, t trace.Time) *goroutine {
		g, ok := all[id]
		if !ok {
			g = &goroutine{id: id, first: t, since: t, lastP: trace.NoProc, in: map[trace.GoState]time.Duration{}, stopped: map[string]int{}, wokenBy: map[string]int{}}
			all[id] = g
		}
		return g
	}
	type wake struct {
		g     *goroutine
		by    trace.GoID
		frame string
	}
	var wakes []wake // resolved at the end, when every waker has its role
	sum := &traceSummary{concurrent: map[int]time.Duration{}}
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind == trace.ResourceProc {
			if from, to := st.Proc(); from == trace.ProcIdle && to == trace.ProcRunning {
				sum.pStarts++
			}
			continue
		}
		if st.Resource.Kind != trace.ResourceGoroutine {
			continue
		}
		from, to := st.Goroutine()
		t := ev.Time()
		g := get(st.Resource.Goroutine(), t)
		g.in[g.state] += t.Sub(g.since) // nothing for a goroutine seen first now
		g.state, g.since, g.last = to, t, t
		if to == trace.GoRunning && from != trace.GoRunning {
			if p := ev.Proc(); p != trace.NoProc {
				if g.lastP != trace.NoProc && p != g.lastP {
					g.moved++
				}
				g.lastP = p
			}
			g.runs = append(g.runs, span{from: t, to: -1})
		}
		if from == trace.GoRunning && to != trace.GoRunning && len(g.runs) > 0 {
			g.runs[len(g.runs)-1].to = t
		}
		if from == trace.GoRunning {
			if g.role == "" {
				g.role = roleOf(st.Stack, roles)
			}
			g.stopped[fmt.Sprintf("%s %q at %s", to, st.Reason, userFrame(st.Stack))]++
		}
		if from == trace.GoWaiting && to == trace.GoRunnable {
			wakes = append(wakes, wake{g, ev.Goroutine(), userFrame(ev.Stack())})
		}
	}
	for _, w := range wakes {
		by := "runtime"
		if b, ok := all[w.by]; ok && b.role != "" {
			by = b.role
		} else if w.by != trace.NoGoroutine {
			by = fmt.Sprintf("goroutine %d", w.by)
		}
		w.g.wokenBy[by+" at "+w.frame]++
	}
	var gs []*goroutine
	for _, g := range all {
		if g.role != "" {
			gs = append(gs, g)
		}
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].id < gs[j].id })
	sum.gs = gs
	overlap(gs, sum.concurrent)
	return sum, nil
}

// overlap adds to concurrent, for each n >= 1, how long exactly n of gs ran
// at once. A run the trace does not see end is left out.
func overlap(gs []*goroutine, concurrent map[int]time.Duration) {
	type edge struct {
		t     trace.Time
		delta int
	}
	var edges []edge
	for _, g := range gs {
		for _, s := range g.runs {
			if s.to >= s.from {
				edges = append(edges, edge{s.from, +1}, edge{s.to, -1})
			}
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].t != edges[j].t {
			return edges[i].t < edges[j].t
		}
		return edges[i].delta < edges[j].delta // an end before a start at the same time
	})
	n := 0
	for i, e := range edges {
		if n > 0 && i > 0 {
			concurrent[n] += e.t.Sub(edges[i-1].t)
		}
		n += e.delta
	}
}

// roleOf is the role of the first function of roles found on stk.
func roleOf(stk trace.Stack, roles roleFlag) string {
	for fr := range stk.Frames() {
		for _, r := range roles {
			if strings.HasSuffix(fr.Func, r[1]) {
				return r[0]
			}
		}
	}
	return ""
}

// userFrame is the innermost frame of stk outside the runtime.
func userFrame(stk trace.Stack) string {
	for fr := range stk.Frames() {
		if !strings.HasPrefix(fr.Func, "runtime.") && !strings.HasPrefix(fr.Func, "internal/") {
			return fr.Func[strings.LastIndex(fr.Func, "/")+1:]
		}
	}
	return "-"
}

// report prints each goroutine that lived at least minLife: its time in
// each state, its most frequent stops and wake-ups and how often it moved
// to another P; then how often an idle P was started and how long one or
// more of the goroutines with a role ran at once.
func report(w io.Writer, tr *traceSummary, minLife time.Duration) {
	for _, g := range tr.gs {
		life := g.last.Sub(g.first)
		if life < minLife {
			continue
		}
		fmt.Fprintf(w, "%s (goroutine %d), %v in the trace:\n", g.role, g.id, life.Round(time.Microsecond))
		for _, s := range []trace.GoState{trace.GoRunning, trace.GoRunnable, trace.GoWaiting, trace.GoSyscall} {
			if d := g.in[s]; d > 0 {
				fmt.Fprintf(w, "  %-9s %10v  %5.1f%%\n", s, d.Round(time.Microsecond), 100*float64(d)/float64(life))
			}
		}
		top(w, "stopped", g.stopped)
		top(w, "made runnable by", g.wokenBy)
		fmt.Fprintf(w, "  moved to another P %d× in %d runs\n", g.moved, len(g.runs))
	}
	fmt.Fprintf(w, "idle Ps started: %d\n", tr.pStarts)
	ns := make([]int, 0, len(tr.concurrent))
	for n := range tr.concurrent {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	for _, n := range ns {
		fmt.Fprintf(w, "goroutines with a role running at once: %d for %v\n", n, tr.concurrent[n].Round(time.Microsecond))
	}
}

// top prints the five most frequent entries of m.
func top(w io.Writer, what string, m map[string]int) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	for i, k := range keys {
		if i == 5 {
			break
		}
		fmt.Fprintf(w, "  %-16s %7d× %s\n", what, m[k], k)
	}
}
