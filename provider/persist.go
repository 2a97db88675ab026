package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// persister is a provider's persistence: the store, the provider's own
// Committer over it, and the programs saved or loaded by this provider.
type persister struct {
	store persistence.Store
	com   *persistence.Committer

	mu       sync.Mutex
	programs map[string]*rtfs.Program // by hash: saved (or loaded) by this provider
}

func newPersister(store persistence.Store, obs Observer) *persister {
	var copts persistence.CommitterOptions
	if obs != nil {
		copts.OnCommit = obs.StoreCommitted
	}
	return &persister{
		store:    store,
		com:      persistence.NewCommitter(store, copts),
		programs: make(map[string]*rtfs.Program),
	}
}

// program returns the program with the given hash that this provider has
// stored or loaded, if any.
func (ps *persister) program(hash string) (*rtfs.Program, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	prog, ok := ps.programs[hash]
	return prog, ok
}

// addProgram records that prog is in the store.
func (ps *persister) addProgram(prog *rtfs.Program) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.programs[prog.Hash()] = prog
}

// codec encodes the values of one stream: with its program's codec, which
// handles closures, or the plain value codec for a stream without a program.
type codec struct{ prog *rtfs.Program }

func (c codec) marshal(v rtfs.Value) ([]byte, error) {
	if c.prog != nil {
		return c.prog.MarshalValue(v)
	}
	return rtfs.MarshalValue(v)
}

func (c codec) unmarshal(b []byte) (rtfs.Value, error) {
	if c.prog != nil {
		return c.prog.UnmarshalValue(b)
	}
	return rtfs.UnmarshalValue(b)
}

// marshalOpt encodes v, or returns nil for a nil Go value (absent).
func (c codec) marshalOpt(v rtfs.Value) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return c.marshal(v)
}

// unmarshalOpt decodes b, or returns nil for empty b (absent).
func (c codec) unmarshalOpt(b []byte) (rtfs.Value, error) {
	if len(b) == 0 {
		return nil, nil
	}
	return c.unmarshal(b)
}

// streamStore is the persistence state of one stream.
type streamStore struct {
	ps      *persister
	codec   codec
	progKey []byte
	journal bool // the source cannot replay: chunks are journaled on arrival

	save  sync.Mutex // serializes snapshot-and-submit, so snapshots commit in order
	batch persistence.Batch
	dlv   sync.Mutex // serializes journaled deliveries, so seqs are journaled in order

	failed atomic.Pointer[error] // the first store error; the stream stops saving
	done   func(error)           // Submit's callback, bound once

	// Journal bookkeeping, guarded by the stream's mu.
	lowWater int64   // every journaled seq below it is processed
	extra    []int64 // processed seqs at or above lowWater, sorted
	deletes  []int64 // journal entries processed since the last save
	accSeq   int64   // seq of the last chunk journaled; -1: none
	accID    string  // its ID
}

func newStreamStore(ps *persister, s *stream, c codec, journal bool) *streamStore {
	st := &streamStore{ps: ps, codec: c, progKey: streamKey(s.id, suffixProg), journal: journal, accSeq: -1}
	st.done = func(err error) {
		if err != nil {
			s.storeFailed(err)
		}
	}
	return st
}

// markProcessedLocked records that journaled chunk seq is processed.
func (st *streamStore) markProcessedLocked(seq int64) {
	st.deletes = append(st.deletes, seq)
	if seq != st.lowWater {
		i := sort.Search(len(st.extra), func(i int) bool { return st.extra[i] >= seq })
		st.extra = append(st.extra, 0)
		copy(st.extra[i+1:], st.extra[i:])
		st.extra[i] = seq
		return
	}
	st.lowWater++
	for len(st.extra) > 0 && st.extra[0] <= st.lowWater {
		if st.extra[0] == st.lowWater {
			st.lowWater++
		}
		st.extra = st.extra[1:]
	}
}

// processed reports whether journaled seq is processed according to a
// progress record.
func (r *progressRecord) processedSeq(seq int64) bool {
	if seq < r.lowWater {
		return true
	}
	i := sort.Search(len(r.extra), func(i int) bool { return r.extra[i] >= seq })
	return i < len(r.extra) && r.extra[i] == seq
}

// storeFailed records the first store error of s and wakes its worker, which
// puts the stream in :error. It takes no lock of the stream: the Committer
// calls it from its goroutine.
func (s *stream) storeFailed(err error) {
	s.ps.failed.CompareAndSwap(nil, &err)
	s.signal()
}

// storeErr returns the stream's store error, if any.
func (s *stream) storeErr() error {
	if s.ps == nil {
		return nil
	}
	if e := s.ps.failed.Load(); e != nil {
		return *e
	}
	return nil
}

// snapshot is a progress record whose values are not encoded yet.
type snapshot struct {
	rec                     progressRecord
	state, lastOut, result  rtfs.Value
	deletes                 []int64
	latency                 time.Duration
	hasLatency              bool
	lastEvent, resumeAtTime time.Time
}

// snapshotLocked copies what the progress record holds; values are immutable,
// so they are encoded after mu is released.
func (s *stream) snapshotLocked() snapshot {
	st := s.ps
	sn := snapshot{
		rec: progressRecord{
			status: string(s.st), reason: s.reason, message: s.msg, cursor: s.cursor,
			procNext: s.procNext, accSeq: st.accSeq, accID: st.accID,
			lowWater: st.lowWater, extra: append([]int64(nil), st.extra...),
			processed: s.stats.processed, dropped: s.stats.dropped, reconnects: s.stats.reconnects,
			bytes: s.stats.bytes, outputs: s.stats.outputs, latencyNs: -1,
		},
		state: s.state, lastOut: s.lastOut, result: s.result, deletes: st.deletes,
	}
	st.deletes = nil
	if s.stats.hasLatency {
		sn.rec.latencyNs = int64(s.stats.latency)
	}
	if !s.stats.lastEvent.IsZero() {
		sn.rec.lastEvent = s.stats.lastEvent.UnixMilli()
	}
	if !s.resumeAt.IsZero() {
		sn.rec.resumeAt = s.resumeAt.UnixMilli()
	}
	return sn
}

// encode fills the record's value fields and returns the framed record.
func (sn *snapshot) encode(c codec) ([]byte, error) {
	var err error
	if sn.rec.state, err = c.marshal(sn.state); err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	if sn.rec.lastOut, err = c.marshalOpt(sn.lastOut); err != nil {
		return nil, fmt.Errorf("encode last output: %w", err)
	}
	if sn.rec.result, err = c.marshalOpt(sn.result); err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return sn.rec.encode(), nil
}

// save commits the stream's progress: its state, cursor, status, stats and
// outputs in one batch with the deletes of the journal entries processed
// since the last save. final waits for the commit and also deletes every
// journal entry left (the stream has ended); otherwise the batch is submitted
// and a failure reaches the worker through storeFailed. After a store error
// the stream saves nothing more.
func (s *stream) save(final bool) {
	st := s.ps
	if st == nil || st.failed.Load() != nil {
		return
	}
	st.save.Lock()
	defer st.save.Unlock()
	s.mu.Lock()
	sn := s.snapshotLocked()
	s.mu.Unlock()
	val, err := sn.encode(st.codec)
	if err != nil {
		s.storeFailed(fmt.Errorf("stream %q: %w", s.id, err))
		return
	}
	b := &st.batch
	b.Reset()
	b.Put(st.progKey, val)
	for _, seq := range sn.deletes {
		b.Delete(journalKey(s.id, seq))
	}
	if !final {
		if err := st.ps.com.Submit(context.Background(), b, st.done); err != nil {
			s.storeFailed(err)
		}
		return
	}
	if st.journal {
		if err := s.deleteJournal(b); err != nil {
			s.storeFailed(err)
			return
		}
	}
	if err := st.ps.com.Commit(context.Background(), b); err != nil {
		s.storeFailed(err)
	}
}

// deleteJournal adds the deletion of every journal entry of s to b.
func (s *stream) deleteJournal(b *persistence.Batch) error {
	return s.ps.ps.store.Scan(context.Background(), journalPrefix(s.id), func(key, _ []byte) error {
		b.Delete(append([]byte(nil), key...))
		return nil
	})
}

// deliverJournaled is Deliver in journal mode: the chunk is committed to the
// journal (durably, as the store makes commits) before it is queued and
// before Deliver returns, so a crash cannot lose it.
func (s *stream) deliverJournaled(ctx context.Context, c transport.Chunk, chunk rtfs.Value, ctrl action) error {
	st := s.ps
	st.dlv.Lock()
	defer st.dlv.Unlock()
	if c.ReceivedAt.IsZero() {
		c.ReceivedAt = time.Now()
	}
	s.mu.Lock()
	s.stats.bytes += int64(len(c.Data))
	if err := s.waitRoomLocked(ctx, ctrl); err != nil {
		s.mu.Unlock()
		return err
	}
	seq := s.seq
	s.seq++
	s.mu.Unlock()
	rec := journalRecord{id: c.ID, event: c.Event, received: c.ReceivedAt.UnixNano(), data: c.Data}
	var b persistence.Batch
	b.Put(journalKey(s.id, seq), rec.encode())
	if err := st.ps.com.Commit(ctx, &b); err != nil {
		if ctx.Err() == nil {
			s.storeFailed(fmt.Errorf("journal chunk %d of stream %q: %w", seq, s.id, err))
		}
		return fmt.Errorf("journal chunk %d of stream %q: %w", seq, s.id, err)
	}
	s.mu.Lock()
	if s.st.Terminal() || s.ctx.Err() != nil {
		state := s.st
		s.mu.Unlock()
		// The stream ended while the chunk was journaled: the chunk will
		// never be processed, so its entry goes (the final save may have
		// missed it).
		b.Reset()
		b.Delete(journalKey(s.id, seq))
		if err := st.ps.com.Commit(context.Background(), &b); err != nil {
			s.p.log.Warn("journal entry of an ended stream not deleted", "stream", s.id, "seq", seq, "err", err)
		}
		return fmt.Errorf("stream %q (%s): %w", s.id, state, errEnded)
	}
	s.obs.ChunkReceived(len(c.Data))
	s.enqueueLocked(chunk, ctrl, c, seq, true)
	st.accSeq, st.accID = seq, c.ID
	wake := s.wakeLocked()
	s.mu.Unlock()
	if wake {
		s.signal()
	}
	return nil
}

// startRecords builds the batch that Start commits: the program (once per
// provider), the definition and the first progress record.
func (p *Provider) startRecords(s *stream, req StartRequest, g *rtfs.Globals, prog *rtfs.Program) (*persistence.Batch, error) {
	c := s.ps.codec
	def := defRecord{
		order: s.started.UnixNano(), endpoint: s.def.endpoint, transport: s.def.transport,
		serverURL: stripUserInfo(s.def.serverURL), procName: s.def.procName, capacity: int64(s.def.capacity),
		journal: s.ps.journal, idleMs: idleMillis(s.def.idle),
	}
	var err error
	if len(s.def.keys) > 0 {
		if def.tkeys, err = json.Marshal(s.def.keys); err != nil {
			return nil, fmt.Errorf("encode transport keys: %w", err)
		}
	}
	switch {
	case req.goProc != nil:
		def.procRef = procGo
	case isName(req.Processor):
		def.procRef, def.procData = procByName, []byte(textOf(req.Processor))
	default:
		def.procRef = procByValue
		if def.procData, err = c.marshal(s.proc.(*rtfsProcessor).fn); err != nil {
			return nil, fmt.Errorf("encode processor: %w", err)
		}
	}
	if g != nil {
		if def.globals, err = g.MarshalBinary(); err != nil {
			return nil, fmt.Errorf("encode globals: %w", err)
		}
	}
	if def.initial, err = c.marshal(s.def.initial); err != nil {
		return nil, fmt.Errorf("encode initial state: %w", err)
	}
	if s.def.config != nil {
		if def.config, err = c.marshal(s.def.config); err != nil {
			return nil, fmt.Errorf("encode config: %w", err)
		}
	}
	b := &persistence.Batch{}
	if prog != nil {
		def.progHash = prog.Hash()
		if _, stored := s.p.ps.program(prog.Hash()); !stored {
			b.Put(programKey(prog.Hash()), (&programRecord{name: prog.Name(), source: prog.Source()}).encode())
		}
	}
	b.Put(streamKey(s.id, suffixDef), def.encode())
	s.mu.Lock()
	sn := s.snapshotLocked()
	s.mu.Unlock()
	val, err := sn.encode(c)
	if err != nil {
		return nil, err
	}
	b.Put(s.ps.progKey, val)
	return b, nil
}

// commitStart commits a new stream's records. It refuses an id that the
// store already holds (a persisted stream not recovered). Called with p.mu
// held, so that two starts of one id cannot both commit.
func (p *Provider) commitStart(s *stream, b *persistence.Batch) error {
	ctx := context.Background()
	_, err := p.ps.store.Get(ctx, streamKey(s.id, suffixDef))
	switch {
	case err == nil:
		return &keyError{"stream-id", fmt.Errorf("a persisted stream with id %q exists in the store; recover it instead", s.id)}
	case !errors.Is(err, persistence.ErrNotFound):
		return fmt.Errorf("start stream %q: read store: %w", s.id, err)
	}
	if err := p.ps.com.Commit(ctx, b); err != nil {
		return fmt.Errorf("start stream %q: persist its definition: %w", s.id, err)
	}
	if prog := s.ps.codec.prog; prog != nil {
		p.ps.addProgram(prog)
	}
	return nil
}

func isName(v rtfs.Value) bool {
	switch v.(type) {
	case rtfs.Symbol, rtfs.String:
		return true
	}
	return false
}

// programOf returns the program a stream's processor belongs to: that of the
// globals, else that of the function.
func programOf(g *rtfs.Globals, fn rtfs.Value) *rtfs.Program {
	if g != nil {
		return g.Program()
	}
	if cl, ok := fn.(*rtfs.Closure); ok {
		return cl.Program()
	}
	return nil
}

// idleMillis is the stored form of a start call's idle timeout: 0 for the
// provider's default, -1 for none, else milliseconds.
func idleMillis(d time.Duration) int64 {
	switch {
	case d < 0:
		return -1
	case d == 0:
		return 0
	}
	return max(d.Milliseconds(), 1)
}

// stripUserInfo removes credentials from a URL before it is stored.
func stripUserInfo(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}

// replayable reports whether transport t can replay from a cursor.
func replayable(t transport.StreamTransport) bool {
	r, ok := t.(transport.Replayable)
	return t != nil && (!ok || r.Replayable())
}
