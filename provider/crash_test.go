package provider

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
	"github.com/rtfshost/rtfshost/transport/sse"
)

// The crash test's child process is this test binary, re-executed with
// crashRoleEnv set to "sse" or "mock" (see TestMain).
const (
	crashRoleEnv  = "RTFSHOST_PROVIDER_CRASH_CHILD"
	crashDirEnv   = "RTFSHOST_PROVIDER_CRASH_DIR"
	crashURLEnv   = "RTFSHOST_PROVIDER_CRASH_URL"
	crashStream   = "crash"
	crashLimit    = 500
	crashInterval = 3 // ms between chunks
	crashKills    = 20
)

// crashSrc sums and counts: every chunk once, or the final state differs.
const crashSrc = `
(defn proc [state chunk meta]
  (let [n (get-in chunk [:chunk :n] 0)]
    {:state {:count (inc (:count state)) :sum (+ (:sum state) n) :squares (+ (:squares state) (* n n))}
     :output n}))`

// TestCrashRecoverySSE kills a child running a persisted stream of the
// reference server's counter.v1 over raw SSE (a source that replays from
// the cursor) at random points, restarts it with recovery each time, and
// checks that its final state equals the uninterrupted run's.
func TestCrashRecoverySSE(t *testing.T) { runCrashTest(t, "sse") }

// TestCrashRecoveryJournal does the same with a mock source, which cannot
// replay: the stream journals its chunks, and the child's producer resumes
// after the cursor of the last chunk the stream journaled.
func TestCrashRecoveryJournal(t *testing.T) { runCrashTest(t, "mock") }

func runCrashTest(t *testing.T, role string) {
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	url := srv.URL() + "/sse"

	want := (&crashChild{t: t, role: role, dir: t.TempDir(), url: url}).runToEnd()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	c := &crashChild{t: t, role: role, dir: t.TempDir(), url: url}
	kills := 0
	for runs := 0; kills < crashKills; runs++ {
		if runs > 4*crashKills {
			t.Fatalf("only %d of %d runs were killed mid-stream", kills, runs)
		}
		// Most kills land while the stream runs; every third one during
		// start-up and recovery.
		killed, ended := c.runAndKill(rng, runs%3 == 2)
		if ended {
			t.Fatalf("the stream ended after %d kills; it must outlast %d", kills, crashKills)
		}
		if killed {
			kills++
		}
	}
	got := c.runToEnd()
	if got != want {
		t.Fatalf("after %d kills the final state is\n%s\nthe uninterrupted run's is\n%s", kills, got, want)
	}
	for _, part := range []string{
		fmt.Sprintf(":count %d", crashLimit), fmt.Sprintf(":sum %d", crashLimit*(crashLimit+1)/2),
		fmt.Sprintf(":squares %d", crashLimit*(crashLimit+1)*(2*crashLimit+1)/6), fmt.Sprintf("processed %d", crashLimit),
	} {
		if !strings.Contains(got, part) {
			t.Fatalf("final line %q lacks %q: a chunk was lost or counted twice", got, part)
		}
	}
}

// crashChild runs the child process on one data directory.
type crashChild struct {
	t    *testing.T
	role string
	dir  string
	url  string
	env  []string // more environment for the child
}

// child is one running child process and the lines of its stdout.
type child struct {
	cmd   *exec.Cmd
	lines chan string // closed at EOF
}

func (c *crashChild) start() *child {
	c.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashRoleEnv+"="+c.role, crashDirEnv+"="+c.dir, crashURLEnv+"="+c.url)
	cmd.Env = append(cmd.Env, c.env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	ch := &child{cmd: cmd, lines: make(chan string, 16)}
	go func() { // ends at EOF, when the child has exited
		defer close(ch.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			ch.lines <- sc.Text()
		}
	}()
	return ch
}

// waitLine waits for a line with the given prefix; ok is false at EOF.
func (ch *child) waitLine(prefix string, timeout time.Duration) (string, bool) {
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-ch.lines:
			if !ok {
				return "", false
			}
			if strings.HasPrefix(l, prefix) {
				return l, true
			}
		case <-deadline:
			return "", false
		}
	}
}

// finish drains the child's output and waits for it; it reports whether a
// "final" line came and whether SIGKILL ended the process.
func (ch *child) finish() (final string, killed bool) {
	for l := range ch.lines {
		if strings.HasPrefix(l, "final ") {
			final = l
		}
	}
	err := ch.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return final, true
		}
	}
	return final, false
}

// runAndKill starts the child and kills it: early, at a random moment of
// its start-up and recovery, or at a random moment after it reported that
// its stream runs. ended reports that the stream had ended before the kill.
func (c *crashChild) runAndKill(rng *rand.Rand, early bool) (killed, ended bool) {
	c.t.Helper()
	ch := c.start()
	if early {
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
	} else {
		if _, ok := ch.waitLine("ready", 20*time.Second); !ok {
			ch.cmd.Process.Kill()
			ch.finish()
			c.t.Fatal("the child did not report ready")
		}
		time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
	}
	_ = ch.cmd.Process.Signal(syscall.SIGKILL)
	final, killed := ch.finish()
	return killed && final == "", final != ""
}

// runToEnd runs the child until its stream ends and returns its final line.
func (c *crashChild) runToEnd() string {
	c.t.Helper()
	ch := c.start()
	final, killed := ch.finish()
	if killed || final == "" || ch.cmd.ProcessState.ExitCode() != 0 {
		c.t.Fatalf("child: exit %v, final %q", ch.cmd.ProcessState, final)
	}
	return final
}

// runCrashChild is the child's main: it opens the store, recovers, starts
// the stream if the store does not hold it yet, feeds a mock source, and
// prints "ready", then "final <state> processed <n>" when the stream ends.
func runCrashChild(role string) int {
	run := func() error { return crashChildMain(role, os.Getenv(crashDirEnv), os.Getenv(crashURLEnv)) }
	if role == "exec" || role == "stdio" {
		run = func() error { return procCrashChildMain(role, os.Getenv(crashDirEnv)) }
	}
	if strings.HasPrefix(role, "held-") {
		run = func() error {
			return heldChildMain(strings.TrimPrefix(role, "held-"), os.Getenv(crashDirEnv), os.Getenv(crashURLEnv))
		}
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 3
	}
	return 0
}

func crashChildMain(role, dir, url string) error {
	store, err := openCrashStore(dir)
	if err != nil {
		return err
	}
	defer store.Close()
	var tr transport.StreamTransport = &sse.Transport{}
	mk := &mock.Transport{}
	if role == "mock" {
		tr = mk
	}
	p := New(Options{Store: store, LookupEnv: noEnv, ServerURL: url, Transports: catalogOf(map[string]transport.StreamTransport{role: tr})})
	defer p.Close()
	ctx := context.Background()
	if err := p.Recover(ctx); err != nil {
		return err
	}
	if !p.has(crashStream) {
		if err := startCrashStream(p, role); err != nil {
			return err
		}
	}
	if st, _ := p.Status(ctx, crashStream); role == "mock" && !st.State.Terminal() {
		feedCtx, cancel := context.WithCancel(ctx)
		feedDone := make(chan error, 1)
		go func() { feedDone <- feedCounter(feedCtx, mk.Source(crashStream)) }()
		defer func() { cancel(); <-feedDone }()
	}
	fmt.Println("ready")
	if _, err := p.Await(ctx, crashStream); err != nil {
		return err
	}
	info, err := p.Inspect(crashStream, InspectOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("final %v processed %v\n", path(info, "current-state"), path(info, "stats", "processed-chunks"))
	return nil
}

func startCrashStream(p *Provider, role string) error {
	prog, err := rtfs.Compile("crash.rtfs", []byte(crashSrc))
	if err != nil {
		return err
	}
	out, err := rtfs.NewThread(rtfs.Limits{}).Run(context.Background(), prog)
	if err != nil {
		return err
	}
	zero := rtfs.Int(0)
	_, err = p.Start(StartRequest{
		StreamID: crashStream, Endpoint: "counter.v1", Transport: role, Processor: rtfs.Symbol("proc"), Globals: out.Globals,
		InitialState: rtfs.MapOf(rtfs.Keyword("count"), zero, rtfs.Keyword("sum"), zero, rtfs.Keyword("squares"), zero),
		Config:       rtfs.MapOf(rtfs.Keyword("limit"), rtfs.Int(crashLimit), rtfs.Keyword("interval_ms"), rtfs.Int(crashInterval)),
	})
	return err
}

// feedCounter is the mock source of the journal test: a deterministic
// generator of {"chunk":{"n":n}} with ID n, like a pipe that cannot replay.
// It resumes after the cursor of the recovered stream: the last chunk the
// stream journaled before the crash.
func feedCounter(ctx context.Context, src *mock.Source) error {
	select {
	case <-src.Started():
	case <-ctx.Done():
		return ctx.Err()
	}
	var from int
	if c := src.Cursor(); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil {
			return fmt.Errorf("cursor %q: %w", c, err)
		}
		from = n
	}
	for n := from + 1; n <= crashLimit; n++ {
		data := []byte(`{"chunk":{"n":` + strconv.Itoa(n) + `}}`)
		if err := src.Send(ctx, transport.Chunk{Data: data, ID: strconv.Itoa(n)}); err != nil {
			return err
		}
		time.Sleep(crashInterval * time.Millisecond)
	}
	src.Close()
	return nil
}

// openCrashStore opens the child's store (persistence.OpenBadger recovers by
// itself from the torn memtable file a kill can leave, dgraph-io/badger#2207).
func openCrashStore(dir string) (*persistence.BadgerStore, error) {
	return persistence.OpenBadger(dir, persistence.Options{GCInterval: -1, MinFreeBytes: -1})
}
