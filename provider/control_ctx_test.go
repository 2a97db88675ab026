package provider

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
)

// TestControlEndedContext: a control call whose context has ended changes
// nothing and says why, errors.Is-matching the context's error; the
// stream goes on as if it had not been asked.
func TestControlEndedContext(t *testing.T) {
	f := newFixture(t, Options{})
	id := f.start(StartRequest{goProc: counter(), QueueCapacity: 8})
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		ctx  context.Context
		want error
	}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		for name, op := range map[string]func(context.Context, string) (Status, error){
			"status": f.p.Status, "pause": f.p.Pause, "resume": f.p.Resume, "skip": f.p.Skip, "cancel": f.p.Cancel} {
			st, err := op(c.ctx, id)
			if !errors.Is(err, c.want) || st.State != "" {
				t.Errorf("%s with an ended context = %+v, %v; want no status and %v", name, st, err, c.want)
			}
		}
	}
	events, _, err := f.p.Timeline(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Source == "request" {
			t.Errorf("a refused request left an event: %+v", e)
		}
	}
	f.Send(id, `{"n":1}`)
	f.waitFor("the chunk", func() bool { return path(f.Inspect(id), "stats", "processed-chunks") == rtfs.Int(1) })
	if st, err := f.p.Status(t.Context(), id); err != nil || st.State != StateActive {
		t.Fatalf("after the refused requests: %+v, %v; want active", st, err)
	}
}

// TestForwardedControlContext: a request on a stream another host runs is
// bounded by the caller's context, not by DefaultForwardTimeout: an owner
// that never answers gives the context's error when it ends, whatever
// error the transport makes of it. A context without a deadline gets
// DefaultForwardTimeout; an ended one asks nobody; Close ends a request
// in flight with ErrClosed.
func TestForwardedControlContext(t *testing.T) {
	deadlines := make(chan time.Time, 8)
	asked := make(chan string, 8)
	hang := true
	c := &fakeCluster{forward: func(ctx context.Context, req Request) (Answer, error) {
		d, _ := ctx.Deadline()
		deadlines <- d
		asked <- req.Verb
		if !hang {
			return Answer{Status: Status{StreamID: req.StreamID, State: StateActive}}, nil
		}
		<-ctx.Done()
		return Answer{}, errors.New("nats: timeout") // a transport's error that does not wrap ctx's
	}}
	f := newFixture(t, Options{Store: persistence.NewMemStore(), Cluster: c})

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	want, _ := ctx.Deadline()
	start := time.Now()
	_, err := f.p.Pause(ctx, "elsewhere")
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Pause of a stream whose owner never answers = %v, want context.DeadlineExceeded", err)
	}
	if took >= DefaultForwardTimeout/2 {
		t.Fatalf("Pause returned after %v: the caller's 200ms deadline did not bound it", took)
	}
	if got := <-deadlines; !got.Equal(want) {
		t.Fatalf("the forwarded request's deadline is %v, want the caller's %v", got, want)
	}
	<-asked

	hang = false
	before := time.Now()
	if st, err := f.p.Status(context.Background(), "elsewhere"); err != nil || st.State != StateActive {
		t.Fatalf("Status from the owner = %+v, %v", st, err)
	}
	if got := <-deadlines; got.Before(before.Add(DefaultForwardTimeout)) || got.After(time.Now().Add(DefaultForwardTimeout)) {
		t.Fatalf("a context without a deadline was forwarded with deadline %v, want DefaultForwardTimeout from the call", got)
	}
	<-asked

	ended, cancel2 := context.WithCancel(t.Context())
	cancel2()
	if _, err := f.p.Status(ended, "elsewhere"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Status with a cancelled context = %v", err)
	}
	select {
	case v := <-asked:
		t.Fatalf("a cancelled context still asked the owner (%s)", v)
	default:
	}

	hang = true
	done := make(chan error, 1)
	go func() {
		_, err := f.p.Cancel(context.Background(), "elsewhere")
		done <- err
	}()
	<-asked
	f.p.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Cancel in flight when the provider closed = %v, want ErrClosed", err)
	}
}

// TestForwardedControlLoadsWhole: a request on a stream no live host runs
// loads it here from the store, claiming it; when the caller's context
// ends during the claim, the request fails with the context's error and
// changes nothing, but the claim and the load go on whole (a claim left
// without its stream would keep it from every host), and the stream runs
// here.
func TestForwardedControlLoadsWhole(t *testing.T) {
	store := persistence.NewMemStore()
	a := newFixture(t, Options{Store: store})
	g := compileGlobals(t, countSrc)
	id := startCount(a, g, "orphan", rtfs.Symbol("proc"))
	a.Send(id, `{"n":1}`)
	a.processed(id, 1)
	if err := a.p.Close(); err != nil {
		t.Fatal(err)
	}

	claiming, release := make(chan struct{}), make(chan struct{})
	c := &fakeCluster{claim: func(ctx context.Context, _ string) error {
		close(claiming)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	b := newFixture(t, Options{Store: store, Cluster: c})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := b.p.Pause(ctx, id)
		errc <- err
	}()
	<-claiming
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Pause while the stream's claim is slow = %v, want context.DeadlineExceeded", err)
	}
	close(release)
	b.waitFor("the stream to load", func() bool { return slices.Contains(b.p.StreamIDs(), id) })
	if st, err := b.p.Status(t.Context(), id); err != nil || st.State != StateActive {
		t.Fatalf("the loaded stream: %+v, %v; want active (the expired Pause changed nothing)", st, err)
	}
	if _, released, _ := c.log(); len(released) != 0 {
		t.Fatalf("the claim was given up: %v", released)
	}
	b.Send(id, `{"n":2}`)
	b.processed(id, 2)
}
