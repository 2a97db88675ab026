package provider

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/rtfshost/rtfshost/persistence"
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
	return binary.BigEndian.AppendUint64(streamKey(id, suffixJournal), uint64(seq))
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

// enc appends the fields of a record payload: unsigned varints, zigzag
// varints and length-prefixed byte strings.
type enc struct{ b []byte }

func (e *enc) uint(v uint64)   { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) int(v int64)     { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) bytes(v []byte)  { e.uint(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) str(v string)    { e.uint(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) float(v float64) { e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v)) }
func (e *enc) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

// dec reads what enc wrote. The first failure sticks: later reads return
// zero values and err says which field was bad.
type dec struct {
	b   []byte
	off int
	err error
}

var errTruncated = errors.New("truncated")

func (d *dec) fail(field string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("field %s at byte %d: %w", field, d.off, err)
	}
}

func (d *dec) uint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail(field, errTruncated)
		return 0
	}
	d.off += n
	return v
}

func (d *dec) int(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail(field, errTruncated)
		return 0
	}
	d.off += n
	return v
}

func (d *dec) bytes(field string) []byte {
	n := d.uint(field)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail(field, errTruncated)
		return nil
	}
	v := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return v
}

func (d *dec) str(field string) string { return string(d.bytes(field)) }

func (d *dec) float(field string) float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 8 {
		d.fail(field, errTruncated)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b[d.off:]))
	d.off += 8
	return v
}

func (d *dec) bool(field string) bool {
	if d.err != nil {
		return false
	}
	if d.off >= len(d.b) || d.b[d.off] > 1 {
		d.fail(field, errors.New("bad boolean"))
		return false
	}
	d.off++
	return d.b[d.off-1] == 1
}

// end reports trailing bytes as an error.
// more reports whether bytes remain to be read (and no read failed).
func (d *dec) more() bool { return d.err == nil && d.off < len(d.b) }

func (d *dec) end() error {
	if d.err == nil && d.off != len(d.b) {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b)-d.off)
	}
	return d.err
}

// decodePayload checks a record's framing and hands its payload to read.
// Every failure names the key: an unknown version is the
// *persistence.UnknownVersionError, anything else a
// *persistence.CorruptRecordError.
func decodePayload(key, data []byte, kind persistence.RecordKind, read func(d *dec)) error {
	_, payload, err := persistence.DecodeRecord(key, data, kind, recordVersion)
	if err != nil {
		return err
	}
	d := &dec{b: payload}
	read(d)
	if err := d.end(); err != nil {
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
	e := enc{b: make([]byte, 0, len(r.source)+len(r.name)+8)}
	e.str(r.name)
	e.bytes(r.source)
	return persistence.EncodeRecord(kindProgram, recordVersion, e.b)
}

func (r *programRecord) decode(key, data []byte) error {
	return decodePayload(key, data, kindProgram, func(d *dec) {
		r.name = d.str("name")
		r.source = append([]byte(nil), d.bytes("source")...)
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
	idleMs    int64  // the start call's idle timeout in ms: 0 default, -1 none (absent in older records)
	tkeys     []byte // the transport's own start keys as a JSON object, empty if none (absent in older records)
}

func (r *defRecord) encode() []byte {
	e := enc{b: make([]byte, 0, 64+len(r.procData)+len(r.globals)+len(r.initial)+len(r.config))}
	e.int(r.order)
	e.str(r.endpoint)
	e.str(r.transport)
	e.str(r.serverURL)
	e.str(r.procName)
	e.uint(r.procRef)
	e.bytes(r.procData)
	e.str(r.progHash)
	e.bytes(r.globals)
	e.bytes(r.initial)
	e.int(r.capacity)
	e.bytes(r.config)
	e.bool(r.journal)
	e.int(r.idleMs)
	e.bytes(r.tkeys)
	return persistence.EncodeRecord(kindDefinition, recordVersion, e.b)
}

func (r *defRecord) decode(key, data []byte) error {
	return decodePayload(key, data, kindDefinition, func(d *dec) {
		r.order = d.int("order")
		r.endpoint = d.str("endpoint")
		r.transport = d.str("transport")
		r.serverURL = d.str("server-url")
		r.procName = d.str("processor name")
		r.procRef = d.uint("processor reference")
		r.procData = d.bytes("processor")
		r.progHash = d.str("program hash")
		r.globals = d.bytes("globals")
		r.initial = d.bytes("initial state")
		r.capacity = d.int("queue capacity")
		r.config = d.bytes("config")
		r.journal = d.bool("journal")
		if d.more() { // added after the first release: older records end here
			r.idleMs = d.int("idle timeout")
		}
		if d.more() {
			r.tkeys = d.bytes("transport keys")
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
}

func (r *progressRecord) appendTo(dst []byte) []byte {
	e := enc{b: dst}
	e.str(r.status)
	e.str(r.reason)
	e.str(r.message)
	e.str(r.cursor)
	e.int(r.procNext)
	e.int(r.accSeq)
	e.str(r.accID)
	e.int(r.lowWater)
	e.uint(uint64(len(r.extra)))
	for _, x := range r.extra {
		e.int(x)
	}
	for _, v := range [...]int64{r.processed, r.dropped, r.reconnects, r.bytes, r.outputs, r.latencyNs, r.lastEvent, r.resumeAt} {
		e.int(v)
	}
	e.bytes(r.state)
	e.bytes(r.lastOut)
	e.bytes(r.result)
	return e.b
}

func (r *progressRecord) encode() []byte {
	payload := r.appendTo(make([]byte, 0, 96+len(r.state)+len(r.lastOut)+len(r.result)+len(r.message)))
	return persistence.EncodeRecord(kindProgress, recordVersion, payload)
}

func (r *progressRecord) decode(key, data []byte) error {
	return decodePayload(key, data, kindProgress, func(d *dec) {
		r.status, r.reason, r.message = d.str("status"), d.str("end reason"), d.str("message")
		r.cursor = d.str("cursor")
		r.procNext, r.accSeq, r.accID = d.int("next seq"), d.int("accepted seq"), d.str("accepted id")
		r.lowWater = d.int("low water")
		n := d.uint("extra count")
		if n > uint64(len(d.b)) {
			d.fail("extra count", errTruncated)
			n = 0
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			r.extra = append(r.extra, d.int("extra"))
		}
		for _, p := range [...]*int64{&r.processed, &r.dropped, &r.reconnects, &r.bytes, &r.outputs, &r.latencyNs, &r.lastEvent, &r.resumeAt} {
			*p = d.int("stats")
		}
		r.state, r.lastOut, r.result = d.bytes("state"), d.bytes("last output"), d.bytes("result")
	})
}

// journalRecord is one journaled chunk as the transport delivered it.
type journalRecord struct {
	id       string
	event    string
	received int64 // unix nanoseconds
	data     []byte
	fd       string // a process transport's output ("stdout", "stderr"); "" for others
}

func (r *journalRecord) encode() []byte {
	e := enc{b: make([]byte, 0, 24+len(r.id)+len(r.event)+len(r.data)+len(r.fd))}
	e.str(r.id)
	e.str(r.event)
	e.int(r.received)
	e.bytes(r.data)
	if r.fd != "" { // added after the first release: written only when set
		e.str(r.fd)
	}
	return persistence.EncodeRecord(kindJournal, recordVersion, e.b)
}

func (r *journalRecord) decode(key, data []byte) error {
	return decodePayload(key, data, kindJournal, func(d *dec) {
		r.id, r.event, r.received = d.str("id"), d.str("event"), d.int("received")
		r.data = append([]byte(nil), d.bytes("data")...)
		if d.more() { // older records end here
			r.fd = d.str("fd")
		}
	})
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
	e := enc{b: make([]byte, 0, 16+len(r.boot))}
	e.int(r.pid)
	e.uint(r.start)
	e.str(r.boot)
	return persistence.EncodeRecord(kindChild, recordVersion, e.b)
}

func (r *childRecord) decode(key, data []byte) error {
	return decodePayload(key, data, kindChild, func(d *dec) {
		r.pid, r.start, r.boot = d.int("pid"), d.uint("start time"), d.str("boot id")
	})
}
