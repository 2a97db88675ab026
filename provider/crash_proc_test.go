package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	texec "github.com/rtfshost/rtfshost/transport/exec"
	tmcp "github.com/rtfshost/rtfshost/transport/mcp"
	"github.com/rtfshost/rtfshost/transport/transporttest"
)

// The crash tests of the process transports: a child process (this test
// binary, role "exec" or "stdio", see runCrashChild) runs a persisted
// stream whose source is a producer program (this test binary again, see
// producerMain) started by :exec or :stdio; the test kills the child with
// SIGKILL at random moments and resumes it. Such a source cannot replay: the
// stream journals its chunks, and a resumed stream processes its journal,
// then either ends with :source-lost or, with :restart :on-failure, runs the
// producer again from its first chunk.
//
// The producer numbers its chunks 1..N and tags them with its run (its pid
// and start time). Whatever the kills, within each run the stream processed
// 1..K, in order, with no duplicate and no gap (K is N for a run that ended
// by itself); the chunks processed are what the stored state holds.
const (
	producerEnv     = "RTFSHOST_PROVIDER_PRODUCER" // "exec" or "stdio": the producer's protocol
	producerMarkEnv = "RTFSHOST_PROVIDER_PRODUCER_MARK"
	crashRestartEnv = "RTFSHOST_PROVIDER_CRASH_RESTART" // "1": the stream has :restart :on-failure
	crashMarkEnv    = "RTFSHOST_PROVIDER_CRASH_MARK"    // passed on to the producer as producerMarkEnv
	producerChunks  = 120
	producerEveryMs = 1
	processorMs     = 2 // the processor is slower than the producer: the queue stays full
	procCapacity    = 2
)

// procCrashSrc records each chunk of the producer as [run n]. An exec chunk
// is the NDJSON line {"run": R, "n": n}; a stdio chunk is a progress
// notification's params, the run in its :message and n in :progress; the
// call's result, the last chunk of a stdio call, is ["result" 0].
var procCrashSrc = `
(defn proc [state chunk meta]
  (call :test.sleep {:ms ` + strconv.Itoa(processorMs) + `})
  (let [run (or (:run chunk) (:message chunk) "result")
        n (or (:n chunk) (:progress chunk) 0)]
    {:state (conj state [run n]) :output n}))`

// TestCrashRecoveryExec: :exec, without :restart (each round kills once;
// the resumed stream processes its journal and ends with :source-lost).
func TestCrashRecoveryExec(t *testing.T) { runProcCrashRounds(t, "exec") }

// TestCrashRecoveryExecRestart: :exec with :restart :on-failure, killed
// again and again; every resume runs the producer anew.
func TestCrashRecoveryExecRestart(t *testing.T) { runProcCrashRestarts(t, "exec") }

// TestCrashRecoveryStdio: :stdio (an MCP tool's progress notifications),
// without :restart.
func TestCrashRecoveryStdio(t *testing.T) { runProcCrashRounds(t, "stdio") }

// TestCrashRecoveryStdioRestart: :stdio with :restart :on-failure.
func TestCrashRecoveryStdioRestart(t *testing.T) { runProcCrashRestarts(t, "stdio") }

// procCrashRounds is how many streams the tests without :restart kill;
// procCrashKills how often the tests with :restart kill their one stream.
const (
	procCrashRounds = 4
	procCrashKills  = 6
)

func runProcCrashRounds(t *testing.T, role string) {
	mark := crashMark(t)
	rng := crashRNG(t)
	for round := 0; round < procCrashRounds; round++ {
		c := &crashChild{t: t, role: role, dir: t.TempDir(), env: []string{crashMarkEnv + "=" + mark}}
		killed, ended := c.runAndKillAfter(time.Duration(10+rng.IntN(150)) * time.Millisecond)
		if ended || !killed {
			t.Fatalf("round %d: the child was not killed mid-stream (killed %v, ended %v)", round, killed, ended)
		}
		f := c.finalOf(c.runToEnd())
		if f.Status != "error" || f.Reason != "source-lost" {
			t.Fatalf("round %d: the resumed stream ended %s (%s), want error (source-lost): %s", round, f.Status, f.Reason, f.Message)
		}
		runs := checkRuns(t, f)
		if len(runs) != 1 || runs[0] >= producerChunks {
			t.Fatalf("round %d: runs %v, want one run cut short by the kill", round, runs)
		}
		c.checkStored(f)
	}
	checkNoProducer(t, mark)
}

func runProcCrashRestarts(t *testing.T, role string) {
	mark := crashMark(t)
	rng := crashRNG(t)
	c := &crashChild{t: t, role: role, dir: t.TempDir(), env: []string{crashMarkEnv + "=" + mark, crashRestartEnv + "=1"}}
	for kills := 0; kills < procCrashKills; kills++ {
		killed, ended := c.runAndKillAfter(time.Duration(10+rng.IntN(150)) * time.Millisecond)
		if ended || !killed {
			t.Fatalf("kill %d: the child was not killed mid-stream (killed %v, ended %v)", kills, killed, ended)
		}
	}
	f := c.finalOf(c.runToEnd())
	if f.Status != "completed" {
		t.Fatalf("the stream ended %s (%s): %s", f.Status, f.Reason, f.Message)
	}
	runs := checkRuns(t, f)
	if len(runs) < 2 || runs[len(runs)-1] != producerChunks {
		t.Fatalf("runs %v: want several, the last one whole (%d chunks)", runs, producerChunks)
	}
	c.checkStored(f)
	checkNoProducer(t, mark)
}

func crashMark(t *testing.T) string {
	return t.Name() + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

func crashRNG(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 11))
}

// runAndKillAfter starts the child and kills it d after it reported that its
// stream runs (a process-transport child does once it has processed a chunk). ended reports that the stream had ended before the kill.
func (c *crashChild) runAndKillAfter(d time.Duration) (killed, ended bool) {
	c.t.Helper()
	ch := c.start()
	if _, ok := ch.waitLine("ready", 20*time.Second); !ok {
		_ = ch.cmd.Process.Kill()
		ch.finish()
		c.t.Fatal("the child did not report ready")
	}
	time.Sleep(d)
	_ = ch.cmd.Process.Kill()
	final, killed := ch.finish()
	return killed && final == "", final != ""
}

// procFinal is the final line of a process-transport crash child.
type procFinal struct {
	State     [][2]json.RawMessage `json:"state"`
	Processed int64                `json:"processed"`
	Status    string               `json:"status"`
	Reason    string               `json:"reason"`
	Message   string               `json:"message"`
}

func (c *crashChild) finalOf(line string) procFinal {
	c.t.Helper()
	var f procFinal
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "final ")), &f); err != nil {
		c.t.Fatalf("final line %q: %v", line, err)
	}
	return f
}

// checkRuns checks that each run's chunks are 1..K in order, that the runs
// follow each other (a run's chunks are never interleaved with another's),
// and that the stream counted as processed exactly the chunks it recorded;
// it returns each run's K.
func checkRuns(t *testing.T, f procFinal) []int {
	t.Helper()
	var runs []int
	var names []string
	for i, e := range f.State {
		var run string
		var n float64
		if json.Unmarshal(e[0], &run) != nil || json.Unmarshal(e[1], &n) != nil {
			t.Fatalf("entry %d of the state is not [run n]: %s %s", i, e[0], e[1])
		}
		if run == "result" {
			if i != len(f.State)-1 {
				t.Fatalf("the call's result at entry %d is not the last chunk\n%s", i, stateText(f))
			}
			continue
		}
		if len(names) == 0 || names[len(names)-1] != run {
			if slices.Contains(names, run) {
				t.Fatalf("run %d resumes at entry %d after another run: chunks out of order\n%s", slices.Index(names, run), i, stateText(f))
			}
			names = append(names, run)
			runs = append(runs, 0)
		}
		k := &runs[len(runs)-1]
		if int(n) != *k+1 {
			t.Fatalf("run %d: chunk %v after %d at entry %d: a gap, a duplicate or a chunk out of order\n%s", len(runs)-1, n, *k, i, stateText(f))
		}
		*k++
	}
	if f.Processed != int64(len(f.State)) {
		t.Fatalf("processed-chunks %d, but the state records %d chunks", f.Processed, len(f.State))
	}
	t.Logf("runs of the producer: %v chunks", runs)
	return runs
}

// stateText prints the state compactly: the runs numbered from 0, "run:n".
func stateText(f procFinal) string {
	var b strings.Builder
	var names []string
	for _, e := range f.State {
		var run string
		_ = json.Unmarshal(e[0], &run)
		i := slices.Index(names, run)
		if i < 0 {
			i, names = len(names), append(names, run)
		}
		fmt.Fprintf(&b, "%d:%s ", i, e[1])
	}
	return b.String()
}

// checkStored opens the child's store in this process and checks that it
// holds the stream as the child last reported it.
func (c *crashChild) checkStored(f procFinal) {
	c.t.Helper()
	store, err := openCrashStore(c.dir)
	if err != nil {
		c.t.Fatal(err)
	}
	defer store.Close()
	p := New(Options{Store: store, LookupEnv: noEnv, ManualConnect: true, Transports: procCatalog()})
	defer p.Close()
	if err := p.Recover(context.Background()); err != nil {
		c.t.Fatal(err)
	}
	stored, err := procFinalOf(p)
	if err != nil {
		c.t.Fatal(err)
	}
	if stateText(stored) != stateText(f) || stored.Processed != f.Processed || stored.Status != f.Status {
		c.t.Fatalf("the store holds %s, processed %d (%s); the child reported %s, processed %d (%s)",
			stateText(stored), stored.Processed, stored.Status, stateText(f), f.Processed, f.Status)
	}
}

// procFinalOf reads the crash stream's final report from p.
func procFinalOf(p *Provider) (procFinal, error) {
	info, err := p.Inspect(crashStream, InspectOptions{})
	if err != nil {
		return procFinal{}, err
	}
	st, err := p.Status(context.Background(), crashStream)
	if err != nil {
		return procFinal{}, err
	}
	js, err := rtfs.ToJSON(path(info, "current-state"))
	if err != nil {
		return procFinal{}, err
	}
	f := procFinal{Status: string(st.State), Reason: st.EndReason, Message: st.Message}
	if err := json.Unmarshal(js, &f.State); err != nil {
		return procFinal{}, fmt.Errorf("state %s: %w", js, err)
	}
	if n, ok := path(info, "stats", "processed-chunks").(rtfs.Int); ok {
		f.Processed = int64(n)
	}
	return f, nil
}

// checkNoProducer fails the test if a producer it started still runs.
func checkNoProducer(t *testing.T, mark string) {
	t.Helper()
	if pids := transporttest.ProcessesWith(producerMarkEnv+"="+mark, 2*time.Second); len(pids) > 0 {
		t.Errorf("producers left running: %v", pids)
	}
}

// procCrashChildMain is the child's main for the roles exec and stdio.
func procCrashChildMain(role, dir string) error {
	store, err := openCrashStore(dir)
	if err != nil {
		return err
	}
	defer store.Close()
	reg := capabilities.NewRegistry()
	if err := reg.Register(capabilities.Capability{ID: "test.sleep", Handler: func(ctx context.Context, c *capabilities.Call) (capabilities.Answer, error) {
		ms, _ := capabilities.Field(c.Args[0].(*rtfs.Map), "ms")
		n, _ := ms.(rtfs.Int)
		select {
		case <-time.After(time.Duration(n) * time.Millisecond):
		case <-ctx.Done():
			return capabilities.Answer{}, ctx.Err()
		}
		return capabilities.Now(nil), nil
	}}); err != nil {
		return err
	}
	p := New(Options{Store: store, LookupEnv: noEnv, Capabilities: reg, Transports: procCatalog()})
	defer p.Close()
	for _, c := range p.Capabilities() {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	ctx := context.Background()
	if err := p.Recover(ctx); err != nil {
		return err
	}
	if !p.has(crashStream) {
		if err := startProcCrashStream(p, role); err != nil {
			return err
		}
	}
	// Ready once the stream has processed a chunk here, so that a kill
	// lands with chunks in the journal.
	first, _ := procFinalOf(p)
	for {
		f, err := procFinalOf(p)
		if err != nil {
			return err
		}
		if f.Processed > first.Processed || State(f.Status).Terminal() {
			break
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Println("ready")
	if _, err := p.Await(ctx, crashStream); err != nil {
		var se *StreamError
		if !errors.As(err, &se) {
			return err
		}
	}
	f, err := procFinalOf(p)
	if err != nil {
		return err
	}
	line, err := json.Marshal(f)
	if err != nil {
		return err
	}
	fmt.Printf("final %s\n", line)
	return nil
}

func startProcCrashStream(p *Provider, role string) error {
	prog, err := rtfs.Compile("crash-proc.rtfs", []byte(procCrashSrc))
	if err != nil {
		return err
	}
	out, err := rtfs.NewThread(rtfs.Limits{}).Run(context.Background(), prog)
	if err != nil {
		return err
	}
	env, _ := json.Marshal(map[string]string{producerEnv: role, producerMarkEnv: os.Getenv(crashMarkEnv)})
	keys := map[string]json.RawMessage{
		"command": json.RawMessage(strconv.Quote(os.Args[0])),
		"args":    json.RawMessage(`["-test.run=^$"]`),
		"env":     env,
	}
	if role == "exec" {
		keys["framing"] = json.RawMessage(`"ndjson"`)
	}
	if os.Getenv(crashRestartEnv) == "1" {
		keys["restart"] = json.RawMessage(`"on-failure"`)
	}
	req := StartRequest{
		StreamID: crashStream, Transport: role, Processor: rtfs.Symbol("proc"), Globals: out.Globals,
		InitialState: rtfs.NewVector(), QueueCapacity: procCapacity, TransportKeys: keys,
	}
	if role == "stdio" {
		req.Endpoint = "count"
	}
	_, err = p.Start(req)
	return err
}

// producerMain is the producer: for exec, the NDJSON lines {"run": R, "n":
// n} for n in 1..producerChunks, one every producerEveryMs; for stdio, an MCP
// server over stdin and stdout whose tool count sends as many progress
// notifications (the run in the message), then its result.
func producerMain(kind string) int {
	run := strconv.Itoa(os.Getpid()) + "." + strconv.FormatInt(time.Now().UnixNano(), 36)
	switch kind {
	case "exec":
		for n := 1; n <= producerChunks; n++ {
			if _, err := fmt.Printf("{\"run\":%q,\"n\":%d}\n", run, n); err != nil {
				return 1
			}
			time.Sleep(producerEveryMs * time.Millisecond)
		}
		return 0
	case "stdio":
		srv := sdk.NewServer(&sdk.Implementation{Name: "crash-producer", Version: "1"}, nil)
		sdk.AddTool(srv, &sdk.Tool{Name: "count"}, func(ctx context.Context, req *sdk.CallToolRequest, _ map[string]any) (*sdk.CallToolResult, any, error) {
			for n := 1; n <= producerChunks; n++ {
				if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
					Progress: float64(n), Total: producerChunks, Message: run}); err != nil {
					return nil, nil, err
				}
				time.Sleep(producerEveryMs * time.Millisecond)
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil, nil
		})
		if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "producer:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "producer: unknown kind %q\n", kind)
	return 2
}

// procCatalog is the catalog of the process transports, as a host has them.
func procCatalog() *transport.Catalog {
	return transport.NewCatalog(texec.Kind(), tmcp.StdioKind())
}
