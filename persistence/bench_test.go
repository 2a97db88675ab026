package persistence_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rtfshost/rtfshost/persistence"
)

// progressRecord is a progress snapshot of about 200 bytes (state, status,
// stats and cursor of one stream, already encoded), as a stream worker
// commits once per chunk.
var progressRecord = persistence.EncodeRecord(1, 1, make([]byte, 193))

// BenchmarkCommitter measures per-chunk progress commits through a Committer
// on Badger: one stream, or 100 streams on concurrent goroutines. Modes:
//   - async: each stream submits its progress record under its own key
//     without waiting (a stream worker's normal path); records a newer one
//     replaces before the commit are skipped.
//   - async-unique: the same, but every write has a key of its own (a
//     journal entry per chunk), so nothing is skipped and every write
//     reaches Badger.
//   - wait: each stream waits for each commit (an ack boundary).
//
// writes/s counts caller batches; stored/s counts operations sent to Badger.
func BenchmarkCommitter(b *testing.B) {
	for _, sync := range []bool{false, true} {
		for _, streams := range []int{1, 100} {
			for _, mode := range []string{"async", "async-unique", "wait"} {
				name := fmt.Sprintf("sync=%v/streams=%d/%s", sync, streams, mode)
				b.Run(name, func(b *testing.B) { benchCommitter(b, sync, streams, mode) })
			}
		}
	}
}

func benchCommitter(b *testing.B, sync bool, streams int, mode string) {
	store := openBadger(b, b.TempDir(), persistence.Options{SyncWrites: sync})
	c := persistence.NewCommitter(store, persistence.CommitterOptions{})
	defer c.Close()
	ctx := context.Background()
	var failed atomic.Int64
	done := func(err error) {
		if err != nil {
			failed.Add(1)
		}
	}
	var seq atomic.Uint64
	write := func(key []byte, batch *persistence.Batch) error {
		batch.Reset()
		if mode == "async-unique" {
			// A fresh key per write: the batch owns it until committed.
			key = binary.BigEndian.AppendUint64(key[:len(key):len(key)], seq.Add(1))
		}
		batch.Put(key, progressRecord)
		if mode == "wait" {
			return c.Commit(ctx, batch)
		}
		return c.Submit(ctx, batch, done)
	}
	b.ReportAllocs()
	b.ResetTimer()
	runStreamsBench(b, streams, write)
	if err := c.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d commits failed", failed.Load())
	}
	st := c.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	b.ReportMetric(float64(st.Written)/b.Elapsed().Seconds(), "stored/s")
	b.ReportMetric(float64(st.Batches)/float64(max(st.Commits, 1)), "batches/commit")
}

// runStreamsBench calls write b.N times in all, from one goroutine per
// stream, each stream with its own key.
func runStreamsBench(b *testing.B, streams int, write func(key []byte, batch *persistence.Batch) error) {
	if streams == 1 {
		var batch persistence.Batch
		key := []byte("stream/0000/progress")
		for range b.N {
			if err := write(key, &batch); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	var ids atomic.Int64
	b.SetParallelism((streams + 1) / 2) // GOMAXPROCS is 2 on the target machine
	b.RunParallel(func(pb *testing.PB) {
		var batch persistence.Batch
		key := fmt.Appendf(nil, "stream/%04d/progress", ids.Add(1))
		for pb.Next() {
			if err := write(key, &batch); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkBadgerTxnPerWrite is the comparison without group commit: one
// Badger transaction per progress write.
func BenchmarkBadgerTxnPerWrite(b *testing.B) {
	for _, sync := range []bool{false, true} {
		for _, streams := range []int{1, 100} {
			b.Run(fmt.Sprintf("sync=%v/streams=%d", sync, streams), func(b *testing.B) {
				store := openBadger(b, b.TempDir(), persistence.Options{SyncWrites: sync})
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				runStreamsBench(b, streams, func(key []byte, batch *persistence.Batch) error {
					batch.Reset()
					batch.Put(key, progressRecord)
					return store.Commit(ctx, batch)
				})
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
			})
		}
	}
}

func BenchmarkRecord(b *testing.B) {
	payload := make([]byte, 193)
	key := []byte("stream/0000/progress")
	b.Run("append", func(b *testing.B) {
		buf := make([]byte, 0, 256)
		b.ReportAllocs()
		for range b.N {
			buf = persistence.AppendRecord(buf[:0], 1, 1, payload)
		}
	})
	b.Run("decode", func(b *testing.B) {
		rec := persistence.EncodeRecord(1, 1, payload)
		b.ReportAllocs()
		for range b.N {
			if _, _, err := persistence.DecodeRecord(key, rec, 1, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
