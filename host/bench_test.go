package host_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/rtfs"
)

// benchRun runs src on a host with the default transports b.N times and
// reports chunks/s, n chunks per run. The program's value must be n.
func benchRun(b *testing.B, src string, n int) {
	h, err := host.Open(host.OpenOptions{Options: host.Options{Stdout: os.Stderr}})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	prog, err := rtfs.Compile("bench.rtfs", []byte(src))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		v, err := h.Run(context.Background(), prog)
		if err != nil {
			b.Fatal(err)
		}
		if v != rtfs.Int(n) {
			b.Fatalf("the processor counted %v, want %d", v, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "chunks/s")
}

// BenchmarkExecIntoProcessor: a child writes 1M short lines ("seq"); the
// exec transport (:lines) delivers each to a counting RTFS processor.
// The goal: at least 300k lines/s.
func BenchmarkExecIntoProcessor(b *testing.B) {
	const n = 1_000_000
	if _, err := exec.LookPath("seq"); err != nil {
		b.Fatalf("this benchmark needs seq (coreutils): %v", err)
	}
	benchRun(b, fmt.Sprintf(`
(defn count-line [n chunk meta] {:state (inc n)})
(def s (call :mcp.stream.start {:transport :exec :command "seq" :args ["1" "%d"]
                                :processor count-line :initial-state 0 :queue-capacity 256}))
(call :mcp.stream.await {:stream-id (:stream-id s) :timeout-ms 120000})
(:current-state (call :mcp.stream.inspect {:stream-id (:stream-id s)}))`, n), n)
}

// BenchmarkStdioIntoProcessor: the reference server's counter.v1 tool,
// served over stdio by a child (this test binary), sends progress
// notifications; a counting processor takes each (and the result).
func BenchmarkStdioIntoProcessor(b *testing.B) {
	const n = 20_000
	benchRun(b, fmt.Sprintf(`
(defn count-chunk [n chunk meta] {:state (inc n)})
(def s (call :mcp.stream.start {:transport :stdio :command %q :args ["-test.run=^$"]
                                :env {%q "1"} :endpoint "counter.v1"
                                :config {:limit %d :interval_ms 0}
                                :processor count-chunk :initial-state 0 :queue-capacity 256}))
(call :mcp.stream.await {:stream-id (:stream-id s) :timeout-ms 120000})
(dec (:current-state (call :mcp.stream.inspect {:stream-id (:stream-id s)})))`, os.Args[0], stdioServerEnv, n), n)
}
