package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// Loaded is one stream's records as read from the store.
type Loaded struct {
	ID       string
	Def      *DefRecord
	Progress *ProgressRecord
	journal  []journalEntry // in seq order
	Child    *ChildRecord   // the process group its transport ran, if recorded (children.go)
	err      error          // the first bad record
}

// ScanStreams reads the stream records under prefix, grouped by stream and
// sorted by start order. A record that cannot be decoded marks its stream.
func (ps *Persister) ScanStreams(ctx context.Context, prefix []byte) ([]*Loaded, error) {
	byID := map[string]*Loaded{}
	var list []*Loaded
	err := ps.Store.Scan(ctx, prefix, func(key, value []byte) error {
		id, suffix, seq, ok := ParseStreamKey(key)
		if !ok {
			ps.log.Warn("unexpected key in the store", "key", fmt.Sprintf("%q", key))
			return nil
		}
		l := byID[id]
		if l == nil {
			l = &Loaded{ID: id}
			byID[id] = l
			list = append(list, l)
		}
		if l.err == nil {
			l.err = l.Add(key, append([]byte(nil), value...), suffix, seq)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(list, func(i, j int) bool { return orderOf(list[i]) < orderOf(list[j]) })
	return list, nil
}

func orderOf(l *Loaded) int64 {
	if l.Def == nil {
		return 0
	}
	return l.Def.Order
}

// Add decodes one record of the stream.
func (l *Loaded) Add(key, value []byte, suffix byte, seq int64) error {
	switch suffix {
	case SuffixDef:
		l.Def = &DefRecord{}
		return l.Def.Decode(key, value)
	case SuffixProg:
		l.Progress = &ProgressRecord{}
		return l.Progress.Decode(key, value)
	case SuffixJournal:
		entries, err := DecodeJournal(key, value, seq)
		if err != nil {
			return err
		}
		// Keys come in seq order; an entry never holds a chunk of the next.
		if n := len(l.journal); n > 0 && l.journal[n-1].Seq >= seq {
			return &persistence.CorruptRecordError{Key: append([]byte(nil), key...),
				Reason: fmt.Sprintf("journal entry %d overlaps the one before, which holds chunks up to %d", seq, l.journal[n-1].Seq)}
		}
		l.journal = append(l.journal, entries...)
		return nil
	case SuffixChild:
		l.Child = &ChildRecord{}
		return l.Child.Decode(key, value)
	}
	return &persistence.CorruptRecordError{Key: key, Reason: fmt.Sprintf("unknown record suffix %q", suffix)}
}

// Complete reports why the records of l cannot rebuild its stream: one is
// damaged, or its definition or progress record is missing.
func (l *Loaded) Complete() error {
	switch {
	case l.err != nil:
		return l.err
	case l.Def == nil:
		return &persistence.CorruptRecordError{Key: StreamKey(l.ID, SuffixDef), Reason: "the stream's definition record is missing"}
	case l.Progress == nil:
		return &persistence.CorruptRecordError{Key: StreamKey(l.ID, SuffixProg), Reason: "the stream's progress record is missing"}
	}
	return nil
}

// LoadProgram returns the program with the given hash: one this provider
// knows, else compiled from the stored source. "" means no program. A
// program that this build compiles to another hash (another compiler or
// prelude) is returned all the same: the caller sees the hashes differ and
// replays it (origin.go).
func (ps *Persister) LoadProgram(ctx context.Context, hash string) (*rtfs.Program, error) {
	if hash == "" {
		return nil, nil
	}
	if prog, ok := ps.program(hash); ok {
		return prog, nil
	}
	key := ProgramKey(hash)
	data, err := ps.Store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("load program %s: %w", hash, err)
	}
	var rec ProgramRecord
	if err := rec.Decode(key, data); err != nil {
		return nil, err
	}
	prog, err := rtfs.Compile(rec.Name, rec.Source)
	if err != nil {
		return nil, fmt.Errorf("recompile program %s (%s): %w", rec.Name, hash, err)
	}
	if prog.Hash() != hash {
		ps.addProgramAs(hash, prog)
		return prog, nil
	}
	ps.AddProgram(prog)
	return prog, nil
}

// RestoreProgress sets the stream's status, state, stats and cursor from its
// progress record, and queues its unprocessed journaled chunks.
func (st *StreamStore) RestoreProgress(l *Loaded) error {
	s := st.s
	r, c := l.Progress, st.Codec
	var err error
	if s.State, err = c.Unmarshal(r.State); err != nil {
		return fmt.Errorf("decode state: %w", err)
	}
	if s.LastOut, err = c.UnmarshalOpt(r.LastOut); err != nil {
		return fmt.Errorf("decode last output: %w", err)
	}
	if s.Result, err = c.UnmarshalOpt(r.Result); err != nil {
		return fmt.Errorf("decode result: %w", err)
	}
	s.St, s.reason, s.Msg, s.Cursor = State(r.Status), r.Reason, r.Message, r.Cursor
	switch s.St {
	case StateActive, StatePaused, StateCompleted, StateCancelled, StateError:
	case StateFailed:
		if r.Failure == nil {
			return &persistence.CorruptRecordError{Key: st.progKey, Reason: "a failed stream without its failure"}
		}
		f := *r.Failure
		s.failure = &f
	default:
		return &persistence.CorruptRecordError{Key: st.progKey, Reason: fmt.Sprintf("unknown status %q", r.Status)}
	}
	s.Stats = Stats{Processed: r.Processed, Dropped: r.Dropped, Reconnects: r.Reconnects, Bytes: r.Bytes, Outputs: r.Outputs}
	if r.LatencyNs >= 0 {
		s.Stats.latency, s.Stats.hasLatency = time.Duration(r.LatencyNs), true
	}
	if r.lastEvent != 0 {
		s.Stats.lastEvent = time.UnixMilli(r.lastEvent)
	}
	if r.ResumeAt != 0 {
		s.resumeAt = time.UnixMilli(r.ResumeAt)
	}
	s.procNext, s.seq, s.StartCursor = r.ProcNext, r.ProcNext, r.Cursor
	if st.journal {
		st.restoreJournal(l)
	}
	return nil
}

// restoreJournal queues the journaled chunks the progress record does not
// count as processed, in seq order, and sets the cursor the source resumes
// after: that of the last chunk the stream took.
func (st *StreamStore) restoreJournal(l *Loaded) {
	s, r := st.s, l.Progress
	st.accSeq, st.accID = r.accSeq, r.accID
	next := r.ProcNext
	if r.accSeq >= next {
		next = r.accSeq + 1
	}
	low := int64(-1)
	for i := 0; i < len(l.journal); {
		// The chunks of one entry: those that share its first seq.
		j := i + 1
		for j < len(l.journal) && l.journal[j].First == l.journal[i].First {
			j++
		}
		entry, whole := l.journal[i:j], true
		i = j
		for _, e := range entry {
			if r.processedSeq(e.Seq) {
				continue
			}
			whole = false
			if low < 0 {
				low = e.Seq
			}
			c := transport.Chunk{Data: e.Rec.Data, Event: e.Rec.Event, ID: e.Rec.ID, ReceivedAt: time.Unix(0, e.Rec.Received), FD: e.Rec.Fd}
			chunk := DecodeChunkInto(&s.dec, c.Data, c.Event, nil)
			s.requeueLocked(c, chunk, e.Seq)
			if e.Seq >= next {
				next = e.Seq + 1
			}
			if e.Seq > st.accSeq {
				st.accSeq, st.accID = e.Seq, e.Rec.ID
			}
		}
		if whole {
			st.deletes = append(st.deletes, entry[0].First)
		} else {
			st.groups = append(st.groups, &journalGroup{st: st, first: entry[0].First, n: int64(len(entry))})
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
	for _, x := range r.Extra {
		if x > low {
			st.extra = append(st.extra, x)
		}
	}
	if st.accSeq >= 0 {
		s.StartCursor = st.accID
	}
}

// Leftover reports whether l holds nothing but a child record: one written
// as its stream was removed (the stream's transport can still start a
// program while the stream ends), which recovery ignores.
func (l *Loaded) Leftover() bool {
	return l.err == nil && l.Def == nil && l.Progress == nil && len(l.journal) == 0 && l.Child != nil
}

// Unrecoverable makes the stream of l, which could not be restored
// because of cause, for the provider to list in StateUnrecoverable (its done channel still
// open).
func Unrecoverable(env *StreamEnv, l *Loaded, cause error) *Stream {
	if inner := errors.Unwrap(cause); inner != nil {
		cause = inner // without "provider: recover stream ...": the stream is named already
	}
	var def Definition
	c := Codec{} // functions cannot be trusted here: plain data only
	if d := l.Def; d != nil {
		def = Definition{Endpoint: d.Endpoint, Transport: d.Transport, ServerURL: d.ServerURL, ProcName: d.ProcName, Capacity: int(d.Capacity)}
		def.Initial, _ = c.UnmarshalOpt(d.Initial)
	}
	s := NewStream(env, l.ID, def, nil)
	if l.Def != nil {
		if l.Def.Order > 0 {
			s.Started = time.Unix(0, l.Def.Order)
		}
		s.History = (*OriginRecord)(nil).HistoryOf(l.Def, "")
	}
	if r := l.Progress; r != nil {
		s.State, _ = c.UnmarshalOpt(r.State)
		s.LastOut, _ = c.UnmarshalOpt(r.LastOut)
		s.Cursor = r.Cursor
		s.Stats = Stats{Processed: r.Processed, Dropped: r.Dropped, Reconnects: r.Reconnects, Bytes: r.Bytes, Outputs: r.Outputs}
	}
	s.St, s.Msg = StateUnrecoverable, cause.Error()
	s.Dormant, s.Exited = true, true
	s.Cancel()
	return s
}

// DefinitionOf returns the definition that d, the definition record of
// stream id, stores, with the delivery policy and milestones of dr (nil:
// none), its values read with c. The transport's kind is left for the
// provider to choose from its catalog.
func DefinitionOf(id string, d *DefRecord, dr *DeliveryRecord, c Codec) (Definition, error) {
	def := Definition{Endpoint: d.Endpoint, Transport: d.Transport, ServerURL: d.ServerURL, ProcName: d.ProcName, Capacity: int(d.Capacity)}
	if def.Capacity <= 0 {
		return def, &persistence.CorruptRecordError{Key: StreamKey(id, SuffixDef), Reason: fmt.Sprintf("queue capacity %d", d.Capacity)}
	}
	def.Idle = time.Duration(d.IdleMs) * time.Millisecond
	def.OnError = d.OnError
	if dr != nil {
		def.Delivery, def.Milestones = dr.Delivery, dr.Milestones
	}
	if len(d.Tkeys) > 0 {
		if err := json.Unmarshal(d.Tkeys, &def.Keys); err != nil {
			return def, &persistence.CorruptRecordError{Key: StreamKey(id, SuffixDef), Reason: fmt.Sprintf("transport keys: %v", err)}
		}
	}
	var err error
	if def.Initial, err = c.Unmarshal(d.Initial); err != nil {
		return def, fmt.Errorf("decode initial state: %w", err)
	}
	if cfg, err := c.UnmarshalOpt(d.Config); err != nil {
		return def, fmt.Errorf("decode config: %w", err)
	} else if m, ok := cfg.(*rtfs.Map); ok {
		def.Config = m
	}
	return def, nil
}

// Restore makes the stream of the records l, with definition def and
// processor proc, as it stood when its last record was written: its start
// time, its program's history, the child process its transport left, its
// progress (read with c), the delivery marks of dr and its count of dead
// letters. It runs nothing: the provider registers and launches it.
func Restore(ctx context.Context, env *StreamEnv, ps *Persister, l *Loaded, def Definition, proc Processor, c Codec, history []ProgramVersion, dr *DeliveryRecord) (*Stream, error) {
	d := l.Def
	s := NewStream(env, l.ID, def, proc)
	s.Recovered = true
	s.History = history
	if l.Child != nil {
		s.Stale = l.Child.Process()
	}
	if d.Order > 0 {
		s.Started = time.Unix(0, d.Order)
	}
	st := NewStreamStore(ps, s, c, d.Journal)
	s.Ps = st
	if err := st.RestoreProgress(l); err != nil {
		s.Cancel()
		return nil, err
	}
	st.RestoreDelivery(dr)
	var err error
	if s.Dead, err = CountDeadLetters(ctx, ps.Store, l.ID); err != nil {
		s.Cancel()
		return nil, err
	}
	return s, nil
}
