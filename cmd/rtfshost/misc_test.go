package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/persistence"
)

// Check names what it cannot read, and --version is a flag as well as a
// command.
func TestCheckMissingAndDirectories(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.rtfs")
	if err := os.WriteFile(good, []byte("(+ 1 2)"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	a := newApp(strings.NewReader(""), &stdout, &stderr)
	code := a.execute(context.Background(), []string{"check", filepath.Join(dir, "missing.rtfs"), good, dir})
	if code != exitProgramError {
		t.Errorf("exit %d, want %d", code, exitProgramError)
	}
	for _, want := range []string{"missing.rtfs: no such file or directory", "is a directory: name the .rtfs files in it"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}
	if !strings.Contains(stdout.String(), "good.rtfs: ok") {
		t.Errorf("the readable file was not checked: %q", stdout.String())
	}
}

func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	a := newApp(strings.NewReader(""), &stdout, &stderr)
	if code := a.execute(context.Background(), []string{"--version"}); code != exitOK || stdout.String() != "rtfshost "+version+"\n" {
		t.Errorf("--version: exit %d, %q %q", code, stdout.String(), stderr.String())
	}
}

// TestNatsd: rtfshost natsd serves JetStream on the address it is given,
// keeps what it acknowledged across a restart, and refuses a missing --data.
func TestNatsd(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	for round := range 2 {
		var out, errOut lockedWriter
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() {
			done <- newApp(strings.NewReader(""), &out, &errOut).execute(ctx, []string{"natsd", "--data", dir, "--listen", addr})
		}()
		c := waitCluster(t, addr)
		st := c.Store()
		if round == 0 {
			var b persistence.Batch
			b.Put([]byte("k"), []byte("kept"))
			if err := st.Commit(context.Background(), &b); err != nil {
				t.Fatal(err)
			}
		} else if rec, err := st.Get(context.Background(), []byte("k")); err != nil || string(rec) != "kept" {
			t.Fatalf("after a restart of natsd: %q, %v", rec, err)
		}
		c.Close()
		cancel()
		if code := <-done; code != exitOK {
			t.Fatalf("natsd exited %d: %s", code, errOut.String())
		}
		if !strings.Contains(out.String(), "JetStream listening on nats://"+addr) {
			t.Errorf("natsd said %q", out.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := newApp(strings.NewReader(""), &out, &errOut).execute(context.Background(), []string{"natsd"}); code != exitProgramError || !strings.Contains(errOut.String(), "--data") {
		t.Fatalf("natsd without --data: exit %d, %s", code, errOut.String())
	}
}

// lockedWriter is a buffer a command may write from another goroutine.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func waitCluster(t *testing.T, addr string) *cluster.Cluster {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := cluster.Connect(context.Background(), cluster.Options{URLs: []string{"nats://" + addr}, Node: "test", ConnectTimeout: time.Second})
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("natsd never answered: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNatsdBusyPort: rtfshost natsd on an address another process listens
// on fails at once with the bind error, naming the address.
func TestNatsdBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	var out, errOut lockedWriter
	began := time.Now()
	code := newApp(strings.NewReader(""), &out, &errOut).execute(context.Background(), []string{"natsd", "--data", t.TempDir(), "--listen", addr})
	took := time.Since(began)
	if code != exitStreamFailed || !strings.Contains(errOut.String(), addr) || !strings.Contains(errOut.String(), "address already in use") {
		t.Fatalf("natsd on a busy port: exit %d after %v: %s", code, took, errOut.String())
	}
	if took >= 10*time.Second {
		t.Fatalf("natsd took %v to report that %s is busy", took, addr)
	}
}

// TestCheckReportsEveryProblem: check finds the wrong arity and the start
// map without :processor that a run stops on, with their positions, one
// JSON line each, and exits 2.
func TestCheckReportsEveryProblem(t *testing.T) {
	f := filepath.Join(t.TempDir(), "p.rtfs")
	src := "(defn add [a b] (+ a b))\n(add 1)\n(call :mcp.stream.start {:endpoint \"weather.monitor.v1\"})\n"
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	a := newApp(strings.NewReader(""), &stdout, &stderr)
	if code := a.execute(context.Background(), []string{"check", "--json", f}); code != exitProgramError {
		t.Fatalf("exit %d, want %d; %s %s", code, exitProgramError, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	want := []string{
		`{"type":"error","file":"` + f + `","message":"add: expected 2 arguments, got 1 (defined at line 1)","line":2,"col":2}`,
		`{"type":"error","file":"` + f + `","message":"capability :mcp.stream.start: key :processor: required fn or symbol or string is missing","line":3,"col":25}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), stdout.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr: %q", stderr.String())
	}
	stdout.Reset()
	a = newApp(strings.NewReader(""), &stdout, &stderr)
	if code := a.execute(context.Background(), []string{"check", f}); code != exitProgramError ||
		!strings.Contains(stderr.String(), f+":2:2: add: expected 2 arguments, got 1") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// TestServersJSON: serve, localserver and natsd with --json print one
// listening line, whose URLs answer, in place of their sentences; they
// stop with exit 0 when their context ends (Ctrl-C), and --json with
// --stdio is refused as an error line.
func TestServersJSON(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	for _, tc := range []struct {
		args  []string
		check func(t *testing.T, l listeningLine)
	}{
		{[]string{"serve", "--json", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "serve")}, func(t *testing.T, l listeningLine) {
			base := strings.TrimSuffix(l.URL, "/mcp")
			if !strings.HasPrefix(base, "http://127.0.0.1:") || base+"/mcp" != l.URL || l.SSE != base+"/sse" || l.Dashboard != base+"/ui/" ||
				l.Metrics != base+"/metrics" || l.Live != base+"/healthz" || l.Ready != base+"/readyz" || l.OAuthIssuer != "" {
				t.Errorf("serve --json: %+v", l)
			}
			for _, u := range []string{l.Live, l.Ready} {
				if code, body := httpGet(t, u); code != http.StatusOK {
					t.Errorf("GET %s: %d %s", u, code, body)
				}
			}
		}},
		{[]string{"localserver", "--json", "--listen", "127.0.0.1:0"}, func(t *testing.T, l listeningLine) {
			if code, body := httpGet(t, l.URL+"/sse/counter.v1?limit=1"); code != http.StatusOK || !strings.Contains(body, `"seq":1`) {
				t.Errorf("localserver --json %+v: GET counter.v1: %d %s", l, code, body)
			}
		}},
		{[]string{"natsd", "--json", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "nats")}, func(t *testing.T, l listeningLine) {
			// Port 0 is a port of its own, not nats-server's default 4222.
			addr := strings.TrimPrefix(l.URL, "nats://")
			if !strings.HasPrefix(l.URL, "nats://127.0.0.1:") || strings.HasSuffix(l.URL, ":4222") || l.Data != filepath.Join(dir, "nats") {
				t.Errorf("natsd --json: %+v", l)
			}
			c := waitCluster(t, addr)
			c.Close()
		}},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			var out, errOut lockedWriter
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan int, 1)
			go func() { done <- newApp(strings.NewReader(""), &out, &errOut).execute(ctx, tc.args) }()
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(out.String(), "\n") {
				select {
				case code := <-done:
					t.Fatalf("%s exited %d before listening: %s%s", tc.args[0], code, out.String(), errOut.String())
				case <-time.After(10 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					cancel()
					<-done
					t.Fatalf("%s printed nothing in 30s: %s", tc.args[0], errOut.String())
				}
			}
			var l listeningLine
			dec := json.NewDecoder(strings.NewReader(out.String()))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&l); err != nil || l.Type != "listening" || strings.Count(out.String(), "\n") != 1 {
				t.Fatalf("%s --json printed %q (%v), not one listening line", tc.args[0], out.String(), err)
			}
			tc.check(t, l)
			cancel()
			if code := <-done; code != exitOK {
				t.Errorf("%s exited %d after its context ended: %s", tc.args[0], code, errOut.String())
			}
			if strings.Count(out.String(), "\n") != 1 {
				t.Errorf("%s --json printed more than its listening line: %s", tc.args[0], out.String())
			}
		})
	}
	for _, cmd := range []string{"serve", "localserver"} {
		code, out, errOut := cliRun(cmd, "--stdio", "--json")
		if code != exitProgramError || errOut != "" || !strings.HasPrefix(out, `{"type":"error","message":"`) || !strings.Contains(out, "--stdio and --json") {
			t.Errorf("%s --stdio --json: exit %d\n%s%s", cmd, code, out, errOut)
		}
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
