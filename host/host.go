// Package host runs RTFS programs and serves their host calls.
//
// The main type is Host. It owns a capabilities.Registry and a
// provider.Provider: New registers the stream capabilities (:mcp.stream.start,
// :mcp.stream.inspect, :mcp.stream.pause, :mcp.stream.resume,
// :mcp.stream.cancel, :mcp.stream.status, :mcp.stream.await) and :ccos.io.log
// (which RTFS's println and log call); embedders add their own capabilities
// with Register. Run drives a program: each (call :id args...) suspends the
// program, the host serves it from the registry and resumes the program with
// the answer, or throws the error into the program, where try/catch sees it.
// A parked answer, such as :mcp.stream.await's, blocks Run until the answer
// exists. Streams started by a program keep running after Run returns; Wait
// waits for them and Close stops them.
//
// With a store (Options.Store) streams are durable, and a program parked on
// :mcp.stream.await is stored with its continuation: after a restart,
// Recover recovers the streams and resumes the parked programs when their
// streams end (ResumedProgram reports their outcome). docs/durability.md
// states the guarantees.
package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// Options configure a Host.
type Options struct {
	// Streams configures the stream provider: its transports, environment,
	// limits for processors, queue capacity. Its Capabilities field is
	// ignored: processors reach the host's registry.
	Streams provider.Options
	// Limits bound each program run (steps, depth, collection size).
	Limits rtfs.Limits
	// Stdout receives what println and log print; nil means os.Stdout.
	Stdout io.Writer
	// Logger receives the host's logs; nil discards them.
	Logger *slog.Logger
	// Store makes the host durable: its streams (it becomes Streams.Store)
	// and its programs parked on :mcp.stream.await. Nil means
	// Streams.Store, and no persistence when that is nil too. The caller
	// owns the store and closes it after the host.
	Store persistence.Store
}

// A Host runs RTFS programs. It is safe for concurrent use: several programs
// may run at once, each on its own goroutine.
type Host struct {
	reg    *capabilities.Registry
	prov   *provider.Provider
	limits rtfs.Limits
	log    *slog.Logger

	outMu  sync.Mutex // serializes writes to stdout
	stdout io.Writer

	store    persistence.Store // nil without persistence
	ctx      context.Context   // ends at Close: bounds resumed programs
	cancel   context.CancelFunc
	programs programSet   // programs resumed by Recover
	parked   atomic.Int64 // programs of Run waiting on a parked host call (await)

	closeStore func() error // closes the store Open opened; nil otherwise
}

// Parked returns how many programs run by Run are waiting on a parked host
// call (:mcp.stream.await) right now. A host that finds every live stream
// stuck (Provider.Stuck) and every running program parked knows that
// nothing will move again.
func (h *Host) Parked() int { return int(h.parked.Load()) }

// LogCapability is the id of the capability that println and log call.
const LogCapability = "ccos.io.log"

// New returns a Host with the stream and log capabilities registered.
func New(opts Options) (*Host, error) {
	h := &Host{reg: capabilities.NewRegistry(), limits: opts.Limits, stdout: opts.Stdout, log: opts.Logger}
	if h.stdout == nil {
		h.stdout = os.Stdout
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	opts.Streams.Capabilities = h.reg
	if opts.Store == nil {
		opts.Store = opts.Streams.Store
	}
	h.store, opts.Streams.Store = opts.Store, opts.Store
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if opts.Streams.Logger == nil {
		opts.Streams.Logger = opts.Logger
	}
	h.prov = provider.New(opts.Streams)
	caps := append(h.prov.Capabilities(), capabilities.Capability{
		ID: LogCapability, Description: "Print the arguments, separated by spaces, on a line.",
		Effects: []string{":io"}, Handler: h.logHandler,
	})
	for _, c := range caps {
		if err := h.reg.Register(c); err != nil {
			h.cancel()
			h.prov.Close()
			return nil, fmt.Errorf("host: %w", err)
		}
	}
	return h, nil
}

// Register adds an embedder's capability. Its handler's errors reach RTFS as
// catchable errors; it may be called by programs and by stream processors,
// from several goroutines at once.
func (h *Host) Register(c capabilities.Capability) error { return h.reg.Register(c) }

// Capabilities returns the host's registry (for listings and for serving
// calls from Go).
func (h *Host) Capabilities() *capabilities.Registry { return h.reg }

// Provider returns the host's stream provider, for subscriptions, inspection
// and control from Go.
func (h *Host) Provider() *provider.Provider { return h.prov }

// Run runs prog to its end and returns its value. Each host call is served
// from the registry; a capability error is thrown into the program, and an
// uncaught one ends Run with an error that carries the RTFS position and
// stack. Run returns ctx.Err() (wrapped) when ctx ends, including while the
// program is parked on :mcp.stream.await. With a store, a program parked on
// :mcp.stream.await is stored first; if ctx ends or the host closes while it
// waits, Run returns an error wrapping ErrParkInterrupted and the program
// stays stored, for Recover to resume after a restart.
func (h *Host) Run(ctx context.Context, prog *rtfs.Program) (rtfs.Value, error) {
	if prog == nil {
		return nil, errors.New("host: Run: nil program")
	}
	th := rtfs.NewThread(h.limits)
	out, err := th.Run(ctx, prog)
	r := newRun(prog)
	v, err := h.drive(ctx, th, r, out, err)
	if !errors.Is(err, ErrParkInterrupted) {
		h.unpark(r, nil)
	}
	return v, err
}

// ErrParkInterrupted is wrapped by the error of a run whose program was
// parked, and stored, on :mcp.stream.await when the host closed or the run's
// context ended. Recover resumes it.
var ErrParkInterrupted = errors.New("the program parked on :mcp.stream.await was interrupted; it stays stored and resumes after Recover")

// drive serves the host calls of a run from out (or err) to its end.
func (h *Host) drive(ctx context.Context, th *rtfs.Thread, r *run, out rtfs.Outcome, err error) (rtfs.Value, error) {
	for err == nil && out.Call != nil {
		out, err = h.serve(ctx, th, r, out)
	}
	if err != nil {
		return nil, err
	}
	return out.Value, nil
}

// serve performs the host call out is suspended at and resumes the program.
// With a store, a program about to wait on :mcp.stream.await is parked
// (stored) first; failing to store it is an error thrown into the program.
func (h *Host) serve(ctx context.Context, th *rtfs.Thread, r *run, out rtfs.Outcome) (rtfs.Outcome, error) {
	hc := out.Call
	call := &capabilities.Call{ID: hc.Capability, Args: hc.Args, Pos: hc.Pos, Globals: out.Globals}
	ans, err := h.reg.Dispatch(ctx, call)
	await := h.store != nil && ans.Parked() && strings.TrimPrefix(hc.Capability, ":") == provider.CapAwait
	if err == nil && await {
		if perr := h.park(ctx, r, out); perr != nil {
			err = &capabilities.Error{Capability: provider.CapAwait, Err: perr}
		}
	}
	var v rtfs.Value
	if err == nil {
		v, err = h.wait(ctx, call, ans)
	}
	if err != nil {
		if await && r.parked && interrupted(ctx, err) {
			return out, fmt.Errorf("host: run of %s, stream %q: %w: %w", r.prog.Name(), awaitedStream(hc.Args), ErrParkInterrupted, err)
		}
		if ctx.Err() != nil {
			return out, fmt.Errorf("host call :%s at %s: %w", hc.Capability, hc.Pos, ctx.Err())
		}
		return th.ResumeError(ctx, out.Continuation, err)
	}
	return th.Resume(ctx, out.Continuation, v)
}

// wait obtains a parked answer's value: the program stays suspended until
// then. A persisted host would store the continuation here.
func (h *Host) wait(ctx context.Context, call *capabilities.Call, ans capabilities.Answer) (rtfs.Value, error) {
	if ans.Parked() {
		h.log.Debug("program parked", "capability", call.ID, "pos", call.Pos.String())
		h.parked.Add(1)
		defer h.parked.Add(-1)
	}
	v, err := ans.Wait(ctx)
	if err != nil {
		var ce *capabilities.Error
		if !errors.As(err, &ce) {
			err = &capabilities.Error{Capability: strings.TrimPrefix(call.ID, ":"), Err: err}
		}
		return nil, err
	}
	return v, nil
}

// Wait blocks until every stream started on the host has ended (including
// those started meanwhile, and those Recover recovered), and every program
// that Recover resumed has finished, or ctx ends. It returns nil when no
// stream failed, else the failures (*provider.StreamError), joined.
func (h *Host) Wait(ctx context.Context) error {
	for {
		if err := h.programs.wait(ctx); err != nil {
			return err
		}
		err := h.prov.WaitAll(ctx)
		if ctx.Err() != nil || h.programs.idleNow() {
			return err
		}
	}
}

// Close stops every stream and every resumed program (a program parked on
// :mcp.stream.await stays stored) and returns when all the host's goroutines
// have exited. It closes the store only when Open opened it.
func (h *Host) Close() error {
	h.cancel()
	err := h.prov.Close()
	h.programs.close()
	if h.closeStore != nil {
		if cerr := h.closeStore(); cerr != nil && err == nil {
			err = fmt.Errorf("host: closing the store: %w", cerr)
		}
		h.closeStore = nil
	}
	return err
}

func (h *Host) logHandler(_ context.Context, c *capabilities.Call) (capabilities.Answer, error) {
	var b strings.Builder
	for i, a := range c.Args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if s, ok := a.(rtfs.String); ok {
			b.WriteString(string(s))
		} else {
			b.WriteString(a.String())
		}
	}
	b.WriteByte('\n')
	h.outMu.Lock()
	defer h.outMu.Unlock()
	if _, err := io.WriteString(h.stdout, b.String()); err != nil {
		return capabilities.Answer{}, fmt.Errorf("write log line: %w", err)
	}
	return capabilities.Now(rtfs.Nil), nil
}
