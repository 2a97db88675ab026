package stream

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/internal/bytecodec"
	"github.com/rtfshost/rtfshost/persistence"
)

// A program run's journal (capabilities.Journal) is stored by appending:
// each batch that needs the journal as it stands (a stream's start, which
// keeps it in its origin record; a program parking on :mcp.stream.await)
// carries the answers recorded since the previous one, once, as a segment
// under the journal's id, and a reference to the journal (Journal.Head: its
// id and how many entries) instead of a copy of it. So the bytes a run
// writes grow with its host calls, not with their square.
//
// Keys, under "journal/<id>/":
//
//	s<first, 8 bytes big-endian>  a segment: the entries first, first+1, ...
//	r                             the run's own reference, while it goes on
//	r/<holder>                    a holder's reference (a stream's id)
//
// The segments of a journal are deleted when its last reference is
// (ReleaseRunJournal): the run's when it ends, a stream's when the stream
// is removed or upgraded to another program.
const RunJournalPrefix = "journal/"

// kindRunJournal is a segment's record kind.
const (
	kindRunJournal    persistence.RecordKind = 8
	kindRunJournalRef persistence.RecordKind = 9
)

func runJournalKey(id string) []byte { return []byte(RunJournalPrefix + id + "/") }

func segmentKey(id string, first int) []byte {
	return binary.BigEndian.AppendUint64(append(runJournalKey(id), 's'), uint64(first))
}

func refPrefix(id string) []byte { return append(runJournalKey(id), 'r') }

func refKey(id, holder string) []byte {
	k := refPrefix(id)
	if holder != "" {
		k = append(append(k, '/'), holder...)
	}
	return k
}

// PutRunJournal adds to b what a reference to j as it stands needs: the
// entries j recorded since it was last stored, as one segment, and the
// references that keep them, holder's (a stream's id; none when "") and,
// with the first segment of a run that goes on (j.Serving), the run's own.
// It returns the reference (j.Head; nil for a nil j) and the function to
// call once b has committed, which marks the entries stored. Cost: the
// head and a segment of the new entries; nothing for those stored before.
func PutRunJournal(b *persistence.Batch, j *capabilities.Journal, holder string) (head []byte, stored func()) {
	if j == nil {
		return nil, func() {}
	}
	seg := j.Unstored()
	head = j.Head()
	if seg.First+seg.Calls == 0 {
		return head, func() {} // no entries: nothing to keep
	}
	if seg.Calls > 0 {
		e := bytecodec.Encoder{B: persistence.AppendRecordHeader(make([]byte, 0, 24+len(seg.Entries)), kindRunJournal, RecordVersion)}
		e.Uint(uint64(seg.Calls))
		e.Bytes(seg.Entries)
		b.Put(segmentKey(seg.ID, seg.First), persistence.FinishRecord(e.B, 0))
		if seg.First == 0 && j.Serving() {
			b.Put(refKey(seg.ID, ""), persistence.EncodeRecord(kindRunJournalRef, RecordVersion, nil))
		}
	}
	if holder != "" {
		b.Put(refKey(seg.ID, holder), persistence.EncodeRecord(kindRunJournalRef, RecordVersion, nil))
	}
	return head, func() { j.Stored(seg) }
}

// ReleaseRunJournal deletes holder's reference to the journal a head refers
// to (holder "" is the run's own), and the journal's segments when no
// reference is left. A head of a journal stored whole (an earlier release's
// snapshot), or of one without entries, holds nothing: it returns nil.
// Cost: a scan of the references, which stops at the first; with none
// left, a scan of the segments and their deletion.
func ReleaseRunJournal(ctx context.Context, st persistence.Store, head []byte, holder string) error {
	return ReleaseRunJournalWith(ctx, st, st.Commit, head, holder)
}

func ReleaseRunJournalWith(ctx context.Context, st persistence.Store, commit func(context.Context, *persistence.Batch) error, head []byte, holder string) error {
	id, ok := capabilities.JournalHeadID(head)
	if !ok {
		return nil
	}
	var b persistence.Batch
	b.Delete(refKey(id, holder))
	if err := commit(ctx, &b); err != nil {
		return fmt.Errorf("release journal %s: %w", id, err)
	}
	held := false
	if err := st.Scan(ctx, refPrefix(id), func(_, _ []byte) error {
		held = true
		return persistence.ErrStopScan
	}); err != nil || held {
		return err
	}
	var keys [][]byte
	if err := st.Scan(ctx, runJournalKey(id), func(key, _ []byte) error {
		keys = append(keys, bytes.Clone(key))
		return nil
	}); err != nil {
		return fmt.Errorf("release journal %s: %w", id, err)
	}
	if err := DeleteKeys(ctx, st, commit, keys); err != nil {
		return fmt.Errorf("delete journal %s: %w", id, err)
	}
	return nil
}

// LoadRunJournal decodes a journal stored by a run: a head (PutRunJournal)
// with the segments it refers to, or a whole snapshot (earlier releases).
// Damage and missing segments are a *persistence.CorruptRecordError naming
// key, the record that holds the journal.
func LoadRunJournal(ctx context.Context, st persistence.Store, key, journal []byte) (*capabilities.Record, error) {
	return LoadRunJournalCached(ctx, st, key, journal, nil)
}

func LoadRunJournalCached(ctx context.Context, st persistence.Store, key, journal []byte, cache *segmentCache) (*capabilities.Record, error) {
	rec, err := capabilities.DecodeJournalFrom(journal, func(id string, calls int) ([]capabilities.JournalSegment, error) {
		if segs := cache.get(id, calls); segs != nil {
			return segs, nil
		}
		segs, err := readSegments(ctx, st, id, calls)
		if err == nil {
			cache.put(id, segs)
		}
		return segs, err
	})
	if err != nil {
		return nil, &persistence.CorruptRecordError{Key: bytes.Clone(key), Reason: "bad journal", Err: err}
	}
	return rec, nil
}

// readSegments reads journal id's segments in order until they hold calls
// entries.
func readSegments(ctx context.Context, st persistence.Store, id string, calls int) ([]capabilities.JournalSegment, error) {
	var segs []capabilities.JournalSegment
	have := 0
	prefix := append(runJournalKey(id), 's')
	err := st.Scan(ctx, prefix, func(key, value []byte) error {
		if len(key) != len(prefix)+8 {
			return &persistence.CorruptRecordError{Key: bytes.Clone(key), Reason: "not a journal segment's key"}
		}
		first := int(binary.BigEndian.Uint64(key[len(prefix):]))
		var seg capabilities.JournalSegment
		err := decodePayload(key, value, kindRunJournal, func(d *bytecodec.Decoder) {
			seg = capabilities.JournalSegment{ID: id, First: first, Calls: d.Count("entry count")}
			seg.Entries = bytes.Clone(d.Bytes("entries"))
		})
		if err != nil {
			return err
		}
		segs = append(segs, seg)
		if have = max(have, first+seg.Calls); have >= calls {
			return persistence.ErrStopScan
		}
		return nil
	})
	return segs, err
}

// A segmentCache keeps the segments of the journal read last, so that the
// streams of one run, recovered one after the other, read them once. It is
// safe for concurrent use; a nil *segmentCache keeps nothing.
type segmentCache struct {
	mu    sync.Mutex
	id    string
	segs  []capabilities.JournalSegment
	calls int
}

func (c *segmentCache) get(id string, calls int) []capabilities.JournalSegment {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.id != id || c.calls < calls {
		return nil
	}
	return c.segs
}

func (c *segmentCache) put(id string, segs []capabilities.JournalSegment) {
	if c == nil || len(segs) == 0 {
		return
	}
	last := segs[len(segs)-1]
	c.mu.Lock()
	defer c.mu.Unlock()
	c.id, c.segs, c.calls = id, segs, last.First+last.Calls
}
