package sse

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	r3sse "github.com/r3labs/sse/v2"

	"github.com/rtfshost/rtfshost/transport"
)

// countSink counts chunks and bytes; it is the cheapest possible host.
type countSink struct{ n, bytes int }

func (s *countSink) Deliver(_ context.Context, c transport.Chunk) error {
	s.n++
	s.bytes += len(c.Data)
	return nil
}

// counterURL is the reference server's counter.v1 stream of n small events.
func counterQuery(n int) map[string]string {
	return map[string]string{"limit": strconv.Itoa(n), "interval_ms": "0"}
}

// cpuTime returns the CPU time (user and system) the process has used, the
// server's goroutines included: on a shared machine, CPU time per event is
// a steadier measure of the work than events per second.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSSE streams b.N small events (about 200 bytes each) from the
// reference server over loopback into a counting sink. One op is one event;
// cpu-ns/event is the CPU time of the server and the client together.
func BenchmarkSSE(b *testing.B) {
	srv := startLocalServer(b)
	spec := transport.Spec{Endpoint: "counter.v1", HTTP: transport.HTTP{ServerURL: srv.URL() + "/sse", Query: counterQuery(b.N)}}
	sink := &countSink{}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	if err := new(Transport).Run(context.Background(), spec, "", sink); err != nil {
		b.Fatal(err)
	}
	cpu := cpuTime(b) - cpu0
	b.StopTimer()
	if sink.n != b.N {
		b.Fatalf("delivered %d events, want %d", sink.n, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/event")
	b.SetBytes(int64(sink.bytes / b.N))
}

// BenchmarkBareR3labsReader reads the same stream as BenchmarkSSE with a bare
// r3labs EventStreamReader (event splitting only, no field parsing), the
// baseline BenchmarkSSE is compared with; cpu-ns/event likewise counts the
// server's CPU time with the reader's.
func BenchmarkBareR3labsReader(b *testing.B) {
	srv := startLocalServer(b)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	url := srv.URL() + "/sse/counter.v1?interval_ms=0&limit=" + strconv.Itoa(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	resp, err := client.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	rd := r3sse.NewEventStreamReader(resp.Body, 16<<20)
	n, size := 0, 0
	for {
		ev, err := rd.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		n++
		size += len(ev)
	}
	cpu := cpuTime(b) - cpu0
	b.StopTimer()
	if n != b.N+1 { // the chunks and the terminal status event
		b.Fatalf("read %d events, want %d", n, b.N+1)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/event")
	b.SetBytes(int64(size / n))
}
