// Package exec implements transport.StreamTransport for any program's
// output: it starts the program (:command, :args, :env, :cwd) and turns what
// it writes into chunks, read as it is written (a CLI agent's output, as
// examples/cli-agent.rtfs streams it).
//
// The main types are Transport and Config. Framing decides what a chunk is:
// :lines (the default) makes each stdout line a chunk {"line": "..."},
// :ndjson each line a JSON value decoded like any JSON chunk (blank lines
// skipped), :raw what one read returns as {"data": "..."}. Chunk.FD is
// "stdout"; with :stderr :chunks stderr lines are chunks too, {"line":
// "..."} with FD "stderr", else they go to the log. A line longer than
// Spec.MaxEventBytes ends the stream with an error naming the limit.
//
// The program's exit ends the source: status 0 is a clean end, any other a
// *transport.Error naming the command, the status and the last lines of its
// stderr; with :restart :on-failure the program is started again under the
// retry policy instead. Cancelling Run stops the program and its whole
// process group (stdin closed, SIGTERM, SIGKILL after a grace period); the
// host's death, even by SIGKILL, kills the group too (on Unix), and a
// resumed stream first ends a group its previous host left running
// (transport.Spec.Stale). The
// program's stdin is closed at start. Output is read only when the sink
// accepted the previous chunk, so a full queue blocks the program on its
// pipe. The transport cannot replay: the host journals its chunks, and a
// stream resumed after a host restart ends with transport.ErrSourceLost
// unless :restart :on-failure.
package exec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rtfshost/rtfshost/internal/jsontext"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/internal/proc"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
)

// Config is the exec transport's configuration, made by Kind's Configure
// from the start keys. It implements transport.Spawner.
type Config struct {
	Process      proc.Config
	Framing      string // "lines", "ndjson" or "raw"
	StderrChunks bool   // :stderr :chunks
	// OnInvalid is what :ndjson does with a line that is not JSON:
	// "error" (the default: the source fails, naming the line's number),
	// "skip" (the line is logged and left out) or "string" (the line is
	// a string chunk).
	OnInvalid string
}

// Executable returns the program, for the egress policy.
func (c *Config) Executable() string { return c.Process.Command }

// EnvNames returns the variables :env sets, for the egress policy.
func (c *Config) EnvNames() []string { return c.Process.EnvNames() }

// Kind describes the exec transport to a transport.Catalog: :transport
// :exec, chosen by name only, with the process keys and :framing and
// :stderr.
func Kind() transport.Kind {
	return transport.Kind{
		Name:   "exec",
		Doc:    "any program's output: each stdout line (or NDJSON value, or read) is a chunk; the program's exit ends the stream",
		Target: transport.TargetCommand,
		Keys: append(proc.Keys(),
			transport.Key{Name: "framing", Type: "keyword|string", Enum: []string{"lines", "ndjson", "raw"},
				Doc: "what a chunk is: :lines {:line \"...\"} (default), :ndjson each line's JSON value, :raw {:data \"...\"} per read"},
			transport.Key{Name: "stderr", Type: "keyword|string", Enum: []string{"log", "chunks"},
				Doc: ":chunks makes stderr lines chunks with :fd :stderr; default :log"},
			transport.Key{Name: "on-invalid", Type: "keyword|string", Enum: []string{"error", "skip", "string"},
				Doc: "with :framing :ndjson, a line that is not JSON: :error fails the source naming the line (default), :skip logs and leaves it out, :string makes it a string chunk"},
		),
		Configure: configure,
		Transport: new(Transport),
	}
}

func configure(keys map[string]json.RawMessage) (any, error) {
	pc, err := proc.Parse(keys)
	if err != nil {
		return nil, err
	}
	c := &Config{Process: pc, Framing: "lines", OnInvalid: "error"}
	var framing, stderr, invalid string
	if raw, ok := keys["framing"]; ok && json.Unmarshal(raw, &framing) != nil {
		return nil, fmt.Errorf(":framing: want :lines, :ndjson or :raw, got %s", raw)
	}
	switch strings.TrimPrefix(framing, ":") {
	case "", "lines":
	case "ndjson", "raw":
		c.Framing = strings.TrimPrefix(framing, ":")
	default:
		return nil, fmt.Errorf(":framing: want :lines, :ndjson or :raw, got %q", framing)
	}
	if raw, ok := keys["on-invalid"]; ok {
		if json.Unmarshal(raw, &invalid) != nil {
			return nil, fmt.Errorf(":on-invalid: want :error, :skip or :string, got %s", raw)
		}
		switch invalid = strings.TrimPrefix(invalid, ":"); invalid {
		case "error", "skip", "string":
			c.OnInvalid = invalid
		default:
			return nil, fmt.Errorf(":on-invalid: want :error, :skip or :string, got %q", invalid)
		}
		if c.Framing != "ndjson" {
			return nil, fmt.Errorf(":on-invalid applies to :framing :ndjson only (the framing is :%s)", c.Framing)
		}
	}
	if raw, ok := keys["stderr"]; ok && json.Unmarshal(raw, &stderr) != nil {
		return nil, fmt.Errorf(":stderr: want :log or :chunks, got %s", raw)
	}
	switch strings.TrimPrefix(stderr, ":") {
	case "", "log":
	case "chunks":
		c.StderrChunks = true
	default:
		return nil, fmt.Errorf(":stderr: want :log or :chunks, got %q", stderr)
	}
	return c, nil
}

// Transport is the exec StreamTransport. The zero value is ready to use;
// it is safe for concurrent use, each Run owning its process.
type Transport struct {
	policy retry.Policy // zero: the project policy; tests shorten it
	grace  time.Duration
}

var _ transport.StreamTransport = (*Transport)(nil)

// Replayable reports false: a program's output cannot be read again.
func (*Transport) Replayable() bool { return false }

// Run starts the program of spec.Config (a *Config) and delivers its output
// until it exits, as the package documentation describes. cursor is the ID
// of the last chunk the host journaled ("" at the start); chunk IDs are
// "<run>:<n>", the run counting the program's starts, so that a restarted
// program's chunks never repeat an earlier ID.
func (t *Transport) Run(ctx context.Context, spec transport.Spec, cursor string, sink transport.Sink) error {
	cfg, ok := spec.Config.(*Config)
	if !ok || cfg == nil {
		return &transport.Error{StreamID: spec.StreamID, Op: "config", Permanent: true, Err: fmt.Errorf("exec: the spec's Config is %T, want *exec.Config", spec.Config)}
	}
	run := runOf(cursor) + 1
	if err := proc.EndStale(ctx, &spec, sink); err != nil {
		return err
	}
	if spec.Resumed && !cfg.Process.Restart {
		return &transport.Error{StreamID: spec.StreamID, Op: "resume", Permanent: true,
			Err: fmt.Errorf("%w: %s was running when the host stopped and is not started again without :restart :on-failure", transport.ErrSourceLost, cfg.Process.Name())}
	}
	r := t.policy.Start("exec", &spec, sink)
	for ; ; run++ {
		err := t.once(ctx, cfg, &spec, run, sink)
		if err == nil || ctx.Err() != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return nil
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

// runOf reads the run number of a chunk ID "<run>:<n>"; 0 for none.
func runOf(cursor string) int {
	head, _, ok := strings.Cut(cursor, ":")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(head)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// deliverer numbers and delivers one run's chunks; stdout and stderr (with
// :stderr :chunks) deliver from two goroutines, one at a time.
type deliverer struct {
	mu   sync.Mutex
	sink transport.Sink
	run  string
	n    int
	buf  []byte
}

func (d *deliverer) deliver(ctx context.Context, data []byte, fd string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n++
	c := transport.Chunk{Data: data, ID: d.run + strconv.Itoa(d.n), ReceivedAt: time.Now(), FD: fd}
	if err := d.sink.Deliver(ctx, c); err != nil {
		return &sinkError{err}
	}
	return nil
}

// wrap builds {"<key>": text} in d's buffer (reused: the sink copies what
// it keeps).
func (d *deliverer) wrap(key string, text []byte) []byte {
	b := append(d.buf[:0], `{"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	b = jsontext.AppendString(b, text)
	b = append(b, '}')
	d.buf = b
	return b
}

// sinkError marks the sink's refusal, which Run returns unchanged.
type sinkError struct{ err error }

func (e *sinkError) Error() string { return e.err.Error() }
func (e *sinkError) Unwrap() error { return e.err }

// once runs the program one time.
func (t *Transport) once(ctx context.Context, cfg *Config, spec *transport.Spec, run int, sink transport.Sink) error {
	d := &deliverer{sink: sink, run: strconv.Itoa(run) + ":"}
	opts := proc.Options{StreamID: spec.StreamID, Logger: spec.Logger, MaxLine: spec.MaxEventBytes, Grace: t.grace,
		Observer: proc.ObserverOf(sink)}
	if cfg.StderrChunks {
		var errBuf deliverer // stderr's own JSON buffer; numbering stays d's
		opts.Stderr = func(line []byte) error {
			return d.deliver(ctx, errBuf.wrap("line", line), "stderr")
		}
	}
	p, err := proc.Start(&cfg.Process, opts)
	if err != nil {
		var te *transport.Error
		if errors.As(err, &te) {
			te.StreamID = spec.StreamID
		}
		return err
	}
	stop := context.AfterFunc(ctx, p.Stop)
	defer func() {
		stop()
		p.Stop()
	}()
	p.Stdin.Close() // the program gets no input
	if err := t.read(ctx, cfg, spec, p, d); err != nil {
		return unwrapSink(err)
	}
	if err := p.ExitError(); err != nil {
		return &transport.Error{StreamID: spec.StreamID, Op: "exit", Err: err}
	}
	return nil
}

func unwrapSink(err error) error {
	var se *sinkError
	if errors.As(err, &se) {
		return se.err
	}
	return err
}

// read delivers stdout until EOF.
func (t *Transport) read(ctx context.Context, cfg *Config, spec *transport.Spec, p *proc.Process, d *deliverer) error {
	limit := spec.MaxEventBytes
	if limit <= 0 {
		limit = transport.DefaultMaxEventBytes
	}
	if cfg.Framing == "raw" {
		buf := make([]byte, min(32<<10, limit))
		for {
			n, err := p.Stdout.Read(buf)
			if n > 0 {
				if derr := d.deliver(ctx, d.wrap("data", buf[:n]), "stdout"); derr != nil {
					return derr
				}
			}
			if err != nil {
				return t.readEnd(ctx, spec, err)
			}
		}
	}
	lr := proc.NewLineReader(p.Stdout, limit)
	for n := 1; ; n++ {
		line, err := lr.Next()
		if errors.Is(err, proc.ErrLineTooLong) {
			return &transport.Error{StreamID: spec.StreamID, Op: "read", Permanent: true,
				Err: fmt.Errorf("%s: a stdout line is longer than the chunk limit of %d bytes: %w", cfg.Process.Name(), limit, err)}
		}
		if len(line) > 0 || (err == nil && cfg.Framing == "lines") {
			data := line
			switch {
			case cfg.Framing == "lines":
				data = d.wrap("line", line)
			case len(bytes.TrimSpace(line)) == 0:
				data = nil
			case !json.Valid(line):
				var ierr error
				if data, ierr = t.invalid(cfg, spec, n, line); ierr != nil {
					return ierr
				}
			}
			if data != nil {
				if derr := d.deliver(ctx, data, "stdout"); derr != nil {
					return derr
				}
			}
		}
		if err != nil {
			return t.readEnd(ctx, spec, err)
		}
	}
}

// invalid applies :on-invalid to stdout line n of :ndjson, which is not
// JSON: the chunk to deliver (nil: none), or the permanent error that ends
// the source.
func (t *Transport) invalid(cfg *Config, spec *transport.Spec, n int, line []byte) ([]byte, error) {
	excerpt := string(line)
	if len(excerpt) > 80 {
		excerpt = excerpt[:77] + "..."
	}
	switch cfg.OnInvalid {
	case "string":
		return line, nil // not JSON: the provider makes it a string
	case "skip":
		if spec.Logger != nil {
			spec.Logger.Warn("exec: a stdout line is not JSON; skipped (:on-invalid :skip)", "stream", spec.StreamID, "line", n, "text", excerpt)
		}
		return nil, nil
	}
	return nil, &transport.Error{StreamID: spec.StreamID, Op: "read", Permanent: true,
		Err: fmt.Errorf("%s: stdout line %d is not JSON (:framing :ndjson; :on-invalid :skip or :string accept such lines): %q", cfg.Process.Name(), n, excerpt)}
}

// readEnd classifies the end of stdout: EOF is the program's end (its exit
// status decides), anything else a read failure.
func (t *Transport) readEnd(ctx context.Context, spec *transport.Spec, err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return &transport.Error{StreamID: spec.StreamID, Op: "read", Err: err}
}
