package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/persistence/storetest"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// lingerTransport is a transport slow to stop, as one whose connection is
// slow to close or whose child process has a grace period: once its
// context ends, a Run returns only when the test releases it (one Run per
// value sent on release), or when free is closed. It counts the Runs of
// each stream id, and the Runs that started while another Run of their id
// was in progress.
type lingerTransport struct {
	release chan struct{}
	free    chan struct{}

	mu       sync.Mutex
	started  map[string]int
	running  map[string]int
	overlaps int
}

// newLinger returns a fixture on a lingerTransport, named :linger.
func newLinger(t *testing.T, opts Options) (*fixture, *lingerTransport) {
	l := &lingerTransport{release: make(chan struct{}), free: make(chan struct{}),
		started: map[string]int{}, running: map[string]int{}}
	opts.Transports = catalogOf(map[string]transport.StreamTransport{"linger": l})
	f := newFixture(t, opts)
	// Runs before the fixture's Close, which waits for the Runs.
	t.Cleanup(func() { close(l.free) })
	return f, l
}

func (l *lingerTransport) Run(ctx context.Context, spec transport.Spec, _ string, _ transport.Sink) error {
	id := spec.StreamID
	l.mu.Lock()
	l.started[id]++
	if l.running[id]++; l.running[id] > 1 {
		l.overlaps++
	}
	l.mu.Unlock()
	<-ctx.Done()
	select {
	case <-l.release:
	case <-l.free:
	}
	l.mu.Lock()
	l.running[id]--
	l.mu.Unlock()
	return ctx.Err()
}

// counts returns how many Runs of id started and are in progress, and how
// many Runs overlapped another of their id.
func (l *lingerTransport) counts(id string) (started, running, overlaps int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started[id], l.running[id], l.overlaps
}

// stopsBeforeNextRun checks, while the Run of stream id, stopped, lingers
// in l, that the provider waits for it before the stream's next Run starts
// and before the operation that stopped it is done (done reports that),
// then lets the Run return.
func stopsBeforeNextRun(t *testing.T, f *fixture, l *lingerTransport, id string, done func() bool) {
	t.Helper()
	f.waitFor("something to wait for the lingering run", func() bool {
		started, _, _ := l.counts(id)
		return started > 1 || f.p.runs.Waiting(id) || done()
	})
	if started, running, _ := l.counts(id); started > 1 || running == 0 {
		t.Fatalf("%d runs of %s started, %d in progress: the next one did not wait for the lingering one", started, id, running)
	}
	if done() {
		t.Fatal("the operation was done while the stream's transport still ran")
	}
	select {
	case l.release <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the lingering run did not see its context end")
	}
}

// A stream's transport runs one at a time: after a remove, a failed
// hand-over, a live processor swap and a move to another host and back,
// the stream's next Run starts only once the previous one has returned;
// Remove, Upgrade and the offer to another host wait for it too.
func TestTransportRunsDoNotOverlap(t *testing.T) {
	g := compileGlobals(t, countSrc)
	start := func(f *fixture, l *lingerTransport, id string) {
		f.start(StartRequest{StreamID: id, Processor: rtfs.Symbol("proc"), Globals: g, Transport: "linger",
			InitialState: rtfs.MapOf(rtfs.Keyword("count"), rtfs.Int(0))})
		f.waitFor("the stream's transport to run", func() bool { _, r, _ := l.counts(id); return r > 0 })
	}

	t.Run("remove and start again", func(t *testing.T) {
		f, l := newLinger(t, Options{})
		start(f, l, "r")
		removed := make(chan error, 1)
		go func() {
			_, err := f.p.Remove(context.Background(), "r", true)
			removed <- err
		}()
		stopsBeforeNextRun(t, f, l, "r", func() bool { return len(removed) > 0 })
		must(t, await1(t, removed))
		start(f, l, "r")
		if started, running, overlaps := l.counts("r"); started != 2 || running != 1 || overlaps != 0 {
			t.Fatalf("runs: %d started, %d running, %d overlapping", started, running, overlaps)
		}
	})

	t.Run("failed hand-over", func(t *testing.T) {
		offered := make(chan int, 1)
		var l *lingerTransport
		running := make(chan struct{})
		c := &fakeCluster{place: func(ctx context.Context, _ string) string {
			select {
			case <-running: // placed once its transport runs
				return "elsewhere"
			case <-ctx.Done():
				return ""
			}
		}, offer: func(id, _ string) error {
			_, running, _ := l.counts(id)
			offered <- running
			return errors.New("the other host is gone")
		}}
		var f *fixture
		f, l = newLinger(t, Options{Store: persistence.NewMemStore(), Cluster: c})
		start(f, l, "h")
		close(running)
		stopsBeforeNextRun(t, f, l, "h", func() bool { return len(offered) > 0 })
		if running := await1(t, offered); running != 0 {
			t.Fatalf("offered while %d runs of its transport were in progress", running)
		}
		f.waitFor("the stream to run here again", func() bool { s, _, _ := l.counts("h"); return s == 2 })
		if st, err := f.p.Status(t.Context(), "h"); err != nil || st.State != StateActive {
			t.Fatalf("after the failed hand-over: %+v %v", st, err)
		}
		if _, _, overlaps := l.counts("h"); overlaps != 0 {
			t.Fatalf("%d runs overlapped", overlaps)
		}
	})

	t.Run("upgrade", func(t *testing.T) {
		f, l := newLinger(t, Options{Store: persistence.NewMemStore()})
		start(f, l, "u")
		upgraded := make(chan error, 1)
		go func() {
			_, err := f.p.Upgrade(context.Background(), Upgrade{StreamID: "u", Program: newProgram(t, countSrc)})
			upgraded <- err
		}()
		stopsBeforeNextRun(t, f, l, "u", func() bool { return len(upgraded) > 0 })
		must(t, await1(t, upgraded))
		f.waitFor("the swapped stream's transport to run", func() bool { s, _, _ := l.counts("u"); return s == 2 })
		if _, _, overlaps := l.counts("u"); overlaps != 0 {
			t.Fatalf("%d runs overlapped", overlaps)
		}
	})

	t.Run("moved away and back", func(t *testing.T) {
		fs := storetest.NewFaultStore(persistence.NewMemStore())
		f, l := newLinger(t, Options{Store: fs, Cluster: &fakeCluster{}})
		start(f, l, "m")
		// Another host takes the stream over: its next commit is fenced,
		// and it stops here (its transport lingers).
		fs.FailAfter(0, fmt.Errorf("cluster: commit to stream %q: %w", "m", persistence.ErrFenced))
		_ = f.p.Deliver(context.Background(), "m", transport.Chunk{Data: []byte(`{"n":1}`)})
		f.waitFor("the stream to leave", func() bool { return !slices.Contains(f.p.StreamIDs(), "m") })
		// It comes back (its new owner died): its next run waits for the
		// lingering one.
		fs.Heal()
		must(t, f.p.RecoverStream(context.Background(), "m"))
		stopsBeforeNextRun(t, f, l, "m", func() bool { return false })
		f.waitFor("the stream's transport to run again", func() bool { s, _, _ := l.counts("m"); return s == 2 })
		if _, _, overlaps := l.counts("m"); overlaps != 0 {
			t.Fatalf("%d runs overlapped", overlaps)
		}
	})
}

// await1 receives from ch within the tests' hang guard.
func await1[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10 s")
	}
	var zero T
	return zero
}
