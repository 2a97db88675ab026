package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/cluster/clustertest"
)

// benchCluster starts an embedded nats-server with JetStream, syncing every
// write as rtfshost natsd does, and joins it; the benchmark closes the
// cluster and the store, the server stops at its end.
func benchCluster(b *testing.B) (*cluster.Cluster, *cluster.Store) {
	b.Helper()
	ns := clustertest.Server(b, clustertest.Options{Sync: true})
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
