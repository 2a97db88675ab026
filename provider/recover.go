package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/rtfs"
)

// ErrNotPersisted is wrapped by RecoverStream's error when the store holds no
// stream with the given id.
var ErrNotPersisted = errors.New("no persisted stream with this id")

// errBusy says that a stream is loaded already, or being loaded.
var errBusy = errors.New("it is already loaded, or being loaded")

// Recover reloads every stream the store holds that this provider does not
// run yet, in their start order. A finished stream (completed, cancelled or
// failed) becomes inspectable: Inspect, Summary, Status and Await answer for
// it. An unfinished one is rebuilt — its program recompiled from the stored
// source (or reused, by hash), its processor bound again (by name in the
// restored globals, or decoded as a closure), its state, stats and cursor
// restored — and continues: the chunks it journaled and had not processed
// are processed first, in order, and its transport reconnects after its
// cursor. With manual connect (Options.ManualConnect, or
// CCOS_MCP_STREAM_AUTO_CONNECT off) unfinished streams are loaded without
// running: they can be inspected, not driven.
//
// A stream whose records cannot be used (corrupt, of an unknown format
// version, its program missing or not compiling, a replay that fails) is
// listed in StateUnrecoverable with the reason as its message, and does
// not run (without Options.Cluster: in a cluster it is left to the other
// hosts); its error names the stream and the key, and is logged and
// returned, joined with the others, while the other streams recover.
// Recover fails at once without a store. Cost: one scan of the stream
// records, a compile per distinct program (and, for a program this build
// compiles to another hash, a replay of it per stream).
func (p *Provider) Recover(ctx context.Context) error {
	if p.ps == nil {
		return errors.New("provider: Recover: no store is configured (Options.Store is nil)")
	}
	all, err := p.ps.ScanStreams(ctx, []byte(stream.StreamPrefix))
	if err != nil {
		return fmt.Errorf("provider: Recover: %w", err)
	}
	var errs []error
	for _, l := range all {
		if p.has(l.ID) || l.Leftover() {
			continue
		}
		if err := p.load.restore(ctx, l); errors.Is(err, ErrOwned) {
			continue // another host runs it
		} else if err != nil {
			p.log.Error("stream not recovered", "stream", l.ID, "err", err)
			errs = append(errs, err)
			// In a cluster another host may manage it (or later this
			// one, through RecoverStream): it is not listed here.
			if p.opts.Cluster == nil && !errors.Is(err, errBusy) && !errors.Is(err, ErrClosed) {
				p.registerUnrecoverable(stream.Unrecoverable(&p.env, l, err))
			}
		}
	}
	return errors.Join(errs...)
}

// RecoverStream reloads the one persisted stream id, as Recover does. It
// fails with an error wrapping ErrNotPersisted when the store does not hold
// it, and when the stream is already loaded.
func (p *Provider) RecoverStream(ctx context.Context, id string) error {
	if p.ps == nil {
		return fmt.Errorf("provider: recover stream %q: no store is configured (Options.Store is nil)", id)
	}
	if p.has(id) {
		return fmt.Errorf("provider: recover stream %q: it is already loaded", id)
	}
	all, err := p.ps.ScanStreams(ctx, append([]byte(stream.StreamPrefix+id), 0))
	if err != nil {
		return fmt.Errorf("provider: recover stream %q: %w", id, err)
	}
	if len(all) == 0 || all[0].Leftover() {
		return fmt.Errorf("provider: recover stream %q: %w", id, ErrNotPersisted)
	}
	return p.load.restore(ctx, all[0])
}

func (r *registry) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.streams[id]
	return ok
}

// restore rebuilds one loaded stream and registers it. A stream that is
// being restored meanwhile, or is loaded, is left alone (an error says so).
func (ld *loader) restore(ctx context.Context, l *stream.Loaded) error {
	wrap := func(err error) error { return fmt.Errorf("provider: recover stream %q: %w", l.ID, err) }
	ld.reg.mu.Lock()
	_, loaded := ld.reg.streams[l.ID]
	busy := ld.reg.restoring[l.ID]
	if !loaded && !busy {
		if ld.reg.restoring == nil {
			ld.reg.restoring = make(map[string]bool)
		}
		ld.reg.restoring[l.ID] = true
	}
	ld.reg.mu.Unlock()
	if loaded || busy {
		return wrap(errBusy)
	}
	defer func() {
		ld.reg.mu.Lock()
		delete(ld.reg.restoring, l.ID)
		ld.reg.mu.Unlock()
	}()
	if err := l.Complete(); err != nil {
		return wrap(err)
	}
	run := !State(l.Progress.Status).Terminal() && ld.set.cfg.autoConnect
	if run {
		if err := ld.set.claim(ctx, l.ID); err != nil {
			return wrap(err)
		}
	}
	s, err := ld.rebuild(ctx, l)
	if err == nil {
		var told []func(error)
		if run || State(l.Progress.Status).Terminal() {
			told = ld.reg.tellLoad(ctx, l.ID, !run)
		}
		if err = ld.set.checkTransport(s); err == nil {
			err = ld.reg.registerRecovered(s)
		}
		for _, f := range told {
			f(err)
		}
	}
	if err != nil {
		if run && ld.set.opts.Cluster != nil {
			// Another host may manage where this one cannot.
			_ = ld.set.opts.Cluster.Release(ctx, l.ID, false)
		}
		return wrap(err)
	}
	return nil
}

// A LoadFunc is told of a stream that a Provider loads from its store
// (WatchLoads): its id, and whether it has ended (it is loaded to be
// inspected; else it runs here). It returns a function that the provider
// calls once the stream is registered (with a nil error) or failed to load
// (with the error), or nil.
type LoadFunc func(ctx context.Context, id string, ended bool) (loaded func(error))

type loadWatch struct{ f LoadFunc }

// WatchLoads calls f for each stream the provider loads from its store
// from now on (Recover, RecoverStream, and so, in a cluster, each stream
// it takes over from another host) that runs here or has ended: once the
// provider owns the stream and before it publishes its first event, so
// that a subscription f makes with SubscribeOptions.Pending gets every
// event of it. f runs on the goroutine that loads the stream and holds it
// up: it may read the store and subscribe, but must not wait for the
// stream. The returned function stops the calls (one in progress may still
// finish). Safe for concurrent use; costs nothing while no stream loads.
func (p *Provider) WatchLoads(f LoadFunc) (stop func()) {
	w := &loadWatch{f}
	p.mu.Lock()
	p.loadWatches = append(p.loadWatches[:len(p.loadWatches):len(p.loadWatches)], w)
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.loadWatches = slices.DeleteFunc(slices.Clone(p.loadWatches), func(x *loadWatch) bool { return x == w })
	}
}

// tellLoad tells the load watches that stream id is being loaded, and
// returns what they want to be told when it is.
func (r *registry) tellLoad(ctx context.Context, id string, ended bool) []func(error) {
	r.mu.Lock()
	watches := r.loadWatches
	r.mu.Unlock()
	var told []func(error)
	for _, w := range watches {
		if f := w.f(ctx, id, ended); f != nil {
			told = append(told, f)
		}
	}
	return told
}

// A loader makes streams from their stored records: for recovery, for a
// request on a stream no live host runs (cluster.go), and for an upgrade
// (upgrade.go), and registers them: restore a recovered one, reload one
// that replaces a stream after an upgrade. It reads the provider's
// settings and store, and gives the streams it makes the provider's env. A
// provider has one.
type loader struct {
	set *settings
	reg *registry         // where the streams it restores are registered
	ps  *stream.Persister // nil without a store: then nothing is loaded
	env *stream.StreamEnv
}

// rebuild makes the stream of l with its processor, state and progress.
func (ld *loader) rebuild(ctx context.Context, l *stream.Loaded) (*stream.Stream, error) {
	d := l.Def
	prog, err := ld.ps.LoadProgram(ctx, d.ProgHash)
	if err != nil {
		return nil, err
	}
	origin, err := stream.LoadOrigin(ctx, ld.ps.Store, l.ID)
	if err != nil {
		return nil, err
	}
	c := stream.Codec{Prog: prog, Max: ld.set.opts.Limits.OutputLimit()}
	var proc stream.Processor
	if prog != nil && prog.Hash() != d.ProgHash {
		// Another compiler's: its stored values are read, and written
		// from now on, without functions (origin.go).
		c = stream.Codec{Max: ld.set.opts.Limits.OutputLimit()}
		proc, err = ld.replayProcessor(ctx, l, prog, origin)
	} else {
		proc, err = ld.set.rebindProcessor(d, prog, c)
	}
	if err != nil {
		return nil, err
	}
	dr, err := stream.LoadDelivery(ctx, ld.ps.Store, l.ID)
	if err != nil {
		return nil, err
	}
	def, err := stream.DefinitionOf(l.ID, d, dr, c)
	if err != nil {
		return nil, err
	}
	// A stream goes on reading the server it started on (its cursor means
	// something there only). The recovering provider's own URL is used when
	// it is that server, since it may carry the credentials the stored URL
	// lost; and for records of streams that stored none.
	if def.ServerURL == "" || stream.StripUserInfo(ld.set.cfg.serverURL) == def.ServerURL {
		def.ServerURL = ld.set.cfg.serverURL
	}
	if err := ld.set.chooseKind(&def, d.Transport); err != nil {
		return nil, fmt.Errorf("stream %s: %w", l.ID, err)
	}
	if err := ld.set.checkEgress(def); err != nil {
		return nil, fmt.Errorf("stream %s: %w", l.ID, err)
	}
	var history []stream.ProgramVersion
	if prog != nil {
		history = origin.HistoryOf(d, prog.Name())
	}
	return stream.Restore(ctx, ld.env, ld.ps, l, def, proc, c, history, dr)
}

// rebindProcessor finds the stream's processor again: by name among the
// restored globals, or decoded from its stored value.
func (set *settings) rebindProcessor(d *stream.DefRecord, prog *rtfs.Program, c stream.Codec) (stream.Processor, error) {
	var g *rtfs.Globals
	var err error
	if len(d.Globals) > 0 {
		if prog == nil {
			return nil, errors.New("the stream has globals but no program")
		}
		if g, err = rtfs.UnmarshalGlobals(prog, d.Globals); err != nil {
			return nil, fmt.Errorf("decode globals: %w", err)
		}
	}
	var fn rtfs.Value
	switch d.ProcRef {
	case stream.ProcByName:
		if fn, _, err = stream.ResolveProcessor(rtfs.String(d.ProcData), g); err != nil {
			return nil, fmt.Errorf("rebind processor: %w", err)
		}
	case stream.ProcByValue:
		if fn, err = c.Unmarshal(d.ProcData); err != nil {
			return nil, fmt.Errorf("decode processor: %w", err)
		}
	case stream.ProcGo:
		return nil, fmt.Errorf("its processor %s is a Go function, which cannot be stored", d.ProcName)
	default:
		return nil, fmt.Errorf("unknown processor reference %d", d.ProcRef)
	}
	return stream.NewRTFSProcessor(d.ProcName, fn, g, set.opts.Limits, set.opts.Capabilities), nil
}

// registerRecovered adds a recovered stream: a finished or dormant one
// without goroutines, an unfinished one running (its transport is in the
// catalog: checkTransport).
func (r *registry) registerRecovered(s *stream.Stream) error {
	if s.Runs() {
		if err := r.register(s, nil, false); err != nil {
			s.Cancel()
			return err
		}
		s.LaunchRecovered()
		return nil
	}
	s.Settle()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	if _, dup := r.streams[s.ID]; dup {
		r.mu.Unlock()
		return fmt.Errorf("a stream with id %q already exists", s.ID)
	}
	r.streams[s.ID] = s
	r.order = append(r.order, s)
	early := r.attachPendingLocked(s)
	r.mu.Unlock()
	for _, sub := range early {
		s.Subscribe(sub) // it has ended: its EventEnd at once
	}
	return nil
}

// checkTransport refuses a recovered stream that would run here without
// its transport in the catalog.
func (set *settings) checkTransport(s *stream.Stream) error {
	if s.Runs() && s.Def.Kind.Transport == nil {
		s.Cancel()
		return fmt.Errorf("no transport :%s in this host (it has :%s)", s.Def.Transport, strings.Join(set.opts.Transports.Names(), " :"))
	}
	return nil
}

// replayProcessor rebinds the processor of stream l, whose program prog
// was recompiled by this build to another hash than the stored one: it
// replays prog to the call that started the stream (or to the end of the
// run whose final globals hold the processor) and takes the processor and
// the globals there. The stored globals and function value are another
// compiler's and are not read.
func (ld *loader) replayProcessor(ctx context.Context, l *stream.Loaded, prog *rtfs.Program, origin *stream.OriginRecord) (stream.Processor, error) {
	d := l.Def
	if origin != nil && origin.SourceHash != "" && origin.SourceHash != stream.SourceHash(prog.Source()) {
		return nil, fmt.Errorf("the stored source of %s does not match its hash %s: it is damaged", prog.Name(), origin.SourceHash)
	}
	var next capabilities.ReplayFunc
	how := "legacy replay (the release that stored it kept no journal of its host calls)"
	if origin != nil && len(origin.Journal) > 0 {
		rec, err := stream.LoadRunJournalCached(ctx, ld.ps.Store, stream.OriginKey(l.ID), origin.Journal, &ld.ps.Journals)
		if err != nil {
			return nil, err
		}
		next, how = rec.Next, "replay of its journal"
	} else {
		next = LegacyReplay(l.ID, d.Endpoint, func(c *rtfs.HostCall) bool { return startsStream(c, l.ID, d.Endpoint) })
	}
	out, err := capabilities.Replay(ctx, rtfs.NewThread(ld.set.opts.Limits), prog, next)
	if err != nil {
		return nil, fmt.Errorf("program %s was compiled by another compiler; this one (%s) could not come back to the stream's start by %s: %w", prog.Name(), rtfs.CompileVersion(), how, err)
	}
	var fnArg rtfs.Value
	switch {
	case out.Call != nil:
		fnArg = field(stream.StartArgs(out.Call), "processor")
	case d.ProcRef == stream.ProcByName:
		fnArg = rtfs.String(d.ProcData)
	default:
		return nil, fmt.Errorf("program %s was compiled by another compiler, and its processor %s is a function value that the run's end does not name", prog.Name(), d.ProcName)
	}
	fn, _, err := stream.ResolveProcessor(fnArg, out.Globals)
	if err != nil {
		return nil, fmt.Errorf("program %s, replayed: %w", prog.Name(), err)
	}
	ld.env.Log.Info("stream's program recompiled by this compiler", "stream", l.ID, "program", prog.Name(), "compiler", rtfs.CompileVersion(), "by", how)
	return stream.NewRTFSProcessor(d.ProcName, fn, out.Globals, ld.set.opts.Limits, ld.set.opts.Capabilities), nil
}

// startsStream reports whether c is the :mcp.stream.start call that
// started stream id of endpoint: it names the id, or names none and has
// that endpoint (the id was generated).
func startsStream(c *rtfs.HostCall, id, endpoint string) bool {
	if c.Capability != CapStart {
		return false
	}
	m := stream.StartArgs(c)
	if given := stringField(m, "stream-id"); given != "" {
		return given == id
	}
	return endpoint != "" && stringField(m, "endpoint") == endpoint
}

// LegacyReplay returns the capabilities.ReplayFunc that replays a program
// run stored by a release that kept no journal of its host calls (0.2.0
// and earlier; docs/upgrading.md). It knows the answers every such release
// gave: nil for println and log (:ccos.io.log), and, for the first
// :mcp.stream.start that started stream id (of endpoint), the stream's
// handle. The replay ends at the first call stop accepts, or at the run's
// end. Any other call fails with an error wrapping ErrUnknownAnswer that
// names it. It is for one replay (it remembers the start it answered).
func LegacyReplay(id, endpoint string, stop func(c *rtfs.HostCall) bool) capabilities.ReplayFunc {
	started := false
	return func(i int, c *rtfs.HostCall) (capabilities.ReplayStep, error) {
		switch {
		case c == nil:
			return capabilities.ReplayStep{}, nil
		case stop(c):
			return capabilities.ReplayStep{Stop: true}, nil
		case c.Capability == capabilities.LogCapability:
			return capabilities.ReplayStep{Value: rtfs.Nil}, nil
		case !started && startsStream(c, id, endpoint):
			started = true
			return capabilities.ReplayStep{Value: stream.StartAnswer(id, stringField(stream.StartArgs(c), "endpoint"))}, nil
		}
		return capabilities.ReplayStep{}, fmt.Errorf("host call %d, :%s at %s: %w", i+1, c.Capability, c.Pos, ErrUnknownAnswer)
	}
}
