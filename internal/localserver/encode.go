package localserver

import (
	"bytes"
	"strconv"
	"time"
)

// traceJSON ends every chunk envelope.
const traceJSON = `,"trace":{"source":"rtfshost-localserver","version":"1"}`

// oversizedField is the top-level field that pads an oversized event; the
// closing quote and brace follow the padding.
const oversizedField = `,"oversized_pad":"`

// An encoder appends the JSON envelopes of one stream's chunks. It keeps no
// buffer of its own, so one encoder serves a whole response without
// allocating per chunk. It is not safe for concurrent use.
type encoder struct {
	d      *dataset
	prefix []byte // {"endpoint":"<name>","seq":
	pad    []byte // the "pad" field's value: size bytes of 'x'
	now    func() time.Time
	at     []byte // generated_at, formatted by stamp; empty: read now per chunk
}

// stamp reads the clock once for the chunks appended until the next stamp:
// a batch written in one go carries the time it was generated. Without it
// every chunk reads the clock.
func (e *encoder) stamp() {
	e.at = e.now().UTC().AppendFormat(e.at[:0], time.RFC3339Nano)
}

func newEncoder(d *dataset, size int, now func() time.Time) *encoder {
	e := &encoder{d: d, now: now}
	e.prefix = append(e.prefix, `{"endpoint":`...)
	e.prefix = strconv.AppendQuote(e.prefix, d.name)
	e.prefix = append(e.prefix, `,"seq":`...)
	if size > 0 {
		e.pad = bytes.Repeat([]byte{'x'}, size)
	}
	return e
}

// appendData appends the envelope of chunk seq:
// {"endpoint":..,"seq":..,"chunk":{..},"generated_at":..,"trace":{..}}.
// If target is positive the envelope is padded to exactly target bytes when
// it is shorter.
func (e *encoder) appendData(dst []byte, seq, target int) []byte {
	start := len(dst)
	dst = append(dst, e.prefix...)
	dst = strconv.AppendInt(dst, int64(seq), 10)
	dst = append(dst, `,"chunk":`...)
	dst = e.d.appendRecord(dst, seq)
	if len(e.pad) > 0 {
		dst = append(dst, `,"pad":"`...)
		dst = append(dst, e.pad...)
		dst = append(dst, '"')
	}
	dst = append(dst, `},"generated_at":"`...)
	if len(e.at) > 0 {
		dst = append(dst, e.at...)
	} else {
		dst = e.now().UTC().AppendFormat(dst, time.RFC3339Nano)
	}
	dst = append(dst, '"')
	dst = append(dst, traceJSON...)
	if target > 0 {
		dst = padTo(dst, target-(len(dst)-start))
	}
	return append(dst, '}')
}

// padTo appends the oversized_pad field so that the object, once closed by
// the caller's '}', grows by exactly room bytes (or by the field's minimum).
func padTo(dst []byte, room int) []byte {
	n := room - len(oversizedField) - len(`"}`)
	if n < 0 {
		n = 0
	}
	dst = append(dst, oversizedField...)
	dst = append(dst, bytes.Repeat([]byte{'x'}, n)...)
	return append(dst, '"')
}

// appendSummary appends the final status object of a stream.
func appendSummary(dst []byte, endpoint string, total, resumedAfter int) []byte {
	dst = append(dst, `{"endpoint":`...)
	dst = strconv.AppendQuote(dst, endpoint)
	dst = append(dst, `,"status":"complete","chunks_sent":`...)
	dst = strconv.AppendInt(dst, int64(total), 10)
	if resumedAfter > 0 {
		dst = append(dst, `,"resumed_after":`...)
		dst = strconv.AppendInt(dst, int64(resumedAfter), 10)
	}
	return append(dst, '}')
}
