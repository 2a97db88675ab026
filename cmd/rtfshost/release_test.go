package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/cluster/clustertest"
	"github.com/rtfshost/rtfshost/host/mcpserver"
	"github.com/rtfshost/rtfshost/internal/localserver"
)

// previousRelease is the release before this build (CHANGELOG.md): the
// oldest a host of this build shares a cluster with during a rolling
// upgrade (docs/upgrading.md).
const previousRelease = "637ec6bd31191c2aea763598d3980ac1da37ebac" // v0.2.0

// buildRelease builds rtfshost as it was at commit, from this repository's
// history (git archive, so the repository is not touched), and returns the
// binary. It builds with -trimpath, so that the Go build cache serves the
// next run whatever temporary directory the sources land in: a warm cache
// makes it a matter of seconds, a cold one costs a full build, as TestCLI's
// build of this one does. A checkout without that history cannot run the
// test: it fails saying so.
func buildRelease(t *testing.T, commit string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	top, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("this test builds the release %s from the repository's history, and needs git: %v", commit, err)
	}
	dir := t.TempDir()
	archive := exec.CommandContext(ctx, "git", "-C", strings.TrimSpace(string(top)), "archive", "--format=tar", commit)
	out, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	archive.Stderr = &stderr
	if err := archive.Start(); err != nil {
		t.Fatal(err)
	}
	if err := untar(out, dir); err != nil {
		t.Fatal(err)
	}
	if err := archive.Wait(); err != nil {
		t.Fatalf("git archive %s: %v: %s (a shallow clone lacks it: git fetch --unshallow)", commit, err, stderr.String())
	}
	bin := filepath.Join(dir, "rtfshost-release")
	build := exec.CommandContext(ctx, goTool(), "build", "-trimpath", "-o", bin, "./cmd/rtfshost")
	build.Dir = dir
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", commit, err, b)
	}
	return bin
}

// untar extracts a tar stream's directories and regular files into dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if !strings.HasPrefix(name, dir+string(filepath.Separator)) {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

// TestClusterAdjacentReleases: a host of the previous release and a host of
// this build share a cluster, as during a rolling upgrade. A stream started
// on the old host goes to the new one when the old one leaves (SIGTERM hands
// it over), then back to a restarted old host when the new one leaves, and
// ends with exactly the sum of its chunks, each counted once, in order.
func TestClusterAdjacentReleases(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	old := buildRelease(t, previousRelease)
	ns := clustertest.Server(t, clustertest.Options{})
	src := localserver.New(localserver.Options{})
	if err := src.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	args := func(node string) []string {
		return []string{"serve", "--listen", "127.0.0.1:0", "--server-url", src.URL() + "/sse",
			"--cluster", ns.ClientURL(), "--node", node, "--lease-ttl", "1s"}
	}
	serveOld := func(node string) (string, func()) {
		cmd := exec.Command(old, args(node)...)
		cmd.Env = append(childEnv(), tokenEnv+"=")
		p := startServeCmd(t, cmd)
		return p.base, p.stop
	}
	serveNew := func(node string) (string, func()) {
		base, stop, _ := startServeChildData(t, "", "", args(node)...)
		return base, stop
	}
	ctx := context.Background()
	call := func(server, tool string, a map[string]any) (string, error) {
		return callServer(ctx, server, tool, a)
	}
	const limit = 600
	a, stopA := serveOld("old-1")
	b, stopB := serveNew("new-1")
	program := `(defn step [state chunk meta]
  (let [n (:n (:chunk chunk))]
    {:state {:sum (+ (:sum state) n) :count (inc (:count state)) :last n
             :gaps (if (= n (inc (:last state))) (:gaps state) (inc (:gaps state)))}
     :action (if (= n 600) :complete :continue)}))`
	if text, err := call(a, mcpserver.ToolStart, map[string]any{
		"program": program, "processor": "step", "endpoint": "counter.v1", "transport": "sse", "stream-id": "adj",
		"config": map[string]any{"limit": limit, "interval_ms": 3}, "initial-state": map[string]any{"sum": 0, "count": 0, "last": 0, "gaps": 0},
		"detach": true,
	}); err != nil {
		stopA()
		stopB()
		t.Fatalf("start on the old host: %s %v", text, err)
	}
	// handOver pauses the stream (so that it cannot end meanwhile) through
	// the host that takes it, stops its owner, and resumes it on the taker.
	handOver := func(stopOwner func(), taker string, after int) {
		t.Helper()
		waitInspect(t, taker, func(in inspected) bool { return in.Stats.Processed >= after })
		if _, err := call(taker, mcpserver.ToolPause, map[string]any{"stream-id": "adj"}); err != nil {
			t.Fatalf("pause through %s: %v", taker, err)
		}
		stopOwner()
		deadline := time.Now().Add(30 * time.Second)
		for {
			text, err := call(taker, mcpserver.ToolResume, map[string]any{"stream-id": "adj"})
			if err == nil && strings.Contains(text, `"active"`) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not take the stream over: %s %v", taker, text, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	handOver(stopA, b, 50) // old → new
	a2, stopA2 := serveOld("old-2")
	defer stopA2()
	handOver(stopB, a2, 250) // new → old
	end := waitInspect(t, a2, func(in inspected) bool { return in.Status.State == "completed" })
	want := map[string]any{"sum": float64(limit * (limit + 1) / 2), "count": float64(limit), "last": float64(limit), "gaps": float64(0)}
	if !jsonEqual(end.State, want) || end.Stats.Processed != limit {
		t.Fatalf("the stream ended with %v after %d chunks, want %v after %d", end.State, end.Stats.Processed, want, limit)
	}
}

// inspected is what the compatibility test reads of an inspect map.
type inspected struct {
	Status struct {
		State string `json:"state"`
	} `json:"status"`
	Stats struct {
		Processed int `json:"processed-chunks"`
	} `json:"stats"`
	State any `json:"current-state"`
}

// waitInspect polls stream "adj" through server until cond holds.
func waitInspect(t *testing.T, server string, cond func(inspected) bool) inspected {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		text, err := callServer(context.Background(), server, mcpserver.ToolInspect, map[string]any{"stream-id": "adj", "include-queue": false})
		var in inspected
		if err == nil && json.Unmarshal([]byte(text), &in) == nil && cond(in) {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream adj through %s: %s %v", server, text, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
