// Package bytecodec writes and reads the fields of rtfshost's own binary
// formats: the provider's stored records and the host-call journal of
// package capabilities. Fields follow one another with no tags: unsigned
// and zigzag varints (encoding/binary's), length-prefixed byte strings,
// booleans, single bytes and little-endian fixed-width integers. It is the
// small layer over encoding/binary that both need: a Decoder whose first
// failure sticks, so a record is read field after field and checked once
// at its end, with an error naming the field and the byte where it went
// wrong.
//
// The main types are Encoder and Decoder. Neither is safe for concurrent
// use; both are values their caller owns, one per record.
package bytecodec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// An Encoder appends fields to B. The zero value is ready to use; set B to
// a buffer with room to spare to save its growth.
type Encoder struct{ B []byte }

// Uint appends v as an unsigned varint.
func (e *Encoder) Uint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }

// Int appends v as a zigzag varint.
func (e *Encoder) Int(v int64) { e.B = binary.AppendVarint(e.B, v) }

// Bytes appends v with its length before it.
func (e *Encoder) Bytes(v []byte) { e.Uint(uint64(len(v))); e.B = append(e.B, v...) }

// Str appends v with its length before it.
func (e *Encoder) Str(v string) { e.B = AppendStr(e.B, v) }

// Bool appends v as one byte, 1 or 0.
func (e *Encoder) Bool(v bool) {
	if v {
		e.B = append(e.B, 1)
	} else {
		e.B = append(e.B, 0)
	}
}

// Float appends v as its IEEE 754 bits, 8 bytes little endian.
func (e *Encoder) Float(v float64) { e.B = binary.LittleEndian.AppendUint64(e.B, math.Float64bits(v)) }

// AppendStr appends s to b with its length before it, as Encoder.Str
// does, for a writer that builds its bytes without an Encoder.
func AppendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// ErrTruncated is wrapped by a Decoder's error when the input ends inside
// a field, or a length or count says more than the input holds.
var ErrTruncated = errors.New("truncated")

// A Decoder reads the fields an Encoder wrote, in the same order. Each read
// names its field; the first failure sticks: later reads return zero
// values, and Err says which field was bad and at which byte. Byte strings
// it returns share the input (capped, so that appending to one copies).
type Decoder struct {
	b   []byte
	off int
	err error
}

// NewDecoder returns a Decoder reading b from its start.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Fail records err as the failure of field at the current byte, unless a
// failure is recorded already.
func (d *Decoder) Fail(field string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("field %s at byte %d: %w", field, d.off, err)
	}
}

// Err returns the first failure, nil while every read succeeded.
func (d *Decoder) Err() error { return d.err }

// Offset returns how many bytes were read.
func (d *Decoder) Offset() int { return d.off }

// More reports whether bytes remain to be read and no read failed.
func (d *Decoder) More() bool { return d.err == nil && d.off < len(d.b) }

// End fails, naming the count, when bytes remain unread, and returns the
// first failure.
func (d *Decoder) End() error {
	if d.err == nil && d.off != len(d.b) {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b)-d.off)
	}
	return d.err
}

// Uint reads an unsigned varint.
func (d *Decoder) Uint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.Fail(field, ErrTruncated)
		return 0
	}
	d.off += n
	return v
}

// Int reads a zigzag varint.
func (d *Decoder) Int(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.Fail(field, ErrTruncated)
		return 0
	}
	d.off += n
	return v
}

// Count reads the number of elements that follow, as an unsigned varint,
// and fails when the input cannot hold that many (each takes at least one
// byte): a corrupt count never makes its reader allocate or loop beyond
// the input's size.
func (d *Decoder) Count(field string) int {
	n := d.Uint(field)
	if d.err == nil && n > uint64(len(d.b)-d.off) {
		d.Fail(field, fmt.Errorf("%w: %d elements in %d bytes", ErrTruncated, n, len(d.b)-d.off))
		return 0
	}
	return int(n)
}

// Next reads the next n bytes as they are.
func (d *Decoder) Next(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.off {
		d.Fail(field, ErrTruncated)
		return nil
	}
	d.off += n
	return d.b[d.off-n : d.off : d.off]
}

// Bytes reads a byte string written with its length before it.
func (d *Decoder) Bytes(field string) []byte {
	n := d.Uint(field)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.Fail(field, ErrTruncated)
		return nil
	}
	return d.Next(field, int(n))
}

// Str reads a string written with its length before it.
func (d *Decoder) Str(field string) string { return string(d.Bytes(field)) }

// Byte reads one byte.
func (d *Decoder) Byte(field string) byte {
	if b := d.Next(field, 1); b != nil {
		return b[0]
	}
	return 0
}

// Bool reads a byte that must be 0 or 1.
func (d *Decoder) Bool(field string) bool {
	if d.err == nil && d.off < len(d.b) && d.b[d.off] > 1 {
		d.Fail(field, errors.New("bad boolean"))
		return false
	}
	return d.Byte(field) == 1
}

// Uint32 reads 4 bytes, little endian.
func (d *Decoder) Uint32(field string) uint32 {
	if b := d.Next(field, 4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// Uint64 reads 8 bytes, little endian.
func (d *Decoder) Uint64(field string) uint64 {
	if b := d.Next(field, 8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// Float reads what Encoder.Float wrote.
func (d *Decoder) Float(field string) float64 { return math.Float64frombits(d.Uint64(field)) }
