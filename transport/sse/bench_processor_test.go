package sse_test

import (
	"context"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/sse"
)

// sumProgram defines the benchmark's processor: it adds each counter.v1
// chunk's n to its state and outputs the running sum, which becomes the
// stream's result when the source ends.
const sumProgram = `
(defn sum [state chunk meta]
  (let [total (+ state (:n (:chunk chunk)))]
    {:state total :output total}))`

// BenchmarkSSEIntoProcessor measures the whole raw SSE pipeline over
// loopback: the reference server's counter.v1 stream of b.N events
// (interval_ms=0) → sse.Transport → provider (decode, metadata, queue,
// worker) → the RTFS processor sum. One op is one event; events/s is the
// figure, whose target is at least 100k (docs/performance.md). Run it with
//
//	go test -run '^$' -bench SSEIntoProcessor -benchmem ./transport/sse/
func BenchmarkSSEIntoProcessor(b *testing.B) {
	defer goleak.VerifyNone(b, goleak.IgnoreCurrent())
	globals := compileSum(b)
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		b.Fatalf("start reference server: %v", err)
	}
	defer srv.Close()
	httpTr := &http.Transport{}
	defer httpTr.CloseIdleConnections()
	p := provider.New(provider.Options{
		Transports: transport.NewCatalog(sse.Kind()),
		ServerURL:  srv.URL() + "/sse",
		LookupEnv:  func(string) (string, bool) { return "", false },
		HTTPClient: &http.Client{Transport: httpTr},
	})
	defer p.Close()
	req := provider.StartRequest{
		Endpoint:     "counter.v1",
		Transport:    "sse",
		Processor:    rtfs.Symbol("sum"),
		Globals:      globals,
		InitialState: rtfs.Int(0),
		Config:       rtfs.MapOf(rtfs.Keyword("limit"), rtfs.Int(b.N), rtfs.Keyword("interval_ms"), rtfs.Int(0)),
	}
	b.ReportAllocs()
	b.ResetTimer()
	id, err := p.Start(req)
	if err != nil {
		b.Fatalf("start stream: %v", err)
	}
	got, err := p.Await(context.Background(), id)
	b.StopTimer()
	if err != nil {
		b.Fatalf("stream %s: %v", id, err)
	}
	if want := rtfs.Int(int64(b.N) * int64(b.N+1) / 2); got != want {
		b.Fatalf("stream %s: result %v, want the sum of 1..%d = %v", id, got, b.N, want)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// compileSum compiles sumProgram and returns its globals.
func compileSum(b *testing.B) *rtfs.Globals {
	b.Helper()
	prog, err := rtfs.Compile("sum.rtfs", []byte(sumProgram))
	if err != nil {
		b.Fatalf("compile: %v", err)
	}
	out, err := rtfs.NewThread(rtfs.Limits{}).Run(context.Background(), prog)
	if err != nil || out.Call != nil {
		b.Fatalf("run %s: %v (host call %v)", prog.Name(), err, out.Call)
	}
	return out.Globals
}
