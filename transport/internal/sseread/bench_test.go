package sseread

import (
	"fmt"
	"testing"
)

// loopReader serves its bytes again and again, in reads of at most step
// bytes, as a socket that always has data would.
type loopReader struct {
	b    []byte
	off  int
	step int
}

func (l *loopReader) Read(p []byte) (int, error) {
	if l.off == len(l.b) {
		l.off = 0
	}
	n := copy(p[:min(len(p), l.step)], l.b[l.off:])
	l.off += n
	return n, nil
}

// BenchmarkReader parses events shaped like the reference server's
// counter.v1 chunks (id, event and a data line of about 200 bytes) from
// memory: the reader's own cost per event, without the network. One op is
// one event.
func BenchmarkReader(b *testing.B) {
	var in []byte
	events := 0
	for seq := 1; len(in) < 1<<20; seq++ {
		events++
		in = fmt.Appendf(in, "id: %d\nevent: chunk\ndata: {\"endpoint\":\"counter.v1\",\"seq\":%d,\"chunk\":{\"n\":%d},"+
			"\"generated_at\":\"2026-11-28T16:47:40.123456789Z\",\"trace\":{\"source\":\"rtfshost-localserver\",\"version\":\"1\"}}\n\n", seq, seq, seq)
	}
	rd := New(0, 0)
	rd.Reset(&loopReader{b: in, step: 13 << 10})
	b.ReportAllocs()
	b.SetBytes(int64(len(in) / events))
	for b.Loop() {
		ev, err := rd.Next()
		if err != nil || len(ev.Data) == 0 {
			b.Fatalf("next: %v", err)
		}
	}
}
