package provider

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// loaded is one stream's records as read from the store.
type loaded struct {
	id       string
	def      *defRecord
	progress *progressRecord
	journal  []journalEntry // in seq order
	child    *childRecord   // the process group its transport ran, if recorded (children.go)
	err      error          // the first bad record
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

// leftover reports whether l holds nothing but a child record: one written
// as its stream was removed (the stream's transport can still start a
// program while the stream ends), which recovery ignores.
func (l *loaded) leftover() bool {
	return l.err == nil && l.def == nil && l.progress == nil && len(l.journal) == 0 && l.child != nil
}
