package provider

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
	kindProgress   persistence.RecordKind = 3
	kindJournal    persistence.RecordKind = 4
	kindChild      persistence.RecordKind = 5
	kindOrigin     persistence.RecordKind = 6 // origin.go
	kindDelivery   persistence.RecordKind = 7 // deliveryrec.go
	kindDeadLetter persistence.RecordKind = 8 // deadletter.go
)

// recordVersion is the format version of every provider record; a record of a
// newer version is refused with a *persistence.UnknownVersionError.
const recordVersion = 1

// Key layout. A stream id never contains a NUL byte (Start refuses one), so
// the NUL separates it from the record's suffix.
const (
	programPrefix = "prog/"
	streamPrefix  = "stream/"
	suffixDef     = 'd'
	suffixProg    = 'p'
	suffixJournal = 'j'
	suffixChild   = 'c'
)

func programKey(hash string) []byte { return []byte(programPrefix + hash) }

func streamKey(id string, suffix byte) []byte {
	k := make([]byte, 0, len(streamPrefix)+len(id)+2)
	k = append(k, streamPrefix...)
	k = append(k, id...)
	return append(k, 0, suffix)
}

func journalKey(id string, seq int64) []byte {
	return appendJournalKey(make([]byte, 0, journalKeyLen(id)), id, seq)
}

// journalKeyLen is the length of every journal key of stream id.
func journalKeyLen(id string) int { return len(streamPrefix) + len(id) + 2 + 8 }

// appendJournalKey appends the key of stream id's journal entry seq to dst.
func appendJournalKey(dst []byte, id string, seq int64) []byte {
	dst = append(dst, streamPrefix...)
	dst = append(dst, id...)
	dst = append(dst, 0, suffixJournal)
	return binary.BigEndian.AppendUint64(dst, uint64(seq))
}

// journalPrefix is the prefix of every journal key of stream id.
func journalPrefix(id string) []byte { return streamKey(id, suffixJournal) }

// parseStreamKey splits a key under streamPrefix into the stream id, the
// suffix and, for a journal key, the chunk's seq. ok is false for a key of
// another shape.
func parseStreamKey(key []byte) (id string, suffix byte, seq int64, ok bool) {
	rest := key[len(streamPrefix):]
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
		case suffix == suffixJournal && len(tail) == 8:
			return id, suffix, int64(binary.BigEndian.Uint64(tail)), true
		case suffix != suffixJournal && len(tail) == 0:
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
	_, payload, err := persistence.DecodeRecord(key, data, kind, recordVersion)
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

// programRecord is a program's name and source, stored under its hash.
type programRecord struct {
	name   string
	source []byte
}

func (r *programRecord) encode() []byte {
	e := bytecodec.Encoder{B: make([]byte, 0, len(r.source)+len(r.name)+8)}
	e.Str(r.name)
	e.Bytes(r.source)
	return persistence.EncodeRecord(kindProgram, recordVersion, e.B)
}

func (r *programRecord) decode(key, data []byte) error {
	return decodePayload(key, data, kindProgram, func(d *bytecodec.Decoder) {
		r.name = d.Str("name")
		r.source = append([]byte(nil), d.Bytes("source")...)
	})
}

// Processor references in a definition record.
const (
	procByName  = 1 // a global of the program, looked up by name on recovery
	procByValue = 2 // a function value encoded with the program's value codec
	procGo      = 3 // a Go processor (tests): cannot be recovered
)

// defRecord is the persisted definition of a stream: everything needed to
// rebuild it, without secrets (the auth header is resolved again from the
// environment).
type defRecord struct {
	order     int64 // start time in unix nanoseconds: recovery keeps start order
	endpoint  string
	transport string
	serverURL string // the stream's resolved server URL without user info
	procName  string
	procRef   uint64
	procData  []byte // the global's name, or the encoded function
	progHash  string // "" without a program
	globals   []byte
	initial   []byte
	capacity  int64
	config    []byte // encoded :config map, empty if none
	journal   bool
	idleMs    int64       // the start call's idle timeout in ms: 0 default, -1 none (absent in older records)
	tkeys     []byte      // the transport's own start keys as a JSON object, empty if none (absent in older records)
	onError   ErrorPolicy // the start's :on-error (absent in older records: hold)
}

func (r *defRecord) encode() []byte {
	e := bytecodec.Encoder{B: make([]byte, 0, 64+len(r.procData)+len(r.globals)+len(r.initial)+len(r.config))}
	e.Int(r.order)
	e.Str(r.endpoint)
	e.Str(r.transport)
	e.Str(r.serverURL)
	e.Str(r.procName)
	e.Uint(r.procRef)
	e.Bytes(r.procData)
	e.Str(r.progHash)
	e.Bytes(r.globals)
	e.Bytes(r.initial)
	e.Int(r.capacity)
	e.Bytes(r.config)
	e.Bool(r.journal)
	e.Int(r.idleMs)
	e.Bytes(r.tkeys)
	e.Int(int64(r.onError.Retry))
	e.Int(r.onError.Backoff.Milliseconds())
	e.Str(r.onError.then())
	return persistence.EncodeRecord(kindDefinition, recordVersion, e.B)
}

func (r *defRecord) decode(key, data []byte) error {
	return decodePayload(key, data, kindDefinition, func(d *bytecodec.Decoder) {
		r.order = d.Int("order")
		r.endpoint = d.Str("endpoint")
		r.transport = d.Str("transport")
		r.serverURL = d.Str("server-url")
		r.procName = d.Str("processor name")
		r.procRef = d.Uint("processor reference")
		r.procData = d.Bytes("processor")
		r.progHash = d.Str("program hash")
		r.globals = d.Bytes("globals")
		r.initial = d.Bytes("initial state")
		r.capacity = d.Int("queue capacity")
		r.config = d.Bytes("config")
		r.journal = d.Bool("journal")
		if d.More() { // added after the first release: older records end here
			r.idleMs = d.Int("idle timeout")
		}
		if d.More() {
			r.tkeys = d.Bytes("transport keys")
		}
		if d.More() {
			r.onError.Retry = int(d.Int("on-error retry"))
			r.onError.Backoff = time.Duration(d.Int("on-error backoff")) * time.Millisecond
			r.onError.Then = d.Str("on-error then")
		}
	})
}

// progressRecord is a stream's progress after a processed chunk or a change
// of status: its state and cursor always together.
type progressRecord struct {
	status     string
	reason     string
	message    string
	cursor     string
	procNext   int64 // seq after the last processed chunk
	accSeq     int64 // seq of the last chunk taken (journal mode); -1: none
	accID      string
	lowWater   int64   // journal mode: every seq below it is processed
	extra      []int64 // journal mode: processed seqs at or above lowWater
	processed  int64
	dropped    int64
	reconnects int64
	bytes      int64
	outputs    int64
	latencyNs  int64 // -1: none yet
	lastEvent  int64 // unix ms; 0: none
	resumeAt   int64 // unix ms of a timed pause's end; 0: none
	state      []byte
	lastOut    []byte // empty: no output yet
	result     []byte // empty: no result
	// failure is why a failed stream is held (failure.go); nil otherwise.
	// Absent in older records.
	failure *Failure
}

func (r *progressRecord) appendTo(dst []byte) []byte {
	e := bytecodec.Encoder{B: dst}
	e.Str(r.status)
	e.Str(r.reason)
	e.Str(r.message)
	e.Str(r.cursor)
	e.Int(r.procNext)
	e.Int(r.accSeq)
	e.Str(r.accID)
	e.Int(r.lowWater)
	e.Uint(uint64(len(r.extra)))
	for _, x := range r.extra {
		e.Int(x)
	}
	for _, v := range [...]int64{r.processed, r.dropped, r.reconnects, r.bytes, r.outputs, r.latencyNs, r.lastEvent, r.resumeAt} {
		e.Int(v)
	}
	e.Bytes(r.state)
	e.Bytes(r.lastOut)
	e.Bytes(r.result)
	if f := r.failure; f != nil {
		e.Str(f.Kind)
		e.Int(f.Seq)
		e.Str(f.Error)
		e.Int(f.Attempts)
		e.Int(f.AtEpochMs)
	}
	return e.B
}

func (r *progressRecord) encode() []byte {
	payload := r.appendTo(make([]byte, 0, 96+len(r.state)+len(r.lastOut)+len(r.result)+len(r.message)))
	return persistence.EncodeRecord(kindProgress, recordVersion, payload)
}

func (r *progressRecord) decode(key, data []byte) error {
	return decodePayload(key, data, kindProgress, func(d *bytecodec.Decoder) {
		r.status, r.reason, r.message = d.Str("status"), d.Str("end reason"), d.Str("message")
		r.cursor = d.Str("cursor")
		r.procNext, r.accSeq, r.accID = d.Int("next seq"), d.Int("accepted seq"), d.Str("accepted id")
		r.lowWater = d.Int("low water")
		n := d.Count("extra count")
		for i := 0; i < n && d.Err() == nil; i++ {
			r.extra = append(r.extra, d.Int("extra"))
		}
		for _, p := range [...]*int64{&r.processed, &r.dropped, &r.reconnects, &r.bytes, &r.outputs, &r.latencyNs, &r.lastEvent, &r.resumeAt} {
			*p = d.Int("stats")
		}
		r.state, r.lastOut, r.result = d.Bytes("state"), d.Bytes("last output"), d.Bytes("result")
		if d.More() { // a failed stream's failure, added after 0.2.0
			r.failure = &Failure{Kind: d.Str("failure kind"), Seq: d.Int("failure seq"), Error: d.Str("failure error"),
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
	journalVersionGroup = 2
)

// journalRecord is one journaled chunk as the transport delivered it.
type journalRecord struct {
	id       string
	event    string
	received int64 // unix nanoseconds
	data     []byte
	fd       string // a process transport's output ("stdout", "stderr"); "" for others
}

// journalEntry is a journaled chunk read back: seq numbers it, first is
// the seq of the first chunk of the entry that holds it (the entry's key).
type journalEntry struct {
	seq, first int64
	rec        journalRecord
}

// appendJournalChunk appends c's part of a version-2 journal entry to dst.
// Cost: the copy of c's data, and dst's growth.
func appendJournalChunk(dst []byte, c *transport.Chunk) []byte {
	e := bytecodec.Encoder{B: dst}
	e.Str(c.ID)
	e.Str(c.Event)
	e.Int(c.ReceivedAt.UnixNano())
	e.Bytes(c.Data)
	e.Str(c.FD)
	return e.B
}

// decodeJournal decodes the journal entry stored under key, whose first
// chunk is numbered first, into its chunks, in order. The chunks' data is
// copied out of data.
func decodeJournal(key, data []byte, first int64) ([]journalEntry, error) {
	version, payload, err := persistence.DecodeRecord(key, data, kindJournal, journalVersionGroup)
	if err != nil {
		return nil, err
	}
	var out []journalEntry
	d := bytecodec.NewDecoder(payload)
	for seq := first; ; seq++ {
		r := journalRecord{id: d.Str("id"), event: d.Str("event"), received: d.Int("received")}
		r.data = append([]byte(nil), d.Bytes("data")...)
		if version == journalVersionGroup || d.More() { // version 1 wrote the fd only when set
			r.fd = d.Str("fd")
		}
		out = append(out, journalEntry{seq: seq, first: first, rec: r})
		if version == journalVersionOne || !d.More() {
			break
		}
	}
	if err := d.End(); err != nil {
		return nil, &persistence.CorruptRecordError{Key: append([]byte(nil), key...), Reason: "bad payload", Err: err}
	}
	return out, nil
}

// childRecord is the process group a stream's transport runs (its :exec or
// :stdio program), kept while it runs, so that a host restarted after a
// crash can end a group that outlived its host (transport.Spec.Stale).
// Added after the first release: a store without it has no such record.
type childRecord struct {
	pid   int64
	start uint64 // the leader's start time as the OS counts it; 0: unknown
	boot  string // the boot start counts from; "": unknown
}

func (r *childRecord) encode() []byte {
	e := bytecodec.Encoder{B: make([]byte, 0, 16+len(r.boot))}
	e.Int(r.pid)
	e.Uint(r.start)
	e.Str(r.boot)
	return persistence.EncodeRecord(kindChild, recordVersion, e.B)
}

func (r *childRecord) decode(key, data []byte) error {
	return decodePayload(key, data, kindChild, func(d *bytecodec.Decoder) {
		r.pid, r.start, r.boot = d.Int("pid"), d.Uint("start time"), d.Str("boot id")
	})
}

// process is the group a child record names.
func (r *childRecord) process() transport.ChildProcess {
	return transport.ChildProcess{PID: int(r.pid), Start: r.start, Boot: r.boot}
}

// ErrNoStoredStream is wrapped by the errors of the stored-stream
// operations (SetStoredState, RemoveStored, UpgradeStored,
// StoredDeadLetters) for an id the store does not hold. ErrNoStream is the
// live provider's: the two say which side was asked.
var ErrNoStoredStream = errors.New("no such stream in the store")

// loadProgress reads stream id's progress record.
func loadProgress(ctx context.Context, st persistence.Store, id string) (*progressRecord, error) {
	if _, err := st.Get(ctx, streamKey(id, suffixDef)); err != nil {
		if errors.Is(err, persistence.ErrNotFound) {
			return nil, fmt.Errorf("stream %q: %w", id, ErrNoStoredStream)
		}
		return nil, err
	}
	data, err := st.Get(ctx, streamKey(id, suffixProg))
	if err != nil {
		return nil, fmt.Errorf("stream %q: progress record: %w", id, err)
	}
	var r progressRecord
	if err := r.decode(streamKey(id, suffixProg), data); err != nil {
		return nil, err
	}
	return &r, nil
}

// maxDeleteBatch is the most keys one batch of deleteKeys deletes: any
// store applies it in one transaction (a cluster's holds 999 operations).
const maxDeleteBatch = 256

// deleteBatchLimits is what one batch of deleteKeys holds at most on st:
// maxDeleteBatch keys, fewer when st says one commit holds fewer
// (persistence.Limited), and the bytes of their keys.
func deleteBatchLimits(st persistence.Store) (ops, size int) {
	ops, size = maxDeleteBatch, 1<<20
	if l, ok := st.(persistence.Limited); ok {
		lops, lbytes := l.BatchLimits()
		ops, size = max(1, min(ops, lops)), max(1, min(size, lbytes))
	}
	return ops, size
}

// deleteKeys deletes keys, in their order, with commit, in batches that
// st takes (deleteBatchLimits): a stream's or a journal's records may be
// more than one commit holds. A failed commit stops it; the keys of the
// batches committed before are gone.
func deleteKeys(ctx context.Context, st persistence.Store, commit func(context.Context, *persistence.Batch) error, keys [][]byte) error {
	maxOps, maxBytes := deleteBatchLimits(st)
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
