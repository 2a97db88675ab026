package provider

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// BenchmarkPipelinePersist runs the anchor processor's pipeline on the mock
// transport over 1 and 100 streams, without a store, with Badger (in
// b.TempDir), with and without SyncWrites, and with the JetStream store of
// a cluster (package cluster, an embedded nats-server syncing every write,
// as rtfshost natsd runs it). "cursor" commits the state and the
// cursor of every chunk (the mock posing as a source that replays, as SSE
// and MCP are); "journal" also journals every chunk durably before Deliver
// returns (the mock as it is: a source that cannot replay). It reports
// chunks/s over all streams and garbage collections per million chunks;
// ns/op and allocs/op are per chunk.
func BenchmarkPipelinePersist(b *testing.B) {
	g := compileGlobals(b, anchorProcessor)
	for _, streams := range []int{1, 100} {
		for _, store := range []string{"none", "badger", "badger-sync", "jetstream"} {
			for _, mode := range []string{"cursor", "journal"} {
				if store == "none" && mode == "journal" {
					continue
				}
				name := strconv.Itoa(streams) + "-streams/" + store + "/" + mode
				b.Run(name, func(b *testing.B) { runPersistPipeline(b, g, streams, store, mode) })
			}
		}
	}
}

func runPersistPipeline(b *testing.B, g *rtfs.Globals, streams int, store, mode string) {
	tr := &mock.Transport{Buffer: 256}
	var st transport.StreamTransport = replaying{tr}
	if mode == "journal" {
		st = tr
	}
	opts := Options{LookupEnv: noEnv, Transports: catalogOf(map[string]transport.StreamTransport{"mock": st}), QueueCapacity: 256}
	switch store {
	case "badger", "badger-sync":
		bs, err := persistence.OpenBadger(b.TempDir(), persistence.Options{SyncWrites: store == "badger-sync", GCInterval: -1, MinFreeBytes: -1})
		if err != nil {
			b.Fatal(err)
		}
		defer bs.Close()
		opts.Store = bs
	case "jetstream":
		cl, js := benchCluster(b)
		defer cl.Close()
		defer js.Close()
		opts.Store, opts.Cluster = js, clusterOf{cl}
	}
	p := New(opts)
	defer p.Close()
	ids := make([]string, streams)
	for i := range ids {
		id, err := p.Start(StartRequest{Endpoint: "bench", Transport: "mock", StreamID: "bench-" + strconv.Itoa(i),
			Processor: rtfs.Symbol("proc"), Globals: g, InitialState: rtfs.MapOf(rtfs.Keyword("readings"), rtfs.NewVector())})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = id
	}
	b.ReportAllocs()
	b.ResetTimer()
	start, gc0 := time.Now(), gcCycles()
	feedStreams(b, tr, ids, b.N)
	for _, id := range ids {
		if _, err := p.Await(context.Background(), id); err != nil {
			b.Fatal(err)
		}
	}
	elapsed, gcs := time.Since(start), gcCycles()-gc0
	b.StopTimer()
	total := int64(0)
	for _, id := range ids {
		info, _ := p.Inspect(id, InspectOptions{OmitQueue: true, OmitState: true, OmitInitialState: true})
		total += int64(path(info, "stats", "processed-chunks").(rtfs.Int))
	}
	if total != int64(b.N) {
		b.Fatalf("processed %d chunks, want %d", total, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "chunks/s")
	b.ReportMetric(float64(gcs)*1e6/float64(b.N), "gc/Mchunk")
}

// feedStreams sends n chunks in all, spread evenly over the streams, one
// goroutine per stream, then closes the sources; it returns when every
// goroutine has.
func feedStreams(b *testing.B, tr *mock.Transport, ids []string, n int) {
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	for i, id := range ids {
		count := n / len(ids)
		if i < n%len(ids) {
			count++
		}
		wg.Add(1)
		go func(src *mock.Source, count int) {
			defer wg.Done()
			defer src.Close()
			ctx := context.Background()
			for j := 0; j < count; j++ {
				if err := src.Send(ctx, transport.Chunk{Data: benchChunk, ID: "x"}); err != nil {
					errs <- err
					return
				}
			}
		}(tr.Source(id), count)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
