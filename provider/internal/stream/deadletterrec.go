package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/internal/bytecodec"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
)

// The store's side of dead letters: their records, read and counted.

// StoredDeadLetters returns the dead letters of stream id in st, oldest
// first, reading the store only (no provider needed: the command line's
// dead-letters on a data directory). A stream the store does not hold is
// an error wrapping ErrNoStoredStream. Cost: a scan of the stream's dead
// letters.
func StoredDeadLetters(ctx context.Context, st persistence.Store, id string) ([]DeadLetter, error) {
	if _, err := st.Get(ctx, StreamKey(id, SuffixDef)); err != nil {
		if errors.Is(err, persistence.ErrNotFound) {
			return nil, fmt.Errorf("stream %q: %w", id, ErrNoStoredStream)
		}
		return nil, err
	}
	var out []DeadLetter
	err := scanDeadLetters(ctx, st, id, func(dl DeadLetter) { out = append(out, dl) })
	if err != nil {
		return nil, fmt.Errorf("dead letters of stream %q: %w", id, err)
	}
	return out, nil
}

// CountDeadLetters counts stream id's stored dead letters and returns the
// last deadLettersShown of them, for a stream loaded from the store.
func CountDeadLetters(ctx context.Context, st persistence.Store, id string) (deadLetters, error) {
	var d deadLetters
	err := scanDeadLetters(ctx, st, id, func(dl DeadLetter) { d.Add(dl, deadLettersShown) })
	return d, err
}

// scanDeadLetters calls fn with each of stream id's stored dead letters,
// oldest first. A record that cannot be decoded ends the scan with a
// *persistence.CorruptRecordError.
func scanDeadLetters(ctx context.Context, st persistence.Store, id string, fn func(DeadLetter)) error {
	return st.Scan(ctx, DeadLetterPrefix(id), func(key, value []byte) error {
		var r deadLetterRecord
		if err := r.Decode(key, value); err != nil {
			return err
		}
		dl, err := r.letter(id)
		if err != nil {
			return &persistence.CorruptRecordError{Key: append([]byte(nil), key...), Reason: "bad chunk", Err: err}
		}
		fn(dl)
		return nil
	})
}

// Dead letter records live under "dead/<stream id>\x00<seq>" (the seq big
// endian, so that a scan lists them in order): outside "stream/", like the
// delivery records, so that a release that does not know them recovers the
// stream all the same.
const DeadLetterPrefixStr = "dead/"

func DeadLetterPrefix(id string) []byte {
	k := make([]byte, 0, len(DeadLetterPrefixStr)+len(id)+1)
	k = append(k, DeadLetterPrefixStr...)
	k = append(k, id...)
	return append(k, 0)
}

func DeadLetterKey(id string, seq int64) []byte {
	return binary.BigEndian.AppendUint64(DeadLetterPrefix(id), uint64(seq))
}

// deadLetterRecord is a dead letter as stored: the chunk and its metadata
// in the plain value codec (a chunk holds no functions), so that it reads
// without the stream's program.
type deadLetterRecord struct {
	seq      int64
	kind     string
	errText  string
	attempts int64
	at       int64 // unix ms
	chunk    []byte
	meta     []byte
}

func NewDeadLetterRecord(dl *DeadLetter) (*deadLetterRecord, error) {
	r := &deadLetterRecord{seq: dl.Seq, kind: dl.Kind, errText: dl.Error, attempts: dl.Attempts, at: dl.AtEpochMs}
	var err error
	if r.chunk, err = rtfs.MarshalValue(dl.Chunk.value()); err != nil {
		return nil, fmt.Errorf("encode dead letter %d: chunk: %w", dl.Seq, err)
	}
	if r.meta, err = rtfs.MarshalValue(dl.Metadata.value()); err != nil {
		return nil, fmt.Errorf("encode dead letter %d: metadata: %w", dl.Seq, err)
	}
	return r, nil
}

func (r *deadLetterRecord) Encode() []byte {
	e := bytecodec.Encoder{B: make([]byte, 0, 48+len(r.kind)+len(r.errText)+len(r.chunk)+len(r.meta))}
	e.Int(r.seq)
	e.Str(r.kind)
	e.Str(r.errText)
	e.Int(r.attempts)
	e.Int(r.at)
	e.Bytes(r.chunk)
	e.Bytes(r.meta)
	return persistence.EncodeRecord(kindDeadLetter, RecordVersion, e.B)
}

func (r *deadLetterRecord) Decode(key, data []byte) error {
	return decodePayload(key, data, kindDeadLetter, func(d *bytecodec.Decoder) {
		r.seq, r.kind, r.errText = d.Int("seq"), d.Str("kind"), d.Str("error")
		r.attempts, r.at = d.Int("attempts"), d.Int("time")
		r.chunk = append([]byte(nil), d.Bytes("chunk")...)
		r.meta = append([]byte(nil), d.Bytes("metadata")...)
	})
}

// letter decodes the record's values.
func (r *deadLetterRecord) letter(id string) (DeadLetter, error) {
	chunk, err := rtfs.UnmarshalValue(r.chunk)
	if err != nil {
		return DeadLetter{}, err
	}
	meta, err := rtfs.UnmarshalValue(r.meta)
	if err != nil {
		return DeadLetter{}, err
	}
	at := time.UnixMilli(r.at)
	return DeadLetter{StreamID: id, Seq: r.seq, Chunk: JSONValue{V: chunk}, Metadata: JSONValue{V: meta},
		Kind: r.kind, Error: r.errText, Attempts: r.attempts, At: at, AtEpochMs: r.at}, nil
}
