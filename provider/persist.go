package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// persister is a provider's persistence: the store, the provider's own
// Committer over it, and the programs saved or loaded by this provider.
type persister struct {
	store persistence.Store
	com   *persistence.Committer
	log   *slog.Logger // the provider's
	// maxDeletes bounds the journal deletes one batch carries, so that a
	// batch always fits in one store transaction: maxSnapshotDeletes, or
	// less for a store whose commits hold less (persistence.Limited).
	maxDeletes int
	// maxGroupBytes bounds a journal entry: a chunk that would make it
	// longer starts an entry of its own, so that an entry fits in one
	// store commit beside others (a quarter of what a commit holds, at
	// most maxJournalEntry).
	maxGroupBytes int

	// journals keeps the run journal read last, for the streams of one
	// run that recovery replays one after the other.
	journals segmentCache

	mu       sync.Mutex
	programs map[string]*rtfs.Program // by hash: saved (or loaded) by this provider
}

// newPersister returns the persistence of a provider over store;
// onCommit, if not nil, is told of every commit of its group committer.
func newPersister(store persistence.Store, onCommit func(persistence.CommitInfo), log *slog.Logger) *persister {
	copts := persistence.CommitterOptions{OnCommit: onCommit}
	maxDeletes, maxGroupBytes := maxSnapshotDeletes, maxJournalEntry
	if l, ok := store.(persistence.Limited); ok {
		ops, bytes := l.BatchLimits()
		maxDeletes = max(1, min(maxDeletes, ops-8)) // room for the progress record and the start batch
		maxGroupBytes = max(1, min(maxGroupBytes, bytes/4))
	}
	return &persister{
		store:         store,
		log:           log,
		com:           persistence.NewCommitter(store, copts),
		maxDeletes:    maxDeletes,
		maxGroupBytes: maxGroupBytes,
		programs:      make(map[string]*rtfs.Program),
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
func (ps *persister) addProgram(prog *rtfs.Program) { ps.addProgramAs(prog.Hash(), prog) }

// addProgramAs records that the program stored under hash compiles to
// prog (whose own hash differs when another compiler stored it).
func (ps *persister) addProgramAs(hash string, prog *rtfs.Program) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.programs[hash] = prog
}

// codec encodes the values of one stream: with its program's codec, which
// handles closures, or the plain value codec for a stream without a program,
// within the output limit of the provider's processor calls (max, 0: none),
// so that a state too large to store ends the stream instead of the host's
// memory.
type codec struct {
	prog *rtfs.Program
	max  int64
}

func (c codec) marshal(v rtfs.Value) ([]byte, error) {
	o := rtfs.EncodeOptions{MaxBytes: c.max}
	if c.prog != nil {
		return c.prog.MarshalValueOpts(v, o)
	}
	return rtfs.MarshalValueOpts(v, o)
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
//
// Snapshots: the stream's progress (state, cursor, status, stats, outputs)
// is taken under its mu after every change and submitted to the
// provider's Committer, one snapshot in flight at a time: while one is in
// flight, later changes only mark the stream dirty, and the next snapshot,
// taken when the one in flight has committed, holds them all. Each
// snapshot is consistent (the state after chunk N with chunk N's cursor),
// snapshots are submitted in the order they were taken, and a snapshot is
// encoded once per commit instead of once per chunk.
//
// Journal (a source that cannot replay): the chunks that arrive while the
// stream's last journal entry waits for its commit join that entry
// (journalGroup), so that a busy stream writes one entry, and later one
// delete, per group commit rather than per chunk.
type streamStore struct {
	ps      *persister
	s       *stream
	codec   codec
	progKey []byte
	journal bool // the source cannot replay: chunks are journaled on arrival

	saving sync.Mutex // serializes snapshot-and-submit, so snapshots commit in order
	batch  persistence.Batch

	failed atomic.Pointer[error] // the first store error; the stream stops saving
	done   func(error)           // Submit's callback for snapshots, bound once
	jdone  func(error)           // SubmitLate's callback for journal entries, bound once
	cdone  func(error)           // Submit's callback for process group records, bound once

	dirty       atomic.Bool // a change is not in a submitted snapshot yet (cleared under mu)
	inflight    atomic.Bool // a snapshot is submitted and not committed yet
	manyDeletes atomic.Bool // deletes has reached the persister's maxDeletes

	delivered deliveryMark // what the last delivery record held (deliveryrec.go); guarded by the stream's mu

	// Guarded by the stream's mu.
	lowWater int64        // every journaled seq below it is processed
	extra    []int64      // processed seqs at or above lowWater, sorted
	deletes  []int64      // journal entries (their first seqs) to delete with the next snapshot
	dead     []DeadLetter // dead letters to store with the next snapshot
	accSeq   int64        // seq of the last chunk journaled; -1: none
	accID    string       // its ID
	fresh    bool         // started here, not recovered: every journal entry it has, it wrote

	// jmu guards groups and the groups' fields; the Committer's goroutine
	// takes it (journalGroup.take), so it is never held while calling the
	// Committer. Taken after the stream's mu.
	jmu    sync.Mutex
	groups []*journalGroup // journal entries written or being written, not yet deleted, in seq order
}

// A journalGroup is one journal entry of a stream: the chunks first,
// first+1, ... first+n-1. It is submitted with its first chunk
// (Committer.SubmitLate) and takes the chunks that arrive until the
// Committer takes it for a commit, or until every chunk in it is processed
// (then its delete may follow, and a later chunk starts an entry of its
// own). The fields are guarded by the stream store's jmu.
type journalGroup struct {
	st    *streamStore
	first int64
	n     int64
	buf   []byte // the entry: record header, then its chunks; nil once taken
	open  bool   // it takes more chunks
}

// maxJournalEntry bounds a journal entry's bytes (persister.maxGroupBytes
// may lower it): a busy stream's entry holds the chunks of one commit
// interval, which are seldom more.
const maxJournalEntry = 256 << 10

// take finishes the entry for its commit; the Committer calls it.
func (g *journalGroup) take() []byte {
	g.st.jmu.Lock()
	defer g.st.jmu.Unlock()
	g.open = false
	b := persistence.FinishRecord(g.buf, 0)
	g.buf = nil
	return b
}

var _ keeper = (*streamStore)(nil)

func newStreamStore(ps *persister, s *stream, c codec, journal bool) *streamStore {
	st := &streamStore{ps: ps, s: s, codec: c, progKey: streamKey(s.id, suffixProg), journal: journal, accSeq: -1}
	// The callbacks run on the Committer's goroutine and take no lock of
	// the stream: a Deliver holding mu may be waiting for the Committer.
	st.done = func(err error) {
		if err != nil {
			st.fail(err)
		}
		st.inflight.Store(false)
		if st.dirty.Load() {
			s.signal()
		}
	}
	st.jdone = func(err error) {
		if err != nil {
			st.fail(fmt.Errorf("journal a chunk of stream %q: %w", s.id, err))
		}
	}
	st.cdone = func(err error) {
		if err != nil {
			st.fail(fmt.Errorf("record the process group of stream %q: %w", s.id, err))
		}
	}
	return st
}

func (st *streamStore) journaling() bool { return st.journal }

func (st *streamStore) deadLetterLocked(dl DeadLetter) {
	st.dead = append(st.dead, dl)
	st.dirty.Store(true)
}

// fail records the first store error and wakes the worker, which puts the
// stream in :error. It takes no lock of the stream: the Committer calls it
// from its goroutine.
func (st *streamStore) fail(err error) {
	st.failed.CompareAndSwap(nil, &err)
	st.s.signal()
}

func (st *streamStore) err() error {
	if e := st.failed.Load(); e != nil {
		return *e
	}
	return nil
}

// journalLocked adds c to the stream's open journal entry, or submits an
// entry of its own when none is open: the entry commits no later than any
// snapshot submitted after this call, which is all that can hold c's
// effect.
func (st *streamStore) journalLocked(ctx context.Context, seq int64, c transport.Chunk) error {
	if err := st.err(); err != nil {
		return fmt.Errorf("journal chunk %d of stream %q: %w", seq, st.s.id, err)
	}
	st.jmu.Lock()
	var g *journalGroup
	if n := len(st.groups); n > 0 && st.groups[n-1].open && len(st.groups[n-1].buf)+len(c.Data) < st.ps.maxGroupBytes {
		g = st.groups[n-1]
		g.buf = appendJournalChunk(g.buf, &c)
		g.n++
		st.jmu.Unlock()
		st.accSeq, st.accID = seq, c.ID
		return nil
	}
	g = &journalGroup{st: st, first: seq, n: 1, open: true}
	g.buf = persistence.AppendRecordHeader(make([]byte, 0, 64+len(c.Data)), kindJournal, journalVersionGroup)
	g.buf = appendJournalChunk(g.buf, &c)
	st.groups = append(st.groups, g)
	st.jmu.Unlock()
	if err := st.ps.com.SubmitLate(ctx, journalKey(st.s.id, seq), g.take, st.jdone); err != nil {
		st.jmu.Lock()
		st.groups = st.groups[:len(st.groups)-1] // still the last: mu is held
		st.jmu.Unlock()
		return fmt.Errorf("journal chunk %d of stream %q: %w", seq, st.s.id, err)
	}
	st.accSeq, st.accID = seq, c.ID
	return nil
}

func (st *streamStore) awaitJournal(ctx context.Context) error {
	if err := st.ps.com.Flush(ctx); err != nil {
		return fmt.Errorf("stream %q: wait for the journal: %w", st.s.id, err)
	}
	return st.err()
}

func (st *streamStore) processedLocked(seq int64) {
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
	// The entries whose every chunk is processed are deleted with the next
	// snapshot; an open one is closed first, so that no chunk joins it
	// after its delete.
	st.jmu.Lock()
	for len(st.groups) > 0 && st.groups[0].first+st.groups[0].n <= st.lowWater {
		st.groups[0].open = false
		st.deletes = append(st.deletes, st.groups[0].first)
		st.groups[0] = nil
		st.groups = st.groups[1:]
	}
	st.jmu.Unlock()
	if len(st.deletes) >= st.ps.maxDeletes {
		st.manyDeletes.Store(true)
	}
}

func (st *streamStore) changed() {
	st.dirty.Store(true)
	switch {
	case !st.inflight.Load():
		st.submit(false)
	case st.manyDeletes.Load():
		st.submit(true) // a second snapshot in flight, so that batches stay small
	}
}

// maxSnapshotDeletes bounds the journal deletes one progress batch carries
// (persister.maxDeletes may lower it), so that a batch always fits in one
// store transaction; the rest go with the next snapshot (a journal entry
// may be deleted later than the snapshot of its effect, never earlier).
const maxSnapshotDeletes = 1024

func (st *streamStore) pendingLocked() bool {
	return st.dirty.Load() && !st.inflight.Load() && st.failed.Load() == nil
}

func (st *streamStore) save() { st.submit(false) }

func (st *streamStore) flush() { st.submit(true) }

// submit takes a snapshot and submits it, if a change waits for one and,
// unless force, no snapshot is in flight. After a store error the stream
// saves nothing more.
func (st *streamStore) submit(force bool) {
	if st.failed.Load() != nil {
		return
	}
	s := st.s
	st.saving.Lock()
	defer st.saving.Unlock()
	if !st.dirty.Load() || (st.inflight.Load() && !force) {
		return
	}
	s.mu.Lock()
	st.dirty.Store(false) // under mu: a change applied after the snapshot sets it again
	sn := st.snapshotLocked()
	s.mu.Unlock()
	st.inflight.Store(true)
	b, err := st.progressBatch(&sn)
	if err == nil {
		err = st.ps.com.Submit(context.Background(), b, st.done)
	}
	if err != nil {
		st.fail(err)
		st.inflight.Store(false)
	}
}

func (st *streamStore) saveFinal() {
	if st.failed.Load() != nil {
		return
	}
	s := st.s
	st.saving.Lock()
	defer st.saving.Unlock()
	s.mu.Lock()
	st.dirty.Store(false)
	sn := st.snapshotLocked()
	// A stream started by this provider knows every entry it wrote: those
	// whose deletes are submitted, in this batch or left over, and those
	// not deleted yet. Another's journal is searched for in the store.
	var rest [][]byte
	if st.fresh {
		rest = st.journalLeftLocked()
	}
	s.mu.Unlock()
	b, err := st.progressBatch(&sn)
	if err == nil && st.journal && !st.fresh {
		rest, err = st.journalKeys()
	}
	// The final record goes with as many journal deletes as one batch
	// holds; the rest are deleted after it, a batch at a time (the entries
	// of an ended stream are never read again).
	for err == nil {
		for len(rest) > 0 && b.Len() <= st.ps.maxDeletes {
			b.Delete(rest[0])
			rest = rest[1:]
		}
		if err = st.ps.com.Commit(context.Background(), b); err != nil || len(rest) == 0 {
			break
		}
		b.Reset()
	}
	if err != nil {
		st.fail(err)
	}
}

// progressBatch encodes a snapshot into the stream's batch: its progress
// record and the deletes of the journal entries processed since the last.
func (st *streamStore) progressBatch(sn *snapshot) (*persistence.Batch, error) {
	val, err := sn.encode(st.codec)
	if err != nil {
		return nil, fmt.Errorf("stream %q: %w", st.s.id, err)
	}
	b := &st.batch
	b.Reset()
	b.Put(st.progKey, val)
	if sn.delivery != nil {
		b.Put(deliveryKey(st.s.id), sn.delivery.encode())
	}
	for i := range sn.dead {
		r, err := newDeadLetterRecord(&sn.dead[i])
		if err != nil {
			return nil, fmt.Errorf("stream %q: %w", st.s.id, err)
		}
		b.Put(deadLetterKey(st.s.id, r.seq), r.encode())
	}
	// The delete keys share one allocation: they live until the batch is
	// committed, and the stream's batch is reused for the next snapshot.
	if len(sn.deletes) > 0 {
		kl := journalKeyLen(st.s.id)
		keys := make([]byte, 0, kl*len(sn.deletes))
		for _, seq := range sn.deletes {
			n := len(keys)
			keys = appendJournalKey(keys, st.s.id, seq)
			b.Delete(keys[n:len(keys):len(keys)])
		}
	}
	return b, nil
}

// journalLeftLocked returns the keys of the stream's journal entries that
// no snapshot deletes: those of the deletes left over and those of the
// entries not processed whole, which it closes. The stream's mu is held.
func (st *streamStore) journalLeftLocked() [][]byte {
	var keys [][]byte
	for _, seq := range st.deletes {
		keys = append(keys, journalKey(st.s.id, seq))
	}
	st.deletes = nil
	st.jmu.Lock()
	for _, g := range st.groups {
		g.open = false
		keys = append(keys, journalKey(st.s.id, g.first))
	}
	st.groups = nil
	st.jmu.Unlock()
	return keys
}

// journalKeys returns the keys of every journal entry of the stream, once
// the entries submitted before are committed.
func (st *streamStore) journalKeys() ([][]byte, error) {
	ctx := context.Background()
	if err := st.ps.com.Flush(ctx); err != nil {
		return nil, err
	}
	var keys [][]byte
	err := st.ps.store.Scan(ctx, journalPrefix(st.s.id), func(key, _ []byte) error {
		keys = append(keys, append([]byte(nil), key...))
		return nil
	})
	return keys, err
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

// snapshot is a progress record whose values are not encoded yet.
type snapshot struct {
	rec                    progressRecord
	state, lastOut, result rtfs.Value
	deletes                []int64
	dead                   []DeadLetter    // to write beside it
	delivery               *deliveryRecord // to write beside it; nil: unchanged
}

// snapshotLocked copies what the progress record holds; values are
// immutable, so they are encoded after mu is released.
func (st *streamStore) snapshotLocked() snapshot {
	s := st.s
	sn := snapshot{
		rec: progressRecord{
			status: string(s.st), reason: s.reason, message: s.msg, cursor: s.cursor,
			procNext: s.procNext, accSeq: st.accSeq, accID: st.accID,
			lowWater: st.lowWater, extra: append([]int64(nil), st.extra...),
			processed: s.stats.processed, dropped: s.stats.dropped, reconnects: s.stats.reconnects,
			bytes: s.stats.bytes, outputs: s.stats.outputs, latencyNs: -1,
		},
		state: s.state, lastOut: s.lastOut, result: s.result, deletes: st.deletes, dead: st.dead,
	}
	st.dead = nil
	if s.st == StateFailed && s.failure != nil {
		f := *s.failure
		sn.rec.failure = &f
	}
	sn.delivery = st.deliverySnapshotLocked()
	st.deletes = nil
	if limit := st.ps.maxDeletes; len(sn.deletes) > limit {
		st.deletes = append(st.deletes, sn.deletes[limit:]...)
		sn.deletes = sn.deletes[:limit]
		st.dirty.Store(true)
	}
	st.manyDeletes.Store(len(st.deletes) >= st.ps.maxDeletes)
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

// processorName is the name a start request gives its processor by (a
// symbol or a string), "" for a function value.
func processorName(v rtfs.Value) string {
	switch v := v.(type) {
	case rtfs.Symbol:
		return string(v)
	case rtfs.String:
		return string(v)
	}
	return ""
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

// childLocked submits the record of the stream's process group c, or its
// deletion once the group is gone. A store error fails the stream.
func (st *streamStore) childLocked(c transport.ChildProcess, running bool) {
	if st.err() != nil {
		return
	}
	var b persistence.Batch
	key := streamKey(st.s.id, suffixChild)
	if running {
		b.Put(key, (&childRecord{pid: int64(c.PID), start: c.Start, boot: c.Boot}).encode())
	} else {
		b.Delete(key)
	}
	if err := st.ps.com.Submit(context.Background(), &b, st.cdone); err != nil {
		st.fail(fmt.Errorf("record the process group of stream %q: %w", st.s.id, err))
	}
}

// streamIDs returns the ids of the streams the store holds (their
// definition records), in key order. Cost: a listing of the store's stream
// keys (persistence.ScanKeys); no value is read.
func (ps *persister) streamIDs(ctx context.Context) ([]string, error) {
	var ids []string
	err := persistence.ScanKeys(ctx, ps.store, []byte(streamPrefix), func(k []byte) error {
		if id, suffix, _, ok := parseStreamKey(k); ok && suffix == suffixDef {
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the stored streams: %w", err)
	}
	return ids, nil
}

// keyError is a start error about one key of the start request.
type keyError struct {
	key string
	err error
}

func (e *keyError) Error() string { return "start stream: :" + e.key + ": " + e.err.Error() }

func (e *keyError) Unwrap() error { return e.err }

// persistNew attaches the persistence state to a new stream and returns the
// batch of its first records, and what to call once it has committed. A
// stream whose transport cannot replay (transport.Replayable), or that has
// no transport, journals its chunks.
// startSource is what of a start request a new stream's first records
// keep beside its definition.
type startSource struct {
	globals   *rtfs.Globals
	processor rtfs.Value            // the :processor given: its name, or a function
	goProc    bool                  // a Go processor, which is not stored
	journal   *capabilities.Journal // the run's journal, stored with the origin
}

func (ps *persister) persistNew(s *stream, req startSource) (*persistence.Batch, func(), error) {
	var fn rtfs.Value
	if rp, ok := s.proc.(*rtfsProcessor); ok {
		fn = rp.fn
	}
	prog := programOf(req.globals, fn)
	st := newStreamStore(ps, s, codec{prog, s.env.outputLimit}, !replayable(s.def.kind.Transport))
	st.fresh = true
	s.ps = st
	b, stored, err := ps.startRecords(s, req, prog)
	if err != nil {
		return nil, nil, fmt.Errorf("start stream %q: %w", s.id, err)
	}
	return b, stored, nil
}

// startRecords builds the batch that Start commits: the program (once per
// provider), the definition, the first progress record, and the origin
// with the run's journal entries not stored yet; and what to call once the
// batch has committed (PutRunJournal).
func (ps *persister) startRecords(s *stream, req startSource, prog *rtfs.Program) (*persistence.Batch, func(), error) {
	st := s.ps.(*streamStore)
	c := st.codec
	def := defRecord{
		order: s.started.UnixNano(), endpoint: s.def.endpoint, transport: s.def.transport,
		serverURL: stripUserInfo(s.def.serverURL), procName: s.def.procName, capacity: int64(s.def.capacity),
		journal: st.journal, idleMs: idleMillis(s.def.idle), onError: s.def.onError,
	}
	var err error
	if len(s.def.keys) > 0 {
		if def.tkeys, err = json.Marshal(s.def.keys); err != nil {
			return nil, nil, fmt.Errorf("encode transport keys: %w", err)
		}
	}
	switch {
	case req.goProc:
		def.procRef = procGo
	case processorName(req.processor) != "":
		def.procRef, def.procData = procByName, []byte(processorName(req.processor))
	default:
		def.procRef = procByValue
		if def.procData, err = c.marshal(s.proc.function()); err != nil {
			return nil, nil, fmt.Errorf("encode processor: %w", err)
		}
	}
	if g := req.globals; g != nil {
		if def.globals, err = g.MarshalBinaryOpts(rtfs.EncodeOptions{MaxBytes: c.max}); err != nil {
			return nil, nil, fmt.Errorf("encode globals: %w", err)
		}
	}
	if def.initial, err = c.marshal(s.def.initial); err != nil {
		return nil, nil, fmt.Errorf("encode initial state: %w", err)
	}
	if s.def.config != nil {
		if def.config, err = c.marshal(s.def.config); err != nil {
			return nil, nil, fmt.Errorf("encode config: %w", err)
		}
	}
	b := &persistence.Batch{}
	stored := func() {}
	if prog != nil {
		def.progHash = prog.Hash()
		if _, stored := ps.program(prog.Hash()); !stored {
			b.Put(programKey(prog.Hash()), (&programRecord{name: prog.Name(), source: prog.Source()}).encode())
		}
		var head []byte
		head, stored = PutRunJournal(b, req.journal, s.id)
		b.Put(originKey(s.id), newOrigin(prog, s.def.procName, head, s.started).encode())
	}
	b.Put(streamKey(s.id, suffixDef), def.encode())
	s.mu.Lock()
	sn := st.snapshotLocked()
	s.mu.Unlock()
	val, err := sn.encode(c)
	if err != nil {
		return nil, nil, err
	}
	b.Put(st.progKey, val)
	if sn.delivery != nil {
		b.Put(deliveryKey(s.id), sn.delivery.encode())
	}
	return b, stored, nil
}

// takenID says why a start cannot take id, which a stored stream has,
// and what to do: an ended stream's id is free again once it is removed,
// an unfinished one is resumed.
func takenID(ctx context.Context, st persistence.Store, id string) error {
	r, err := loadProgress(ctx, st, id)
	if err != nil {
		return fmt.Errorf("a stream with id %q exists in the store (%v); give another :stream-id, or none for a fresh one", id, err)
	}
	if state := State(r.status); state.Terminal() {
		return fmt.Errorf("a stream with id %q exists in the store, ended (%s): give another :stream-id (or none, for a fresh one), or remove the old one first with rtfshost rm %s", id, state, id)
	}
	if r.status == string(StateFailed) && r.failure != nil && r.failure.Kind == FailureProcessor {
		return fmt.Errorf("a stream with id %q exists in the store, failed on chunk %d (%s): rtfshost resume %s retries the chunk (upgrade it first to fix the processor), rtfshost resume %s --skip sets the chunk aside and goes on; give another :stream-id to start a new one", id, r.failure.Seq, r.failure.Error, id, id)
	}
	return fmt.Errorf("a stream with id %q exists in the store and has not ended (%s): rtfshost resume %s carries it on; give another :stream-id to start a new one", id, r.status, id)
}

// commitStart commits a new stream's records. It refuses an id that the
// store already holds (a persisted stream not recovered). Called with p.mu
// held, so that two starts of one id cannot both commit.
func (ps *persister) commitStart(s *stream, b *persistence.Batch) error {
	ctx := context.Background()
	_, err := ps.store.Get(ctx, streamKey(s.id, suffixDef))
	switch {
	case err == nil:
		return &keyError{"stream-id", takenID(ctx, ps.store, s.id)}
	case !errors.Is(err, persistence.ErrNotFound):
		return fmt.Errorf("start stream %q: read store: %w", s.id, err)
	}
	if err := ps.com.Commit(ctx, b); err != nil {
		return fmt.Errorf("start stream %q: persist its definition: %w", s.id, err)
	}
	if prog := s.ps.(*streamStore).codec.prog; prog != nil {
		ps.addProgram(prog)
	}
	return nil
}
