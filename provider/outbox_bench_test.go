package provider

import (
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
)

// BenchmarkOutbox measures one output through an Outbox that delivers
// every output at once (a progress notification per output), taken in
// bursts of 64 as a consumer that lags behind its stream takes them.
func BenchmarkOutbox(b *testing.B) {
	d := Delivery{Normal: Throttle{Interval: 0, MaxBatch: 1}, Low: Throttle{Interval: 0, MaxBatch: 1}}
	o := NewOutbox(OutboxOptions{Delivery: &d})
	ev := Event{Kind: EventOutput, StreamID: "s", Output: rtfs.Int(1)}
	var bs []Batch
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ev.Seq = int64(i)
		o.AddEncoded(ev, nil)
		if i%64 == 63 {
			bs = o.Take(now, bs[:0])
		}
	}
}
