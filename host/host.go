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
// exists. RunWith adjusts one run (its limits, a hook before each host call,
// where its println lines go) and returns the program's globals too; the
// loop itself is capabilities.Drive, which processors and the MCP server
// share. Streams started by a program keep running after Run returns; Wait
// waits for them and Close stops them.
//
// With a store (Options.Store) streams are durable, and a program parked on
// :mcp.stream.await is stored with its continuation: after a restart,
// Recover recovers the streams and resumes the parked programs when their
// streams end (ResumedProgram reports their outcome). docs/durability.md
// states the guarantees.
//
// Open with OpenOptions.Cluster makes the host one of several sharing their
// streams on NATS JetStream (package cluster, cluster.go, docs/cluster.md):
// it runs the streams and parked programs it owns, answers other hosts'
// requests on them, takes over those of hosts that die, and hands its own
// over at Close.
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
	"time"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// Options configure a Host.
type Options struct {
	// Streams configures the stream provider: its transports, environment,
	// limits for processors, queue capacity. The host sets two of its
	// fields itself, and New refuses them set: Capabilities (processors
	// reach the host's registry, where Register adds capabilities) and
	// Store (give Options.Store, or OpenOptions.DataDir).
	Streams provider.Options
	// Limits bound each program run (steps, depth, collection size).
	Limits rtfs.Limits
	// Stdout receives what println and log print; nil means os.Stdout.
	Stdout io.Writer
	// Log, when set, receives instead of Stdout each line println and log
	// print (without its newline) that no route takes (RouteLog,
	// RunOptions.Log), with the id of the stream whose processor printed
	// it, "" for a program. It is called on the printing goroutine (a
	// stream's, or a program's), so it must not block for long.
	Log func(stream, line string)
	// Logger receives the host's logs; nil discards them.
	Logger *slog.Logger
	// Store makes the host durable: its streams and its programs parked
	// on :mcp.stream.await; nil means no persistence. The caller owns the
	// store and closes it after the host (Open with OpenOptions.DataDir
	// opens one that the host owns instead).
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
	logFn  func(stream, line string) // Options.Log

	routesMu sync.Mutex
	routes   map[string]*logRoute // by stream id (RouteLog)

	store    persistence.Store // nil without persistence
	ctx      context.Context   // ends at Close: bounds resumed programs
	cancel   context.CancelFunc
	programs programSet   // programs resumed by Recover
	parked   atomic.Int64 // programs of Run waiting on a parked host call (await)
	awaiting awaitingSet  // the same programs, by the stream they await

	closeStore func() error // closes the store Open opened; nil otherwise

	cl          *cluster.Cluster // nil for a host alone with its store (cluster.go)
	clusterLoop *clusterLoop
	grace       shutdownGrace // BeginClose
}

// Parked returns how many programs run by Run are waiting on a parked host
// call (:mcp.stream.await) right now. A host that finds every live stream
// stuck (Provider.Stuck) and every running program parked knows that
// nothing will move again.
func (h *Host) Parked() int { return int(h.parked.Load()) }

// ParkedOn returns how many programs are waiting on an await of one of
// the streams ids right now: a program whose stream has just ended counts
// until its await returns. A command that resumed only some streams uses
// it with ResumedRunning to tell when the programs left wait on streams
// nothing runs. Safe for concurrent use; it costs a lock and a pass over
// ids.
func (h *Host) ParkedOn(ids []string) int {
	h.awaiting.mu.Lock()
	defer h.awaiting.mu.Unlock()
	n := 0
	for _, id := range ids {
		n += h.awaiting.n[id]
	}
	return n
}

// awaitingSet counts the programs waiting on an await by the stream
// they await (ParkedOn).
type awaitingSet struct {
	mu sync.Mutex
	n  map[string]int
}

// add counts a program awaiting stream id; the function it returns
// uncounts it.
func (s *awaitingSet) add(id string) (done func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[id]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.n[id]--; s.n[id] == 0 {
			delete(s.n, id)
		}
	}
}

// LogCapability is the id of the capability that println and log call.
const LogCapability = capabilities.LogCapability

// New returns a Host with the stream and log capabilities registered.
func New(opts Options) (*Host, error) {
	h := &Host{reg: capabilities.NewRegistry(), limits: opts.Limits, stdout: opts.Stdout, logFn: opts.Log, log: opts.Logger}
	if h.stdout == nil {
		h.stdout = os.Stdout
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if opts.Streams.Capabilities != nil {
		return nil, errors.New("host: Options.Streams.Capabilities is the host's own registry: leave it nil and add capabilities with Host.Register")
	}
	if opts.Streams.Store != nil {
		return nil, errors.New("host: Options.Streams.Store is set from Options.Store: give the store there")
	}
	opts.Streams.Capabilities = h.reg
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
//
// Register every capability before Recover: a recovered stream runs on at
// once, and its processor's call to a capability not registered yet fails
// with an unknown-capability error, handled as any error of the processor:
// by default the stream is held as failed on that chunk, nothing lost, and
// Provider().Resume carries it on once the capability is registered.
//
// A handler may see the same call again: after a crash, or when a failed
// stream retries its chunk, the chunk is processed again and its
// processor's host calls run again (docs/durability.md). Call.Key
// (stream, the chunk's seq, the call's index in its processing) is the same
// each time: a handler with effects outside the host acts once per key.
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
	v, _, err := h.RunWith(ctx, prog, RunOptions{})
	return v, err
}

// RunOptions adjust one run of RunWith; the zero value runs as Run does.
type RunOptions struct {
	// Limits bound the run; the zero value means the host's (Options.Limits).
	Limits rtfs.Limits
	// Before, when set, sees each host call of the program before the
	// registry serves it, on the run's goroutine, and may replace c.Args. An
	// error it returns is thrown into the program and the call is not
	// served; otherwise after, when not nil, is called with the call's
	// error (nil when it succeeded).
	Before func(ctx context.Context, c *capabilities.Call) (after func(error), err error)
	// Log, when set, receives each line the program prints with println or
	// log (without its newline) instead of the host's Stdout, on the run's
	// goroutine. Lines of the streams the program starts go where RouteLog
	// says.
	Log func(line string)
	// Ephemeral keeps the run out of the store: a program waiting on
	// :mcp.stream.await is not stored and does not outlive the run.
	Ephemeral bool
	// Journal, when set, records the run's host calls and their answers
	// (a host with a store records them by itself): what a stream the run
	// starts keeps, to come back to its processor under another compiler
	// (docs/upgrading.md). The caller owns it; it is written on the run's
	// goroutine until RunWith returns.
	Journal *capabilities.Journal
}

// RunWith runs prog as Run does, adjusted by opts, and returns also the
// program's global variables at its end (nil when it failed).
func (h *Host) RunWith(ctx context.Context, prog *rtfs.Program, opts RunOptions) (rtfs.Value, *rtfs.Globals, error) {
	if prog == nil {
		return nil, nil, errors.New("host: Run: nil program")
	}
	limits := opts.Limits
	if limits == (rtfs.Limits{}) {
		limits = h.limits
	}
	th := rtfs.NewThread(limits)
	out, err := th.Run(ctx, prog)
	r := newRun(prog)
	r.opts = opts
	r.journal = opts.Journal
	if r.journal == nil && h.store != nil {
		r.journal = &capabilities.Journal{}
	}
	out, err = h.drive(ctx, th, r, out, err)
	if !errors.Is(err, ErrParkInterrupted) {
		h.unpark(r, nil)
	}
	if err != nil {
		return nil, nil, err
	}
	return out.Value, out.Globals, nil
}

// ErrParkInterrupted is wrapped by the error of a run whose program was
// parked, and stored, on :mcp.stream.await when the host closed or the run's
// context ended. Recover resumes it.
var ErrParkInterrupted = errors.New("the program parked on :mcp.stream.await was interrupted; it stays stored and resumes after Recover")

// drive serves the host calls of run r from out (or err) to its end,
// recording them in r's journal.
func (h *Host) drive(ctx context.Context, th *rtfs.Thread, r *run, out rtfs.Outcome, err error) (rtfs.Outcome, error) {
	return capabilities.Drive(ctx, th, out, err, r.journal.Serve(func(ctx context.Context, out rtfs.Outcome) (rtfs.Value, error) {
		return h.serve(ctx, r, out)
	}))
}

// serve performs the host call out is suspended at for run r. With a store,
// a program about to wait on :mcp.stream.await is parked (stored) first;
// failing to store it is an error thrown into the program.
func (h *Host) serve(ctx context.Context, r *run, out rtfs.Outcome) (rtfs.Value, error) {
	hc := out.Call
	call := &capabilities.Call{ID: hc.Capability, Args: hc.Args, Pos: hc.Pos, Globals: out.Globals, Journal: r.journal}
	if r.opts.Before != nil {
		after, err := r.opts.Before(ctx, call)
		if err != nil {
			return nil, err
		}
		v, err := h.serveCall(ctx, r, out, call)
		if after != nil {
			after(err)
		}
		return v, err
	}
	return h.serveCall(ctx, r, out, call)
}

// serveCall serves call from the registry, or, for println and log of a run
// with RunOptions.Log, hands the line to it. A parked :mcp.stream.await of
// a durable run interrupted by the host's close or ctx ends the run
// (capabilities.Halt) with ErrParkInterrupted: the program stays stored.
func (h *Host) serveCall(ctx context.Context, r *run, out rtfs.Outcome, call *capabilities.Call) (rtfs.Value, error) {
	id := strings.TrimPrefix(call.ID, ":")
	if id == LogCapability && r.opts.Log != nil {
		r.opts.Log(logLine(call.Args))
		return rtfs.Nil, nil
	}
	ans, err := h.reg.Dispatch(ctx, call)
	await := h.store != nil && !r.opts.Ephemeral && ans.Parked() && id == provider.CapAwait
	if err == nil && await {
		if perr := h.park(ctx, r, out); perr != nil {
			err = &capabilities.Error{Capability: provider.CapAwait, Err: perr}
		}
	}
	var v rtfs.Value
	if err == nil {
		v, err = h.wait(ctx, call, ans)
	}
	if err != nil && await && r.parked && interrupted(ctx, err) {
		return nil, capabilities.Halt(fmt.Errorf("host: run of %s, stream %q: %w: %w", r.prog.Name(), awaitedStream(call.Args), ErrParkInterrupted, err))
	}
	return v, err
}

// wait obtains a parked answer's value: the program stays suspended until
// then. A persisted host would store the continuation here.
func (h *Host) wait(ctx context.Context, call *capabilities.Call, ans capabilities.Answer) (rtfs.Value, error) {
	if ans.Parked() {
		h.log.Debug("program parked", "capability", call.ID, "pos", call.Pos.String())
		h.parked.Add(1)
		defer h.parked.Add(-1)
		if strings.TrimPrefix(call.ID, ":") == provider.CapAwait {
			defer h.awaiting.add(awaitedStream(call.Args))()
		}
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
// have exited. It closes the store only when Open opened it. A host in a
// cluster hands its streams over to the other hosts and leaves; the
// commits that wait for NATS meanwhile get its shutdown grace (CloseGrace,
// counted from BeginClose when it was called, else from Close): when the
// grace ends first, the store is closed, which fails them, and the host
// leaves without handing its streams over (the other hosts take them when
// its lease expires).
func (h *Host) Close() error {
	h.BeginClose()
	if h.clusterLoop != nil {
		h.clusterLoop.stopLoop()
		h.clusterLoop = nil
	}
	h.cancel()
	err := h.prov.Close()
	h.programs.close()
	gaveUp := h.grace.stop()
	if h.cl != nil {
		// The streams and parked programs stopped with their progress
		// committed: hand them over to the other hosts at once.
		end, _ := h.grace.deadline()
		if cerr := h.leaveCluster(end, gaveUp); cerr != nil && err == nil {
			err = fmt.Errorf("host: leaving the cluster: %w", cerr)
		}
	}
	if h.closeStore != nil {
		if cerr := h.closeStore(); cerr != nil && err == nil {
			err = fmt.Errorf("host: closing the store: %w", cerr)
		}
		h.closeStore = nil
	}
	return err
}

// CloseGrace is how long a host in a cluster that is closing waits for
// the commits that NATS does not answer: from BeginClose (or Close), not
// from the start of each commit.
const CloseGrace = 10 * time.Second

// BeginClose starts the shutdown grace of a host in a cluster, before
// Close: from now on, the commits that wait for NATS have CloseGrace in
// all, after which the store is closed and they fail. A server calls it
// when it is told to stop, before it closes what runs on the host (its MCP
// server waits for the calls and events that commit to the host's store),
// so that the host exits within the grace however long closing those
// takes. It stops nothing else; it is idempotent, safe for concurrent use,
// and does nothing for a host alone with its store.
func (h *Host) BeginClose() {
	h.grace.once.Do(func() {
		h.grace.end.Store(time.Now().Add(CloseGrace).UnixNano())
		if h.cl == nil || h.closeStore == nil {
			return
		}
		h.grace.timer = time.AfterFunc(CloseGrace, func() {
			h.grace.fired.Store(true)
			h.log.Warn("cluster: NATS did not answer within the shutdown grace; the commits still waiting are given up "+
				"(the hosts that take the streams over process those chunks again)", "grace", CloseGrace)
			_ = h.store.Close()
		})
	})
}

// A NotReadyError is Ready's answer for a host that cannot take work:
// Part names what is not ready ("closing", "store" or "cluster"), Err
// says why.
type NotReadyError struct {
	Part string
	Err  error
}

func (e *NotReadyError) Error() string { return "host not ready: " + e.Part + ": " + e.Err.Error() }
func (e *NotReadyError) Unwrap() error { return e.Err }

// readyProbe is the key Ready reads: it holds nothing, and a store that
// answers ErrNotFound for it is open and reachable.
var readyProbe = []byte("rtfshost/ready-probe")

// Ready reports whether the host can take work, for a readiness probe:
// nil when BeginClose or Close has not been called, its store (if any)
// answers a read, and in a cluster its connection to NATS is up and its
// lease is current (cluster.Cluster.Ready). Otherwise it returns a
// *NotReadyError saying what is not. It costs one store read, bounded by
// ctx; it is safe for concurrent use.
func (h *Host) Ready(ctx context.Context) error {
	if _, closing := h.grace.deadline(); closing || h.ctx.Err() != nil {
		return &NotReadyError{Part: "closing", Err: errors.New("the host is shutting down")}
	}
	if h.store != nil {
		if _, err := h.store.Get(ctx, readyProbe); err != nil && !errors.Is(err, persistence.ErrNotFound) {
			return &NotReadyError{Part: "store", Err: err}
		}
	}
	if h.cl != nil {
		if err := h.cl.Ready(); err != nil {
			return &NotReadyError{Part: "cluster", Err: err}
		}
	}
	return nil
}

// shutdownGrace is the state of BeginClose.
type shutdownGrace struct {
	once  sync.Once
	end   atomic.Int64 // when the grace ends, in Unix ns; 0 before BeginClose
	timer *time.Timer  // closes the store at end; nil outside a cluster; set by once
	fired atomic.Bool  // the timer closed the store
}

// deadline returns when the grace ends, once BeginClose has been called.
func (g *shutdownGrace) deadline() (time.Time, bool) {
	ns := g.end.Load()
	return time.Unix(0, ns), ns != 0
}

// stop stops the timer and reports whether it had fired: NATS did not
// answer within the grace.
func (g *shutdownGrace) stop() bool {
	if g.timer != nil {
		g.timer.Stop()
	}
	return g.fired.Load()
}

// RouteLog sends the lines that the processor of stream id prints with
// println or log to fn instead of the host's Stdout, until the returned
// function is called. fn runs on the stream's goroutine, so it must not
// block for long. The MCP server uses it to send a stream's lines to the
// client that started it. A stream has one route at a time: while one is in
// place, a later RouteLog of the same id routes nothing and its stop does
// nothing (a second start of a running stream's id fails, and must not take
// the running stream's lines). It is safe for concurrent use.
func (h *Host) RouteLog(id string, fn func(line string)) (stop func()) {
	h.routesMu.Lock()
	defer h.routesMu.Unlock()
	if h.routes == nil {
		h.routes = make(map[string]*logRoute)
	}
	if _, taken := h.routes[id]; taken {
		return func() {}
	}
	r := &logRoute{fn: fn}
	h.routes[id] = r
	return func() {
		h.routesMu.Lock()
		defer h.routesMu.Unlock()
		if h.routes[id] == r {
			delete(h.routes, id)
		}
	}
}

type logRoute struct{ fn func(line string) }

func (h *Host) logHandler(_ context.Context, c *capabilities.Call) (capabilities.Answer, error) {
	line := logLine(c.Args)
	if c.Stream != "" {
		h.routesMu.Lock()
		r := h.routes[c.Stream]
		h.routesMu.Unlock()
		if r != nil {
			r.fn(line)
			return capabilities.Now(rtfs.Nil), nil
		}
	}
	if h.logFn != nil {
		h.logFn(c.Stream, line)
		return capabilities.Now(rtfs.Nil), nil
	}
	h.outMu.Lock()
	defer h.outMu.Unlock()
	if _, err := io.WriteString(h.stdout, line+"\n"); err != nil {
		return capabilities.Answer{}, fmt.Errorf("write log line: %w", err)
	}
	return capabilities.Now(rtfs.Nil), nil
}

// maxLogLine bounds what println and log print of one value: a value that
// shares structure prints without end.
const maxLogLine = 1 << 20

// logLine is what println and log print for args: their values separated by
// spaces, strings without quotes, each cut past maxLogLine bytes.
func logLine(args []rtfs.Value) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if s, ok := a.(rtfs.String); ok {
			b.WriteString(string(s))
		} else {
			b.WriteString(rtfs.Excerpt(a, maxLogLine))
		}
	}
	return b.String()
}
