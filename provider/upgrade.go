package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
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
var ErrCannotUpgrade = errors.New("the processor cannot be swapped")

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
	fn, _, err := resolveProcessor(rtfs.String(name), out.Globals)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w: %w", ErrCannotUpgrade, err)
	}
	if err := checkShape(fn, name); err != nil {
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
	wrap := func(err error) (UpgradeResult, error) {
		return res, fmt.Errorf("upgrade stream %q: %w", u.StreamID, err)
	}
	dkey := streamKey(u.StreamID, suffixDef)
	data, err := st.Get(ctx, dkey)
	if errors.Is(err, persistence.ErrNotFound) {
		return wrap(ErrNoStoredStream)
	}
	if err != nil {
		return wrap(err)
	}
	var d defRecord
	if err := d.decode(dkey, data); err != nil {
		return wrap(err)
	}
	r, err := loadProgress(ctx, st, u.StreamID)
	if err != nil {
		return wrap(err)
	}
	res.State = State(r.status)
	if res.State.Terminal() {
		return wrap(fmt.Errorf("%w: it has ended (%s)", ErrCannotUpgrade, res.State))
	}
	if d.procRef == procGo {
		return wrap(fmt.Errorf("%w: its processor %s is a Go function", ErrCannotUpgrade, d.procName))
	}
	g, _, name, err := u.define(ctx, d.procName)
	if err != nil {
		return wrap(err)
	}
	origin, err := loadOrigin(ctx, st, u.StreamID)
	if err != nil {
		return wrap(err)
	}
	oldCodec, oldFile := storedCodec(ctx, st, d.progHash)
	history := origin.historyOf(&d, oldFile)
	if len(history) > 0 {
		res.From = history[len(history)-1]
	}
	newCodec := codec{prog: u.Program} // values already stored: no bound of a run applies
	recode := func(what string, b []byte) ([]byte, error) {
		if len(b) == 0 {
			return b, nil
		}
		v, err := oldCodec.unmarshal(b)
		if err == nil {
			b, err = newCodec.marshal(v)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: its %s cannot be carried over to %s (does it hold a function of the old program?): %w", ErrCannotUpgrade, what, u.Program.Name(), err)
		}
		return b, nil
	}
	for _, f := range []struct {
		what string
		b    *[]byte
	}{{"state", &r.state}, {"last output", &r.lastOut}, {"result", &r.result}, {"initial state", &d.initial}, {"config", &d.config}} {
		if *f.b, err = recode(f.what, *f.b); err != nil {
			return wrap(err)
		}
	}
	if d.globals, err = g.MarshalBinary(); err != nil {
		return wrap(err)
	}
	d.progHash, d.procName, d.procRef, d.procData = u.Program.Hash(), name, procByName, []byte(name)
	res.To = versionOf(u.Program, name, time.Now())
	o := &originRecord{sourceHash: sourceHash(u.Program.Source()), journal: (&capabilities.Journal{}).Snapshot(),
		history: append(append([]ProgramVersion(nil), history...), res.To)}

	b := &persistence.Batch{}
	b.Put(programKey(u.Program.Hash()), (&programRecord{name: u.Program.Name(), source: u.Program.Source()}).encode())
	b.Put(dkey, d.encode())
	b.Put(streamKey(u.StreamID, suffixProg), r.encode())
	b.Put(originKey(u.StreamID), o.encode())
	if err := st.Commit(ctx, b); err != nil {
		return wrap(err)
	}
	if origin != nil {
		// The new origin keeps no journal of the run that started the
		// stream: the stream lets go of it. The upgrade is done either
		// way; a journal not released costs room only.
		_ = ReleaseRunJournal(ctx, st, origin.journal, u.StreamID)
	}
	return res, nil
}

// storedCodec returns the codec that decodes the values of a stream whose
// program is stored under hash, and the program's file name: that
// program's, when this build compiles it to that hash; else the plain
// value codec (values without functions: those of another compiler cannot
// be read, nor those of a program missing or not compiling any more).
func storedCodec(ctx context.Context, st persistence.Store, hash string) (codec, string) {
	if hash == "" {
		return codec{}, ""
	}
	key := programKey(hash)
	data, err := st.Get(ctx, key)
	if err != nil {
		return codec{}, ""
	}
	var rec programRecord
	if err := rec.decode(key, data); err != nil {
		return codec{}, ""
	}
	prog, err := rtfs.Compile(rec.name, rec.source)
	if err != nil || prog.Hash() != hash {
		return codec{}, rec.name
	}
	return codec{prog: prog}, rec.name
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
	s.mu.Lock()
	switch {
	case s.upgrade != nil:
		s.mu.Unlock()
		return UpgradeResult{StreamID: id}, fmt.Errorf("upgrade stream %q: %w: another swap is under way", id, ErrCannotUpgrade)
	case s.st.Terminal():
		st := s.st
		s.mu.Unlock()
		return UpgradeResult{StreamID: id, State: st}, fmt.Errorf("upgrade stream %q: %w: it has ended (%s)", id, ErrCannotUpgrade, st)
	case !s.dormant && s.def.kind.Target == transport.TargetCommand && s.st == StateFailed && s.ps != nil:
		s.mu.Unlock()
		return p.load.upgradeHeld(ctx, s, u) // swapped in place: its process goes on
	case !s.dormant && s.def.kind.Target == transport.TargetCommand:
		s.mu.Unlock()
		return UpgradeResult{StreamID: id}, fmt.Errorf("upgrade stream %q: %w: its source is a process (:%s), which stopping the stream would end; it can be swapped while it is failed", id, ErrCannotUpgrade, s.def.transport)
	}
	// Check the new program before the stream is touched.
	if _, _, _, err := u.define(ctx, s.def.procName); err != nil {
		s.mu.Unlock()
		return UpgradeResult{StreamID: id}, fmt.Errorf("upgrade stream %q: %w", id, err)
	}
	dormant := s.dormant
	stopped := make(chan struct{})
	if !dormant {
		s.upgrade = stopped
	}
	s.mu.Unlock()
	if dormant {
		res, err := UpgradeStored(ctx, p.ps.store, u)
		if err != nil {
			return res, err
		}
		p.forget(s)
		if rerr := p.RecoverStream(ctx, id); rerr != nil {
			p.log.Error("upgraded stream not loaded again", "stream", id, "err", rerr)
		}
		return res, nil
	}
	s.cancel()
	<-stopped // the worker stopped between two chunks, its progress flushed
	// Its transport stops too before the swap is made (the stream that
	// replaces it would anyway start its own only then: runs.go), so that
	// when Upgrade returns, nothing of the old stream runs.
	var res UpgradeResult
	err = p.runs.await(ctx, id)
	if err == nil {
		if err = p.ps.com.Flush(ctx); err != nil {
			err = fmt.Errorf("upgrade stream %q: committing its progress: %w", id, err)
		}
	}
	if err == nil {
		res, err = UpgradeStored(ctx, p.ps.store, u)
	}
	if rerr := p.reload(ctx, s); rerr != nil {
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
func (p *Provider) reload(ctx context.Context, old *stream) error {
	l := &loaded{id: old.id}
	all, err := p.ps.scanStreams(ctx, append([]byte(streamPrefix+old.id), 0))
	if err == nil && len(all) == 0 {
		err = ErrNotPersisted
	}
	if err == nil {
		l = all[0]
		err = l.complete()
	}
	var s *stream
	if err == nil {
		s, err = p.load.rebuild(ctx, l)
	}
	if err != nil {
		s = unrecoverableStream(&p.env, l, err)
	}
	run := !s.dormant && !s.st.Terminal() && p.cfg.autoConnect && s.def.kind.Transport != nil
	if !run && !s.dormant {
		s.dormant, s.exited = !s.st.Terminal(), true
		s.cancel()
	}
	// s takes over while nobody can reach it yet; a Subscribe that holds
	// old follows replacedBy to it.
	old.mu.Lock()
	subs := old.subs
	s.subs, s.done = subs, old.done
	old.subs, old.exited = nil, true
	old.replacedBy.Store(s)
	old.mu.Unlock()
	p.mu.Lock()
	if p.streams[old.id] == old && !p.closed {
		p.streams[old.id] = s
		for i, o := range p.order {
			if o == old {
				p.order[i] = s
			}
		}
		if run {
			s.admit()
		}
	} else if run {
		run = false
		s.cancel()
	}
	p.mu.Unlock()
	if run {
		s.launch()
		return err
	}
	for _, sub := range subs {
		sub.Close()
	}
	close(s.done)
	return err
}

// upgradeHeld swaps the processor of s, a failed stream whose source is a
// process, in place: a held stream's worker takes no chunk, so nothing
// changes its state meanwhile, and its process (held back by the full
// queue) goes on. Its records are rewritten as UpgradeStored does, with
// the snapshots stopped (the stream store's saving lock) so that none
// written with the old program's codec can follow; then the stream takes
// the new processor and the values its rewritten progress record holds.
func (ld *loader) upgradeHeld(ctx context.Context, s *stream, u Upgrade) (UpgradeResult, error) {
	id := s.id
	s.mu.Lock()
	if s.st != StateFailed || s.swapping {
		st := s.st
		s.mu.Unlock()
		return UpgradeResult{StreamID: id, State: st}, fmt.Errorf("upgrade stream %q: %w: it is %s, no longer failed, and its source is a process (:%s)", id, ErrCannotUpgrade, st, s.def.transport)
	}
	s.swapping = true
	name := s.def.procName
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.swapping = false
		s.mu.Unlock()
	}()
	g, fn, name, err := u.define(ctx, name)
	if err != nil {
		return UpgradeResult{StreamID: id}, fmt.Errorf("upgrade stream %q: %w", id, err)
	}
	ss := s.ps.(*streamStore)
	ss.flush()
	ss.saving.Lock()
	defer ss.saving.Unlock()
	if err := ld.ps.com.Flush(ctx); err != nil {
		return UpgradeResult{StreamID: id}, fmt.Errorf("upgrade stream %q: committing its progress: %w", id, err)
	}
	if err := ss.err(); err != nil {
		return UpgradeResult{StreamID: id}, fmt.Errorf("upgrade stream %q: %w", id, err)
	}
	res, err := UpgradeStored(ctx, ld.ps.store, u)
	if err != nil {
		return res, err
	}
	c := codec{prog: u.Program, max: ld.set.opts.Limits.OutputLimit()}
	r, err := loadProgress(ctx, ld.ps.store, id)
	var state, lastOut, result rtfs.Value
	if err == nil {
		state, err = c.unmarshal(r.state)
	}
	if err == nil {
		lastOut, err = c.unmarshalOpt(r.lastOut)
	}
	if err == nil {
		result, err = c.unmarshalOpt(r.result)
	}
	if err != nil {
		// The records hold the new program: a restart carries it on.
		return res, fmt.Errorf("upgrade stream %q: its records are swapped but the running stream could not take them (a restart will): %w", id, err)
	}
	proc := newRTFSProcessor(name, fn, g, ld.set.opts.Limits, ld.set.opts.Capabilities)
	proc.stream = id
	ld.ps.addProgram(u.Program)
	s.mu.Lock()
	s.proc, s.state, s.lastOut, s.result = proc, state, lastOut, result
	s.def.procName = name
	s.history = append(s.history, res.To)
	ss.codec = c
	s.mu.Unlock()
	ld.env.log.Info("failed stream's processor swapped in place", "stream", id, "from", res.From.Hash, "to", res.To.Hash, "processor", name)
	return res, nil
}
