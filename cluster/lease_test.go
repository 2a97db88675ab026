package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// natsServer starts an embedded nats-server with JetStream on 127.0.0.1
// port 0, its data in a temporary directory; the test stops it.
func natsServer(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

func connect(t *testing.T, s *server.Server, node string) *Cluster {
	t.Helper()
	c, err := Connect(context.Background(), Options{URLs: []string{s.ClientURL()}, Node: node, LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestLeaseFencing: one host owns a stream at a time; its commits pass
// while its lease lives; once the lease expires another host claims the
// stream, and the first host's next commit and renewal are refused
// (ErrFenced), so the record is the new owner's.
func TestLeaseFencing(t *testing.T) {
	s := natsServer(t)
	ctx := context.Background()
	a, b := connect(t, s, "a"), connect(t, s, "b")

	la, err := a.Claim(ctx, "s.1 with odd*chars>")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Claim(ctx, "s.1 with odd*chars>"); !errors.Is(err, ErrOwned) {
		t.Fatalf("b claimed a live lease: %v", err)
	}
	if err := a.Commit(ctx, la, []byte("state 1")); err != nil {
		t.Fatal(err)
	}
	if la, err = a.Renew(ctx, la); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, la, []byte("state 2")); err != nil {
		t.Fatalf("a commit with the renewed lease: %v", err)
	}
	if owner, _ := b.Owner(ctx, "s.1 with odd*chars>"); owner != "a" {
		t.Fatalf("owner = %q", owner)
	}

	// a stops renewing (paused, partitioned): its lease expires, b takes over.
	var lb Lease
	deadline := time.Now().Add(10 * time.Second)
	for {
		if lb, err = b.Claim(ctx, "s.1 with odd*chars>"); err == nil {
			break
		}
		if !errors.Is(err, ErrOwned) || time.Now().After(deadline) {
			t.Fatalf("b could not take the stream over: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := b.Commit(ctx, lb, []byte("state 3 by b")); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, la, []byte("state 3 by a, the zombie")); !errors.Is(err, ErrFenced) {
		t.Fatalf("the old owner's commit: %v, want ErrFenced", err)
	}
	if _, err := a.Renew(ctx, la); !errors.Is(err, ErrFenced) {
		t.Fatalf("the old owner's renewal: %v, want ErrFenced", err)
	}
	rec, err := a.Load(ctx, "s.1 with odd*chars>")
	if err != nil || string(rec) != "state 3 by b" {
		t.Fatalf("record = %q, %v", rec, err)
	}
}

// TestReleaseHandsOverAtOnce: a host leaving cleanly releases its lease,
// and another host claims the stream without waiting for the TTL; a stale
// release does not free a lease that is no longer the releaser's.
func TestReleaseHandsOverAtOnce(t *testing.T) {
	s := natsServer(t)
	ctx := context.Background()
	a, b := connect(t, s, "a"), connect(t, s, "b")
	la, err := a.Claim(ctx, "s2")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Claim(ctx, "s2")
	if err != nil {
		t.Fatalf("claim after a release: %v", err)
	}
	if err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	if owner, _ := a.Owner(ctx, "s2"); owner != "b" {
		t.Fatalf("a stale release freed b's lease: owner %q", owner)
	}
	if err := b.Commit(ctx, lb, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Load(ctx, "none"); !errors.Is(err, ErrNoRecord) {
		t.Fatalf("Load of a stream without a record: %v", err)
	}
}

// TestConnectNamesTheURL: NATS unreachable at start is an error naming the
// URL.
func TestConnectNamesTheURL(t *testing.T) {
	_, err := Connect(context.Background(), Options{URLs: []string{"nats://127.0.0.1:1"}, Node: "a", ConnectTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "nats://127.0.0.1:1") {
		t.Fatalf("Connect to nothing: %v", err)
	}
}
