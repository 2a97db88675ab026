package stream

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

// Persister is a provider's persistence: the store, the provider's own
// Committer over it, and the programs saved or loaded by this provider.
type Persister struct {
	Store persistence.Store
	Com   *persistence.Committer
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

	// Journals keeps the run journal read last, for the streams of one
	// run that recovery replays one after the other.
	Journals segmentCache

	mu       sync.Mutex
	programs map[string]*rtfs.Program // by hash: saved (or loaded) by this provider
}

// NewPersister returns the persistence of a provider over store;
// onCommit, if not nil, is told of every commit of its group committer.
func NewPersister(store persistence.Store, onCommit func(persistence.CommitInfo), log *slog.Logger) *Persister {
	copts := persistence.CommitterOptions{OnCommit: onCommit}
	maxDeletes, maxGroupBytes := maxSnapshotDeletes, maxJournalEntry
	if l, ok := store.(persistence.Limited); ok {
		ops, bytes := l.BatchLimits()
		maxDeletes = max(1, min(maxDeletes, ops-8)) // room for the progress record and the start batch
		maxGroupBytes = max(1, min(maxGroupBytes, bytes/4))
	}
	return &Persister{
		Store:         store,
		log:           log,
		Com:           persistence.NewCommitter(store, copts),
		maxDeletes:    maxDeletes,
		maxGroupBytes: maxGroupBytes,
		programs:      make(map[string]*rtfs.Program),
	}
}

// program returns the program with the given hash that this provider has
// stored or loaded, if any.
func (ps *Persister) program(hash string) (*rtfs.Program, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	prog, ok := ps.programs[hash]
	return prog, ok
}

// AddProgram records that prog is in the store.
func (ps *Persister) AddProgram(prog *rtfs.Program) { ps.addProgramAs(prog.Hash(), prog) }

// addProgramAs records that the program stored under hash compiles to
// prog (whose own hash differs when another compiler stored it).
func (ps *Persister) addProgramAs(hash string, prog *rtfs.Program) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.programs[hash] = prog
}

// Codec encodes the values of one stream: with its program's codec, which
// handles closures, or the plain value codec for a stream without a program,
// within the output limit of the provider's processor calls (max, 0: none),
// so that a state too large to store ends the stream instead of the host's
// memory.
type Codec struct {
	Prog *rtfs.Program
	Max  int64
}

func (c Codec) Marshal(v rtfs.Value) ([]byte, error) {
	o := rtfs.EncodeOptions{MaxBytes: c.Max}
	if c.Prog != nil {
		return c.Prog.MarshalValueOpts(v, o)
	}
	return rtfs.MarshalValueOpts(v, o)
}

func (c Codec) Unmarshal(b []byte) (rtfs.Value, error) {
	if c.Prog != nil {
		return c.Prog.UnmarshalValue(b)
	}
	return rtfs.UnmarshalValue(b)
}

// marshalOpt encodes v, or returns nil for a nil Go value (absent).
func (c Codec) marshalOpt(v rtfs.Value) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return c.Marshal(v)
}

// UnmarshalOpt decodes b, or returns nil for empty b (absent).
func (c Codec) UnmarshalOpt(b []byte) (rtfs.Value, error) {
	if len(b) == 0 {
		return nil, nil
	}
	return c.Unmarshal(b)
}

// StreamStore is the persistence state of one stream.
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
type StreamStore struct {
	ps      *Persister
	s       *Stream
	Codec   Codec
	progKey []byte
	journal bool // the source cannot replay: chunks are journaled on arrival

	Saving sync.Mutex // serializes snapshot-and-submit, so snapshots commit in order
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
	st    *StreamStore
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

var _ keeper = (*StreamStore)(nil)

func NewStreamStore(ps *Persister, s *Stream, c Codec, journal bool) *StreamStore {
	st := &StreamStore{ps: ps, s: s, Codec: c, progKey: StreamKey(s.ID, SuffixProg), journal: journal, accSeq: -1}
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
			st.fail(fmt.Errorf("journal a chunk of stream %q: %w", s.ID, err))
		}
	}
	st.cdone = func(err error) {
		if err != nil {
			st.fail(fmt.Errorf("record the process group of stream %q: %w", s.ID, err))
		}
	}
	return st
}

func (st *StreamStore) journaling() bool { return st.journal }

func (st *StreamStore) deadLetterLocked(dl DeadLetter) {
	st.dead = append(st.dead, dl)
	st.dirty.Store(true)
}

// fail records the first store error and wakes the worker, which puts the
// stream in :error. It takes no lock of the stream: the Committer calls it
// from its goroutine.
func (st *StreamStore) fail(err error) {
	st.failed.CompareAndSwap(nil, &err)
	st.s.signal()
}

func (st *StreamStore) Err() error {
	if e := st.failed.Load(); e != nil {
		return *e
	}
	return nil
}

// journalLocked adds c to the stream's open journal entry, or submits an
// entry of its own when none is open: the entry commits no later than any
// snapshot submitted after this call, which is all that can hold c's
// effect.
func (st *StreamStore) journalLocked(ctx context.Context, seq int64, c transport.Chunk) error {
	if err := st.Err(); err != nil {
		return fmt.Errorf("journal chunk %d of stream %q: %w", seq, st.s.ID, err)
	}
	st.jmu.Lock()
	var g *journalGroup
	if n := len(st.groups); n > 0 && st.groups[n-1].open && len(st.groups[n-1].buf)+len(c.Data) < st.ps.maxGroupBytes {
		g = st.groups[n-1]
		g.buf = AppendJournalChunk(g.buf, &c)
		g.n++
		st.jmu.Unlock()
		st.accSeq, st.accID = seq, c.ID
		return nil
	}
	g = &journalGroup{st: st, first: seq, n: 1, open: true}
	g.buf = persistence.AppendRecordHeader(make([]byte, 0, 64+len(c.Data)), KindJournal, JournalVersionGroup)
	g.buf = AppendJournalChunk(g.buf, &c)
	st.groups = append(st.groups, g)
	st.jmu.Unlock()
	if err := st.ps.Com.SubmitLate(ctx, JournalKey(st.s.ID, seq), g.take, st.jdone); err != nil {
		st.jmu.Lock()
		st.groups = st.groups[:len(st.groups)-1] // still the last: mu is held
		st.jmu.Unlock()
		return fmt.Errorf("journal chunk %d of stream %q: %w", seq, st.s.ID, err)
	}
	st.accSeq, st.accID = seq, c.ID
	return nil
}

func (st *StreamStore) awaitJournal(ctx context.Context) error {
	if err := st.ps.Com.Flush(ctx); err != nil {
		return fmt.Errorf("stream %q: wait for the journal: %w", st.s.ID, err)
	}
	return st.Err()
}

func (st *StreamStore) processedLocked(seq int64) {
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

func (st *StreamStore) changed() {
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

func (st *StreamStore) pendingLocked() bool {
	return st.dirty.Load() && !st.inflight.Load() && st.failed.Load() == nil
}

func (st *StreamStore) save() { st.submit(false) }

func (st *StreamStore) Flush() { st.submit(true) }

// submit takes a snapshot and submits it, if a change waits for one and,
// unless force, no snapshot is in flight. After a store error the stream
// saves nothing more.
func (st *StreamStore) submit(force bool) {
	if st.failed.Load() != nil {
		return
	}
	s := st.s
	st.Saving.Lock()
	defer st.Saving.Unlock()
	if !st.dirty.Load() || (st.inflight.Load() && !force) {
		return
	}
	s.Mu.Lock()
	st.dirty.Store(false) // under mu: a change applied after the snapshot sets it again
	sn := st.snapshotLocked()
	s.Mu.Unlock()
	st.inflight.Store(true)
	b, err := st.progressBatch(&sn)
	if err == nil {
		err = st.ps.Com.Submit(context.Background(), b, st.done)
	}
	if err != nil {
		st.fail(err)
		st.inflight.Store(false)
	}
}

func (st *StreamStore) saveFinal() {
	if st.failed.Load() != nil {
		return
	}
	s := st.s
	st.Saving.Lock()
	defer st.Saving.Unlock()
	s.Mu.Lock()
	st.dirty.Store(false)
	sn := st.snapshotLocked()
	// A stream started by this provider knows every entry it wrote: those
	// whose deletes are submitted, in this batch or left over, and those
	// not deleted yet. Another's journal is searched for in the store.
	var rest [][]byte
	if st.fresh {
		rest = st.journalLeftLocked()
	}
	s.Mu.Unlock()
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
		if err = st.ps.Com.Commit(context.Background(), b); err != nil || len(rest) == 0 {
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
func (st *StreamStore) progressBatch(sn *snapshot) (*persistence.Batch, error) {
	val, err := sn.Encode(st.Codec)
	if err != nil {
		return nil, fmt.Errorf("stream %q: %w", st.s.ID, err)
	}
	b := &st.batch
	b.Reset()
	b.Put(st.progKey, val)
	if sn.delivery != nil {
		b.Put(DeliveryKey(st.s.ID), sn.delivery.Encode())
	}
	for i := range sn.dead {
		r, err := NewDeadLetterRecord(&sn.dead[i])
		if err != nil {
			return nil, fmt.Errorf("stream %q: %w", st.s.ID, err)
		}
		b.Put(DeadLetterKey(st.s.ID, r.seq), r.Encode())
	}
	// The delete keys share one allocation: they live until the batch is
	// committed, and the stream's batch is reused for the next snapshot.
	if len(sn.deletes) > 0 {
		kl := journalKeyLen(st.s.ID)
		keys := make([]byte, 0, kl*len(sn.deletes))
		for _, seq := range sn.deletes {
			n := len(keys)
			keys = appendJournalKey(keys, st.s.ID, seq)
			b.Delete(keys[n:len(keys):len(keys)])
		}
	}
	return b, nil
}

// journalLeftLocked returns the keys of the stream's journal entries that
// no snapshot deletes: those of the deletes left over and those of the
// entries not processed whole, which it closes. The stream's mu is held.
func (st *StreamStore) journalLeftLocked() [][]byte {
	var keys [][]byte
	for _, seq := range st.deletes {
		keys = append(keys, JournalKey(st.s.ID, seq))
	}
	st.deletes = nil
	st.jmu.Lock()
	for _, g := range st.groups {
		g.open = false
		keys = append(keys, JournalKey(st.s.ID, g.first))
	}
	st.groups = nil
	st.jmu.Unlock()
	return keys
}

// journalKeys returns the keys of every journal entry of the stream, once
// the entries submitted before are committed.
func (st *StreamStore) journalKeys() ([][]byte, error) {
	ctx := context.Background()
	if err := st.ps.Com.Flush(ctx); err != nil {
		return nil, err
	}
	var keys [][]byte
	err := st.ps.Store.Scan(ctx, JournalPrefix(st.s.ID), func(key, _ []byte) error {
		keys = append(keys, append([]byte(nil), key...))
		return nil
	})
	return keys, err
}

// processed reports whether journaled seq is processed according to a
// progress record.
func (r *ProgressRecord) processedSeq(seq int64) bool {
	if seq < r.lowWater {
		return true
	}
	i := sort.Search(len(r.Extra), func(i int) bool { return r.Extra[i] >= seq })
	return i < len(r.Extra) && r.Extra[i] == seq
}

// snapshot is a progress record whose values are not encoded yet.
type snapshot struct {
	rec                    ProgressRecord
	state, lastOut, result rtfs.Value
	deletes                []int64
	dead                   []DeadLetter    // to write beside it
	delivery               *DeliveryRecord // to write beside it; nil: unchanged
}

// snapshotLocked copies what the progress record holds; values are
// immutable, so they are encoded after mu is released.
func (st *StreamStore) snapshotLocked() snapshot {
	s := st.s
	sn := snapshot{
		rec: ProgressRecord{
			Status: string(s.St), Reason: s.reason, Message: s.Msg, Cursor: s.Cursor,
			ProcNext: s.procNext, accSeq: st.accSeq, accID: st.accID,
			lowWater: st.lowWater, Extra: append([]int64(nil), st.extra...),
			Processed: s.Stats.Processed, Dropped: s.Stats.Dropped, Reconnects: s.Stats.Reconnects,
			Bytes: s.Stats.Bytes, Outputs: s.Stats.Outputs, LatencyNs: -1,
		},
		state: s.State, lastOut: s.LastOut, result: s.Result, deletes: st.deletes, dead: st.dead,
	}
	st.dead = nil
	if s.St == StateFailed && s.failure != nil {
		f := *s.failure
		sn.rec.Failure = &f
	}
	sn.delivery = st.deliverySnapshotLocked()
	st.deletes = nil
	if limit := st.ps.maxDeletes; len(sn.deletes) > limit {
		st.deletes = append(st.deletes, sn.deletes[limit:]...)
		sn.deletes = sn.deletes[:limit]
		st.dirty.Store(true)
	}
	st.manyDeletes.Store(len(st.deletes) >= st.ps.maxDeletes)
	if s.Stats.hasLatency {
		sn.rec.LatencyNs = int64(s.Stats.latency)
	}
	if !s.Stats.lastEvent.IsZero() {
		sn.rec.lastEvent = s.Stats.lastEvent.UnixMilli()
	}
	if !s.resumeAt.IsZero() {
		sn.rec.ResumeAt = s.resumeAt.UnixMilli()
	}
	return sn
}

// Encode fills the record's value fields and returns the framed record.
func (sn *snapshot) Encode(c Codec) ([]byte, error) {
	var err error
	if sn.rec.State, err = c.Marshal(sn.state); err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	if sn.rec.LastOut, err = c.marshalOpt(sn.lastOut); err != nil {
		return nil, fmt.Errorf("encode last output: %w", err)
	}
	if sn.rec.Result, err = c.marshalOpt(sn.result); err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return sn.rec.Encode(), nil
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

// ProgramOf returns the program a stream's processor belongs to: that of the
// globals, else that of the function.
func ProgramOf(g *rtfs.Globals, fn rtfs.Value) *rtfs.Program {
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

// StripUserInfo removes credentials from a URL before it is stored.
func StripUserInfo(raw string) string {
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
func (st *StreamStore) childLocked(c transport.ChildProcess, running bool) {
	if st.Err() != nil {
		return
	}
	var b persistence.Batch
	key := StreamKey(st.s.ID, SuffixChild)
	if running {
		b.Put(key, (&ChildRecord{Pid: int64(c.PID), Start: c.Start, Boot: c.Boot}).Encode())
	} else {
		b.Delete(key)
	}
	if err := st.ps.Com.Submit(context.Background(), &b, st.cdone); err != nil {
		st.fail(fmt.Errorf("record the process group of stream %q: %w", st.s.ID, err))
	}
}

// StreamIDs returns the ids of the streams the store holds (their
// definition records), in key order. Cost: a listing of the store's stream
// keys (persistence.ScanKeys); no value is read.
func (ps *Persister) StreamIDs(ctx context.Context) ([]string, error) {
	var ids []string
	err := persistence.ScanKeys(ctx, ps.Store, []byte(StreamPrefix), func(k []byte) error {
		if id, suffix, _, ok := ParseStreamKey(k); ok && suffix == SuffixDef {
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the stored streams: %w", err)
	}
	return ids, nil
}

// KeyError is a start error about one key of the start request.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return "start stream: :" + e.Key + ": " + e.Err.Error() }

func (e *KeyError) Unwrap() error { return e.Err }

// A StartSource is what of a start request a new stream's first records
// keep beside its definition.
type StartSource struct {
	Globals   *rtfs.Globals
	Processor rtfs.Value            // the :processor given: its name, or a function
	GoProc    bool                  // a Go processor, which is not stored
	Journal   *capabilities.Journal // the run's journal, stored with the origin
}

// PersistNew attaches the persistence state to a new stream and returns the
// batch of its first records, and what to call once it has committed. A
// stream whose transport cannot replay (transport.Replayable), or that has
// no transport, journals its chunks.
func (ps *Persister) PersistNew(s *Stream, req StartSource) (*persistence.Batch, func(), error) {
	var fn rtfs.Value
	if rp, ok := s.Proc.(*RTFSProcessor); ok {
		fn = rp.fn
	}
	prog := ProgramOf(req.Globals, fn)
	st := NewStreamStore(ps, s, Codec{prog, s.Env.OutputLimit}, !replayable(s.Def.Kind.Transport))
	st.fresh = true
	s.Ps = st
	b, stored, err := ps.startRecords(s, req, prog)
	if err != nil {
		return nil, nil, fmt.Errorf("start stream %q: %w", s.ID, err)
	}
	return b, stored, nil
}

// startRecords builds the batch that Start commits: the program (once per
// provider), the definition, the first progress record, and the origin
// with the run's journal entries not stored yet; and what to call once the
// batch has committed (PutRunJournal).
func (ps *Persister) startRecords(s *Stream, req StartSource, prog *rtfs.Program) (*persistence.Batch, func(), error) {
	st := s.Ps.(*StreamStore)
	c := st.Codec
	def := DefRecord{
		Order: s.Started.UnixNano(), Endpoint: s.Def.Endpoint, Transport: s.Def.Transport,
		ServerURL: StripUserInfo(s.Def.ServerURL), ProcName: s.Def.ProcName, Capacity: int64(s.Def.Capacity),
		Journal: st.journal, IdleMs: idleMillis(s.Def.Idle), OnError: s.Def.OnError,
	}
	var err error
	if len(s.Def.Keys) > 0 {
		if def.Tkeys, err = json.Marshal(s.Def.Keys); err != nil {
			return nil, nil, fmt.Errorf("encode transport keys: %w", err)
		}
	}
	switch {
	case req.GoProc:
		def.ProcRef = ProcGo
	case processorName(req.Processor) != "":
		def.ProcRef, def.ProcData = ProcByName, []byte(processorName(req.Processor))
	default:
		def.ProcRef = ProcByValue
		if def.ProcData, err = c.Marshal(s.Proc.Function()); err != nil {
			return nil, nil, fmt.Errorf("encode processor: %w", err)
		}
	}
	if g := req.Globals; g != nil {
		if def.Globals, err = g.MarshalBinaryOpts(rtfs.EncodeOptions{MaxBytes: c.Max}); err != nil {
			return nil, nil, fmt.Errorf("encode globals: %w", err)
		}
	}
	if def.Initial, err = c.Marshal(s.Def.Initial); err != nil {
		return nil, nil, fmt.Errorf("encode initial state: %w", err)
	}
	if s.Def.Config != nil {
		if def.Config, err = c.Marshal(s.Def.Config); err != nil {
			return nil, nil, fmt.Errorf("encode config: %w", err)
		}
	}
	b := &persistence.Batch{}
	stored := func() {}
	if prog != nil {
		def.ProgHash = prog.Hash()
		if _, stored := ps.program(prog.Hash()); !stored {
			b.Put(ProgramKey(prog.Hash()), (&ProgramRecord{Name: prog.Name(), Source: prog.Source()}).Encode())
		}
		var head []byte
		head, stored = PutRunJournal(b, req.Journal, s.ID)
		b.Put(OriginKey(s.ID), newOrigin(prog, s.Def.ProcName, head, s.Started).Encode())
	}
	b.Put(StreamKey(s.ID, SuffixDef), def.Encode())
	s.Mu.Lock()
	sn := st.snapshotLocked()
	s.Mu.Unlock()
	val, err := sn.Encode(c)
	if err != nil {
		return nil, nil, err
	}
	b.Put(st.progKey, val)
	if sn.delivery != nil {
		b.Put(DeliveryKey(s.ID), sn.delivery.Encode())
	}
	return b, stored, nil
}

// takenID says why a start cannot take id, which a stored stream has,
// and what to do: an ended stream's id is free again once it is removed,
// an unfinished one is resumed.
func takenID(ctx context.Context, st persistence.Store, id string) error {
	r, err := LoadProgress(ctx, st, id)
	if err != nil {
		return fmt.Errorf("a stream with id %q exists in the store (%v); give another :stream-id, or none for a fresh one", id, err)
	}
	if state := State(r.Status); state.Terminal() {
		return fmt.Errorf("a stream with id %q exists in the store, ended (%s): give another :stream-id (or none, for a fresh one), or remove the old one first with rtfshost rm %s", id, state, id)
	}
	if r.Status == string(StateFailed) && r.Failure != nil && r.Failure.Kind == FailureProcessor {
		return fmt.Errorf("a stream with id %q exists in the store, failed on chunk %d (%s): rtfshost resume %s retries the chunk (upgrade it first to fix the processor), rtfshost resume %s --skip sets the chunk aside and goes on; give another :stream-id to start a new one", id, r.Failure.Seq, r.Failure.Error, id, id)
	}
	return fmt.Errorf("a stream with id %q exists in the store and has not ended (%s): rtfshost resume %s carries it on; give another :stream-id to start a new one", id, r.Status, id)
}

// CommitStart commits a new stream's records. It refuses an id that the
// store already holds (a persisted stream not recovered). Called with p.mu
// held, so that two starts of one id cannot both commit.
func (ps *Persister) CommitStart(s *Stream, b *persistence.Batch) error {
	ctx := context.Background()
	_, err := ps.Store.Get(ctx, StreamKey(s.ID, SuffixDef))
	switch {
	case err == nil:
		return &KeyError{"stream-id", takenID(ctx, ps.Store, s.ID)}
	case !errors.Is(err, persistence.ErrNotFound):
		return fmt.Errorf("start stream %q: read store: %w", s.ID, err)
	}
	if err := ps.Com.Commit(ctx, b); err != nil {
		return fmt.Errorf("start stream %q: persist its definition: %w", s.ID, err)
	}
	if prog := s.Ps.(*StreamStore).Codec.Prog; prog != nil {
		ps.AddProgram(prog)
	}
	return nil
}
