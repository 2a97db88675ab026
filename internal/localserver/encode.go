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
	dec    []byte // decSeq in decimal
	decSeq int    // the seq dec holds; 0: none yet
}

// decimal returns seq in decimal, valid until the next call. A stream's
// seqs follow one another, so the digits of the one before are incremented
// in place rather than formatted anew (the id line, the envelope's seq and
// a counter's n all carry it).
func (e *encoder) decimal(seq int) []byte {
	switch {
	case seq == e.decSeq:
	case seq == e.decSeq+1 && e.decSeq > 0:
		e.dec = incDecimal(e.dec)
	default:
		e.dec = strconv.AppendInt(e.dec[:0], int64(seq), 10)
	}
	e.decSeq = seq
	return e.dec
}

// incDecimal adds one to the positive decimal number d, in place when no
// digit is added.
func incDecimal(d []byte) []byte {
	for i := len(d) - 1; i >= 0; i-- {
		if d[i] < '9' {
			d[i]++
			return d
		}
		d[i] = '0'
	}
	d = append(d, '0') // 99 -> 100
	d[0] = '1'
	return d
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
	dec := e.decimal(seq)
	dst = append(dst, e.prefix...)
	dst = append(dst, dec...)
	dst = append(dst, `,"chunk":`...)
	dst = e.d.appendRecord(dst, seq, dec)
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
