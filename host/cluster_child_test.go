package host_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// A cluster host as a child process: this test binary, re-executed with
// clusterChildEnv holding a childSpec (see TestMain). It joins the cluster,
// recovers, starts the streams of its spec that the cluster does not hold
// yet, feeds its mock sources, prints "ready", then "moved <id>" for every
// stream that leaves it, until SIGTERM (a clean leave) or SIGKILL.
const clusterChildEnv = "RTFSHOST_HOST_TEST_CLUSTER_CHILD"

type childSpec struct {
	NATS, Node, Src string
	Transport       string // ":sse" or ":mock"
	IDs             []string
	Limit, Interval int
	LeaseTTL        time.Duration // 0: 1 s
}

func runClusterChild(spec string) int {
	var cs childSpec
	if err := json.Unmarshal([]byte(spec), &cs); err != nil {
		fmt.Fprintln(os.Stderr, "cluster child:", err)
		return 3
	}
	if err := clusterChildMain(cs); err != nil {
		fmt.Fprintln(os.Stderr, "cluster child:", err)
		return 3
	}
	return 0
}

func clusterChildMain(cs childSpec) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	h, mk, err := openClusterHostWith(cluster.Options{URLs: []string{cs.NATS}, Node: cs.Node, LeaseTTL: cs.LeaseTTL}, cs.Src)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.Recover(ctx); err != nil {
		return err
	}
	feeders := feedAll(ctx, mk, cs.IDs, cs.Limit, cs.Interval)
	defer feeders()
	for _, id := range cs.IDs {
		if err := startOnce(h, id, cs.Transport, cs.Limit, cs.Interval); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	ran := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
		ids := h.Provider().StreamIDs()
		for id := range ran {
			if !slices.Contains(ids, id) {
				fmt.Println("moved", id)
				delete(ran, id)
			}
		}
		for _, id := range ids {
			ran[id] = true
		}
	}
}

// startOnce starts stream id of a sums program unless the cluster holds it
// already (an earlier run of this host started it, or another host runs it).
func startOnce(h *host.Host, id, transport string, limit, interval int) error {
	if slices.Contains(h.Provider().StreamIDs(), id) {
		return nil
	}
	prog, err := rtfs.Compile(id+".rtfs", fmt.Appendf(nil, sumProgram, id, transport, limit, interval))
	if err != nil {
		return err
	}
	_, err = h.Run(context.Background(), prog)
	if err != nil && (strings.Contains(err.Error(), "another host owns") || strings.Contains(err.Error(), "exists in the store")) {
		return nil
	}
	return err
}

// feedAll feeds the mock source of each of ids, whenever a stream run of
// this host takes it, with the counter after its cursor: {"chunk":{"n":n}}
// with ID n up to limit, like a pipe that cannot replay. It returns a
// function that stops the feeders and waits for them.
func feedAll(ctx context.Context, mk *mock.Transport, ids []string, limit, interval int) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, len(ids))
	for _, id := range ids {
		go func() {
			defer func() { done <- struct{}{} }()
			for ctx.Err() == nil {
				src := mk.Source(id)
				select {
				case <-src.Started():
				case <-ctx.Done():
					return
				}
				_ = feedCounter(ctx, src, limit, interval)
			}
		}()
	}
	return func() {
		cancel()
		for range ids {
			<-done
		}
	}
}

func feedCounter(ctx context.Context, src *mock.Source, limit, interval int) error {
	from := 0
	if c := src.Cursor(); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil {
			return fmt.Errorf("cursor %q: %w", c, err)
		}
		from = n
	}
	for n := from + 1; n <= limit; n++ {
		data := []byte(`{"chunk":{"n":` + strconv.Itoa(n) + `}}`)
		if err := src.Send(ctx, transport.Chunk{Data: data, ID: strconv.Itoa(n)}); err != nil {
			return err
		}
		if interval > 0 {
			time.Sleep(time.Duration(interval) * time.Millisecond)
		}
	}
	src.Close()
	return nil
}

// clusterChild is a running child host and its stdout lines.
type clusterChild struct {
	t     testing.TB
	cmd   *exec.Cmd
	lines chan string // closed at EOF
}

func startClusterChild(t testing.TB, cs childSpec) *clusterChild {
	t.Helper()
	spec, _ := json.Marshal(cs)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), clusterChildEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &clusterChild{t: t, cmd: cmd, lines: make(chan string, 64)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(c.kill)
	// A hang guard, not a timing: a child starting hundreds of streams
	// under -race on a busy machine takes tens of seconds.
	if _, ok := c.waitLine("ready", 120*time.Second); !ok {
		t.Fatalf("the cluster child %s did not report ready", cs.Node)
	}
	return c
}

// waitLine waits for a line starting with prefix; ok is false at EOF or
// timeout.
func (c *clusterChild) waitLine(prefix string, timeout time.Duration) (string, bool) {
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-c.lines:
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

// kill ends the child with SIGKILL and reaps it; it is idempotent.
func (c *clusterChild) kill() {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGCONT) // a stopped child dies too
	_ = c.cmd.Process.Kill()
	for range c.lines {
	}
	_ = c.cmd.Wait()
}

// stop ends the child with SIGTERM (a clean leave) and checks its exit.
func (c *clusterChild) stop() {
	c.t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	for range c.lines {
	}
	if err := c.cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			c.t.Errorf("cluster child exited with %v", err)
		}
	}
}
