package clustertest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A cluster's servers run in child processes, so that a test can kill one
// as a crash would (SIGKILL: it does not step down from leading its raft
// groups, its peers elect a new leader after their election timeout). The
// child is the test binary itself, re-executed with childEnv holding its
// childSpec; the package's TestMain calls Main first.
const childEnv = "RTFSHOST_CLUSTERTEST_NATS"

type childSpec struct {
	Name       string
	Dir        string
	RoutePort  int
	RoutePorts []int
	Sync       bool
}

// Main runs a server of a Cluster when this process is one of them: the
// TestMain of a package that calls Cluster calls it first, and exits with
// code when ran is true. Otherwise it returns at once with ran false.
func Main() (code int, ran bool) {
	raw := os.Getenv(childEnv)
	if raw == "" {
		return 0, false
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "clustertest child:", err)
		return 2, true
	}
	if err := runChild(spec); err != nil {
		fmt.Fprintln(os.Stderr, "clustertest child:", spec.Name+":", err)
		return 1, true
	}
	return 0, true
}

// runChild runs one server until stdin closes (its test ended) or SIGTERM.
func runChild(spec childSpec) error {
	routes := make([]*url.URL, len(spec.RoutePorts))
	for i, p := range spec.RoutePorts {
		routes[i] = &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)}
	}
	s, err := server.NewServer(&server.Options{ServerName: spec.Name, Host: "127.0.0.1", Port: -1,
		JetStream: true, StoreDir: spec.Dir, SyncAlways: spec.Sync, NoSigs: true, Routes: routes,
		Cluster: server.ClusterOpts{Name: "rtfshost-test", Host: "127.0.0.1", Port: spec.RoutePort}})
	if err != nil {
		return err
	}
	go s.Start()
	defer func() {
		s.Shutdown()
		s.WaitForShutdown()
	}()
	if !s.ReadyForConnections(10 * time.Second) {
		return errors.New("did not start listening within 10s")
	}
	fmt.Printf("ready %s\n", s.ClientURL())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-ctx.Done():
	case <-eof:
	}
	return nil
}

// ClusterOptions configure Cluster. The zero value is three servers, not
// syncing each write.
type ClusterOptions struct {
	Size int  // servers; 0: 3
	Sync bool // sync every write to disk before acknowledging it
}

// A NATSCluster is nats-servers with JetStream routed together on
// 127.0.0.1, each in a child process with its files in its own temporary
// directory. The test owns it: the servers are killed when it ends.
type NATSCluster struct {
	t     testing.TB
	nodes []*node
}

type node struct {
	name  string
	url   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	dead  bool
}

// Cluster starts a cluster of nats-servers as opts say, each in a child
// process (the package's TestMain must call Main), on free client ports,
// each routed to all the others; the route ports are picked free just
// before, and a start that loses one of them to another process is tried
// again. It returns once the JetStream meta group has a leader and every
// server is in it, and fails the test when that takes more than 60 s.
func Cluster(t testing.TB, opts ClusterOptions) *NATSCluster {
	t.Helper()
	n := opts.Size
	if n == 0 {
		n = 3
	}
	c := &NATSCluster{t: t}
	t.Cleanup(c.killAll)
	deadline := time.Now().Add(60 * time.Second)
	for attempt := 0; ; attempt++ {
		err := c.start(t, n, opts.Sync)
		if err == nil {
			err = c.waitFormed(deadline)
		}
		if err == nil {
			return c
		}
		c.killAll()
		c.nodes = nil
		if attempt == 2 || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// start starts n servers routed to each other.
func (c *NATSCluster) start(t testing.TB, n int, sync bool) error {
	ports := make([]int, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	for i := range n {
		spec, _ := json.Marshal(childSpec{Name: fmt.Sprintf("n%d", i+1), Dir: t.TempDir(), RoutePort: ports[i], RoutePorts: ports, Sync: sync})
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start nats-server n%d: %w", i+1, err)
		}
		nd := &node{name: fmt.Sprintf("n%d", i+1), cmd: cmd, stdin: stdin}
		c.nodes = append(c.nodes, nd)
		first := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			if sc.Scan() {
				first <- sc.Text()
			}
			close(first)
			_, _ = io.Copy(io.Discard, out)
		}()
		select {
		case line := <-first:
			u, ok := strings.CutPrefix(line, "ready ")
			if !ok {
				return fmt.Errorf("nats-server %s did not start (it said %q)", nd.name, line)
			}
			nd.url = u
		case <-time.After(30 * time.Second):
			return fmt.Errorf("nats-server %s did not start within 30s", nd.name)
		}
	}
	return nil
}

// waitFormed waits until the cluster places a stream with a replica on
// every server: the JetStream meta group has a leader and every server.
func (c *NATSCluster) waitFormed(deadline time.Time) error {
	nc, err := nats.Connect(strings.Join(c.URLs(), ","), nats.Timeout(5*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cfg := jetstream.StreamConfig{Name: "CLUSTERTEST_PROBE", Subjects: []string{"clustertest.probe"},
		Replicas: len(c.nodes), Storage: jetstream.MemoryStorage}
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, last = js.CreateStream(ctx, cfg)
		if last == nil {
			last = js.DeleteStream(ctx, cfg.Name)
		}
		cancel()
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the nats-servers did not form a JetStream cluster: %w", last)
}

// URLs returns the client URLs of the servers not killed.
func (c *NATSCluster) URLs() []string {
	var urls []string
	for _, nd := range c.nodes {
		if !nd.dead {
			urls = append(urls, nd.url)
		}
	}
	return urls
}

// StreamLeader returns the name of the server ("n1", "n2", ...) that leads
// JetStream stream name, as the cluster says, or an error.
func (c *NATSCluster) StreamLeader(ctx context.Context, name string) (string, error) {
	nc, err := nats.Connect(strings.Join(c.URLs(), ","), nats.Timeout(5*time.Second))
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return "", fmt.Errorf("stream %s: %w", name, err)
	}
	info := st.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return "", fmt.Errorf("stream %s has no leader", name)
	}
	return info.Cluster.Leader, nil
}

// Kill ends server name with SIGKILL, as a crash would, and reaps it.
func (c *NATSCluster) Kill(name string) {
	c.t.Helper()
	for _, nd := range c.nodes {
		if nd.name == name {
			nd.kill()
			return
		}
	}
	c.t.Fatalf("clustertest: no server %q", name)
}

func (nd *node) kill() {
	if nd.dead {
		return
	}
	nd.dead = true
	_ = nd.cmd.Process.Kill()
	_ = nd.stdin.Close()
	_ = nd.cmd.Wait()
}

func (c *NATSCluster) killAll() {
	for _, nd := range c.nodes {
		nd.kill()
	}
}
