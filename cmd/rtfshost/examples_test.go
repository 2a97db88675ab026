//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/internal/localserver"
)

// exampleCase is one program under ../../examples and what its run must print.
type exampleCase struct {
	file    string
	streams map[string]streamWant
	// result is the program's value as JSON; "" when check tests it.
	result string
	// check, when set, looks at the lines more closely.
	check func(t *testing.T, r result, lines []outLine, runs map[string]*streamRun)
	// fromRoot runs the example in the repository's root, as its header
	// says (it reads a file under examples/).
	fromRoot bool
}

// exampleCases are the examples that run on any server URL. mcp-tool.rtfs
// names its server (127.0.0.1:2025) and is tested by testMCPToolExample.
func exampleCases() []exampleCase {
	return []exampleCase{
		{
			file: "weather.rtfs",
			streams: map[string]streamWant{
				"weather.monitor.v1": {outputs: 12, state: "completed", endReason: "processor"},
			},
			result: `{"statistics":{"samples":12,"min":5.2,"max":24.8,"avg":18.833333333333336},
				"cities":["Paris","Tokyo","Nairobi","Reykjavik","Lima","Sydney"],"last_seq":12}`,
			check: checkWeather,
		},
		{
			file:     "cli-agent.rtfs",
			fromRoot: true,
			streams: map[string]streamWant{
				"agent.review": {outputs: -1, state: "completed", endReason: "processor"},
			},
			result: `{"result":"3 findings: 1 critical, 1 high, 1 medium. Fix internal/db/orders.go:57 first.","ok":true,"turns":9,
				"findings":[
					{"severity":"critical","where":"internal/db/orders.go:57","title":"OrderByID concatenates the id from the URL into SQL (injection)"},
					{"severity":"high","where":"internal/config/config.go:14","title":"a live API token is committed in the source"},
					{"severity":"medium","where":"internal/http/handlers.go:88","title":"errors from the database are written to the client verbatim"}],
				"tools":{"Glob":1,"Read":4,"Grep":1},"model":"claude-sonnet-4-5"}`,
			check: checkAgent,
		},
		{
			file: "backpressure.rtfs",
			streams: map[string]streamWant{
				"counter.v1": {outputs: 8, state: "completed", endReason: "processor"},
			},
			check: checkBackpressure,
		},
		{
			file: "resilient.rtfs",
			streams: map[string]streamWant{
				"counter.v1": {outputs: 30, state: "completed", endReason: "source-ended"},
			},
			result: `{"processed":30,"succeeded":24,"transient-errors":6,"sum":360,
				"failed-seqs":[5,10,15,20,25,30],"last-error":"sensor glitch on reading 30"}`,
			check: checkResilient,
		},
		{
			file: "multiplex.rtfs",
			streams: map[string]streamWant{
				"weather.monitor.v1": {outputs: 12, state: "completed", endReason: "source-ended"},
				"docs.search.v1":     {outputs: 6, state: "completed", endReason: "source-ended"},
				"news.digest.v1":     {outputs: 9, state: "completed", endReason: "source-ended"},
			},
			result: `{"total":3,
				"streams":[
					{"endpoint":"weather.monitor.v1","state":"completed","processed":12,"processor":"warmest"},
					{"endpoint":"docs.search.v1","state":"completed","processed":6,"processor":"titles"},
					{"endpoint":"news.digest.v1","state":"completed","processed":9,"processor":"per-source"}],
				"warmest":{"city":"Nairobi","temperature_c":24.8},
				"titles":["Streaming basics","MCP Streamable HTTP"],
				"per-source":{"rtfs-weekly":3,"systems-digest":3,"security-notes":3}}`,
		},
		{
			file: "await.rtfs",
			streams: map[string]streamWant{
				"weather.monitor.v1": {outputs: 12, state: "completed", endReason: "source-ended"},
			},
			result: `{"cities":6,"readings":12,
				"averages":[{"city":"Lima","avg":19.85},{"city":"Nairobi","avg":24.65},{"city":"Paris","avg":18.55},
					{"city":"Reykjavik","avg":5.35},{"city":"Sydney","avg":21.35},{"city":"Tokyo","avg":23.25}],
				"warmest":"Nairobi","coldest":"Reykjavik"}`,
		},
	}
}

// testExamples runs every example with --json against the test's server and
// checks its lines and its result.
func (c *cli) testExamples(t *testing.T) {
	t.Parallel()
	cases := exampleCases()
	covered := map[string]bool{"mcp-tool.rtfs": true}
	for _, ex := range cases {
		covered[ex.file] = true
	}
	files, err := filepath.Glob(filepath.Join(c.examples, "*.rtfs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.rtfs") {
			continue // an example's tests (TestExampleTests)
		}
		if !covered[filepath.Base(f)] {
			t.Errorf("example %s has no end-to-end test", filepath.Base(f))
		}
	}
	for _, ex := range cases {
		t.Run(strings.TrimSuffix(ex.file, ".rtfs"), func(t *testing.T) {
			t.Parallel()
			// Twice in a row on one data directory, as a newcomer tries
			// an example: both runs give the example's result.
			data := filepath.Join(t.TempDir(), "data")
			args := []string{"run", "--data", data, "--json", "--server-url", c.serverURL, filepath.Join(c.examples, ex.file)}
			dir := t.TempDir()
			if ex.fromRoot {
				dir = filepath.Dir(c.examples)
			}
			for range 2 {
				c.checkExample(t, c.runIn(t, dir, args...), ex)
			}
		})
	}
}

// checkExample checks a finished example run against ex.
func (c *cli) checkExample(t *testing.T, r result, ex exampleCase) {
	t.Helper()
	wantCode(t, r, exitOK)
	if r.stderr != "" {
		t.Errorf("a clean run printed on stderr\n%s", r)
	}
	lines := parseJSONLines(t, r)
	runs := checkLines(t, r, lines, ex.streams)
	last := lines[len(lines)-1]
	if last.Type != "result" {
		t.Fatalf("the last line is not the result\n%s", r)
	}
	if ex.result != "" {
		wantJSON(t, r, "result", last.Value, ex.result)
	}
	if ex.check != nil {
		ex.check(t, r, lines, runs)
	}
}

// checkWeather: one output per reading, numbered from 1 as the server numbers them, with the running
// sample count and the cities in the dataset's order; the program logs the
// stream id it started.
func checkWeather(t *testing.T, r result, lines []outLine, runs map[string]*streamRun) {
	cities := []string{"Paris", "Tokyo", "Nairobi", "Reykjavik", "Lima", "Sydney"}
	outs := runs["weather.monitor.v1"].outputs
	for i, o := range outs[:11] {
		var v struct {
			SampleCount int    `json:"sample_count"`
			City        string `json:"city"`
		}
		if err := json.Unmarshal(o.Output, &v); err != nil || *o.Seq != int64(i+1) || v.SampleCount != i+1 || v.City != cities[i%6] {
			t.Errorf("output %d: seq %d %s (%v)", i, *o.Seq, o.Output, err)
		}
	}
	// The program's log line names the stream; it races the stream's
	// outputs to the reporter, so it may come after the first of them,
	// but before the stream's status line.
	logged := false
	for _, l := range lines {
		if l.Type == "status" {
			break
		}
		logged = logged || (l.Type == "log" && l.Message == "started stream "+outs[0].Stream)
	}
	if !logged {
		t.Errorf("no log line naming stream %s before its status line\n%s", outs[0].Stream, r)
	}
}

// checkAgent: the recorded review's events become outputs in order: the
// findings each on its own; the tool calls (low priority, one :kind per
// tool) all there, a run of one tool's calls possibly delivered as one with
// their count; nothing dropped (the replay is slow enough).
func checkAgent(t *testing.T, r result, lines []outLine, runs map[string]*streamRun) {
	var findings []string
	tools := map[string]int64{}
	for _, o := range runs["agent.review"].outputs {
		var v struct {
			Finding *struct{ Severity string } `json:"finding"`
			Tool    string                     `json:"tool"`
		}
		if err := json.Unmarshal(o.Output, &v); err != nil {
			t.Fatal(err)
		}
		if v.Finding != nil {
			findings = append(findings, v.Finding.Severity)
		}
		if v.Tool != "" {
			n := max(o.Count, 1)
			if o.Count > 1 && o.Kind != v.Tool {
				t.Errorf("a coalesced output of kind %q is a call of %s", o.Kind, v.Tool)
			}
			tools[v.Tool] += n
		}
	}
	if strings.Join(findings, " ") != "critical high medium" {
		t.Errorf("findings %v", findings)
	}
	if fmt.Sprint(tools) != "map[Glob:1 Grep:1 Read:4]" {
		t.Errorf("tool calls delivered %v", tools)
	}
	// The phases reach their milestones: progress lines with done rising,
	// their milestones in the phases' order up to report (a milestone
	// reached within one batch of another shows as the later one).
	var milestones []string
	var done []float64
	for _, l := range lines {
		if l.Type == "progress" && strings.HasPrefix(l.Stream, "agent.review-") && l.Progress != nil {
			milestones, done = append(milestones, l.Progress.Milestone), append(done, l.Progress.Done)
		}
	}
	phases := []string{"init", "explore", "analyze", "verify", "report"}
	order := []int{}
	for _, m := range milestones {
		if m != "" {
			order = append(order, slices.Index(phases, m))
		}
	}
	if len(done) == 0 || !slices.IsSorted(done) || done[len(done)-1] < 0.99 || len(order) == 0 || slices.Contains(order, -1) ||
		!slices.IsSorted(order) || order[len(order)-1] != len(phases)-1 {
		t.Errorf("progress lines: milestones %v, done %v\n%s", milestones, done, r)
	}
	for _, l := range lines {
		if l.Type == "dropped" {
			t.Errorf("outputs dropped: %+v\n%s", l, r)
		}
	}
}

// checkBackpressure: one output per flushed batch of 25 with the running
// total, then the final sum: every chunk counted exactly once in spite of
// the pauses, and a backlog that built up while the stream was paused.
func checkBackpressure(t *testing.T, r result, lines []outLine, runs map[string]*streamRun) {
	outs := runs["counter.v1"].outputs
	for i, o := range outs[:7] {
		n := 25 * (i + 1)
		want := fmt.Sprintf(`{"status":"flushed","total":%d,"pauses":%d}`, n*(n+1)/2, i+1)
		if *o.Seq != int64(n) {
			t.Errorf("output %d has seq %d, want %d", i, *o.Seq, n)
		}
		wantJSON(t, r, fmt.Sprintf("output %d", i), o.Output, want)
	}
	var res map[string]any
	if err := json.Unmarshal(lines[len(lines)-1].Value, &res); err != nil {
		t.Fatal(err)
	}
	backlog, ok := res["max-backlog"].(float64)
	// The queue holds 8; the first chunk after a pause sees what piled up.
	if !ok || backlog < 1 || backlog > 8 {
		t.Errorf("max-backlog %v, want 1..8 (the queue's capacity)", res["max-backlog"])
	}
	delete(res, "max-backlog")
	got, _ := json.Marshal(res)
	wantJSON(t, r, "result", got, `{"sum":20100,"expected":20100,"chunks":200,"pauses":7}`)
}

// checkResilient: every chunk gives an output; the failed ones (every fifth)
// are counted and the stream goes on.
func checkResilient(t *testing.T, r result, lines []outLine, runs map[string]*streamRun) {
	for i, o := range runs["counter.v1"].outputs {
		var v struct {
			Processed       int     `json:"processed"`
			TransientErrors int     `json:"transient-errors"`
			LastError       *string `json:"last-error"`
		}
		if err := json.Unmarshal(o.Output, &v); err != nil {
			t.Fatal(err)
		}
		n := i + 1
		if *o.Seq != int64(n) || v.Processed != n || v.TransientErrors != n/5 {
			t.Errorf("output %d: seq %d %s", i, *o.Seq, o.Output)
		}
		if n%5 == 0 && (v.LastError == nil || *v.LastError != fmt.Sprintf("sensor glitch on reading %d", n)) {
			t.Errorf("output %d does not report the glitch: %s", i, o.Output)
		}
	}
}

// testMCPToolExample runs mcp-tool.rtfs as shipped, against the embedded
// server on the default address: the tool's progress notifications become
// chunks in order, and its result completes the stream.
func (c *cli) testMCPToolExample(t *testing.T) {
	path := filepath.Join(c.examples, "mcp-tool.rtfs")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), `(def mcp-url`) {
		t.Fatalf("%s no longer defines mcp-url", path)
	}
	c.checkMCPToolRun(t, c.run(t, "run", "--json", "--server-url", c.serverURL, path)) // --server-url moves it
	waitDefaultAddrFree(t)
	c.checkMCPToolRun(t, c.run(t, "run", "--json", path))

	// The same processor on :stdio: the reference server's tools served by
	// "rtfshost localserver --stdio" as a child process (docs/transports.md,
	// :stdio).
	waitDefaultAddrFree(t)
	const viaHTTP = "     :transport :mcp\n     :server-url mcp-url\n"
	if !strings.Contains(string(src), viaHTTP) {
		t.Fatalf("%s no longer starts its stream with %q", path, viaHTTP)
	}
	viaStdio := fmt.Sprintf("     :transport :stdio\n     :command %q :args [\"localserver\" \"--stdio\"]\n", c.bin)
	stdio := filepath.Join(t.TempDir(), "mcp-tool-stdio.rtfs")
	if err := os.WriteFile(stdio, []byte(strings.Replace(string(src), viaHTTP, viaStdio, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.checkMCPToolRun(t, c.run(t, "run", "--json", stdio))
}

// checkMCPToolRun checks the lines of a run of examples/mcp-tool.rtfs.
func (c *cli) checkMCPToolRun(t *testing.T, r result) {
	wantCode(t, r, exitOK)
	lines := parseJSONLines(t, r)
	runs := checkLines(t, r, lines, map[string]streamWant{
		"news.digest.v1": {outputs: 7, state: "completed", endReason: "processor"},
	})
	headlines := []string{"Runtime adds resumable streams", "Backpressure explained", "Loopback servers and origins"}
	for i, o := range runs["news.digest.v1"].outputs[:6] {
		want := fmt.Sprintf(`{"progress":%d,"total":6,"headline":%q}`, i+1, headlines[i%3])
		wantJSON(t, r, fmt.Sprintf("output %d", i), o.Output, want)
	}
	wantJSON(t, r, "result", lines[len(lines)-1].Value, `{
		"headlines":["Runtime adds resumable streams","Backpressure explained","Loopback servers and origins",
			"Runtime adds resumable streams","Backpressure explained","Loopback servers and origins"],
		"sources":["rtfs-weekly","systems-digest","security-notes"],
		"progress-seen":[1,2,3,4,5,6],
		"tool-status":"complete","chunks-sent":6,"is-error":false}`)
	if err := listenOnce(defaultLocalAddr); err != nil {
		t.Fatalf("after the run, %s is still in use: %v", defaultLocalAddr, err)
	}
}

// BenchmarkRunCounter measures a whole "rtfshost run --json" of
// testdata/bench_sum.rtfs (20,000 chunks of counter.v1 over raw SSE from an
// in-process reference server, summed by a processor): process start, intake,
// processing and exit. It reports the chunks per second of the run.
func BenchmarkRunCounter(b *testing.B) {
	c := buildCLI(b)
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	const chunks = 20000
	path := filepath.Join(c.testdata, "bench_sum.rtfs")
	for b.Loop() {
		r := c.run(b, "run", "--json", "--server-url", srv.URL()+"/sse", path)
		wantCode(b, r, exitOK)
		lines := parseJSONLines(b, r)
		wantJSON(b, r, "result", lines[len(lines)-1].Value, `{"sum":200010000,"chunks":20000}`)
	}
	b.ReportMetric(float64(chunks)*float64(b.N)/b.Elapsed().Seconds(), "chunks/s")
}
