package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
	"github.com/rtfshost/rtfshost/transport/transporttest"
)

// stdioServerEnv makes the test binary an MCP server over stdio (go-sdk's
// server on sdk.StdioTransport) instead of the tests; its value is the
// server's behaviour: "normal"; "garbage" (before each message it writes
// the junk lines, which are not JSON-RPC, to stdout); or "silent" (it
// reads stdin until EOF and never answers, not even initialize).
const stdioServerEnv = "RTFSHOST_STDIO_SERVER"

// keepAliveEnv sets the stdio server's KeepAlive interval (a Go duration);
// two missed pings in a row close its session.
const keepAliveEnv = "RTFSHOST_STDIO_KEEPALIVE"

// junk are the lines the "garbage" server writes before each message: a
// log line, and what Node's console.log prints for an object, which starts
// with "{" but is not JSON.
var junk = []string{"server starting, log level info", "{ a: 1, b: 'two' }"}

// junkWriter writes the junk lines before each line written through it.
type junkWriter struct {
	w       io.Writer
	midLine bool
}

func (j *junkWriter) Write(p []byte) (int, error) {
	if !j.midLine {
		for _, l := range junk {
			if _, err := io.WriteString(j.w, l+"\n"); err != nil {
				return 0, err
			}
		}
	}
	j.midLine = len(p) > 0 && p[len(p)-1] != '\n'
	return j.w.Write(p)
}

func (j *junkWriter) Close() error { return nil }

// countFileEnv names the file where the endless tool records how many
// progress notifications it sent (8 bytes, little endian).
const countFileEnv = "RTFSHOST_STDIO_COUNT"

// stdioServerMain serves the tools of the stdio tests, those of
// addRequestTools and: count (n progress
// notifications, then a result; isError with fail), endless (progress until
// cancelled), crash (a progress notification, a stderr line, exit 4), hang
// (one progress notification, then never answers) and flood (one progress notification of n bytes).
func stdioServerMain(mode string) int {
	if mode == "silent" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	}
	opts := &sdk.ServerOptions{KeepAliveFailureThreshold: 2}
	if d := os.Getenv(keepAliveEnv); d != "" {
		var err error
		if opts.KeepAlive, err = time.ParseDuration(d); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "stdio-test", Version: "1"}, opts)
	addRequestTools(srv)
	counter := func() {}
	if path := os.Getenv(countFileEnv); path != "" {
		c, err := transporttest.Counter(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		counter = c
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "count"}, func(ctx context.Context, req *sdk.CallToolRequest, in countArgs) (*sdk.CallToolResult, any, error) {
		for i := 1; i <= in.N; i++ {
			if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
				Progress: float64(i), Total: float64(in.N), Message: fmt.Sprintf("step %d", i)}); err != nil {
				return nil, nil, err
			}
		}
		if in.Fail {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "boom: bad input"}}}, nil, nil
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("counted %d", in.N)}}}, nil, nil
	})
	sdk.AddTool(srv, &sdk.Tool{Name: "endless"}, func(ctx context.Context, req *sdk.CallToolRequest, _ map[string]any) (*sdk.CallToolResult, any, error) {
		return endless(ctx, req, counter)
	})
	sdk.AddTool(srv, &sdk.Tool{Name: "crash"}, func(ctx context.Context, req *sdk.CallToolRequest, _ map[string]any) (*sdk.CallToolResult, any, error) {
		_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1})
		time.Sleep(20 * time.Millisecond)
		fmt.Fprintln(os.Stderr, "panic: the index is corrupt")
		os.Exit(4)
		return nil, nil, nil
	})
	sdk.AddTool(srv, &sdk.Tool{Name: "hang"}, func(ctx context.Context, req *sdk.CallToolRequest, _ map[string]any) (*sdk.CallToolResult, any, error) {
		_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1})
		<-ctx.Done()
		return nil, nil, ctx.Err()
	})
	sdk.AddTool(srv, &sdk.Tool{Name: "flood"}, func(ctx context.Context, req *sdk.CallToolRequest, in countArgs) (*sdk.CallToolResult, any, error) {
		err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
			Progress: 1, Message: strings.Repeat("x", in.N)})
		return &sdk.CallToolResult{}, nil, err
	})
	var t sdk.Transport = &sdk.StdioTransport{}
	if mode == "garbage" {
		t = &sdk.IOTransport{Reader: os.Stdin, Writer: &junkWriter{w: os.Stdout}}
	}
	if err := srv.Run(context.Background(), t); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "stdio server:", err)
	}
	return 0
}

// endless sends progress notifications until ctx ends, calling sent after
// each.
func endless(ctx context.Context, req *sdk.CallToolRequest, sent func()) (*sdk.CallToolResult, any, error) {
	for i := 1; ; i++ {
		if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i)}); err != nil {
			return nil, nil, err
		}
		sent()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
	}
}

// stdioSpec is the Spec of a call of tool on the test binary as a stdio
// server, configured through StdioKind as the provider does.
func stdioSpec(t testing.TB, tool, args string, env map[string]string, extra map[string]string) transport.Spec {
	t.Helper()
	e := map[string]string{stdioServerEnv: "normal"}
	for k, v := range env {
		e[k] = v
	}
	keys := map[string]json.RawMessage{}
	keys["command"], _ = json.Marshal(os.Args[0])
	keys["args"], _ = json.Marshal([]string{"-test.run=^$"})
	keys["env"], _ = json.Marshal(e)
	for k, v := range extra {
		keys[k] = json.RawMessage(v)
	}
	cfg, err := StdioKind().Configure(keys)
	if err != nil {
		t.Fatalf("configure: %v", err)
	}
	return transport.Spec{StreamID: "stdio-" + tool, Endpoint: tool, Arguments: []byte(args), Config: cfg}
}

func progressIndex(c transport.Chunk) (int, bool) {
	if c.Event != "progress" {
		return 0, false
	}
	var p struct{ Progress float64 }
	if json.Unmarshal(c.Data, &p) != nil {
		return 0, false
	}
	return int(p.Progress) - 1, true
}

func suiteMarker() (string, string) {
	return "RTFSHOST_SUITE_MARK", strconv.FormatInt(time.Now().UnixNano(), 36)
}

// TestTransportSuiteStdio runs the transport suite on a go-sdk MCP server
// launched from the test binary.
func TestTransportSuiteStdio(t *testing.T) { transporttest.Run(t, stdioHarness()) }

// BenchmarkCancelStdio: how long Run takes to return after a cancel, the
// server still sending (it is stopped, and waited for).
func BenchmarkCancelStdio(b *testing.B) { transporttest.BenchmarkCancel(b, stdioHarness()) }

func stdioHarness() transporttest.Harness {
	return transporttest.Harness{
		Finite: func(t testing.TB, n int) transporttest.Source {
			k, v := suiteMarker()
			return transporttest.Source{Transport: new(Stdio), Marker: k + "=" + v,
				Spec: stdioSpec(t, "count", fmt.Sprintf(`{"n":%d}`, n), map[string]string{k: v}, nil)}
		},
		Endless: func(t testing.TB) transporttest.Source {
			k, v := suiteMarker()
			count := transporttest.NewCountFile(t)
			return transporttest.Source{Transport: new(Stdio), Marker: k + "=" + v,
				Spec:     stdioSpec(t, "endless", `{}`, map[string]string{k: v, countFileEnv: count.Path}, nil),
				Produced: count.Produced}
		},
		Failing: func(t testing.TB) transporttest.Source {
			k, v := suiteMarker()
			return transporttest.Source{Transport: new(Stdio), Marker: k + "=" + v,
				Spec: stdioSpec(t, "count", `{"n":2,"fail":true}`, map[string]string{k: v}, nil)}
		},
		Index: progressIndex,
	}
}

// TestTransportSuiteStreamable, TestTransportSuiteStreamableModern and
// TestTransportSuiteLegacy run the suite on go-sdk's HTTP handlers: the
// stateful one (a 2025-11-25 session), the stateless one of 2026-07-28
// only, and the 2024-11-05 SSE one.
func TestTransportSuiteStreamable(t *testing.T) { runHTTPSuite(t, false, sdkConfig{}) }

func TestTransportSuiteStreamableModern(t *testing.T) {
	runHTTPSuite(t, false, sdkConfig{version: version20260728, stateless: true})
}

func TestTransportSuiteLegacy(t *testing.T) { runHTTPSuite(t, true, sdkConfig{legacy: true}) }

// BenchmarkCancelStreamable: how long Run takes to return after a cancel,
// over Streamable HTTP (a 2025-11-25 session).
func BenchmarkCancelStreamable(b *testing.B) {
	transporttest.BenchmarkCancel(b, httpHarness(false, sdkConfig{}))
}

func runHTTPSuite(t *testing.T, legacy bool, base sdkConfig) {
	transporttest.Run(t, httpHarness(legacy, base))
}

// httpHarness is the suite's Harness over go-sdk's HTTP handlers: the
// legacy SSE one, or Streamable HTTP as base says.
func httpHarness(legacy bool, base sdkConfig) transporttest.Harness {
	tr := func() transport.StreamTransport {
		if legacy {
			return LegacySSE{policy: fastPolicy}
		}
		return Streamable{policy: fastPolicy}
	}
	spec := func(s *sdkServer, tool, args string) transport.Spec {
		sp := s.spec(tool, args)
		if legacy {
			sp.HTTP.ServerURL = s.http.URL + "/sse"
		}
		return sp
	}
	return transporttest.Harness{
		Finite: func(t testing.TB, n int) transporttest.Source {
			s := newSDKServer(t, base)
			return transporttest.Source{Transport: tr(), Spec: spec(s, "count", fmt.Sprintf(`{"n":%d}`, n))}
		},
		Endless: func(t testing.TB) transporttest.Source {
			cfg := base
			cfg.noStore = true
			s := newSDKServer(t, cfg)
			return transporttest.Source{Transport: tr(), Spec: spec(s, "endless", `{}`),
				Produced: func() int { return int(s.produced.Load()) }}
		},
		Failing: func(t testing.TB) transporttest.Source {
			s := newSDKServer(t, base)
			return transporttest.Source{Transport: tr(), Spec: spec(s, "count", `{"n":2,"fail":true}`)}
		},
		Index: progressIndex,
	}
}

// TestStdioLikeMCP: the same tool over stdio delivers what :mcp delivers:
// progress chunks with the notification's params, then the result.
func TestStdioLikeMCP(t *testing.T) {
	sink := &recSink{}
	if err := new(Stdio).Run(context.Background(), stdioSpec(t, "count", `{"n":3}`, nil, nil), "", sink); err != nil {
		t.Fatal(err)
	}
	if got := sink.events(); strings.Join(got, ",") != "progress,progress,progress,result" {
		t.Fatalf("events %v", got)
	}
	var p struct {
		Token   string  `json:"progressToken"`
		Message string  `json:"message"`
		Total   float64 `json:"total"`
	}
	if err := json.Unmarshal(sink.chunks[0].Data, &p); err != nil || p.Message != "step 1" || p.Total != 3 || !strings.HasPrefix(p.Token, "rtfs-") {
		t.Fatalf("first progress %s (%v)", sink.chunks[0].Data, err)
	}
	if !strings.Contains(string(sink.last().Data), "counted 3") {
		t.Fatalf("result %s", sink.last().Data)
	}
}

// TestStdioServerCrash: a server that dies mid-call ends the stream with
// an error naming the command, the exit status and the stderr tail, after
// the chunks it sent; the tool is not called again.
func TestStdioServerCrash(t *testing.T) {
	sink := &recSink{}
	err := new(Stdio).Run(context.Background(), stdioSpec(t, "crash", `{}`, nil, nil), "", sink)
	for _, want := range []string{"exited with status 4", "before the tool's result", "panic: the index is corrupt", filepath.Base(os.Args[0])} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to say %q", err, want)
		}
	}
	if got := sink.events(); len(got) != 1 {
		t.Errorf("events %v, want the one progress sent before the crash", got)
	}
}

// TestStdioRestartOnFailure: with :restart :on-failure the crashed server
// is started again under the retry policy.
func TestStdioRestartOnFailure(t *testing.T) {
	sink := &recSink{}
	tr := &Stdio{policy: retry.Policy{Initial: time.Millisecond, Max: time.Millisecond, Attempts: 1}}
	err := tr.Run(context.Background(), stdioSpec(t, "crash", `{}`, nil, map[string]string{"restart": `"on-failure"`}), "", sink)
	if err == nil || !strings.Contains(err.Error(), "gave up after 1 retries") {
		t.Fatalf("err = %v", err)
	}
	if got := sink.events(); len(got) != 2 {
		t.Errorf("events %v, want one progress from each of the two starts", got)
	}
}

// TestStdioHangCancels: a tool that never answers is cancelled promptly:
// notifications/cancelled, stdin closed, the server gone.
func TestStdioHangCancels(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := new(Stdio).Run(ctx, stdioSpec(t, "hang", `{}`, nil, nil), "", &recSink{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

// TestStdioFloodIsBounded: a message longer than the limit is an error
// naming the limit, not an unbounded buffer.
func TestStdioFloodIsBounded(t *testing.T) {
	spec := stdioSpec(t, "flood", `{"n":200000}`, nil, nil)
	spec.MaxEventBytes = 64 << 10
	err := new(Stdio).Run(context.Background(), spec, "", &recSink{})
	if !errors.Is(err, transport.ErrEventTooLarge) || !strings.Contains(err.Error(), "65536 bytes") {
		t.Fatalf("err = %v", err)
	}
}

// TestStdioResumedIsSourceLost: a call resumed after a host restart is not
// made again.
func TestStdioResumedIsSourceLost(t *testing.T) {
	spec := stdioSpec(t, "count", `{"n":1}`, nil, nil)
	spec.Resumed = true
	if err := new(Stdio).Run(context.Background(), spec, "x", &recSink{}); !errors.Is(err, transport.ErrSourceLost) {
		t.Fatalf("err = %v", err)
	}
}

// BenchmarkStdioProgress: progress notifications from a stdio server into a
// counting sink, under the default idle timeout (a read deadline per read).
// Reports chunks/s.
func BenchmarkStdioProgress(b *testing.B) {
	const n = 20000
	spec := stdioSpec(b, "count", fmt.Sprintf(`{"n":%d}`, n), nil, nil)
	spec.IdleTimeout = time.Minute
	b.ResetTimer()
	for range b.N {
		s := &countingSink{}
		if err := new(Stdio).Run(context.Background(), spec, "", s); err != nil || s.n != n+1 {
			b.Fatalf("err %v, %d chunks", err, s.n)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "chunks/s")
}

type countingSink struct{ n int }

func (s *countingSink) Deliver(context.Context, transport.Chunk) error { s.n++; return nil }

// TestStdioHandshakeTimeout: a server that never answers initialize ends
// the stream after :handshake-timeout-ms with an error saying so, instead
// of blocking Run.
func TestStdioHandshakeTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := stdioSpec(t, "count", `{"n":1}`, map[string]string{stdioServerEnv: "silent"}, map[string]string{"handshake-timeout-ms": "200"})
	err := new(Stdio).Run(ctx, spec, "", &recSink{})
	if ctx.Err() != nil {
		t.Fatalf("Run waited for its context: %v", err)
	}
	var te *transport.Error
	if !errors.As(err, &te) || te.Op != "initialize" || te.Permanent ||
		!strings.Contains(err.Error(), "did not answer initialize within 200ms (:handshake-timeout-ms)") {
		t.Fatalf("err = %v, want a handshake timeout naming the key", err)
	}
}

// TestStdioHandshakeTimeoutKey: :handshake-timeout-ms defaults to 60 s and
// takes only a positive number of milliseconds.
func TestStdioHandshakeTimeoutKey(t *testing.T) {
	cfg := stdioSpec(t, "count", "", nil, nil).Config.(*StdioConfig)
	if cfg.HandshakeTimeout != 0 || DefaultHandshakeTimeout != time.Minute {
		t.Fatalf("default handshake timeout %v / %v", cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	}
	cfg = stdioSpec(t, "count", "", nil, map[string]string{"handshake-timeout-ms": "1500"}).Config.(*StdioConfig)
	if cfg.HandshakeTimeout != 1500*time.Millisecond {
		t.Fatalf("handshake timeout %v", cfg.HandshakeTimeout)
	}
	for _, bad := range []string{"0", "-5", `"soon"`, "1.5"} {
		_, err := StdioKind().Configure(map[string]json.RawMessage{"command": json.RawMessage(`"x"`), "handshake-timeout-ms": json.RawMessage(bad)})
		if err == nil || !strings.Contains(err.Error(), ":handshake-timeout-ms: want a positive number of milliseconds") {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}

// TestStdioIdleTimeout: a server that goes silent mid-call ends the stream
// after the idle timeout with an error wrapping egress.ErrIdle, as the
// network transports do; a call whose server keeps sending outlives many
// idle timeouts.
func TestStdioIdleTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := stdioSpec(t, "hang", `{}`, nil, nil)
	spec.IdleTimeout = 300 * time.Millisecond
	sink := &recSink{}
	err := new(Stdio).Run(ctx, spec, "", sink)
	if ctx.Err() != nil {
		t.Fatalf("Run waited for its context: %v", err)
	}
	if !errors.Is(err, egress.ErrIdle) || transport.IsPermanent(err) ||
		!strings.Contains(err.Error(), "idle timeout: the source sent nothing for 300ms (:idle-timeout-ms)") ||
		!strings.Contains(err.Error(), `calling the tool "hang"`) {
		t.Fatalf("err = %v, want the idle timeout", err)
	}
	if got := sink.events(); !slices.Equal(got, []string{"progress"}) {
		t.Fatalf("events %v, want the progress sent before the silence", got)
	}

	spec = stdioSpec(t, "slow", `{"n":12,"every_ms":100}`, nil, nil)
	spec.IdleTimeout = 600 * time.Millisecond
	sink = &recSink{}
	if err := new(Stdio).Run(ctx, spec, "", sink); err != nil {
		t.Fatalf("a server that keeps sending: %v", err)
	}
	if got := sink.progressValues(t); !slices.Equal(got, wantProgress(12)) {
		t.Fatalf("progress %v", got)
	}
}

// TestStdioSkipsJunkLines: lines on stdout that are not JSON-RPC messages,
// among them one that starts with "{" but is not JSON (Node's console.log
// of an object), are skipped; the warning is rate-limited: the first line
// at once, then one report per interval counting the lines skipped.
func TestStdioSkipsJunkLines(t *testing.T) {
	logs := &logRecorder{}
	spec := stdioSpec(t, "count", `{"n":20}`, map[string]string{stdioServerEnv: "garbage"}, nil)
	spec.Logger = slog.New(logs)
	sink := &recSink{}
	if err := (&Stdio{skipEvery: time.Hour}).Run(context.Background(), spec, "", sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.events(); !slices.Equal(got, wantEvents(20)) {
		t.Fatalf("events %v", got)
	}
	// Two junk lines before each of the 22 messages read: the initialize
	// answer, 20 progress notifications and the result.
	warnings := logs.records("stdio: skipped lines")
	if len(warnings) != 2 || warnings[0]["skipped"] != "1" || warnings[0]["line"] != junk[0] || warnings[1]["skipped"] != "43" {
		t.Fatalf("warnings %v, want the first junk line at once, then the other 43 counted when the run ended", warnings)
	}
}

// TestSkipLogRateLimit: one report per interval, counting the lines since
// the last, and the rest when flushed.
func TestSkipLogRateLimit(t *testing.T) {
	now := time.Unix(0, 0)
	var reports []string
	s := skipLog{every: 10 * time.Second, now: func() time.Time { return now },
		warn: func(n int, sample string) { reports = append(reports, fmt.Sprintf("%d %s", n, sample)) }}
	for _, step := range []struct {
		at   time.Duration
		line string
	}{{0, "a"}, {time.Second, "b"}, {5 * time.Second, "c"}, {10 * time.Second, "d"}, {12 * time.Second, "e"}} {
		now = time.Unix(0, 0).Add(step.at)
		s.add([]byte(step.line))
	}
	s.flush()
	s.flush()
	if want := []string{"1 a", "3 d", "1 e"}; !slices.Equal(reports, want) {
		t.Fatalf("reports %q, want %q", reports, want)
	}
}

// logRecorder is a slog.Handler that keeps every record's message and
// attributes (as text).
type logRecorder struct {
	mu   sync.Mutex
	recs []map[string]string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	l.mu.Lock()
	l.recs = append(l.recs, m)
	l.mu.Unlock()
	return nil
}

// records returns the records whose message starts with prefix.
func (l *logRecorder) records(prefix string) []map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]string
	for _, r := range l.recs {
		if strings.HasPrefix(r["msg"], prefix) {
			out = append(out, r)
		}
	}
	return out
}

// TestStdoutReaderIdle: the idle clock runs only while a read waits: data
// that waited in the pipe longer than the idle timeout, while nothing read
// (a chunk being delivered), is read; a server writing more often than the
// timeout is read to the end under deadlines set by earlier reads; a read
// that waits the whole timeout fails with the deadline error, and keeps
// failing.
func TestStdoutReaderIdle(t *testing.T) {
	const idle = 200 * time.Millisecond
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	r := &stdoutReader{f: pr, idle: idle}
	buf := make([]byte, 64)
	if _, err := pw.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(buf); n != 1 || err != nil {
		t.Fatalf("first read: %d, %v", n, err)
	}
	if _, err := pw.Write([]byte("b")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * idle) // the transport delivers a chunk: nobody reads
	if n, err := r.Read(buf); n != 1 || err != nil || buf[0] != 'b' {
		t.Fatalf("read after a pause longer than the idle timeout: %d %q, %v", n, buf[:n], err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 8 {
			time.Sleep(idle / 4)
			if _, err := pw.Write([]byte("c")); err != nil {
				return
			}
		}
	}()
	for got := 0; got < 8; {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatalf("a writer more frequent than the idle timeout: %v after %d bytes", err, got)
		}
		got += n
	}
	<-done
	start := time.Now()
	if _, err := r.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) < idle {
		t.Fatalf("silence: %v after %v, want the deadline after at least %v", err, time.Since(start), idle)
	}
	if _, err := pw.Write([]byte("d")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after the deadline: %v, want it again", err)
	}
}
