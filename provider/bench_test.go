package provider

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// The reference processor (rtfs.BenchmarkProcessor runs it too): add the
// chunk's temp to the readings kept in the state and output their count;
// except that at 100 readings it resets its state and continues instead of
// completing, so that one stream runs for the whole benchmark (same work per
// chunk).
const anchorProcessor = `
(defn proc [state chunk meta]
  (let [rs (conj (get state :readings) (get chunk :temp))]
    (if (< (count rs) 100)
      {:state (assoc state :readings rs) :action :continue :output (count rs)}
      {:state (assoc state :readings []) :action :continue :output (count rs)})))`

var benchChunk = []byte(`{"temp":21.5,"ts":12345,"sensor":"a"}`)

// runPipeline pushes b.N chunks through one mock stream, reports chunks/s,
// CPU time per chunk and garbage collections per million chunks
// (gc/Mchunk), and returns the wall time and the CPU time.
func runPipeline(b *testing.B, req StartRequest) (wall, cpu time.Duration) {
	b.Helper()
	tr := &mock.Transport{Buffer: 256}
	p := New(Options{LookupEnv: noEnv, Transports: catalogOf(map[string]transport.StreamTransport{"mock": tr}), QueueCapacity: 256})
	defer p.Close()
	req.Endpoint, req.Transport, req.StreamID = "bench", "mock", "bench"
	req.InitialState = rtfs.MapOf(rtfs.Keyword("readings"), rtfs.NewVector())
	id, err := p.Start(req)
	if err != nil {
		b.Fatal(err)
	}
	src := tr.Source(id)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, gc0 := cpuTime(b), gcCycles()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if err := src.Send(ctx, transport.Chunk{Data: benchChunk, ID: "x"}); err != nil {
			b.Fatal(err)
		}
	}
	src.Close()
	st, err := p.Await(ctx, id)
	elapsed := time.Since(start)
	cpu, gcs := cpuTime(b)-cpu0, gcCycles()-gc0
	b.StopTimer()
	if err != nil {
		b.Fatal(err, st)
	}
	info, _ := p.Inspect(id, InspectOptions{OmitQueue: true, OmitState: true, OmitInitialState: true})
	if n := path(info, "stats", "processed-chunks"); n != rtfs.Int(b.N) {
		b.Fatalf("processed %v chunks, want %d", n, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "chunks/s")
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/chunk")
	b.ReportMetric(float64(gcs)*1e6/float64(b.N), "gc/Mchunk")
	return elapsed, cpu
}

// gcCycles returns how many garbage collections the process has completed:
// per chunk, an exact measure of the garbage a pipeline makes (given the
// heap it keeps), which a loaded machine does not disturb.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// cpuTime returns the CPU time (user and system) the process has used: on a
// shared machine it is a steadier measure of work per chunk than wall time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPipelineRTFS: the whole pipeline (mock transport, decode, queue,
// worker, RTFS processor, directive) on one stream. It also times b.N bare
// processor calls in the same process and reports the difference per chunk
// as host-ns/chunk: the host's overhead beyond the processor call. The same
// difference in CPU time (every goroutine's, the producer's and the GC's
// included) is host-cpu-ns/chunk, which the load of a shared machine
// disturbs less.
func BenchmarkPipelineRTFS(b *testing.B) {
	g := compileGlobals(b, anchorProcessor)
	pipeline, pipelineCPU := runPipeline(b, StartRequest{Processor: rtfs.Symbol("proc"), Globals: g})
	cpu0 := cpuTime(b)
	bare := timeProcessorCalls(b, g, b.N)
	bareCPU := cpuTime(b) - cpu0
	b.ReportMetric(float64(pipeline-bare)/float64(b.N), "host-ns/chunk")
	b.ReportMetric(float64(pipelineCPU-bareCPU)/float64(b.N), "host-cpu-ns/chunk")
}

// timeProcessorCalls times n calls of the anchor processor, threading state.
func timeProcessorCalls(b *testing.B, g *rtfs.Globals, n int) time.Duration {
	call := anchorCaller(g)
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// anchorCaller returns a function that makes one call of the anchor
// processor as the worker makes it (decoded chunk, the metadata built once
// if the processor reads it: the anchor processor does not), threading the
// state from call to call. The function has a processor and state of its
// own, so it is not safe for concurrent use.
func anchorCaller(g *rtfs.Globals) func() error {
	fn, _ := g.Get("proc")
	proc := stream.NewRTFSProcessor("proc", fn, g, rtfs.Limits{}, nil)
	chunk := stream.DecodeChunkInto(new(rtfs.JSONDecoder), benchChunk, "", nil)
	mb := stream.NewMetaBuilder(rtfs.String("bench"), rtfs.String("bench"))
	var meta rtfs.Value = rtfs.Nil
	if proc.WantsMeta() {
		meta = mb.Build(&stream.Item{ID: "x", Received: time.Now()})
	}
	var state rtfs.Value = rtfs.MapOf(rtfs.Keyword("readings"), rtfs.NewVector())
	ctx := context.Background()
	return func() error {
		res, err := proc.Call(ctx, state, chunk, meta)
		if err != nil {
			return err
		}
		state, _ = res.(*rtfs.Map).GetKeyword("state")
		return nil
	}
}

// BenchmarkPipelineGoNoop: the same pipeline with a Go processor that does
// nothing: the host's own cost per chunk.
func BenchmarkPipelineGoNoop(b *testing.B) {
	res := rtfs.MapOf(rtfs.Keyword("action"), rtfs.Keyword("continue"))
	runPipeline(b, StartRequest{goProc: goProc(func(state, chunk, meta rtfs.Value) (rtfs.Value, error) { return res, nil })})
}

// BenchmarkProcessorCall: the RTFS processor call alone, as the worker makes
// it (decoded chunk, the metadata built once if the processor reads it: the
// anchor processor does not), threading the state; the pipeline's host
// overhead is BenchmarkPipelineRTFS minus this.
func BenchmarkProcessorCall(b *testing.B) {
	g := compileGlobals(b, anchorProcessor)
	b.ReportAllocs()
	b.ResetTimer()
	timeProcessorCalls(b, g, b.N)
}

// BenchmarkProcessorCallParallel: the call of BenchmarkProcessorCall on
// every P at once, one processor and state per goroutine, as streams on
// several cores make it. ns/op is wall time per call over all goroutines:
// BenchmarkProcessorCall's ns/op divided by this one is how many cores'
// worth of calls the machine runs (its garbage collection included).
func BenchmarkProcessorCallParallel(b *testing.B) {
	g := compileGlobals(b, anchorProcessor)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		call := anchorCaller(g)
		for pb.Next() {
			if err := call(); err != nil {
				b.Error(err) // not Fatal: this is not the benchmark's goroutine
				return
			}
		}
	})
}

// BenchmarkDecodeChunk: the per-chunk work of Deliver (decode and control
// check) and of the worker (metadata, for a processor that reads it).
func BenchmarkDecodeChunk(b *testing.B) {
	c := transport.Chunk{Data: benchChunk, Event: "chunk", ID: "17", ReceivedAt: time.Now()}
	mb := stream.NewMetaBuilder(rtfs.String("s"), rtfs.String("e"))
	var dec rtfs.JSONDecoder
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		it := stream.Item{Event: c.Event, ID: c.ID, Received: c.ReceivedAt, Seq: int64(i)}
		if it.Chunk = stream.DecodeChunkInto(&dec, c.Data, c.Event, nil); stream.ControlAction(it.Chunk) != stream.ActNone || mb.Build(&it) == nil {
			b.Fatal("unexpected")
		}
	}
}

// BenchmarkIdleStreams10k starts 10,000 streams on the mock transport that
// receive nothing, and reports the process's RSS, the heap and stacks the
// streams use, and goroutines per stream.
func BenchmarkIdleStreams10k(b *testing.B) {
	const n = 10000
	for i := 0; i < b.N; i++ {
		tr := &mock.Transport{}
		p := New(Options{LookupEnv: noEnv, Transports: catalogOf(map[string]transport.StreamTransport{"mock": tr})})
		runtime.GC()
		g0 := runtime.NumGoroutine()
		var m0 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for j := 0; j < n; j++ {
			if _, err := p.Start(StartRequest{Endpoint: "idle", Transport: "mock", StreamID: "idle-" + strconv.Itoa(j), goProc: counter()}); err != nil {
				b.Fatal(err)
			}
		}
		waitGoroutines(b, g0+2*n)
		runtime.GC()
		var m1 runtime.MemStats
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(runtime.NumGoroutine()-g0)/n, "goroutines/stream")
		b.ReportMetric(float64((m1.HeapInuse+m1.StackInuse)-(m0.HeapInuse+m0.StackInuse))/(1<<20), "MB-heap+stack")
		b.ReportMetric(rssMB(b), "MB-RSS")
		p.Close()
	}
}

// waitGoroutines waits until the streams' goroutines have all started.
func waitGoroutines(b *testing.B, want int) {
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() < want {
		if time.Now().After(deadline) {
			b.Fatalf("%d goroutines, want %d", runtime.NumGoroutine(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// rssMB reads VmRSS from /proc/self/status (Linux; elsewhere the benchmark
// fails, saying so, rather than report a number it could not measure).
func rssMB(b *testing.B) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatalf("RSS needs /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			var kb float64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb); err == nil {
				return kb / 1024
			}
		}
	}
	b.Fatal("VmRSS not found")
	return 0
}
