// Package sseread is the one Server-Sent Events reader of rtfshost's
// transports: it splits a text/event-stream body into events following the
// WHATWG event stream interpretation, bounded in memory, and stops consuming
// its source when its caller stops asking for events (backpressure). The raw
// SSE transport and the MCP transports (Streamable HTTP responses, the
// standalone GET stream, legacy HTTP+SSE) all read through it.
//
// The main type is Reader.
package sseread

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// readBufSize is the size of a Reader's read buffer. It bounds how far the
// transport reads ahead of the sink: while Deliver blocks, at most this many bytes
// (plus the kernel's socket buffers) have been taken from the connection.
const DefaultBufSize = 16 << 10

// keepCap is the largest buffer capacity a Reader keeps after an event;
// larger buffers (left by a large event) are released so that an idle stream
// does not pin megabytes.
const keepCap = 1 << 20

// An Event is one dispatched SSE event block. Its slices belong to the
// Reader and are valid until the next call to Next: they point into the
// read buffer when the field arrived in one piece, and into the Reader's own
// storage otherwise, so an event is copied only when its bytes must outlive
// the buffer's contents (a field continued, or a read that refills the buffer
// in the middle of the event).
type Event struct {
	Data    []byte // data lines joined with "\n"
	Name    []byte // the event field ("" when absent)
	ID      []byte // the id field, valid when HasID
	HasData bool   // at least one data field was seen
	HasID   bool   // the block set the last event ID
}

// A Reader splits a text/event-stream body into events, following the
// WHATWG event stream interpretation: lines end with CRLF, LF or CR; a leading
// BOM is ignored; lines starting with ':' are comments; one space after the
// colon is dropped; unknown fields are ignored; an id containing NUL is ignored;
// retry takes ASCII digits only; an incomplete event at EOF is discarded.
//
// It reads into a fixed buffer and never reads further than the line it needs,
// so a caller that stops calling Next stops consuming the underlying reader.
// The raw bytes of one event (every line but comments, terminators included)
// are bounded by max; a larger event is an error wrapping
// transport.ErrEventTooLarge. Comment lines are discarded as they arrive,
// never buffered, so they may be of any length.
type Reader struct {
	src    io.Reader
	buf    []byte // fixed-size read buffer
	r, w   int    // unread bytes are buf[r:w]
	err    error  // sticky error from src
	skipLF bool   // the last line ended with CR: a following LF is part of it
	inNote bool   // inside a comment line, whose bytes are being discarded
	noteLF bool   // the skipLF is a comment's: its LF does not count either
	bomOK  bool   // the stream's first bytes were checked for a BOM
	crFree int    // buf[r:crFree] holds no CR (when crFree > r): lines before it end with a plain LF
	long   []byte // a line that did not fit in buf, being accumulated
	max    int    // limit on one event's raw size
	size   int    // raw bytes of the current event so far
	ev     Event  // the event being built
	lent   uint8  // which of ev's slices point into buf (lentData, lentName, lentID)
	data   []byte // storage for ev.Data when it does not point into buf
	name   []byte // storage for ev.Name, likewise
	id     []byte // storage for ev.ID, likewise
	reads  uint64 // reads from src that returned bytes
	retry  int64  // last valid retry field in milliseconds, -1 if none
}

// The bits of Reader.lent.
const (
	lentData = 1 << iota
	lentName
	lentID
)

// minBufSize keeps room for the BOM check and a useful amount of input.
const minBufSize = 16

// New returns a Reader whose events may be at most limit raw bytes (every
// line but comments, terminators included; 0 or less means
// transport.DefaultMaxEventBytes), reading through a buffer of bufSize
// bytes (0 means 16 KiB). Call Reset before the first Next.
func New(limit, bufSize int) *Reader {
	if limit <= 0 {
		limit = transport.DefaultMaxEventBytes
	}
	if bufSize <= 0 {
		bufSize = DefaultBufSize
	}
	bufSize = max(bufSize, minBufSize)
	return &Reader{buf: make([]byte, bufSize), max: limit, retry: -1}
}

// Retry returns the reconnection time the stream set with its last valid
// retry field, and whether it set one. It survives Reset.
func (rd *Reader) Retry() (time.Duration, bool) {
	if rd.retry < 0 {
		return 0, false
	}
	return time.Duration(rd.retry) * time.Millisecond, true
}

// partial reports whether the input ended inside an event: after some of
// its lines, or inside a line that is not a comment.
func (rd *Reader) partial() bool {
	return rd.size > 0 || len(rd.long) > 0 || (!rd.inNote && rd.r < rd.w)
}

// Reads returns how many reads from the source have returned bytes since the
// Reader was made. An event returned by Next arrived with the latest of them,
// so a caller that stamps events with their arrival time need read its clock
// only when Reads has changed since its last event.
func (rd *Reader) Reads() uint64 { return rd.reads }

// Reset prepares the reader for a new connection. The retry value survives: it
// is the stream's reconnection time, not a property of one response.
func (rd *Reader) Reset(src io.Reader) {
	rd.src = src
	rd.r, rd.w, rd.crFree = 0, 0, 0
	rd.err = nil
	rd.skipLF = false
	rd.inNote = false
	rd.noteLF = false
	rd.bomOK = false
	rd.long = rd.long[:0]
	rd.size = 0
	rd.clearEvent()
}

func (rd *Reader) clearEvent() {
	rd.data = shrink(rd.data)
	rd.ev.Data = rd.data
	rd.ev.Name = rd.name[:0]
	rd.ev.ID = rd.id[:0]
	rd.lent = 0
	rd.ev.HasData = false
	rd.ev.HasID = false
	rd.size = 0
}

func shrink(b []byte) []byte {
	if cap(b) > keepCap {
		return nil
	}
	return b[:0]
}

// Next returns the next event that carries data or an id. Blocks made only of
// comments, event or retry fields are consumed without being returned (a retry
// field updates Retry as soon as it is read). At the end of the input it
// returns the source's error: io.EOF for a clean end between events,
// io.ErrUnexpectedEOF for an end inside an event (which is discarded), an
// error wrapping transport.ErrEventTooLarge for an event over the limit.
func (rd *Reader) Next() (*Event, error) {
	if rd.ev.HasData || rd.ev.HasID {
		rd.clearEvent() // the event returned by the previous call
	}
	for {
		var line []byte
		var inBuf bool
		var err error
		// The fast path, written out here: a line that starts at rd.r in the
		// plain state (no BOM check, comment or CR pending, no long line) and
		// ends with an LF that no CR precedes takes one scan for the LF, the
		// buffer's CRs having been looked for once for all its lines
		// (noCR). Everything else goes through readLine.
		if rd.bomOK && !rd.skipLF && !rd.inNote && len(rd.long) == 0 && rd.r < rd.w && rd.buf[rd.r] != ':' {
			seg := rd.buf[rd.r:rd.w]
			if i := bytes.IndexByte(seg, '\n'); i >= 0 && (rd.r+i < rd.crFree || rd.noCR(rd.r+i)) {
				rd.r += i + 1
				rd.size += i + 1
				if rd.size > rd.max {
					return nil, rd.tooLarge()
				}
				line, inBuf = seg[:i], true
			} else {
				line, inBuf, err = rd.readLine()
			}
		} else {
			line, inBuf, err = rd.readLine()
		}
		if err != nil {
			if err == io.EOF && rd.partial() {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(line) > 0 {
			rd.field(line, inBuf)
			continue
		}
		if rd.ev.HasData || rd.ev.HasID {
			return &rd.ev, nil
		}
		rd.clearEvent()
	}
}

// field interprets one non-empty line. inBuf reports whether line points
// into buf (and stays there until the next fill), so that a field's value can
// be lent instead of copied.
func (rd *Reader) field(line []byte, inBuf bool) {
	if line[0] == ':' {
		return
	}
	name, value := line, []byte(nil)
	if i := colon(line); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	value = value[:len(value):len(value)] // a caller's append must not write into buf
	switch string(name) {
	case "data":
		switch {
		case rd.ev.HasData:
			rd.keepData()
			rd.data = append(rd.data, '\n')
			rd.data = append(rd.data, value...)
			rd.ev.Data = rd.data
		case inBuf:
			rd.ev.Data = value
			rd.lent |= lentData
		default:
			rd.data = append(rd.data[:0], value...)
			rd.ev.Data = rd.data
		}
		rd.ev.HasData = true
	case "event":
		rd.set(&rd.ev.Name, &rd.name, lentName, value, inBuf)
	case "id":
		if bytes.IndexByte(value, 0) >= 0 {
			break
		}
		rd.set(&rd.ev.ID, &rd.id, lentID, value, inBuf)
		rd.ev.HasID = true
	case "retry":
		if ms, ok := parseRetry(value); ok {
			rd.retry = ms
		}
	}
}

// colon returns the index of line's first colon, or -1. The fields every
// event has, data, id and event, are recognized without a scan.
func colon(line []byte) int {
	switch {
	case len(line) > 4 && line[4] == ':' && string(line[:4]) == "data":
		return 4
	case len(line) > 2 && line[2] == ':' && string(line[:2]) == "id":
		return 2
	case len(line) > 5 && line[5] == ':' && string(line[:5]) == "event":
		return 5
	}
	return bytes.IndexByte(line, ':')
}

// set makes *field, one of ev's single-valued fields, value: lent from buf
// when inBuf (marked by bit in rd.lent), else copied into own, the
// Reader's storage for it.
func (rd *Reader) set(field, own *[]byte, bit uint8, value []byte, inBuf bool) {
	if inBuf {
		*field = value
		rd.lent |= bit
		return
	}
	*own = append((*own)[:0], value...)
	*field = *own
	rd.lent &^= bit
}

// keepData makes ev.Data the Reader's own copy, rd.data, if it is lent.
func (rd *Reader) keepData() {
	if rd.lent&lentData != 0 {
		rd.data = append(rd.data[:0], rd.ev.Data...)
		rd.ev.Data = rd.data
		rd.lent &^= lentData
	}
}

// keep copies the event's lent slices into the Reader's own storage; fill
// calls it before it overwrites buf. The copies are bounded by max, as the
// event is.
func (rd *Reader) keep() {
	if rd.lent == 0 {
		return
	}
	rd.keepData()
	if rd.lent&lentName != 0 {
		rd.name = append(rd.name[:0], rd.ev.Name...)
		rd.ev.Name = rd.name
	}
	if rd.lent&lentID != 0 {
		rd.id = append(rd.id[:0], rd.ev.ID...)
		rd.ev.ID = rd.id
	}
	rd.lent = 0
}

// parseRetry accepts a non-empty string of ASCII digits that fits in an int64
// number of milliseconds that time.Duration can hold.
func parseRetry(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	const maxMS = int64(1<<63-1) / 1e6
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		if n > maxMS {
			return 0, false
		}
	}
	return n, true
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// noCR reports whether buf[rd.r:end] holds no CR, scanning past crFree
// only: every byte of the buffer is looked at once however many lines it
// holds.
func (rd *Reader) noCR(end int) bool {
	if rd.crFree < rd.r {
		rd.crFree = rd.r
	}
	if end <= rd.crFree {
		return true
	}
	j := bytes.IndexByte(rd.buf[rd.crFree:rd.w], '\r')
	if j < 0 {
		rd.crFree = rd.w
		return true
	}
	rd.crFree += j
	return end <= rd.crFree
}

// readLine returns the next line without its terminator, and whether it
// points into buf (rather than into rd.long). The slice is valid until the
// next call. A line cut off by the end of the input is discarded and the
// source's error returned.
func (rd *Reader) readLine() ([]byte, bool, error) {
	for {
		if rd.skipLF && rd.r < rd.w {
			if rd.buf[rd.r] == '\n' {
				rd.r++
				if !rd.noteLF {
					rd.size++
				}
			}
			rd.skipLF, rd.noteLF = false, false
		}
		if !rd.bomOK && (rd.w-rd.r >= len(bom) || rd.err != nil) {
			if bytes.HasPrefix(rd.buf[rd.r:rd.w], bom) {
				rd.r += len(bom)
			}
			rd.bomOK = true
		}
		if rd.bomOK && rd.skipComment() {
			continue
		}
		if rd.bomOK && !rd.inNote {
			if line, inBuf, ok, err := rd.cutLine(); ok || err != nil {
				return line, inBuf, err
			}
		}
		if rd.err != nil {
			return nil, false, rd.err
		}
		if err := rd.fill(); err != nil {
			return nil, false, err
		}
	}
}

// skipComment discards a comment line, a line that starts with ':', as it
// arrives: its bytes are never buffered and do not count toward max. It
// reports whether it consumed a whole comment line; otherwise either no
// comment starts at rd.r or all buffered bytes were discarded and inNote
// records that the comment goes on.
func (rd *Reader) skipComment() bool {
	if !rd.inNote {
		if len(rd.long) > 0 || rd.r == rd.w || rd.buf[rd.r] != ':' {
			return false
		}
		rd.inNote = true
	}
	seg := rd.buf[rd.r:rd.w]
	i := indexEOL(seg)
	if i < 0 {
		rd.r = rd.w
		return false
	}
	rd.r += i + 1
	rd.skipLF = seg[i] == '\r'
	rd.noteLF = rd.skipLF
	rd.inNote = false
	return true
}

// cutLine takes one complete line from the buffer if there is one, and
// reports whether the line points into buf.
func (rd *Reader) cutLine() (line []byte, inBuf, ok bool, err error) {
	seg := rd.buf[rd.r:rd.w]
	i := indexEOL(seg)
	if i < 0 {
		return nil, false, false, nil
	}
	n := i + 1
	if seg[i] == '\r' {
		if i+1 < len(seg) {
			if seg[i+1] == '\n' {
				n++
			}
		} else {
			rd.skipLF, rd.noteLF = true, false
		}
	}
	rd.r += n
	rd.size += n + len(rd.long)
	if rd.size > rd.max {
		return nil, false, false, rd.tooLarge()
	}
	if len(rd.long) == 0 {
		return seg[:i], true, true, nil
	}
	rd.long = append(rd.long, seg[:i]...)
	line = rd.long
	rd.long = rd.long[:0]
	if cap(line) > keepCap {
		rd.long = nil
	}
	return line, false, true, nil
}

// indexEOL returns the index of the first CR or LF in seg, or -1.
func indexEOL(seg []byte) int {
	i := bytes.IndexByte(seg, '\n')
	lim := seg
	if i >= 0 {
		lim = seg[:i]
	}
	if j := bytes.IndexByte(lim, '\r'); j >= 0 {
		return j
	}
	return i
}

// fill reads more input, first making room: unread bytes move to the front, and
// a partial line that fills the whole buffer moves to rd.long.
func (rd *Reader) fill() error {
	rd.keep()
	rd.crFree = 0
	if rd.r == 0 && rd.w == len(rd.buf) {
		rd.long = append(rd.long, rd.buf...)
		rd.r, rd.w = 0, 0
		if rd.size+len(rd.long) > rd.max {
			return rd.tooLarge()
		}
	} else if rd.r > 0 {
		rd.w = copy(rd.buf, rd.buf[rd.r:rd.w])
		rd.r = 0
	}
	for tries := 0; ; tries++ {
		n, err := rd.src.Read(rd.buf[rd.w:])
		rd.w += n
		if n > 0 {
			rd.reads++
		}
		if err != nil {
			rd.err = err
		}
		if n > 0 || err != nil {
			return nil
		}
		if tries == 100 {
			rd.err = io.ErrNoProgress
			return nil
		}
	}
}

func (rd *Reader) tooLarge() error {
	rd.err = fmt.Errorf("%w: one event exceeds %d bytes", transport.ErrEventTooLarge, rd.max)
	return rd.err
}
