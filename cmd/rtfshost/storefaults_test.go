//go:build unix

package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/host/mcpserver"
	"github.com/rtfshost/rtfshost/internal/localserver"
)

// Store faults, end to end: a full disk, a data directory whose MANIFEST is
// older than its tables, and a data directory removed under a serve.

// TestServeExitsAfterDataDirRemoved: serve's data directory is removed while
// a stream is live; after SIGTERM serve exits within its shutdown grace
// (Badger alone retries its last flush into the missing directory forever).
func TestServeExitsAfterDataDirRemoved(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	src := localserver.New(localserver.Options{})
	if err := src.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dir := filepath.Join(t.TempDir(), "data")
	p := startServeProc(t, "", dir, "serve", "--listen", "127.0.0.1:0", "--server-url", src.URL()+"/sse")
	defer p.kill()
	ctx := context.Background()
	program := `(defn step [state chunk meta] {:state (+ state (:n (:chunk chunk)))})`
	text, err := callServer(ctx, p.base, mcpserver.ToolStart, map[string]any{
		"program": program, "processor": "step", "endpoint": "counter.v1", "transport": "sse", "stream-id": "live",
		"config": map[string]any{"limit": 1000000, "interval_ms": 2}, "initial-state": 0, "detach": true,
	})
	if err != nil {
		t.Fatalf("start: %s %v", text, err)
	}
	// Wait until the stream has committed progress: its memtable holds
	// records that Badger would try to flush at close.
	deadline := time.Now().Add(30 * time.Second)
	for {
		text, err := callServer(ctx, p.base, mcpserver.ToolInspect, map[string]any{"stream-id": "live"})
		var in struct {
			Status struct{ State string }
			Stats  struct {
				Processed int `json:"processed-chunks"`
			}
		}
		_ = json.Unmarshal([]byte(text), &in)
		if err == nil && in.Status.State == "active" && in.Stats.Processed > 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream did not get going: %s %v", text, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	// The grace is generous here (the machine is loaded); serve's own
	// grace is CloseGrace.
	select {
	case err := <-exited:
		t.Logf("serve exited %v after SIGTERM: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(3 * 10 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		<-exited
		t.Fatalf("serve still running 30 s after SIGTERM (shutdown grace 10 s):\n%s", lastLines(p.stderr.String(), 80))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// dirFiles describes every file of dir (name, size, content hash), but
// the lock file's holder record.
func dirFiles(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "rtfshost.lock" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%s %d %x", e.Name(), len(data), sha256.Sum256(data)))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestReadCommandsChangeNothing: streams and inspect read a data directory
// without changing it, whether its last run closed it or not; on a
// directory whose MANIFEST is older than its tables (one stream in a table
// the MANIFEST does not list) they refuse it as damaged, and nothing
// changes, where Badger's open would delete that stream's table.
func TestReadCommandsChangeNothing(t *testing.T) {
	c := buildCLI(t)
	work := t.TempDir()
	prog := func(name, id string) string {
		file := filepath.Join(work, name+".rtfs")
		src := fmt.Sprintf(`(defn step [state chunk meta] {:state (+ state 1)})
(def s (call :mcp.stream.start {:transport :exec :command "sh" :args ["-c" "seq 1 50"] :processor step :initial-state 0 :stream-id %q}))
(call :mcp.stream.await {:stream-id %q})
`, id, id)
		if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	data := filepath.Join(work, "data")
	wantCode(t, c.runIn(t, work, "run", "--data", data, prog("one", "one")), exitOK)
	manifest, err := os.ReadFile(filepath.Join(data, "MANIFEST"))
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.runIn(t, work, "run", "--data", data, prog("two", "two")), exitOK)

	// A clean directory: both streams listed, nothing changed.
	before := dirFiles(t, data)
	for _, cmd := range []string{"streams", "inspect"} {
		r := c.runIn(t, work, cmd, "--data", data)
		wantCode(t, r, exitOK)
		if !strings.Contains(r.stdout, "one") || !strings.Contains(r.stdout, "two") {
			t.Fatalf("%s does not list both streams\n%s", cmd, r)
		}
		if after := dirFiles(t, data); after != before {
			t.Fatalf("%s changed the data directory:\nbefore:\n%s\nafter:\n%s", cmd, before, after)
		}
	}

	// The older MANIFEST put back: refused as damaged, nothing changed.
	if err := os.WriteFile(filepath.Join(data, "MANIFEST"), manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	before = dirFiles(t, data)
	for _, cmd := range []string{"streams", "inspect", "resume"} {
		r := c.runIn(t, work, cmd, "--data", data)
		if r.code == exitOK || !strings.Contains(r.stderr, "is damaged") || !strings.Contains(r.stderr, "nothing was changed") {
			t.Fatalf("%s on a directory with an older MANIFEST: want a refusal naming the damage\n%s", cmd, r)
		}
		if after := dirFiles(t, data); after != before {
			t.Fatalf("%s changed the damaged data directory:\nbefore:\n%s\nafter:\n%s", cmd, before, after)
		}
	}
}
