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
// Reader and are valid until the next call to Next.
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
	long   []byte // a line that did not fit in buf, being accumulated
	max    int    // limit on one event's raw size
	size   int    // raw bytes of the current event so far
	ev     Event  // the event being built
	retry  int64  // last valid retry field in milliseconds, -1 if none
}

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

// Reset prepares the reader for a new connection. The retry value survives: it
// is the stream's reconnection time, not a property of one response.
func (rd *Reader) Reset(src io.Reader) {
	rd.src = src
	rd.r, rd.w = 0, 0
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
	rd.ev.Data = shrink(rd.ev.Data)
	rd.ev.Name = rd.ev.Name[:0]
	rd.ev.ID = rd.ev.ID[:0]
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
		line, err := rd.readLine()
		if err != nil {
			if err == io.EOF && rd.partial() {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(line) > 0 {
			rd.field(line)
			continue
		}
		if rd.ev.HasData || rd.ev.HasID {
			return &rd.ev, nil
		}
		rd.clearEvent()
	}
}

// field interprets one non-empty line.
func (rd *Reader) field(line []byte) {
	if line[0] == ':' {
		return
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if rd.ev.HasData {
			rd.ev.Data = append(rd.ev.Data, '\n')
		}
		rd.ev.Data = append(rd.ev.Data, value...)
		rd.ev.HasData = true
	case "event":
		rd.ev.Name = append(rd.ev.Name[:0], value...)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			rd.ev.ID = append(rd.ev.ID[:0], value...)
			rd.ev.HasID = true
		}
	case "retry":
		if ms, ok := parseRetry(value); ok {
			rd.retry = ms
		}
	}
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

// readLine returns the next line without its terminator. The slice is valid
// until the next call. A line cut off by the end of the input is discarded and
// the source's error returned.
func (rd *Reader) readLine() ([]byte, error) {
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
			if line, ok, err := rd.cutLine(); ok || err != nil {
				return line, err
			}
		}
		if rd.err != nil {
			return nil, rd.err
		}
		if err := rd.fill(); err != nil {
			return nil, err
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

// cutLine takes one complete line from the buffer if there is one.
func (rd *Reader) cutLine() ([]byte, bool, error) {
	seg := rd.buf[rd.r:rd.w]
	i := indexEOL(seg)
	if i < 0 {
		return nil, false, nil
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
		return nil, false, rd.tooLarge()
	}
	if len(rd.long) == 0 {
		return seg[:i], true, nil
	}
	rd.long = append(rd.long, seg[:i]...)
	line := rd.long
	rd.long = rd.long[:0]
	if cap(line) > keepCap {
		rd.long = nil
	}
	return line, true, nil
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
