package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
	"github.com/rtfshost/rtfshost/transport/internal/proc"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
)

// Stdio is the MCP stdio transport: it starts an MCP server as a child
// process (Spec.Config, a *StdioConfig from the start keys :command :args
// :env :cwd :restart :roots :handshake-timeout-ms) and calls one tool over
// its stdin and stdout, newline-delimited JSON-RPC, delivering progress
// notifications and the result exactly as Streamable does, so a processor
// written for :mcp runs unchanged. The zero value is ready to use and safe
// for concurrent use.
//
// It speaks the protocol itself rather than through go-sdk's client and
// CommandTransport, for three reasons (docs/transports.md): go-sdk reads the
// child's stdout ahead into an unbounded queue while a notification handler
// blocks, so a full stream queue would not stop a fast server; it decodes a
// message of any length; and it signals the child only, not its process
// group. Here stdout is read one bounded line at a time, only once the sink
// took the previous chunk, and Stop ends the whole group.
//
// The server's own requests are answered as over :mcp (answerer): ping,
// roots/list from :roots, elicitation and sampling refused. A stdout line
// that is not a JSON-RPC message (a server logging to stdout) is skipped,
// with at most one warning per 10 s counting the lines skipped.
//
// A server that does not answer initialize within the handshake timeout
// (StdioConfig.HandshakeTimeout), or that sends nothing for
// Spec.IdleTimeout once the call was made, ends the stream with an error
// saying so (the idle one wraps egress.ErrIdle); so does a server that
// exits before the result, naming the command, its exit status and its
// stderr tail. The tool is not called again unless :restart :on-failure
// says it may be. Cancelling Run sends notifications/cancelled, closes
// stdin, then SIGTERM and SIGKILL after a grace period; the host's death,
// even by SIGKILL, kills the server's process group too (on Unix). A stream
// resumed after a host restart first ends a group its previous host left
// running (transport.Spec.Stale), then ends with transport.ErrSourceLost,
// unless :restart :on-failure.
type Stdio struct {
	policy    retry.Policy // zero: the project policy; tests shorten it
	grace     time.Duration
	skipEvery time.Duration // least time between two skipped-line warnings; zero: skipWarnEvery
}

var _ transport.StreamTransport = (*Stdio)(nil)

// DefaultHandshakeTimeout is how long a :stdio server may take to answer
// initialize, counted from its start, when :handshake-timeout-ms is not
// given: long enough for npx or uvx to fetch a package first.
const DefaultHandshakeTimeout = 60 * time.Second

// StdioConfig is the configuration of the :stdio transport, made by
// StdioKind's Configure from the start keys (Spec.Config). It is a value,
// read-only once built; it implements transport.Spawner.
type StdioConfig struct {
	Process proc.Config // :command :args :env :cwd :restart
	Roots   []Root      // :roots, listed to the server's roots/list
	// HandshakeTimeout bounds the wait for the answer to initialize, from
	// the program's start (:handshake-timeout-ms); zero means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
}

// Executable returns the program, for the egress policy.
func (c *StdioConfig) Executable() string { return c.Process.Command }

// EnvNames returns the variables :env sets, for the egress policy.
func (c *StdioConfig) EnvNames() []string { return c.Process.EnvNames() }

// StdioKind describes the stdio transport to a transport.Catalog:
// :transport :stdio, chosen by name only, with the process start keys,
// :roots and :handshake-timeout-ms.
func StdioKind() transport.Kind {
	return transport.Kind{
		Name:     "stdio",
		Doc:      "one MCP tool call on an MCP server started as a child process (stdin/stdout): progress notifications, then the result",
		Endpoint: "the tool's name",
		Target:   transport.TargetCommand,
		Keys: append(proc.Keys(), rootsKey(),
			transport.Key{Name: "handshake-timeout-ms", Type: "int",
				Doc: "how long the MCP server may take to answer initialize, from its start (default 60000)"}),
		Configure: func(keys map[string]json.RawMessage) (any, error) {
			pc, err := proc.Parse(keys)
			if err != nil {
				return nil, err
			}
			c := &StdioConfig{Process: pc}
			if c.Roots, err = parseRoots(keys); err != nil {
				return nil, err
			}
			if raw, ok := keys["handshake-timeout-ms"]; ok && string(raw) != "null" {
				var ms int64
				if err := json.Unmarshal(raw, &ms); err != nil || ms <= 0 {
					return nil, fmt.Errorf(":handshake-timeout-ms: want a positive number of milliseconds, got %.40s", raw)
				}
				c.HandshakeTimeout = time.Duration(ms) * time.Millisecond
			}
			return c, nil
		},
		Transport: new(Stdio),
	}
}

// Replayable reports false: a tool call on a child process cannot be read
// again; the host journals its chunks.
func (*Stdio) Replayable() bool { return false }

// kindStdio marks the cursors of stdio calls (they are chunk IDs only: a
// stdio call is never resumed from one).
const kindStdio = "stdio"

// Run implements transport.StreamTransport.
func (t *Stdio) Run(ctx context.Context, spec transport.Spec, cursor string, sink transport.Sink) error {
	cfg, ok := spec.Config.(*StdioConfig)
	if !ok || cfg == nil {
		return &transport.Error{StreamID: spec.StreamID, Op: "config", Permanent: true, Err: fmt.Errorf("stdio: the spec's Config is %T, want the *mcp.StdioConfig of StdioKind", spec.Config)}
	}
	if err := proc.EndStale(ctx, &spec, sink); err != nil {
		return err
	}
	if spec.Resumed && !cfg.Process.Restart {
		return &transport.Error{StreamID: spec.StreamID, Op: "resume", Permanent: true,
			Err: fmt.Errorf("%w: the MCP server %s was running the call when the host stopped, and a tool call is not made again without :restart :on-failure", transport.ErrSourceLost, cfg.Process.Name())}
	}
	args, err := toolArguments(&spec)
	if err != nil {
		return err
	}
	r := t.policy.Start("stdio", &spec, sink)
	for {
		err := t.once(ctx, cfg, &spec, args, sink)
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		var se *sinkError
		if errors.As(err, &se) {
			return se.err
		}
		var te *transport.Error
		if !cfg.Process.Restart || !errors.As(err, &te) || te.Permanent {
			return err
		}
		if werr := r.Wait(ctx, err, 0); werr != nil {
			return werr
		}
	}
}

// stdioRun is one start of the server and its call.
type stdioRun struct {
	p       *proc.Process
	spec    *transport.Spec
	out     *stdoutReader
	lines   *proc.LineReader
	name    string
	tr      tracker
	answers answerer
	skips   skipLog
	called  atomic.Bool // tools/call was written (read by the cancel)
	wmu     sync.Mutex  // one line at a time on stdin: the cancel writes too
}

func (t *Stdio) once(ctx context.Context, cfg *StdioConfig, spec *transport.Spec, args json.RawMessage, sink transport.Sink) error {
	limit := spec.MaxEventBytes
	if limit <= 0 {
		limit = transport.DefaultMaxEventBytes
	}
	handshake := cfg.HandshakeTimeout
	if handshake <= 0 {
		handshake = DefaultHandshakeTimeout
	}
	p, err := proc.Start(&cfg.Process, proc.Options{StreamID: spec.StreamID, Logger: spec.Logger, Grace: t.grace, Observer: proc.ObserverOf(sink)})
	if err != nil {
		return err
	}
	out := &stdoutReader{f: p.Stdout, handshake: time.Now().Add(handshake), handshakeTimeout: handshake, idle: spec.IdleTimeout}
	r := &stdioRun{p: p, spec: spec, out: out, lines: proc.NewLineReader(out, limit), name: cfg.Process.Name(),
		tr: tracker{sink: sink, streamID: spec.StreamID, log: spec.Logger, noTasks: "stdio",
			st: callState{Kind: kindStdio, Req: callID, Token: "rtfs-" + rand.Text()}},
		answers: answerer{roots: cfg.Roots, streamID: spec.StreamID, log: spec.Logger}}
	r.skips = skipLog{every: t.skipEvery, warn: r.warnSkipped}
	stop := context.AfterFunc(ctx, func() {
		if r.called.Load() {
			r.send(0, methodCancelled, cancelledParams(callID, "the stream ended"))
		}
		p.Stop()
	})
	defer func() {
		stop()
		p.Stop()
		r.skips.flush()
	}()
	if err := r.initialize(ctx); err != nil {
		return r.failure(ctx, err, "during initialize")
	}
	r.called.Store(true)
	if err := r.send(callID, methodToolsCall, addMeta(ctx, callParams(spec.Endpoint, args, r.tr.st.Token, false), "")); err != nil {
		return r.failure(ctx, err, "before the tools/call was sent")
	}
	for {
		msgs, err := r.next(ctx)
		if err != nil {
			if errors.Is(err, egress.ErrIdle) {
				r.send(0, methodCancelled, cancelledParams(callID, "the server sent nothing for the idle timeout"))
			}
			return r.failure(ctx, err, "before the tool's result")
		}
		if done, err := r.tr.handle(ctx, msgs, "", false); done || err != nil {
			return err
		}
	}
}

// initialize runs the handshake: initialize, then notifications/initialized.
// It must end before the handshake deadline, after which reads fall under
// the idle timeout.
func (r *stdioRun) initialize(ctx context.Context) error {
	if err := r.send(initializeID, methodInitialize, initializeParams(newestSessionVersion)); err != nil {
		return err
	}
	for {
		msgs, err := r.next(ctx)
		if err != nil {
			return err
		}
		for i := range msgs {
			if !msgs[i].isResponseTo(initializeID) {
				continue
			}
			r.out.handshakeDone()
			if msgs[i].Error != nil {
				return r.fail("initialize", true, msgs[i].Error)
			}
			var res struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if err := json.Unmarshal(msgs[i].Result, &res); err != nil {
				return r.fail("initialize", true, fmt.Errorf("malformed initialize result: %w", err))
			}
			if !supportedVersion(res.ProtocolVersion) && res.ProtocolVersion != legacyVersion {
				return r.fail("initialize", true, fmt.Errorf("the server chose protocol version %q, which this client does not speak", res.ProtocolVersion))
			}
			return r.send(0, methodInitialized, nil)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// next reads the next line of JSON-RPC messages, answering the server's
// own requests on the way (answerer). Lines that are not a JSON-RPC
// message (a server logging to stdout, Node's console.log of an object)
// are skipped, with a rate-limited warning (skipLog).
func (r *stdioRun) next(ctx context.Context) ([]rpcMessage, error) {
	for {
		line, err := r.lines.Next()
		if errors.Is(err, proc.ErrLineTooLong) {
			return nil, r.fail("read", true, fmt.Errorf("a message from %s is longer than %d bytes: %w", r.name, r.spec.MaxEventBytes, err))
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			var msgs []rpcMessage
			var derr error
			if trimmed[0] == '{' || trimmed[0] == '[' {
				msgs, derr = decodeMessages(trimmed)
			}
			if len(msgs) > 0 && derr == nil {
				r.answers.answer(ctx, msgs, func(_ context.Context, b []byte) error { return r.write(b) })
				return msgs, nil
			}
			r.skips.add(trimmed)
		}
		if err != nil {
			return nil, r.readError(err)
		}
	}
}

// readError names a deadline of the stdout reader: the handshake's, or the
// idle timeout.
func (r *stdioRun) readError(err error) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	if r.out.inHandshake() {
		return r.fail("initialize", false, fmt.Errorf("the MCP server %s did not answer initialize within %s (:handshake-timeout-ms)", r.name, r.out.handshakeTimeout))
	}
	return r.fail("read", false, fmt.Errorf("the MCP server %s, calling the tool %q: %w", r.name, r.spec.Endpoint, &egress.IdleError{Timeout: r.out.idle}))
}

// warnSkipped logs the lines skipLog counted.
func (r *stdioRun) warnSkipped(n int, sample string) {
	if r.spec.Logger != nil {
		r.spec.Logger.Warn("stdio: skipped lines on the server's stdout that are not JSON-RPC messages",
			"stream", r.spec.StreamID, "command", r.name, "skipped", n, "line", sample)
	}
}

// send writes one request (id 0: a notification) as a line on stdin.
func (r *stdioRun) send(id int, method string, p params) error {
	b, err := encodeRequest(id, method, p)
	if err != nil {
		return r.fail(method, true, err)
	}
	if err := r.write(b); err != nil {
		return r.fail(method, false, fmt.Errorf("writing to the stdin of %s: %w", r.name, err))
	}
	return nil
}

// stdinTimeout bounds one write to the server's stdin: a server that does
// not read its input cannot block the transport.
const stdinTimeout = 5 * time.Second

func (r *stdioRun) write(b []byte) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	_ = r.p.Stdin.SetWriteDeadline(time.Now().Add(stdinTimeout))
	_, err := r.p.Stdin.Write(append(b, '\n'))
	return err
}

func (r *stdioRun) fail(op string, permanent bool, err error) error {
	return &transport.Error{StreamID: r.spec.StreamID, Op: op, Permanent: permanent, Err: err}
}

// failure turns an error of the call into the stream's error: the context's
// when it ended, else, when the server's output ended or broke, how the
// server ended (command, exit status, stderr tail).
func (r *stdioRun) failure(ctx context.Context, err error, when string) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var te *transport.Error
	var se *sinkError
	if errors.As(err, &te) || errors.As(err, &se) {
		return err
	}
	if errors.Is(err, os.ErrClosed) || errors.Is(err, io.EOF) {
		return r.fail("tools/call", false, r.p.Ended(when))
	}
	return r.fail("read", false, fmt.Errorf("reading the stdout of %s: %w", r.name, err))
}

// stdoutReader reads the server's stdout under a deadline: until the
// answer to initialize, the handshake's, fixed from the program's start;
// after it the idle timeout, counted from the start of each read, so that
// it fires only when the server sent no byte for that long while the
// transport waited for one (time spent delivering a chunk does not count).
// Setting a deadline costs more than a small read, so a read keeps the one
// set by an earlier read while at least 3/4 of the idle timeout remains of
// it, and when that one passes, waits out the rest of its own. A deadline
// error is sticky. It is owned by one stdioRun.
type stdoutReader struct {
	f                *os.File
	handshake        time.Time // zero once initialize was answered
	handshakeTimeout time.Duration
	idle             time.Duration // zero: no idle timeout
	deadline         time.Time     // the deadline set on f; zero: none
	err              error
}

func (s *stdoutReader) inHandshake() bool { return !s.handshake.IsZero() }

func (s *stdoutReader) handshakeDone() { s.handshake = time.Time{} }

// Read implements io.Reader.
func (s *stdoutReader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	start := time.Now()
	if err := s.arm(start); err != nil {
		return 0, err
	}
	for {
		n, err := s.f.Read(p)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		if s.inHandshake() || s.idle <= 0 || time.Since(start) >= s.idle {
			s.err = err
			return n, err
		}
		// An earlier read's deadline passed: this read waits the rest of
		// its own idle timeout.
		if err := s.set(start.Add(s.idle)); err != nil {
			return 0, err
		}
	}
}

// arm sets the deadline a read starting at now waits under, unless the one
// set is close enough.
func (s *stdoutReader) arm(now time.Time) error {
	var want time.Time
	switch {
	case s.inHandshake():
		want = s.handshake
	case s.idle > 0:
		if left := s.deadline.Sub(now); !s.deadline.IsZero() && left >= s.idle*3/4 && left <= s.idle {
			return nil
		}
		want = now.Add(s.idle)
	}
	if want.Equal(s.deadline) {
		return nil
	}
	return s.set(want)
}

func (s *stdoutReader) set(deadline time.Time) error {
	if err := s.f.SetReadDeadline(deadline); err != nil && !errors.Is(err, os.ErrNoDeadline) {
		return err
	}
	s.deadline = deadline
	return nil
}

// skipWarnEvery is the least time between two warnings about lines
// skipped on a server's stdout.
const skipWarnEvery = 10 * time.Second

// skipLog rate-limits the warning about stdout lines that are not JSON-RPC
// messages: the first line skipped is reported at once, later ones at most
// once per interval with the count of lines skipped since the last report
// and the latest of them; flush reports what is left when the run ends. It
// is owned by one stdioRun.
type skipLog struct {
	every   time.Duration // zero: skipWarnEvery
	now     func() time.Time
	warn    func(n int, sample string)
	last    time.Time // of the last report; zero before the first
	pending int       // lines skipped since the last report
	sample  string    // the latest of them, cut to 200 bytes
}

func (s *skipLog) add(line []byte) {
	s.pending++
	s.sample = string(line[:min(len(line), 200)])
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	every := s.every
	if every <= 0 {
		every = skipWarnEvery
	}
	if !s.last.IsZero() && now.Sub(s.last) < every {
		return
	}
	s.last = now
	s.flush()
}

// flush reports the lines skipped since the last report, if any.
func (s *skipLog) flush() {
	if s.pending == 0 {
		return
	}
	if s.warn != nil {
		s.warn(s.pending, s.sample)
	}
	s.pending = 0
}
