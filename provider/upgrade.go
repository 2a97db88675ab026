package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
)

// Replacing a stream's processor, keeping its state (docs/upgrading.md):
// the stream's program becomes another one, which must compile and define
// the processor; the stream's state, cursor, journal and statistics stay
// exactly as they are, and the next chunk is the new processor's. On a
// store no provider runs (rtfshost upgrade on a data directory) it is one
// commit of the stream's records (UpgradeStored); on a running stream the
// provider stops it between two chunks with its progress committed, makes
// that commit, and starts it again from its records (Provider.Upgrade). A
// swap that fails changes nothing.

// An Upgrade says which processor a stream gets: Processor (by default
// the name of the one it has) as the program Program defines it.
type Upgrade struct {
	StreamID string
	// Program is the new program. Its top level runs once, to define the
	// processor; it may not make host calls.
	Program *rtfs.Program
	// Processor names the processor among Program's globals; "" keeps the
	// stream's processor's name.
	Processor string
	// Limits bound the run of Program's top level (zero: the defaults).
	Limits rtfs.Limits
}

// An UpgradeResult says what a swap did: the stream's program before and
// after (To is the newest of the stream's history), and its state, which
// the swap does not change.
type UpgradeResult struct {
	StreamID string         `json:"stream-id"`
	From     ProgramVersion `json:"from"`
	To       ProgramVersion `json:"to"`
	State    State          `json:"state"`
}

// ErrCannotUpgrade is wrapped by the error of a swap that the stream or
// the new program does not allow; nothing changed.
var ErrCannotUpgrade = stream.ErrCannotUpgrade

// define runs u.Program's top level and returns its globals and the
// processor name (stored is the stream's current processor's name).
func (u Upgrade) define(ctx context.Context, stored string) (*rtfs.Globals, rtfs.Value, string, error) {
	if u.Program == nil {
		return nil, nil, "", fmt.Errorf("%w: no program", ErrCannotUpgrade)
	}
	name := u.Processor
	if name == "" {
		name = stored
	}
	if name == "" || name == "anonymous fn" {
		return nil, nil, "", fmt.Errorf("%w: the stream's processor has no name; say which function of %s is the new one (--processor)", ErrCannotUpgrade, u.Program.Name())
	}
	out, err := capabilities.Replay(ctx, rtfs.NewThread(u.Limits), u.Program, func(_ int, c *rtfs.HostCall) (capabilities.ReplayStep, error) {
		if c == nil {
			return capabilities.ReplayStep{}, nil
		}
		return capabilities.ReplayStep{}, fmt.Errorf("its top level calls :%s at %s; a program that replaces a processor may only define it", c.Capability, c.Pos)
	})
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w: running %s: %w", ErrCannotUpgrade, u.Program.Name(), err)
	}
	fn, _, err := stream.ResolveProcessor(rtfs.String(name), out.Globals)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w: %w", ErrCannotUpgrade, err)
	}
	if err := stream.CheckShape(fn, name); err != nil {
		return nil, nil, "", fmt.Errorf("%w: %w", ErrCannotUpgrade, err)
	}
	return out.Globals, fn, name, nil
}

// UpgradeStored swaps the processor of stream u.StreamID in st, a store
// that no provider runs (the caller holds it): the stream must be paused
// or interrupted, not ended. Its definition, progress and origin records
// are rewritten in one commit, with its state and other values encoded for
// the new program, and the new program's version added to its history; its
// journal and cursor are untouched. A swap that fails changes nothing.
func UpgradeStored(ctx context.Context, st persistence.Store, u Upgrade) (UpgradeResult, error) {
	res := UpgradeResult{StreamID: u.StreamID}
	define := func(stored string) (*rtfs.Globals, string, error) {
		g, _, name, err := u.define(ctx, stored)
		return g, name, err
	}
	var err error
	if res.From, res.To, res.State, err = stream.Reprogram(ctx, st, u.StreamID, u.Program, define); err != nil {
		return res, fmt.Errorf("upgrade stream %q: %w", u.StreamID, err)
	}
	return res, nil
}

// Upgrade swaps the processor of stream u.StreamID, which this provider
// has: a running stream is stopped between two chunks with its progress
// committed, its records are rewritten (UpgradeStored), and it goes on at
// once from them with the new processor, in the state it was in (a paused
// stream stays paused). Its subscriptions, Await and Done follow it. A
// stream that did not run (unrecoverable, or loaded with manual connect) is
// rewritten and loaded again. It needs a store, and a stream whose source
// is a process (:stdio, :exec), which a stop would end, is refused. When
// the swap fails, nothing changed and a running stream goes on with its old
// processor. With Options.Cluster, a stream another host runs is swapped
// there (the program's source travels, and is compiled there).
func (p *Provider) Upgrade(ctx context.Context, u Upgrade) (UpgradeResult, error) {
	id := u.StreamID
	if p.ps == nil {
		return UpgradeResult{StreamID: id}, fmt.Errorf("upgrade stream %q: %w: the host keeps no store, and a swap is made on the stream's records", id, ErrCannotUpgrade)
	}
	s, err := p.lookup(id)
	if err != nil && p.opts.Cluster != nil && u.Program != nil {
		// Another host runs it: the swap is made there.
		a, ferr := p.opts.Cluster.Forward(ctx, Request{Verb: "upgrade", StreamID: id,
			Upgrade: &UpgradeSource{File: u.Program.Name(), Source: string(u.Program.Source()), Processor: u.Processor}})
		if ferr == nil && a.Upgraded != nil {
			return *a.Upgraded, nil
		}
		if ferr != nil && !errors.Is(ferr, ErrNotRunning) {
			return UpgradeResult{StreamID: id}, ferr
		}
	}
	if err != nil {
		return UpgradeResult{StreamID: id}, fmt.Errorf("upgrade stream %q: %w", id, err)
	}
	// Check the new program before the stream is touched.
	check := func(procName string) error {
		_, _, _, err := u.define(ctx, procName)
		return err
	}
	path, stopped, st, err := s.PlanUpgrade(check)
	switch {
	case err != nil:
		return UpgradeResult{StreamID: id, State: st}, fmt.Errorf("upgrade stream %q: %w", id, err)
	case path == stream.UpgradeInPlace:
		return p.load.upgradeHeld(ctx, s, u) // swapped in place: its process goes on
	}
	dormant := path == stream.UpgradeRecords
	if dormant {
		res, err := UpgradeStored(ctx, p.ps.Store, u)
		if err != nil {
			return res, err
		}
		p.forget(s)
		if rerr := p.RecoverStream(ctx, id); rerr != nil {
			p.log.Error("upgraded stream not loaded again", "stream", id, "err", rerr)
		}
		return res, nil
	}
	s.Cancel()
	<-stopped // the worker stopped between two chunks, its progress flushed
	// Its transport stops too before the swap is made (the stream that
	// replaces it would anyway start its own only then: runs.go), so that
	// when Upgrade returns, nothing of the old stream runs.
	var res UpgradeResult
	err = p.runs.Await(ctx, id)
	if err == nil {
		if err = p.ps.Com.Flush(ctx); err != nil {
			err = fmt.Errorf("upgrade stream %q: committing its progress: %w", id, err)
		}
	}
	if err == nil {
		res, err = UpgradeStored(ctx, p.ps.Store, u)
	}
	if rerr := p.load.reload(ctx, s); rerr != nil {
		err = errors.Join(err, fmt.Errorf("upgrade stream %q: the stream did not start again: %w", id, rerr))
	}
	if err == nil {
		p.log.Info("stream's processor swapped", "stream", id, "from", res.From.Hash, "to", res.To.Hash, "processor", res.To.Processor)
	}
	return res, err
}

// reload puts in old's place, old being stopped for an upgrade, the
// stream its records describe now, and starts it: the new stream takes
// over old's subscriptions and done channel, so that watchers, Await and
// Done follow. When the records cannot be used, an unrecoverable stream
// saying why takes old's place.
func (ld *loader) reload(ctx context.Context, old *stream.Stream) error {
	l := &stream.Loaded{ID: old.ID}
	all, err := ld.ps.ScanStreams(ctx, append([]byte(stream.StreamPrefix+old.ID), 0))
	if err == nil && len(all) == 0 {
		err = ErrNotPersisted
	}
	if err == nil {
		l = all[0]
		err = l.Complete()
	}
	var s *stream.Stream
	if err == nil {
		s, err = ld.rebuild(ctx, l)
	}
	if err != nil {
		s = stream.Unrecoverable(ld.env, l, err)
	}
	run := !s.Dormant && !s.St.Terminal() && ld.set.cfg.autoConnect && s.Def.Kind.Transport != nil
	if !run && !s.Dormant {
		s.Dormant, s.Exited = !s.St.Terminal(), true
		s.Cancel()
	}
	// s takes over while nobody can reach it yet; a Subscribe that holds
	// old follows ReplacedBy to it.
	subs := old.HandOver(s)
	ld.reg.mu.Lock()
	if ld.reg.streams[old.ID] == old && !ld.reg.closed {
		ld.reg.streams[old.ID] = s
		for i, o := range ld.reg.order {
			if o == old {
				ld.reg.order[i] = s
			}
		}
		if run {
			s.Admit()
		}
	} else if run {
		run = false
		s.Cancel()
	}
	ld.reg.mu.Unlock()
	if run {
		s.Launch()
		return err
	}
	for _, sub := range subs {
		sub.Close()
	}
	close(s.Done)
	return err
}

// upgradeHeld swaps the processor of s, a failed stream whose source is a
// process, in place: a held stream's worker takes no chunk, so nothing
// changes its state meanwhile, and its process (held back by the full
// queue) goes on. Its records are rewritten as UpgradeStored does, with
// the snapshots stopped (the stream store's saving lock) so that none
// written with the old program's codec can follow; then the stream takes
// the new processor and the values its rewritten progress record holds.
func (ld *loader) upgradeHeld(ctx context.Context, s *stream.Stream, u Upgrade) (UpgradeResult, error) {
	id := s.ID
	name, st, err := s.BeginSwap()
	if err != nil {
		return UpgradeResult{StreamID: id, State: st}, fmt.Errorf("upgrade stream %q: %w", id, err)
	}
	defer s.EndSwap()
	g, fn, name, err := u.define(ctx, name)
	if err != nil {
		return UpgradeResult{StreamID: id}, fmt.Errorf("upgrade stream %q: %w", id, err)
	}
	ss := s.Ps.(*stream.StreamStore)
	ss.Flush()
	ss.Saving.Lock()
	defer ss.Saving.Unlock()
	if err := ld.ps.Com.Flush(ctx); err != nil {
		return UpgradeResult{StreamID: id}, fmt.Errorf("upgrade stream %q: committing its progress: %w", id, err)
	}
	if err := ss.Err(); err != nil {
		return UpgradeResult{StreamID: id}, fmt.Errorf("upgrade stream %q: %w", id, err)
	}
	res, err := UpgradeStored(ctx, ld.ps.Store, u)
	if err != nil {
		return res, err
	}
	c := stream.Codec{Prog: u.Program, Max: ld.set.opts.Limits.OutputLimit()}
	r, err := stream.LoadProgress(ctx, ld.ps.Store, id)
	var state, lastOut, result rtfs.Value
	if err == nil {
		state, err = c.Unmarshal(r.State)
	}
	if err == nil {
		lastOut, err = c.UnmarshalOpt(r.LastOut)
	}
	if err == nil {
		result, err = c.UnmarshalOpt(r.Result)
	}
	if err != nil {
		// The records hold the new program: a restart carries it on.
		return res, fmt.Errorf("upgrade stream %q: its records are swapped but the running stream could not take them (a restart will): %w", id, err)
	}
	proc := stream.NewRTFSProcessor(name, fn, g, ld.set.opts.Limits, ld.set.opts.Capabilities)
	proc.Stream = id
	ld.ps.AddProgram(u.Program)
	s.TakeProgram(proc, res.To, c, state, lastOut, result)
	ld.env.Log.Info("failed stream's processor swapped in place", "stream", id, "from", res.From.Hash, "to", res.To.Hash, "processor", name)
	return res, nil
}
