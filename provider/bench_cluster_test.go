package provider

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/rtfshost/rtfshost/cluster"
)

// benchCluster starts an embedded nats-server with JetStream in b.TempDir,
// syncing every write as rtfshost natsd does, and joins it; the benchmark
// closes both. The server stops at the end of the benchmark.
func benchCluster(b *testing.B) (*cluster.Cluster, *cluster.Store) {
	b.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: b.TempDir(), SyncAlways: os.Getenv("BENCH_NOSYNC") == "", NoSigs: true})
	if err != nil {
		b.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		b.Fatal("nats-server did not start")
	}
	b.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	cl, err := cluster.Connect(context.Background(), cluster.Options{URLs: []string{ns.ClientURL()}, Node: "bench", KeyOwner: KeyOwner})
	if err != nil {
		b.Fatal(err)
	}
	return cl, cl.Store()
}

// clusterOf is the provider's Cluster over a cluster.Cluster, for
// benchmarks of one host (package host has the real one).
type clusterOf struct{ cl *cluster.Cluster }

func (c clusterOf) Claim(ctx context.Context, id string) error { return c.cl.Claim(ctx, id) }
func (c clusterOf) Release(ctx context.Context, id string, ended bool) error {
	return c.cl.Release(ctx, id, ended)
}
func (c clusterOf) Forget(id string) { c.cl.Forget(id) }
func (c clusterOf) Forward(context.Context, Request) (Answer, error) {
	return Answer{}, fmt.Errorf("one host: %w", ErrNotRunning)
}
func (c clusterOf) Place(context.Context, string) (string, error) { return "", nil }
func (c clusterOf) Offer(context.Context, string, string) error   { return nil }
