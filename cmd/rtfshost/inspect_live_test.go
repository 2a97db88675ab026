package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"regexp"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/host/mcpserver"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// inspect --server shows the live streams of a running MCP server (what
// rtfshost serve runs): a stream that is still active, with its progress.
func TestInspectLiveServer(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after liveServe's cleanup
	ctx, h, source, base := liveServe(t, nil)
	src := source.Source("live-1")
	defer src.Close()
	for i := 0; i < 3; i++ {
		if err := src.SendJSON(ctx, "chunk", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		in, err := h.Provider().Info("live-1", provider.InspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if in.Stats.ProcessedChunks == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream did not process 3 chunks: %+v", in)
		}
		time.Sleep(10 * time.Millisecond)
	}

	var stdout, stderr bytes.Buffer
	code := newApp(nil, &stdout, &stderr).execute(ctx, []string{"inspect", "--server", base, "--stream", "live-1", "--json"})
	if code != exitOK {
		t.Fatalf("inspect --server: exit %d, stderr %s", code, stderr.String())
	}
	var got struct {
		StreamID string `json:"stream-id"`
		Status   struct {
			State string `json:"state"`
		} `json:"status"`
		Stats struct {
			Processed int `json:"processed-chunks"`
		} `json:"stats"`
		State int `json:"current-state"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("inspect --server --json printed %q: %v", stdout.String(), err)
	}
	if got.StreamID != "live-1" || got.Status.State != "active" || got.Stats.Processed != 3 || got.State != 3 {
		t.Errorf("inspect --server = %+v, want live-1 active with 3 chunks processed and state 3", got)
	}

	stdout.Reset()
	code = newApp(nil, &stdout, &stderr).execute(ctx, []string{"inspect", "--server", base + "/mcp"})
	// The table of a serve's streams comes from their typed snapshots,
	// decoded from the tool's JSON: the row has the live numbers.
	if code != exitOK || !regexp.MustCompile(`(?m)^live-1\s+active\s+3\s+0\s+\d+s\s`).Match(stdout.Bytes()) {
		t.Errorf("inspect --server table: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}

	// Managing the serve's live stream from the command line: the same
	// lines and exit codes as on a data directory (testStuck).
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "--server", base, "live-1"}, "live-1: paused (was active)\n"},
		{[]string{"resume", "--server", base, "live-1"}, "live-1: active (was paused)\n"},
		{[]string{"rm", "--server", base, "live-1"}, `rtfshost: stream "live-1" is active, not ended: cancel it first, or remove it with --force (its progress is lost)` + "\n"},
		{[]string{"cancel", "--server", base, "live-1"}, "live-1: cancelled (was active)\n"},
		{[]string{"cancel", "--server", base, "live-1"}, "live-1: cancelled (was cancelled)\n"},
		{[]string{"pause", "--json", "--server", base, "live-1"}, `{"type":"error","stream":"live-1","message":"stream \"live-1\" has ended (cancelled): it cannot be paused; rtfshost rm removes it"}` + "\n"},
		{[]string{"rm", "--server", base, "live-1"}, "live-1: removed (was cancelled)\n"},
	} {
		stdout.Reset()
		stderr.Reset()
		newApp(nil, &stdout, &stderr).execute(ctx, step.args)
		if stdout.String()+stderr.String() != step.want {
			t.Errorf("%v: want %q, got %q %q", step.args, step.want, stdout.String(), stderr.String())
		}
	}
	if _, err := h.Provider().Status(t.Context(), "live-1"); err == nil {
		t.Error("rm --server left the stream known to the serve")
	}
}

// liveServe runs, in this process, a host (on store, if not nil) with a
// mock transport and its MCP server on 127.0.0.1, with stream "live-1"
// started, counting its chunks; it returns a context that ends with the
// test, the host, the mock and the server's base URL. The server and the
// host stop when the test ends.
func liveServe(t *testing.T, store persistence.Store) (context.Context, *host.Host, *mock.Transport, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	source := &mock.Transport{}
	h, err := host.New(host.Options{Store: store, Streams: provider.Options{Transports: transport.NewCatalog(mock.Kind(source))}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Options{Host: h})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		h.Close()
	})
	prog, err := rtfs.Compile("live.rtfs", []byte(`
(defn count-chunks [n chunk meta] {:state (inc n) :output (inc n)})
(call :mcp.stream.start {:endpoint "live" :stream-id "live-1" :transport :mock
                         :processor count-chunks :initial-state 0})`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Run(ctx, prog); err != nil {
		t.Fatal(err)
	}
	return ctx, h, source, "http://" + ln.Addr().String()
}
