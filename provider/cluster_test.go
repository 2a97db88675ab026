package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/persistence/storetest"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// fakeCluster is a Cluster of one host whose other host is a Go func: it
// records claims, releases and forgets, and answers Forward with remote.
type fakeCluster struct {
	mu       sync.Mutex
	claimed  []string
	released []string
	forgot   []string
	remote   func(Request) (Answer, error)
	// forward, when set, answers Forward in its place, with the request's
	// context.
	forward func(context.Context, Request) (Answer, error)
	// claim, when set, runs first in Claim.
	claim func(ctx context.Context, id string) error
	// place answers Place (nil: every stream stays here); offer answers
	// Offer (nil: accepted).
	place func(ctx context.Context, id string) string
	offer func(id, to string) error
}

func (c *fakeCluster) Claim(ctx context.Context, id string) error {
	if c.claim != nil {
		if err := c.claim(ctx, id); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claimed = append(c.claimed, id)
	return nil
}

func (c *fakeCluster) Release(_ context.Context, id string, ended bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = append(c.released, fmt.Sprintf("%s ended=%v", id, ended))
	return nil
}

func (c *fakeCluster) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgot = append(c.forgot, id)
}

func (c *fakeCluster) Forward(ctx context.Context, req Request) (Answer, error) {
	if c.forward != nil {
		return c.forward(ctx, req)
	}
	if c.remote == nil {
		return Answer{}, fmt.Errorf("fake: %w", ErrNotRunning)
	}
	return c.remote(req)
}

func (c *fakeCluster) Place(ctx context.Context, id string) (string, error) {
	if c.place == nil {
		return "", nil
	}
	return c.place(ctx, id), nil
}

func (c *fakeCluster) Offer(_ context.Context, id, to string) error {
	if c.offer == nil {
		return nil
	}
	return c.offer(id, to)
}

func (c *fakeCluster) log() (claimed, released, forgot []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.claimed), slices.Clone(c.released), slices.Clone(c.forgot)
}

// TestClusterFencedStreamMoves: when the store refuses a stream's commit
// as fenced (another host took it over), the stream stops here without
// writing or ending: it leaves the provider, the cluster forgets it,
// requests on it are forwarded to its new owner, and Await follows it
// there. A stream that ends here is claimed at its start and released as
// ended.
func TestClusterFencedStreamMoves(t *testing.T) {
	g := compileGlobals(t, countSrc)
	fs := storetest.NewFaultStore(persistence.NewMemStore())
	c := &fakeCluster{}
	f := newFixture(t, Options{Store: fs, Cluster: c})
	id := startCount(f, g, "moving", rtfs.Symbol("proc"))
	f.Send(id, `{"n":1}`)
	f.processed(id, 1)
	must(t, f.p.ps.Com.Flush(context.Background()))
	commits, _ := fs.Counts()

	var remoteStatus sync.Mutex
	remoteState := StateActive
	c.remote = func(req Request) (Answer, error) {
		remoteStatus.Lock()
		defer remoteStatus.Unlock()
		st := Status{StreamID: req.StreamID, State: remoteState}
		if remoteState == StateCompleted {
			st.Result = rtfs.String("done elsewhere")
		}
		return Answer{Status: st}, nil
	}
	sub, err := f.p.Subscribe(id, SubscribeOptions{})
	must(t, err)
	defer sub.Close()
	// From now on every commit is fenced, as for a host that lost the
	// stream: JetStream refuses each of them.
	fs.FailAfter(0, fmt.Errorf("cluster: commit to stream %q: %w", id, persistence.ErrFenced))
	_ = f.mock.Source(id).Send(context.Background(), transport.Chunk{Data: []byte(`{"n":2}`)})
	waitUntil(t, "the stream to leave the provider", func() bool { return !slices.Contains(f.p.StreamIDs(), id) })
	if n, failed := fs.Counts(); n-failed != commits {
		t.Fatalf("%d commits after the fence, want none", n-failed-commits)
	}
	fs.Heal()
	var last Event
	for ev := range sub.C() {
		last = ev
	}
	if last.Kind != EventEnd || last.Status.State.Terminal() || !strings.Contains(last.Status.Message, "moved to another host") {
		t.Fatalf("the subscription's last event: %+v", last)
	}
	claimed, released, forgot := c.log()
	if !slices.Equal(claimed, []string{id}) || len(released) != 0 || !slices.Equal(forgot, []string{id}) {
		t.Fatalf("claimed %v released %v forgot %v", claimed, released, forgot)
	}
	st, err := f.p.Status(t.Context(), id)
	if err != nil || st.State != StateActive {
		t.Fatalf("status, forwarded: %+v %v", st, err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		v, err := f.p.Await(ctx, id)
		if err == nil && v != rtfs.String("done elsewhere") {
			err = fmt.Errorf("result %v", v)
		}
		done <- err
	}()
	remoteStatus.Lock()
	remoteState = StateCompleted
	remoteStatus.Unlock()
	if err := <-done; err != nil {
		t.Fatalf("await of a moved stream: %v", err)
	}

	// A stream that ends here: claimed, then released as ended.
	id2 := startCount(f, g, "ending", rtfs.Symbol("proc"))
	f.Send(id2, `{"done":true}`)
	if st := f.Await(id2); st.State != StateCompleted {
		t.Fatalf("status %+v", st)
	}
	waitUntil(t, "the release", func() bool {
		_, released, _ := c.log()
		return slices.Contains(released, id2+" ended=true")
	})
}

// TestClusterForwardUnknown: a stream no host runs and the store does not
// hold is an error that names it.
func TestClusterForwardUnknown(t *testing.T) {
	f := newFixture(t, Options{Store: persistence.NewMemStore(), Cluster: &fakeCluster{}})
	if _, err := f.p.Status(t.Context(), "nowhere"); err == nil || !errors.Is(err, ErrNotPersisted) {
		t.Fatalf("status of an unknown stream: %v", err)
	}
}
