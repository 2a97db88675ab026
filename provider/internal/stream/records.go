package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/internal/bytecodec"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/transport"
)

// The record kinds the provider stores (persistence.RecordKind). Kinds 16 and
// above are left to the host.
const (
	kindProgram    persistence.RecordKind = 1
	kindDefinition persistence.RecordKind = 2
	KindProgress   persistence.RecordKind = 3
	KindJournal    persistence.RecordKind = 4
	KindChild      persistence.RecordKind = 5
	kindOrigin     persistence.RecordKind = 6 // origin.go
	KindDelivery   persistence.RecordKind = 7 // deliveryrec.go
	kindDeadLetter persistence.RecordKind = 8 // deadletter.go
)

// RecordVersion is the format version of every provider record; a record of a
// newer version is refused with a *persistence.UnknownVersionError.
const RecordVersion = 1

// Key layout. A stream id never contains a NUL byte (Start refuses one), so
// the NUL separates it from the record's suffix.
const (
	ProgramPrefix = "prog/"
	StreamPrefix  = "stream/"
	SuffixDef     = 'd'
	SuffixProg    = 'p'
	SuffixJournal = 'j'
	SuffixChild   = 'c'
)

func ProgramKey(hash string) []byte { return []byte(ProgramPrefix + hash) }

func StreamKey(id string, suffix byte) []byte {
	k := make([]byte, 0, len(StreamPrefix)+len(id)+2)
	k = append(k, StreamPrefix...)
	k = append(k, id...)
	return append(k, 0, suffix)
}

func JournalKey(id string, seq int64) []byte {
	return appendJournalKey(make([]byte, 0, journalKeyLen(id)), id, seq)
}

// journalKeyLen is the length of every journal key of stream id.
func journalKeyLen(id string) int { return len(StreamPrefix) + len(id) + 2 + 8 }

// appendJournalKey appends the key of stream id's journal entry seq to dst.
func appendJournalKey(dst []byte, id string, seq int64) []byte {
	dst = append(dst, StreamPrefix...)
	dst = append(dst, id...)
	dst = append(dst, 0, SuffixJournal)
	return binary.BigEndian.AppendUint64(dst, uint64(seq))
}

// JournalPrefix is the prefix of every journal key of stream id.
func JournalPrefix(id string) []byte { return StreamKey(id, SuffixJournal) }

// ParseStreamKey splits a key under StreamPrefix into the stream id, the
// suffix and, for a journal key, the chunk's seq. ok is false for a key of
// another shape.
func ParseStreamKey(key []byte) (id string, suffix byte, seq int64, ok bool) {
	rest := key[len(StreamPrefix):]
	for i, b := range rest {
		if b != 0 {
			continue
		}
		if i+1 >= len(rest) {
			return "", 0, 0, false
		}
		id, suffix = string(rest[:i]), rest[i+1]
		tail := rest[i+2:]
		switch {
		case suffix == SuffixJournal && len(tail) == 8:
			return id, suffix, int64(binary.BigEndian.Uint64(tail)), true
		case suffix != SuffixJournal && len(tail) == 0:
			return id, suffix, 0, true
		}
		return "", 0, 0, false
	}
	return "", 0, 0, false
}

// decodePayload checks a record's framing and hands its payload to read.
// Every failure names the key: an unknown version is the
// *persistence.UnknownVersionError, anything else a
// *persistence.CorruptRecordError.
func decodePayload(key, data []byte, kind persistence.RecordKind, read func(d *bytecodec.Decoder)) error {
	_, payload, err := persistence.DecodeRecord(key, data, kind, RecordVersion)
	if err != nil {
		return err
	}
	d := bytecodec.NewDecoder(payload)
	read(d)
	if err := d.End(); err != nil {
		return &persistence.CorruptRecordError{Key: append([]byte(nil), key...), Reason: "bad payload", Err: err}
	}
	return nil
}

// ProgramRecord is a program's name and source, stored under its hash.
type ProgramRecord struct {
	Name   string
	Source []byte
}

func (r *ProgramRecord) Encode() []byte {
	e := bytecodec.Encoder{B: make([]byte, 0, len(r.Source)+len(r.Name)+8)}
	e.Str(r.Name)
	e.Bytes(r.Source)
	return persistence.EncodeRecord(kindProgram, RecordVersion, e.B)
}

func (r *ProgramRecord) Decode(key, data []byte) error {
	return decodePayload(key, data, kindProgram, func(d *bytecodec.Decoder) {
		r.Name = d.Str("name")
		r.Source = append([]byte(nil), d.Bytes("source")...)
	})
}

// Processor references in a definition record.
const (
	ProcByName  = 1 // a global of the program, looked up by name on recovery
	ProcByValue = 2 // a function value encoded with the program's value codec
	ProcGo      = 3 // a Go processor (tests): cannot be recovered
)

// DefRecord is the persisted definition of a stream: everything needed to
// rebuild it, without secrets (the auth header is resolved again from the
// environment).
type DefRecord struct {
	Order     int64 // start time in unix nanoseconds: recovery keeps start order
	Endpoint  string
	Transport string
	ServerURL string // the stream's resolved server URL without user info
	ProcName  string
	ProcRef   uint64
	ProcData  []byte // the global's name, or the encoded function
	ProgHash  string // "" without a program
	Globals   []byte
	Initial   []byte
	Capacity  int64
	Config    []byte // encoded :config map, empty if none
	Journal   bool
	IdleMs    int64       // the start call's idle timeout in ms: 0 default, -1 none (absent in older records)
	Tkeys     []byte      // the transport's own start keys as a JSON object, empty if none (absent in older records)
	OnError   ErrorPolicy // the start's :on-error (absent in older records: hold)
}

func (r *DefRecord) Encode() []byte {
	e := bytecodec.Encoder{B: make([]byte, 0, 64+len(r.ProcData)+len(r.Globals)+len(r.Initial)+len(r.Config))}
	e.Int(r.Order)
	e.Str(r.Endpoint)
	e.Str(r.Transport)
	e.Str(r.ServerURL)
	e.Str(r.ProcName)
	e.Uint(r.ProcRef)
	e.Bytes(r.ProcData)
	e.Str(r.ProgHash)
	e.Bytes(r.Globals)
	e.Bytes(r.Initial)
	e.Int(r.Capacity)
	e.Bytes(r.Config)
	e.Bool(r.Journal)
	e.Int(r.IdleMs)
	e.Bytes(r.Tkeys)
	e.Int(int64(r.OnError.Retry))
	e.Int(r.OnError.Backoff.Milliseconds())
	e.Str(r.OnError.then())
	return persistence.EncodeRecord(kindDefinition, RecordVersion, e.B)
}

func (r *DefRecord) Decode(key, data []byte) error {
	return decodePayload(key, data, kindDefinition, func(d *bytecodec.Decoder) {
		r.Order = d.Int("order")
		r.Endpoint = d.Str("endpoint")
		r.Transport = d.Str("transport")
		r.ServerURL = d.Str("server-url")
		r.ProcName = d.Str("processor name")
		r.ProcRef = d.Uint("processor reference")
		r.ProcData = d.Bytes("processor")
		r.ProgHash = d.Str("program hash")
		r.Globals = d.Bytes("globals")
		r.Initial = d.Bytes("initial state")
		r.Capacity = d.Int("queue capacity")
		r.Config = d.Bytes("config")
		r.Journal = d.Bool("journal")
		if d.More() { // added after the first release: older records end here
			r.IdleMs = d.Int("idle timeout")
		}
		if d.More() {
			r.Tkeys = d.Bytes("transport keys")
		}
		if d.More() {
			r.OnError.Retry = int(d.Int("on-error retry"))
			r.OnError.Backoff = time.Duration(d.Int("on-error backoff")) * time.Millisecond
			r.OnError.Then = d.Str("on-error then")
		}
	})
}

// ProgressRecord is a stream's progress after a processed chunk or a change
// of status: its state and cursor always together.
type ProgressRecord struct {
	Status     string
	Reason     string
	Message    string
	Cursor     string
	ProcNext   int64 // seq after the last processed chunk
	accSeq     int64 // seq of the last chunk taken (journal mode); -1: none
	accID      string
	lowWater   int64   // journal mode: every seq below it is processed
	Extra      []int64 // journal mode: processed seqs at or above lowWater
	Processed  int64
	Dropped    int64
	Reconnects int64
	Bytes      int64
	Outputs    int64
	LatencyNs  int64 // -1: none yet
	lastEvent  int64 // unix ms; 0: none
	ResumeAt   int64 // unix ms of a timed pause's end; 0: none
	State      []byte
	LastOut    []byte // empty: no output yet
	Result     []byte // empty: no result
	// Failure is why a failed stream is held (failure.go); nil otherwise.
	// Absent in older records.
	Failure *Failure
}

func (r *ProgressRecord) AppendTo(dst []byte) []byte {
	e := bytecodec.Encoder{B: dst}
	e.Str(r.Status)
	e.Str(r.Reason)
	e.Str(r.Message)
	e.Str(r.Cursor)
	e.Int(r.ProcNext)
	e.Int(r.accSeq)
	e.Str(r.accID)
	e.Int(r.lowWater)
	e.Uint(uint64(len(r.Extra)))
	for _, x := range r.Extra {
		e.Int(x)
	}
	for _, v := range [...]int64{r.Processed, r.Dropped, r.Reconnects, r.Bytes, r.Outputs, r.LatencyNs, r.lastEvent, r.ResumeAt} {
		e.Int(v)
	}
	e.Bytes(r.State)
	e.Bytes(r.LastOut)
	e.Bytes(r.Result)
	if f := r.Failure; f != nil {
		e.Str(f.Kind)
		e.Int(f.Seq)
		e.Str(f.Error)
		e.Int(f.Attempts)
		e.Int(f.AtEpochMs)
	}
	return e.B
}

func (r *ProgressRecord) Encode() []byte {
	payload := r.AppendTo(make([]byte, 0, 96+len(r.State)+len(r.LastOut)+len(r.Result)+len(r.Message)))
	return persistence.EncodeRecord(KindProgress, RecordVersion, payload)
}

func (r *ProgressRecord) Decode(key, data []byte) error {
	return decodePayload(key, data, KindProgress, func(d *bytecodec.Decoder) {
		r.Status, r.Reason, r.Message = d.Str("status"), d.Str("end reason"), d.Str("message")
		r.Cursor = d.Str("cursor")
		r.ProcNext, r.accSeq, r.accID = d.Int("next seq"), d.Int("accepted seq"), d.Str("accepted id")
		r.lowWater = d.Int("low water")
		n := d.Count("extra count")
		for i := 0; i < n && d.Err() == nil; i++ {
			r.Extra = append(r.Extra, d.Int("extra"))
		}
		for _, p := range [...]*int64{&r.Processed, &r.Dropped, &r.Reconnects, &r.Bytes, &r.Outputs, &r.LatencyNs, &r.lastEvent, &r.ResumeAt} {
			*p = d.Int("stats")
		}
		r.State, r.LastOut, r.Result = d.Bytes("state"), d.Bytes("last output"), d.Bytes("result")
		if d.More() { // a failed stream's failure, added after 0.2.0
			r.Failure = &Failure{Kind: d.Str("failure kind"), Seq: d.Int("failure seq"), Error: d.Str("failure error"),
				Attempts: d.Int("failure attempts"), AtEpochMs: d.Int("failure time")}
		}
	})
}

// A journal entry, under the key of the seq of its first chunk, holds
// journaled chunks as the transport delivered them. Version 1 holds one
// chunk; version 2, written since, holds the chunks seq, seq+1, ... that
// arrived while the entry waited for its commit (persist.go), one after
// the other, each as version 1 wrote its one chunk but with the :fd always
// written.
const (
	journalVersionOne   = 1
	JournalVersionGroup = 2
)

// journalRecord is one journaled chunk as the transport delivered it.
type journalRecord struct {
	ID       string
	Event    string
	Received int64 // unix nanoseconds
	Data     []byte
	Fd       string // a process transport's output ("stdout", "stderr"); "" for others
}

// journalEntry is a journaled chunk read back: seq numbers it, first is
// the seq of the first chunk of the entry that holds it (the entry's key).
type journalEntry struct {
	Seq, First int64
	Rec        journalRecord
}

// AppendJournalChunk appends c's part of a version-2 journal entry to dst.
// Cost: the copy of c's data, and dst's growth.
func AppendJournalChunk(dst []byte, c *transport.Chunk) []byte {
	e := bytecodec.Encoder{B: dst}
	e.Str(c.ID)
	e.Str(c.Event)
	e.Int(c.ReceivedAt.UnixNano())
	e.Bytes(c.Data)
	e.Str(c.FD)
	return e.B
}

// DecodeJournal decodes the journal entry stored under key, whose first
// chunk is numbered first, into its chunks, in order. The chunks' data is
// copied out of data.
func DecodeJournal(key, data []byte, first int64) ([]journalEntry, error) {
	version, payload, err := persistence.DecodeRecord(key, data, KindJournal, JournalVersionGroup)
	if err != nil {
		return nil, err
	}
	var out []journalEntry
	d := bytecodec.NewDecoder(payload)
	for seq := first; ; seq++ {
		r := journalRecord{ID: d.Str("id"), Event: d.Str("event"), Received: d.Int("received")}
		r.Data = append([]byte(nil), d.Bytes("data")...)
		if version == JournalVersionGroup || d.More() { // version 1 wrote the fd only when set
			r.Fd = d.Str("fd")
		}
		out = append(out, journalEntry{Seq: seq, First: first, Rec: r})
		if version == journalVersionOne || !d.More() {
			break
		}
	}
	if err := d.End(); err != nil {
		return nil, &persistence.CorruptRecordError{Key: append([]byte(nil), key...), Reason: "bad payload", Err: err}
	}
	return out, nil
}

// ChildRecord is the process group a stream's transport runs (its :exec or
// :stdio program), kept while it runs, so that a host restarted after a
// crash can end a group that outlived its host (transport.Spec.Stale).
// Added after the first release: a store without it has no such record.
type ChildRecord struct {
	Pid   int64
	Start uint64 // the leader's start time as the OS counts it; 0: unknown
	Boot  string // the boot start counts from; "": unknown
}

func (r *ChildRecord) Encode() []byte {
	e := bytecodec.Encoder{B: make([]byte, 0, 16+len(r.Boot))}
	e.Int(r.Pid)
	e.Uint(r.Start)
	e.Str(r.Boot)
	return persistence.EncodeRecord(KindChild, RecordVersion, e.B)
}

func (r *ChildRecord) Decode(key, data []byte) error {
	return decodePayload(key, data, KindChild, func(d *bytecodec.Decoder) {
		r.Pid, r.Start, r.Boot = d.Int("pid"), d.Uint("start time"), d.Str("boot id")
	})
}

// Process is the group a child record names.
func (r *ChildRecord) Process() transport.ChildProcess {
	return transport.ChildProcess{PID: int(r.Pid), Start: r.Start, Boot: r.Boot}
}

// ErrNoStoredStream is wrapped by the errors of the stored-stream
// operations (SetStoredState, RemoveStored, UpgradeStored,
// StoredDeadLetters) for an id the store does not hold. ErrNoStream is the
// live provider's: the two say which side was asked.
var ErrNoStoredStream = errors.New("no such stream in the store")

// LoadProgress reads stream id's progress record.
func LoadProgress(ctx context.Context, st persistence.Store, id string) (*ProgressRecord, error) {
	if _, err := st.Get(ctx, StreamKey(id, SuffixDef)); err != nil {
		if errors.Is(err, persistence.ErrNotFound) {
			return nil, fmt.Errorf("stream %q: %w", id, ErrNoStoredStream)
		}
		return nil, err
	}
	data, err := st.Get(ctx, StreamKey(id, SuffixProg))
	if err != nil {
		return nil, fmt.Errorf("stream %q: progress record: %w", id, err)
	}
	var r ProgressRecord
	if err := r.Decode(StreamKey(id, SuffixProg), data); err != nil {
		return nil, err
	}
	return &r, nil
}

// maxDeleteBatch is the most keys one batch of DeleteKeys deletes: any
// store applies it in one transaction (a cluster's holds 999 operations).
const maxDeleteBatch = 256

// DeleteBatchLimits is what one batch of DeleteKeys holds at most on st:
// maxDeleteBatch keys, fewer when st says one commit holds fewer
// (persistence.Limited), and the bytes of their keys.
func DeleteBatchLimits(st persistence.Store) (ops, size int) {
	ops, size = maxDeleteBatch, 1<<20
	if l, ok := st.(persistence.Limited); ok {
		lops, lbytes := l.BatchLimits()
		ops, size = max(1, min(ops, lops)), max(1, min(size, lbytes))
	}
	return ops, size
}

// DeleteKeys deletes keys, in their order, with commit, in batches that
// st takes (DeleteBatchLimits): a stream's or a journal's records may be
// more than one commit holds. A failed commit stops it; the keys of the
// batches committed before are gone.
func DeleteKeys(ctx context.Context, st persistence.Store, commit func(context.Context, *persistence.Batch) error, keys [][]byte) error {
	maxOps, maxBytes := DeleteBatchLimits(st)
	for len(keys) > 0 {
		var b persistence.Batch
		n, size := 0, 0
		for n < len(keys) && n < maxOps && (n == 0 || size+len(keys[n]) <= maxBytes) {
			b.Delete(keys[n])
			size += len(keys[n])
			n++
		}
		if err := commit(ctx, &b); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}
