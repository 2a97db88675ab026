package mcp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/internal/proc"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
)

// Stdio is the MCP stdio transport: it starts an MCP server as a child
// process (Spec.Config, from the start keys :command :args :env :cwd
// :restart) and calls one tool over its stdin and stdout, newline-delimited
// JSON-RPC, delivering progress notifications and the result exactly as
// Streamable does, so a processor written for :mcp runs unchanged. The zero
// value is ready to use and safe for concurrent use.
//
// It speaks the protocol itself rather than through go-sdk's client and
// CommandTransport, for three reasons (docs/transports.md): go-sdk reads the
// child's stdout ahead into an unbounded queue while a notification handler
// blocks, so a full stream queue would not stop a fast server; it decodes a
// message of any length; and it signals the child only, not its process
// group. Here stdout is read one bounded line at a time, only once the sink
// took the previous chunk, and Stop ends the whole group.
//
// A server that exits before the result ends the stream with an error
// naming the command, its exit status and its stderr tail; the tool is not
// called again unless :restart :on-failure says it may be. Cancelling Run
// sends notifications/cancelled, closes stdin, then SIGTERM and SIGKILL
// after a grace period; the host's death, even by SIGKILL, kills the
// server's process group too (on Unix). A stream resumed after a host
// restart first ends a group its previous host left running
// (transport.Spec.Stale), then ends with transport.ErrSourceLost, unless
// :restart :on-failure.
type Stdio struct {
	policy retry.Policy // zero: the project policy; tests shorten it
	grace  time.Duration
}

var _ transport.StreamTransport = (*Stdio)(nil)

// StdioKind describes the stdio transport to a transport.Catalog:
// :transport :stdio, chosen by name only, with the process start keys.
func StdioKind() transport.Kind {
	return transport.Kind{
		Name:     "stdio",
		Doc:      "one MCP tool call on an MCP server started as a child process (stdin/stdout): progress notifications, then the result",
		Endpoint: "the tool's name",
		Target:   transport.TargetCommand,
		Keys:     proc.Keys(),
		Configure: func(keys map[string]json.RawMessage) (any, error) {
			c, err := proc.Parse(keys)
			if err != nil {
				return nil, err
			}
			return &c, nil
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
	cfg, ok := spec.Config.(*proc.Config)
	if !ok || cfg == nil {
		return &transport.Error{StreamID: spec.StreamID, Op: "config", Permanent: true, Err: fmt.Errorf("stdio: the spec's Config is %T, want the process configuration of StdioKind", spec.Config)}
	}
	if err := proc.EndStale(ctx, &spec, sink); err != nil {
		return err
	}
	if spec.Resumed && !cfg.Restart {
		return &transport.Error{StreamID: spec.StreamID, Op: "resume", Permanent: true,
			Err: fmt.Errorf("%w: the MCP server %s was running the call when the host stopped, and a tool call is not made again without :restart :on-failure", transport.ErrSourceLost, cfg.Name())}
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
		if !cfg.Restart || !errors.As(err, &te) || te.Permanent {
			return err
		}
		if werr := r.Wait(ctx, err, 0); werr != nil {
			return werr
		}
	}
}

// stdioRun is one start of the server and its call.
type stdioRun struct {
	p      *proc.Process
	spec   *transport.Spec
	lines  *proc.LineReader
	name   string
	tr     tracker
	called atomic.Bool // tools/call was written (read by the cancel)
	wmu    sync.Mutex  // one line at a time on stdin: the cancel writes too
}

func (t *Stdio) once(ctx context.Context, cfg *proc.Config, spec *transport.Spec, args json.RawMessage, sink transport.Sink) error {
	limit := spec.MaxEventBytes
	if limit <= 0 {
		limit = transport.DefaultMaxEventBytes
	}
	p, err := proc.Start(cfg, proc.Options{StreamID: spec.StreamID, Logger: spec.Logger, Grace: t.grace, Observer: proc.ObserverOf(sink)})
	if err != nil {
		return err
	}
	r := &stdioRun{p: p, spec: spec, lines: proc.NewLineReader(p.Stdout, limit), name: cfg.Name(),
		tr: tracker{sink: sink, streamID: spec.StreamID, log: spec.Logger, noTasks: "stdio",
			st: callState{Kind: kindStdio, Req: callID, Token: "rtfs-" + rand.Text()}}}
	stop := context.AfterFunc(ctx, func() {
		if r.called.Load() {
			r.send(0, methodCancelled, cancelledParams(callID, "the stream ended"))
		}
		p.Stop()
	})
	defer func() {
		stop()
		p.Stop()
	}()
	if err := r.initialize(ctx); err != nil {
		return r.failure(ctx, err, "during initialize")
	}
	r.called.Store(true)
	if err := r.send(callID, methodToolsCall, addMeta(ctx, callParams(spec.Endpoint, args, r.tr.st.Token, false), "")); err != nil {
		return r.failure(ctx, err, "before the tools/call was sent")
	}
	for {
		msgs, err := r.next()
		if err != nil {
			return r.failure(ctx, err, "before the tool's result")
		}
		if done, err := r.tr.handle(ctx, msgs, "", false); done || err != nil {
			return err
		}
	}
}

// initialize runs the handshake: initialize, then notifications/initialized.
func (r *stdioRun) initialize(ctx context.Context) error {
	if err := r.send(initializeID, methodInitialize, initializeParams(newestSessionVersion)); err != nil {
		return err
	}
	for {
		msgs, err := r.next()
		if err != nil {
			return err
		}
		for i := range msgs {
			if !msgs[i].isResponseTo(initializeID) {
				continue
			}
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
// own requests (ping; anything else is "method not found") on the way.
// Lines that are not JSON (a server logging to stdout) are logged and
// skipped.
func (r *stdioRun) next() ([]rpcMessage, error) {
	for {
		line, err := r.lines.Next()
		if errors.Is(err, proc.ErrLineTooLong) {
			return nil, r.fail("read", true, fmt.Errorf("a message from %s is longer than %d bytes: %w", r.name, r.spec.MaxEventBytes, err))
		}
		if err != nil && len(line) == 0 {
			return nil, err
		}
		trimmed := strings.TrimSpace(string(line))
		if trimmed == "" {
			if err != nil {
				return nil, err
			}
			continue
		}
		if trimmed[0] != '{' && trimmed[0] != '[' {
			if r.spec.Logger != nil {
				r.spec.Logger.Warn("stdio: the server wrote a line that is not JSON-RPC to stdout", "stream", r.spec.StreamID, "command", r.name, "line", trimmed[:min(len(trimmed), 200)])
			}
			continue
		}
		msgs, derr := decodeMessages(line)
		if derr != nil {
			return nil, r.fail("read", true, derr)
		}
		for i := range msgs {
			if m := &msgs[i]; m.Method != "" && len(m.ID) > 0 {
				r.answer(m)
			}
		}
		return msgs, nil
	}
}

// answer replies to a request from the server.
func (r *stdioRun) answer(m *rpcMessage) {
	reply := map[string]any{"jsonrpc": "2.0", "id": m.ID}
	if m.Method == "ping" {
		reply["result"] = map[string]any{}
	} else {
		reply["error"] = map[string]any{"code": -32601, "message": "method not found: this client does not offer " + m.Method}
	}
	b, err := json.Marshal(reply)
	if err == nil {
		r.write(b)
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
