package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/internal/npmtest"
)

// stdioGuard bounds every wait on a "serve --stdio" child, so that a bug
// fails the test instead of hanging it; no test relies on it for timing.
const stdioGuard = 60 * time.Second

// serveStdioArgs are the arguments of this test binary that make it
// "rtfshost serve --stdio <extra>" on a data directory of its own, and the
// environment that says so (see serveChild).
func serveStdioArgs(t *testing.T, extra ...string) ([]string, []string) {
	t.Helper()
	args := append([]string{"serve", "--stdio", "--data", filepath.Join(t.TempDir(), "data")}, extra...)
	argsJSON, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return []string{"-test.run=^TestServeSubprocess$"}, append(os.Environ(), serveChildEnv+"="+string(argsJSON))
}

// TestServeStdio: go-sdk's CommandTransport launches "rtfshost serve
// --stdio" as a child process and, over its stdin and stdout, lists the
// tools, evaluates a program that prints (its print goes to the log, not
// stdout) and starts a stream from the reference server, whose outputs
// arrive as progress notifications; closing the session (stdin) makes the
// server exit with 0 by itself.
func TestServeStdio(t *testing.T) {
	src := localserver.New(localserver.Options{})
	if err := src.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	args, env := serveStdioArgs(t, "--server-url", src.URL()+"/sse")
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = env
	stderr := &lockedWriter{}
	cmd.Stderr = stderr

	var mu sync.Mutex
	var progress []string
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params.Message)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), stdioGuard)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: stdioGuard}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 8 {
		t.Fatalf("tools/list: %v %v", err, tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "rtfs.eval", Arguments: map[string]any{"program": `(println "to the log") (* 6 7)`}})
	if err != nil || res.IsError {
		t.Fatalf("rtfs.eval: %v %+v\n%s", err, res, stderr)
	}
	if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"value":42}` {
		t.Errorf("rtfs.eval: %s", b)
	}
	params := &mcp.CallToolParams{Name: "mcp.stream.start", Arguments: map[string]any{
		"program":   `(defn step [n chunk meta] {:state (inc n) :output {:n (:n (:chunk chunk))}})`,
		"processor": "step", "endpoint": "counter.v1", "transport": "sse", "initial-state": 0,
		"config": map[string]any{"limit": 3, "interval_ms": 0},
		// One notification per output (by default these would share one).
		"delivery": map[string]any{"normal": map[string]any{"interval-ms": 0, "max-batch": 1}},
	}}
	params.SetProgressToken("stdio")
	res, err = cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("mcp.stream.start: %v %+v\n%s", err, res, stderr)
	}
	// go-sdk's client may run the handlers of the notifications that came
	// before the result after CallTool returned.
	var got string
	for deadline := time.Now().Add(stdioGuard); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		got = strings.Join(progress, " ")
		mu.Unlock()
		if len(strings.Fields(got)) >= 3 || time.Now().After(deadline) {
			break
		}
	}
	if got != `{"n":1} {"n":2} {"n":3}` {
		t.Errorf("progress over stdio: %s", got)
	}
	if err := cs.Close(); err != nil {
		t.Errorf("the server did not exit cleanly when stdin closed: %v\n%s", err, stderr)
	}
}

// TestServeStdioStdoutIsMCPOnly speaks raw JSON-RPC to "serve --stdio":
// every byte it writes to stdout is a JSON-RPC message, line by line (a
// program's print, the recovery and the start-up say nothing there), and
// it exits with 0 once stdin is closed, even with a call in flight.
func TestServeStdioStdoutIsMCPOnly(t *testing.T) {
	args, env := serveStdioArgs(t, "--log-level", "debug")
	ctx, cancel := context.WithTimeout(context.Background(), stdioGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = env
	stderr := &lockedWriter{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(stdout)
	send := func(msg string) {
		t.Helper()
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	await := func(id string) {
		t.Helper()
		for {
			line, err := lines.ReadString('\n')
			if err != nil {
				t.Fatalf("stdout ended before response %s: %v\n%s", id, err, stderr)
			}
			seen = append(seen, line)
			if strings.Contains(line, `"id":`+id+`,`) || strings.Contains(line, `"id":`+id+`}`) {
				return
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	await("1")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"rtfs.eval","arguments":{"program":"(println \"hello from a program\") (+ 40 2)"}}}`)
	await("2")
	// A call that would run for a long time, then stdin closes.
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rtfs.eval","arguments":{"program":"(loop [i 0] (recur (inc i)))"}}}`)
	stdin.Close()
	rest, err := io.ReadAll(lines)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve --stdio exited with %v after stdin closed\n%s", err, stderr)
	}
	all := strings.Join(seen, "") + string(rest)
	for _, line := range strings.SplitAfter(all, "\n") {
		if line == "" {
			continue
		}
		var m struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if !strings.HasSuffix(line, "\n") || json.Unmarshal([]byte(line), &m) != nil || m.JSONRPC != "2.0" {
			t.Errorf("stdout carries a line that is not a JSON-RPC message: %q", line)
		}
	}
	if !strings.Contains(all, `"value":42`) {
		t.Errorf("no value in the answers:\n%s", all)
	}
}

// claimChildEnv makes TestClaimStdout's child print around claimStdout.
const claimChildEnv = "RTFSHOST_TEST_CLAIM_STDOUT"

// TestClaimStdout: once serve --stdio has claimed stdout, whatever else in
// the process writes to file descriptor 1 lands on stderr and only the
// connection's writer reaches stdout; releasing it gives stdout back.
func TestClaimStdout(t *testing.T) {
	if os.Getenv(claimChildEnv) != "" {
		out, release, err := claimStdout(os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Println("stray print")
		_, _ = os.Stdout.WriteString("stray write\n")
		_, _ = io.WriteString(out, "protocol\n")
		release()
		fmt.Println("after release")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestClaimStdout$")
	cmd.Env = append(os.Environ(), claimChildEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	if stdout.String() != "protocol\nafter release\n" {
		t.Errorf("stdout %q, want only the connection's line and the line after the release", stdout.String())
	}
	if !strings.Contains(stderr.String(), "stray print\nstray write\n") {
		t.Errorf("stderr %q lacks the stray lines", stderr.String())
	}
}

// TestServeStdioTypeScript: the official TypeScript SDK's
// StdioClientTransport (the version pinned in
// testdata/stdio-client/package-lock.json) launches "rtfshost serve
// --stdio", lists the tools and calls rtfs.eval: the value, and a program
// error as an isError result with its position. It needs node and npm
// (.ci/run installs them); the SDK is installed once per machine into the
// user's cache directory, keyed by the lock file.
func TestServeStdioTypeScript(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: the TypeScript SDK's stdio client needs it (apt-get install nodejs npm; .ci/run does)")
	}
	dir := installStdioClient(t)
	args, env := serveStdioArgs(t)
	ctx, cancel := context.WithTimeout(context.Background(), stdioGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, "client.mjs"), os.Args[0]}, args...)...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the TypeScript client: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var got struct {
		Server struct {
			Name string `json:"name"`
		} `json:"server"`
		Tools      []string        `json:"tools"`
		Result     json.RawMessage `json:"result"`
		IsError    bool            `json:"isError"`
		BadIsError bool            `json:"badIsError"`
		BadText    string          `json:"badText"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("the TypeScript client printed %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	if got.Server.Name != "rtfshost" || !strings.Contains(strings.Join(got.Tools, " "), "rtfs.eval") || !strings.Contains(strings.Join(got.Tools, " "), "mcp.stream.start") {
		t.Errorf("server %q, tools %v", got.Server.Name, got.Tools)
	}
	if string(got.Result) != `{"value":42}` || got.IsError {
		t.Errorf("rtfs.eval from the TypeScript client: %s (isError %v)", got.Result, got.IsError)
	}
	if !got.BadIsError || !strings.Contains(got.BadText, "eval.rtfs:1:") {
		t.Errorf("a program error from the TypeScript client: isError %v, %q", got.BadIsError, got.BadText)
	}
}

// installStdioClient returns a directory holding testdata/stdio-client's
// script beside its installed dependencies (bare imports resolve from the
// script's directory).
func installStdioClient(t *testing.T) string {
	t.Helper()
	return npmtest.Install(t, filepath.Join("testdata", "stdio-client"), npmtest.Options{})
}

// TestServeOAuth runs "rtfshost serve --oauth-issuer" against a local
// issuer: the resource is the URL of /mcp it prints (from the bound
// address), a request without a token gets 401 pointing at the metadata,
// and the metadata names that resource and the issuer.
func TestServeOAuth(t *testing.T) {
	iss := httptest.NewServer(http.NotFoundHandler()) // no keys are needed to refuse a request without a token
	defer iss.Close()
	p := startServeProc(t, "", filepath.Join(t.TempDir(), "data"), "serve", "--listen", "127.0.0.1:0", "--no-ui", "--oauth-issuer", iss.URL)
	defer p.stop()
	resp, err := http.Post(p.base, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	metadata := strings.TrimSuffix(p.base, "/mcp") + "/.well-known/oauth-protected-resource/mcp"
	if h := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(h, `resource_metadata="`+metadata+`"`) {
		t.Errorf("no token: %s, WWW-Authenticate %q", resp.Status, h)
	}
	resp, err = http.Get(metadata)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var meta struct {
		Resource string   `json:"resource"`
		Servers  []string `json:"authorization_servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&meta); err != nil || meta.Resource != p.base || len(meta.Servers) != 1 || meta.Servers[0] != iss.URL {
		t.Errorf("metadata %+v (%v); want resource %s and the issuer %s", meta, err, p.base, iss.URL)
	}
}
