package provider

import (
	"context"
	"fmt"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
	"github.com/rtfshost/rtfshost/transport/sse"
)

// SIGKILL while failed: a child process runs the crash stream with a
// processor that throws on chunk heldBad, reports once the stream is
// held as failed, and is killed. The data directory is then repaired as
// the command line does it (UpgradeStored with the fixed processor, a
// provider that recovers it, Resume): the recovered stream is held again
// with the same failure, and once resumed its final state is exact, chunk
// heldBad processed once, by the new processor, for a source that replays
// (SSE) and for one that cannot (journal mode).
func TestCrashWhileFailedSSE(t *testing.T)     { runHeldCrash(t, "sse") }
func TestCrashWhileFailedJournal(t *testing.T) { runHeldCrash(t, "mock") }

const (
	heldBad   = 7
	heldLimit = 40
	// heldSrc's :log says which processor handled each chunk.
	heldSrc = `
(defn proc [state chunk meta]
  (let [n (get-in chunk [:chunk :n] 0)]
    (when (= n 7) (throw (ex-info "cannot handle chunk 7" {:n n})))
    {:state {:count (inc (:count state)) :sum (+ (:sum state) n) :log (conj (:log state) [:old n])} :output n}))`
	heldFixedSrc = `
(defn proc [state chunk meta]
  (let [n (get-in chunk [:chunk :n] 0)]
    {:state {:count (inc (:count state)) :sum (+ (:sum state) n) :log (conj (:log state) [:new n])} :output n}))`
)

func runHeldCrash(t *testing.T, role string) {
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	url := srv.URL() + "/sse"
	c := &crashChild{t: t, role: "held-" + role, dir: t.TempDir(), url: url}
	ch := c.start()
	if _, ok := ch.waitLine("failed", 30*time.Second); !ok {
		_ = ch.cmd.Process.Kill()
		ch.finish()
		t.Fatal("the child did not report its stream failed")
	}
	_ = ch.cmd.Process.Signal(syscall.SIGKILL)
	if _, killed := ch.finish(); !killed {
		t.Fatal("the child was not killed")
	}

	store, err := openCrashStore(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	res, err := UpgradeStored(ctx, store, Upgrade{StreamID: crashStream, Program: newProgram(t, heldFixedSrc)})
	if err != nil || res.State != StateFailed {
		t.Fatalf("UpgradeStored = %+v, %v", res, err)
	}
	mk := &mock.Transport{}
	var tr transport.StreamTransport = &sse.Transport{}
	if role == "mock" {
		tr = mk
	}
	p := New(Options{Store: store, LookupEnv: noEnv, ServerURL: url, Transports: catalogOf(map[string]transport.StreamTransport{role: tr})})
	defer p.Close()
	if err := p.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := p.Status(ctx, crashStream)
	if err != nil || st.State != StateFailed || st.Failure == nil || st.Failure.Seq != heldBad {
		t.Fatalf("recovered status %+v, %v", st, err)
	}
	if role == "mock" {
		feedCtx, cancel := context.WithCancel(ctx)
		feedDone := make(chan error, 1)
		go func() { feedDone <- feedHeld(feedCtx, mk.Source(crashStream)) }()
		defer func() { cancel(); <-feedDone }()
	}
	if _, err := p.Resume(ctx, crashStream); err != nil {
		t.Fatal(err)
	}
	awaitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := p.Await(awaitCtx, crashStream); err != nil {
		t.Fatal(err)
	}
	in, err := p.Info(crashStream, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	state := in.CurrentState.V
	if path(state, "count") != rtfs.Int(heldLimit) || path(state, "sum") != rtfs.Int(heldLimit*(heldLimit+1)/2) {
		t.Fatalf("final state %v: a chunk was lost or processed twice", state)
	}
	log := path(state, "log").(*rtfs.Vector)
	var want []string
	for n := 1; n <= heldLimit; n++ {
		who := "old"
		if n >= heldBad {
			who = "new"
		}
		want = append(want, fmt.Sprintf("[:%s %d]", who, n))
	}
	var got []string
	for i := 0; i < log.Len(); i++ {
		got = append(got, log.Index(i).String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("log %v\nwant %v", got, want)
	}
}

// heldChildMain is the child of the SIGKILL-while-failed test: it starts
// the stream with heldSrc (or finds it recovered), feeds the mock source
// in journal mode, prints "failed" once the stream is held, and waits to
// be killed.
func heldChildMain(role, dir, url string) error {
	store, err := openCrashStore(dir)
	if err != nil {
		return err
	}
	defer store.Close()
	mk := &mock.Transport{}
	var tr transport.StreamTransport = &sse.Transport{}
	if role == "mock" {
		tr = mk
	}
	p := New(Options{Store: store, LookupEnv: noEnv, ServerURL: url, Transports: catalogOf(map[string]transport.StreamTransport{role: tr})})
	defer p.Close()
	prog, err := rtfs.Compile("held.rtfs", []byte(heldSrc))
	if err != nil {
		return err
	}
	out, err := rtfs.NewThread(rtfs.Limits{}).Run(context.Background(), prog)
	if err != nil {
		return err
	}
	zero := rtfs.Int(0)
	if _, err := p.Start(StartRequest{
		StreamID: crashStream, Endpoint: "counter.v1", Transport: role, Processor: rtfs.Symbol("proc"), Globals: out.Globals,
		InitialState: rtfs.MapOf(rtfs.Keyword("count"), zero, rtfs.Keyword("sum"), zero, rtfs.Keyword("log"), rtfs.NewVector()),
		Config:       rtfs.MapOf(rtfs.Keyword("limit"), rtfs.Int(heldLimit), rtfs.Keyword("interval_ms"), rtfs.Int(1)),
	}); err != nil {
		return err
	}
	if role == "mock" {
		go func() { _ = feedHeld(context.Background(), mk.Source(crashStream)) }()
	}
	for {
		// Killed once its failure is committed.
		if err := p.ps.Com.Flush(context.Background()); err != nil {
			return err
		}
		if r, err := stream.LoadProgress(context.Background(), store, crashStream); err == nil && r.Status == string(StateFailed) {
			fmt.Println("failed")
			select {} // killed here
		}
		time.Sleep(time.Millisecond)
	}
}

// feedHeld is feedCounter up to heldLimit: chunks {"chunk":{"n":n}} with
// ID n, after the recovered stream's cursor.
func feedHeld(ctx context.Context, src *mock.Source) error {
	select {
	case <-src.Started():
	case <-ctx.Done():
		return ctx.Err()
	}
	from := 0
	if c := src.Cursor(); c != "" {
		if _, err := fmt.Sscan(c, &from); err != nil {
			return fmt.Errorf("cursor %q: %w", c, err)
		}
	}
	for n := from + 1; n <= heldLimit; n++ {
		data := []byte(fmt.Sprintf(`{"chunk":{"n":%d}}`, n))
		if err := src.Send(ctx, transport.Chunk{Data: data, ID: fmt.Sprint(n)}); err != nil {
			return err
		}
	}
	src.Close()
	return nil
}
