package localserver

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strconv"
	"testing"
	"time"
)

// BenchmarkSSECounter streams b.N counter.v1 chunks over loopback into a
// minimal line reader; it reports the server's events per second.
func BenchmarkSSECounter(b *testing.B) {
	for _, size := range []int{0, 1024} {
		b.Run("size="+strconv.Itoa(size), func(b *testing.B) {
			s, c := startServer(b, Options{Now: time.Now})
			url := s.URL() + "/sse/counter.v1?limit=" + strconv.Itoa(b.N) + "&size=" + strconv.Itoa(size)
			b.ReportAllocs()
			b.ResetTimer()
			resp := get(b, c, url)
			n, err := countData(resp.Body)
			resp.Body.Close()
			b.StopTimer()
			if err != nil || n != b.N+1 {
				b.Fatalf("read %d data lines (%v), want %d chunks and a status", n, err, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// countData counts the data lines of an SSE body.
func countData(r io.Reader) (int, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	n := 0
	for {
		line, err := br.ReadSlice('\n')
		if bytes.HasPrefix(line, []byte("data:")) {
			n++
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil && err != bufio.ErrBufferFull {
			return n, err
		}
	}
}

// BenchmarkEncodeChunk measures building one SSE chunk event in a reused
// buffer; it must not allocate.
func BenchmarkEncodeChunk(b *testing.B) {
	cat := newCatalog()
	for _, name := range []string{"weather.monitor.v1", "counter.v1"} {
		b.Run(name, func(b *testing.B) {
			st := &sseStream{enc: newEncoder(cat[name], 0, time.Now), stats: &serverStats{}, buf: make([]byte, 0, 4096)}
			b.ReportAllocs()
			for i := range b.N {
				st.buf = st.buf[:0]
				st.appendChunk(i+1, 0)
			}
		})
	}
}

// BenchmarkMCPProgress measures one counter.v1 tool call streaming b.N
// progress notifications to a go-sdk client over Streamable HTTP.
func BenchmarkMCPProgress(b *testing.B) {
	s, c := startServer(b, Options{Now: time.Now})
	log := newProgressLog()
	cs := connect(b, s, c, streamable, "", log)
	b.ReportAllocs()
	b.ResetTimer()
	_, err := cs.CallTool(context.Background(), callParams("counter.v1", "bench", map[string]any{"limit": b.N}))
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
