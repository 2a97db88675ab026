package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// ErrNotPersisted is wrapped by RecoverStream's error when the store holds no
// stream with the given id.
var ErrNotPersisted = errors.New("no persisted stream with this id")

// errBusy says that a stream is loaded already, or being loaded.
var errBusy = errors.New("it is already loaded, or being loaded")

// loaded is one stream's records as read from the store.
type loaded struct {
	id       string
	def      *defRecord
	progress *progressRecord
	journal  []journalEntry // in seq order
	child    *childRecord   // the process group its transport ran, if recorded (children.go)
	err      error          // the first bad record
}

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
	all, err := p.ps.scanStreams(ctx, []byte(streamPrefix))
	if err != nil {
		return fmt.Errorf("provider: Recover: %w", err)
	}
	var errs []error
	for _, l := range all {
		if p.has(l.id) || l.leftover() {
			continue
		}
		if err := p.restore(ctx, l); errors.Is(err, ErrOwned) {
			continue // another host runs it
		} else if err != nil {
			p.log.Error("stream not recovered", "stream", l.id, "err", err)
			errs = append(errs, err)
			// In a cluster another host may manage it (or later this
			// one, through RecoverStream): it is not listed here.
			if p.opts.Cluster == nil && !errors.Is(err, errBusy) && !errors.Is(err, ErrClosed) {
				p.registerUnrecoverable(unrecoverableStream(&p.env, l, err))
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
	all, err := p.ps.scanStreams(ctx, append([]byte(streamPrefix+id), 0))
	if err != nil {
		return fmt.Errorf("provider: recover stream %q: %w", id, err)
	}
	if len(all) == 0 || all[0].leftover() {
		return fmt.Errorf("provider: recover stream %q: %w", id, ErrNotPersisted)
	}
	return p.restore(ctx, all[0])
}

func (r *registry) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.streams[id]
	return ok
}

// scanStreams reads the stream records under prefix, grouped by stream and
// sorted by start order. A record that cannot be decoded marks its stream.
func (ps *persister) scanStreams(ctx context.Context, prefix []byte) ([]*loaded, error) {
	byID := map[string]*loaded{}
	var list []*loaded
	err := ps.store.Scan(ctx, prefix, func(key, value []byte) error {
		id, suffix, seq, ok := parseStreamKey(key)
		if !ok {
			ps.log.Warn("unexpected key in the store", "key", fmt.Sprintf("%q", key))
			return nil
		}
		l := byID[id]
		if l == nil {
			l = &loaded{id: id}
			byID[id] = l
			list = append(list, l)
		}
		if l.err == nil {
			l.err = l.add(key, append([]byte(nil), value...), suffix, seq)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(list, func(i, j int) bool { return orderOf(list[i]) < orderOf(list[j]) })
	return list, nil
}

func orderOf(l *loaded) int64 {
	if l.def == nil {
		return 0
	}
	return l.def.order
}

// add decodes one record of the stream.
func (l *loaded) add(key, value []byte, suffix byte, seq int64) error {
	switch suffix {
	case suffixDef:
		l.def = &defRecord{}
		return l.def.decode(key, value)
	case suffixProg:
		l.progress = &progressRecord{}
		return l.progress.decode(key, value)
	case suffixJournal:
		entries, err := decodeJournal(key, value, seq)
		if err != nil {
			return err
		}
		// Keys come in seq order; an entry never holds a chunk of the next.
		if n := len(l.journal); n > 0 && l.journal[n-1].seq >= seq {
			return &persistence.CorruptRecordError{Key: append([]byte(nil), key...),
				Reason: fmt.Sprintf("journal entry %d overlaps the one before, which holds chunks up to %d", seq, l.journal[n-1].seq)}
		}
		l.journal = append(l.journal, entries...)
		return nil
	case suffixChild:
		l.child = &childRecord{}
		return l.child.decode(key, value)
	}
	return &persistence.CorruptRecordError{Key: key, Reason: fmt.Sprintf("unknown record suffix %q", suffix)}
}

// complete reports why the records of l cannot rebuild its stream: one is
// damaged, or its definition or progress record is missing.
func (l *loaded) complete() error {
	switch {
	case l.err != nil:
		return l.err
	case l.def == nil:
		return &persistence.CorruptRecordError{Key: streamKey(l.id, suffixDef), Reason: "the stream's definition record is missing"}
	case l.progress == nil:
		return &persistence.CorruptRecordError{Key: streamKey(l.id, suffixProg), Reason: "the stream's progress record is missing"}
	}
	return nil
}

// restore rebuilds one loaded stream and registers it. A stream that is
// being restored meanwhile, or is loaded, is left alone (an error says so).
func (p *Provider) restore(ctx context.Context, l *loaded) error {
	wrap := func(err error) error { return fmt.Errorf("provider: recover stream %q: %w", l.id, err) }
	p.mu.Lock()
	_, loaded := p.streams[l.id]
	busy := p.restoring[l.id]
	if !loaded && !busy {
		if p.restoring == nil {
			p.restoring = make(map[string]bool)
		}
		p.restoring[l.id] = true
	}
	p.mu.Unlock()
	if loaded || busy {
		return wrap(errBusy)
	}
	defer func() {
		p.mu.Lock()
		delete(p.restoring, l.id)
		p.mu.Unlock()
	}()
	if err := l.complete(); err != nil {
		return wrap(err)
	}
	run := !State(l.progress.status).Terminal() && p.cfg.autoConnect
	if run {
		if err := p.claim(ctx, l.id); err != nil {
			return wrap(err)
		}
	}
	s, err := p.load.rebuild(ctx, l)
	if err == nil {
		var told []func(error)
		if run || State(l.progress.status).Terminal() {
			told = p.tellLoad(ctx, l.id, !run)
		}
		if err = p.checkTransport(s); err == nil {
			err = p.registerRecovered(s)
		}
		for _, f := range told {
			f(err)
		}
	}
	if err != nil {
		if run && p.opts.Cluster != nil {
			// Another host may manage where this one cannot.
			_ = p.opts.Cluster.Release(ctx, l.id, false)
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
// (upgrade.go). It reads the provider's settings and store, and gives the
// streams it makes the provider's env. A provider has one.
type loader struct {
	set *settings
	ps  *persister // nil without a store: then nothing is loaded
	env *streamEnv
}

// rebuild makes the stream of l with its processor, state and progress.
func (ld *loader) rebuild(ctx context.Context, l *loaded) (*stream, error) {
	d := l.def
	prog, err := ld.ps.loadProgram(ctx, d.progHash)
	if err != nil {
		return nil, err
	}
	origin, err := loadOrigin(ctx, ld.ps.store, l.id)
	if err != nil {
		return nil, err
	}
	c := codec{prog, ld.set.opts.Limits.OutputLimit()}
	var proc processor
	if prog != nil && prog.Hash() != d.progHash {
		// Another compiler's: its stored values are read, and written
		// from now on, without functions (origin.go).
		c = codec{max: ld.set.opts.Limits.OutputLimit()}
		proc, err = ld.replayProcessor(ctx, l, prog, origin)
	} else {
		proc, err = ld.set.rebindProcessor(d, prog, c)
	}
	if err != nil {
		return nil, err
	}
	def := definition{endpoint: d.endpoint, transport: d.transport, serverURL: d.serverURL, procName: d.procName, capacity: int(d.capacity)}
	// A stream goes on reading the server it started on (its cursor means
	// something there only). The recovering provider's own URL is used when
	// it is that server, since it may carry the credentials the stored URL
	// lost; and for records of streams that stored none.
	if def.serverURL == "" || stripUserInfo(ld.set.cfg.serverURL) == def.serverURL {
		def.serverURL = ld.set.cfg.serverURL
	}
	if def.capacity <= 0 {
		return nil, &persistence.CorruptRecordError{Key: streamKey(l.id, suffixDef), Reason: fmt.Sprintf("queue capacity %d", d.capacity)}
	}
	def.idle = time.Duration(d.idleMs) * time.Millisecond
	def.onError = d.onError
	dr, err := loadDelivery(ctx, ld.ps.store, l.id)
	if err != nil {
		return nil, err
	}
	if dr != nil {
		def.delivery, def.milestones = dr.delivery, dr.milestones
	}
	if len(d.tkeys) > 0 {
		if err := json.Unmarshal(d.tkeys, &def.keys); err != nil {
			return nil, &persistence.CorruptRecordError{Key: streamKey(l.id, suffixDef), Reason: fmt.Sprintf("transport keys: %v", err)}
		}
	}
	if err := ld.set.chooseKind(&def, d.transport); err != nil {
		return nil, fmt.Errorf("stream %s: %w", l.id, err)
	}
	if err := ld.set.checkEgress(def); err != nil {
		return nil, fmt.Errorf("stream %s: %w", l.id, err)
	}
	if def.initial, err = c.unmarshal(d.initial); err != nil {
		return nil, fmt.Errorf("decode initial state: %w", err)
	}
	if cfg, err := c.unmarshalOpt(d.config); err != nil {
		return nil, fmt.Errorf("decode config: %w", err)
	} else if m, ok := cfg.(*rtfs.Map); ok {
		def.config = m
	}
	s := newStream(ld.env, l.id, def, proc)
	s.recovered = true
	if prog != nil {
		s.history = origin.historyOf(d, prog.Name())
	}
	if l.child != nil {
		s.stale = l.child.process()
	}
	if d.order > 0 {
		s.started = time.Unix(0, d.order)
	}
	st := newStreamStore(ld.ps, s, c, d.journal)
	s.ps = st
	if err := st.restoreProgress(l); err != nil {
		s.cancel()
		return nil, err
	}
	st.restoreDelivery(dr)
	if s.dead, err = countDeadLetters(ctx, ld.ps.store, l.id); err != nil {
		s.cancel()
		return nil, err
	}
	return s, nil
}

// loadProgram returns the program with the given hash: one this provider
// knows, else compiled from the stored source. "" means no program. A
// program that this build compiles to another hash (another compiler or
// prelude) is returned all the same: the caller sees the hashes differ and
// replays it (origin.go).
func (ps *persister) loadProgram(ctx context.Context, hash string) (*rtfs.Program, error) {
	if hash == "" {
		return nil, nil
	}
	if prog, ok := ps.program(hash); ok {
		return prog, nil
	}
	key := programKey(hash)
	data, err := ps.store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("load program %s: %w", hash, err)
	}
	var rec programRecord
	if err := rec.decode(key, data); err != nil {
		return nil, err
	}
	prog, err := rtfs.Compile(rec.name, rec.source)
	if err != nil {
		return nil, fmt.Errorf("recompile program %s (%s): %w", rec.name, hash, err)
	}
	if prog.Hash() != hash {
		ps.addProgramAs(hash, prog)
		return prog, nil
	}
	ps.addProgram(prog)
	return prog, nil
}

// rebindProcessor finds the stream's processor again: by name among the
// restored globals, or decoded from its stored value.
func (set *settings) rebindProcessor(d *defRecord, prog *rtfs.Program, c codec) (processor, error) {
	var g *rtfs.Globals
	var err error
	if len(d.globals) > 0 {
		if prog == nil {
			return nil, errors.New("the stream has globals but no program")
		}
		if g, err = rtfs.UnmarshalGlobals(prog, d.globals); err != nil {
			return nil, fmt.Errorf("decode globals: %w", err)
		}
	}
	var fn rtfs.Value
	switch d.procRef {
	case procByName:
		if fn, _, err = resolveProcessor(rtfs.String(d.procData), g); err != nil {
			return nil, fmt.Errorf("rebind processor: %w", err)
		}
	case procByValue:
		if fn, err = c.unmarshal(d.procData); err != nil {
			return nil, fmt.Errorf("decode processor: %w", err)
		}
	case procGo:
		return nil, fmt.Errorf("its processor %s is a Go function, which cannot be stored", d.procName)
	default:
		return nil, fmt.Errorf("unknown processor reference %d", d.procRef)
	}
	return newRTFSProcessor(d.procName, fn, g, set.opts.Limits, set.opts.Capabilities), nil
}

// restoreProgress sets the stream's status, state, stats and cursor from its
// progress record, and queues its unprocessed journaled chunks.
func (st *streamStore) restoreProgress(l *loaded) error {
	s := st.s
	r, c := l.progress, st.codec
	var err error
	if s.state, err = c.unmarshal(r.state); err != nil {
		return fmt.Errorf("decode state: %w", err)
	}
	if s.lastOut, err = c.unmarshalOpt(r.lastOut); err != nil {
		return fmt.Errorf("decode last output: %w", err)
	}
	if s.result, err = c.unmarshalOpt(r.result); err != nil {
		return fmt.Errorf("decode result: %w", err)
	}
	s.st, s.reason, s.msg, s.cursor = State(r.status), r.reason, r.message, r.cursor
	switch s.st {
	case StateActive, StatePaused, StateCompleted, StateCancelled, StateError:
	case StateFailed:
		if r.failure == nil {
			return &persistence.CorruptRecordError{Key: st.progKey, Reason: "a failed stream without its failure"}
		}
		f := *r.failure
		s.failure = &f
	default:
		return &persistence.CorruptRecordError{Key: st.progKey, Reason: fmt.Sprintf("unknown status %q", r.status)}
	}
	s.stats = stats{processed: r.processed, dropped: r.dropped, reconnects: r.reconnects, bytes: r.bytes, outputs: r.outputs}
	if r.latencyNs >= 0 {
		s.stats.latency, s.stats.hasLatency = time.Duration(r.latencyNs), true
	}
	if r.lastEvent != 0 {
		s.stats.lastEvent = time.UnixMilli(r.lastEvent)
	}
	if r.resumeAt != 0 {
		s.resumeAt = time.UnixMilli(r.resumeAt)
	}
	s.procNext, s.seq, s.startCursor = r.procNext, r.procNext, r.cursor
	if st.journal {
		st.restoreJournal(l)
	}
	return nil
}

// restoreJournal queues the journaled chunks the progress record does not
// count as processed, in seq order, and sets the cursor the source resumes
// after: that of the last chunk the stream took.
func (st *streamStore) restoreJournal(l *loaded) {
	s, r := st.s, l.progress
	st.accSeq, st.accID = r.accSeq, r.accID
	next := r.procNext
	if r.accSeq >= next {
		next = r.accSeq + 1
	}
	low := int64(-1)
	for i := 0; i < len(l.journal); {
		// The chunks of one entry: those that share its first seq.
		j := i + 1
		for j < len(l.journal) && l.journal[j].first == l.journal[i].first {
			j++
		}
		entry, whole := l.journal[i:j], true
		i = j
		for _, e := range entry {
			if r.processedSeq(e.seq) {
				continue
			}
			whole = false
			if low < 0 {
				low = e.seq
			}
			c := transport.Chunk{Data: e.rec.data, Event: e.rec.event, ID: e.rec.id, ReceivedAt: time.Unix(0, e.rec.received), FD: e.rec.fd}
			chunk := decodeChunk(&s.dec, c.Data, c.Event, nil)
			s.requeueLocked(c, chunk, e.seq)
			if e.seq >= next {
				next = e.seq + 1
			}
			if e.seq > st.accSeq {
				st.accSeq, st.accID = e.seq, e.rec.id
			}
		}
		if whole {
			st.deletes = append(st.deletes, entry[0].first)
		} else {
			st.groups = append(st.groups, &journalGroup{st: st, first: entry[0].first, n: int64(len(entry))})
		}
	}
	s.seq = next
	if low < 0 {
		low = next
	}
	// Seqs below low were processed; of those above it, the record's extra
	// ones were (out of order, before the crash), the rest are queued.
	st.lowWater = low
	st.extra = nil
	for _, x := range r.extra {
		if x > low {
			st.extra = append(st.extra, x)
		}
	}
	if st.accSeq >= 0 {
		s.startCursor = st.accID
	}
}

// registerRecovered adds a recovered stream: a finished or dormant one
// without goroutines, an unfinished one running (its transport is in the
// catalog: checkTransport).
func (r *registry) registerRecovered(s *stream) error {
	if !s.st.Terminal() && s.env.autoConnect {
		if err := r.register(s, nil, false); err != nil {
			s.cancel()
			return err
		}
		queued := s.queue.len()
		s.recovered = true
		s.launch()
		s.env.log.Info("stream recovered", "stream", s.id, "cursor", s.startCursor, "journaled", queued)
		return nil
	}
	s.dormant = !s.st.Terminal()
	s.exited = true
	s.cancel()
	close(s.done)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	if _, dup := r.streams[s.id]; dup {
		r.mu.Unlock()
		return fmt.Errorf("a stream with id %q already exists", s.id)
	}
	r.streams[s.id] = s
	r.order = append(r.order, s)
	early := r.attachPendingLocked(s)
	r.mu.Unlock()
	for _, sub := range early {
		s.subscribe(sub) // it has ended: its EventEnd at once
	}
	return nil
}

// checkTransport refuses a recovered stream that would run here without
// its transport in the catalog.
func (set *settings) checkTransport(s *stream) error {
	if !s.st.Terminal() && set.cfg.autoConnect && s.def.kind.Transport == nil {
		s.cancel()
		return fmt.Errorf("no transport :%s in this host (it has :%s)", s.def.transport, strings.Join(set.opts.Transports.Names(), " :"))
	}
	return nil
}

// leftover reports whether l holds nothing but a child record: one written
// as its stream was removed (the stream's transport can still start a
// program while the stream ends), which recovery ignores.
func (l *loaded) leftover() bool {
	return l.err == nil && l.def == nil && l.progress == nil && len(l.journal) == 0 && l.child != nil
}
