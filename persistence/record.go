package persistence

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A RecordKind says what a record holds (a program, a stream definition, a
// progress snapshot, a journaled chunk...). The kinds are chosen by the
// package that stores the records; this package only checks that a record has
// the kind its reader expects.
type RecordKind uint8

// recordMagic is the first byte of every record.
const recordMagic = 0xB7

// Record framing: magic byte, kind byte, format version as a uvarint, the
// payload, then the CRC-32C (Castagnoli) of everything before it, little
// endian. The overhead is 7 bytes for versions below 128.
const (
	recordMinLen = 2 + 1 + crc32.Size
	maxHeaderLen = 2 + binary.MaxVarintLen64
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendRecord appends to dst the record framing payload as the given kind and
// format version, and returns the extended slice. It never fails. Cost: one
// pass over payload for the checksum; no allocation when dst has room.
func AppendRecord(dst []byte, kind RecordKind, version uint64, payload []byte) []byte {
	start := len(dst)
	dst = AppendRecordHeader(dst, kind, version)
	dst = append(dst, payload...)
	return FinishRecord(dst, start)
}

// AppendRecordHeader appends to dst the framing that goes before a record's
// payload, for a caller that writes the payload in place rather than
// building it apart: append the header at offset start, then the payload,
// then call FinishRecord(dst, start). The bytes are those of AppendRecord.
// Cost: at most RecordOverhead bytes, no allocation when dst has room.
func AppendRecordHeader(dst []byte, kind RecordKind, version uint64) []byte {
	dst = append(dst, recordMagic, byte(kind))
	return binary.AppendUvarint(dst, version)
}

// FinishRecord appends the checksum of the record that starts at dst[start:]
// (its header from AppendRecordHeader and its payload), completing it.
// Cost: one pass over the record; no allocation when dst has room.
func FinishRecord(dst []byte, start int) []byte {
	sum := crc32.Checksum(dst[start:], castagnoli)
	return binary.LittleEndian.AppendUint32(dst, sum)
}

// RecordOverhead is the most bytes the framing adds to a payload: the
// header of AppendRecordHeader and FinishRecord's checksum.
const RecordOverhead = maxHeaderLen + crc32.Size

// EncodeRecord returns a new record framing payload as the given kind and
// format version. It is AppendRecord with a buffer of the right size.
func EncodeRecord(kind RecordKind, version uint64, payload []byte) []byte {
	return AppendRecord(make([]byte, 0, maxHeaderLen+len(payload)+crc32.Size), kind, version, payload)
}

// DecodeRecord checks the record data read from key and returns its format
// version and payload. The payload aliases data. It returns a
// *CorruptRecordError when data is not a well-formed record of the wanted kind
// (too short, bad magic byte, bad version varint, checksum mismatch, other
// kind), and an *UnknownVersionError when its version is above maxVersion, the
// newest version the caller can read. Both errors name key. The caller
// dispatches on the returned version among the versions it knows.
func DecodeRecord(key, data []byte, kind RecordKind, maxVersion uint64) (version uint64, payload []byte, err error) {
	if len(data) < recordMinLen {
		return 0, nil, corrupt(key, fmt.Sprintf("%d bytes is shorter than the %d-byte record frame", len(data), recordMinLen))
	}
	if data[0] != recordMagic {
		return 0, nil, corrupt(key, fmt.Sprintf("first byte is 0x%02x, want record marker 0x%02x", data[0], recordMagic))
	}
	body, tail := data[:len(data)-crc32.Size], data[len(data)-crc32.Size:]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(tail); got != want {
		return 0, nil, corrupt(key, fmt.Sprintf("checksum mismatch (stored %08x, computed %08x)", want, got))
	}
	if got := RecordKind(data[1]); got != kind {
		return 0, nil, corrupt(key, fmt.Sprintf("record kind is %d, want %d", got, kind))
	}
	version, n := binary.Uvarint(body[2:])
	if n <= 0 || n != uvarintLen(version) {
		return 0, nil, corrupt(key, "malformed format version")
	}
	if version > maxVersion {
		return 0, nil, &UnknownVersionError{Key: clone(key), Kind: kind, Version: version, MaxVersion: maxVersion}
	}
	return version, body[2+n:], nil
}

// A CorruptRecordError reports a stored record that cannot be read. Key is the
// record's key (a copy). Reason says what is wrong; Err, when set, is the
// underlying error (for example from the payload decoder of the caller, which
// may build a CorruptRecordError itself).
type CorruptRecordError struct {
	Key    []byte
	Reason string
	Err    error
}

func corrupt(key []byte, reason string) error {
	return &CorruptRecordError{Key: clone(key), Reason: reason}
}

// Error returns "persistence: corrupt record at key "K": reason".
func (e *CorruptRecordError) Error() string {
	msg := fmt.Sprintf("persistence: corrupt record at key %q: %s", e.Key, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns e.Err.
func (e *CorruptRecordError) Unwrap() error { return e.Err }

// An UnknownVersionError reports a record written in a format version newer
// than the reader supports, typically by a newer rtfshost. Key is the record's
// key (a copy).
type UnknownVersionError struct {
	Key        []byte
	Kind       RecordKind
	Version    uint64
	MaxVersion uint64
}

// Error names the key, the kind, the version found and the newest one known.
func (e *UnknownVersionError) Error() string {
	return fmt.Sprintf("persistence: record at key %q (kind %d) has format version %d, but this rtfshost reads versions up to %d; it was written by a newer rtfshost",
		e.Key, e.Kind, e.Version, e.MaxVersion)
}

// uvarintLen returns the length of the minimal uvarint encoding of v.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func clone(b []byte) []byte {
	return append([]byte(nil), b...)
}

// StoreFormat numbers the layout of what rtfshost keeps in a store: which
// records there are, under which keys, with which payloads (the provider's
// and the host's, docs/durability.md). It goes up with every release that
// writes something an older release does not read alike; CHANGELOG.md says
// which release brought which, and host/testdata/upgrade holds a data
// directory of each (docs/upgrading.md). 1: 0.1.0. 2: 0.2.0 (a stream's
// idle timeout and transport keys in its definition; MCP tasks and event
// store). 3: streams' origin records and parked programs' journals, which
// let another compiler come back to them (older releases ignore both); the
// process group of an :exec or :stdio stream, and the output a journaled
// chunk of such a stream came from (which 0.2.0 refuses); streams'
// delivery records (progress, milestones, dropped outputs; ignored by
// older releases); journal entries that hold several chunks (version 2 of
// the journal record, which older releases refuse by version). 4: a
// program run's journal is appended to, each answer once
// (journal/<id>/...), and streams' origin records and parked programs
// refer to it instead of keeping a copy (format 2 of the journal bytes,
// which older releases refuse, naming the key, when they replay; they read
// everything else); version 2 of the host's resumed-program record, which
// keeps the program's value in the value codec (older releases refuse it by
// version).
const StoreFormat = 4
