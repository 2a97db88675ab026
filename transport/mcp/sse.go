package mcp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// sseEvent is one dispatched Server-Sent Event. Data aliases the reader's
// buffer and is valid until the next call to next.
type sseEvent struct {
	name     string
	data     []byte
	id       string
	hasID    bool
	hasData  bool
	retry    time.Duration
	hasRetry bool
}

// eventReader splits an SSE body into events, following the WHATWG event
// stream format for the fields MCP uses (data, event, id, retry; unknown
// fields are skipped, and a block of only those is no event). Comment lines
// are discarded as they are read, unbuffered, and do not count toward the
// limit. Lines end with LF or CRLF. One event, all its other lines together,
// may not exceed max bytes. Unlike r3labs' reader it reports a body that ends
// inside an event as io.ErrUnexpectedEOF instead of dispatching the truncated
// event.
type eventReader struct {
	r    *bufio.Reader
	max  int
	line []byte
	ev   sseEvent
}

func newEventReader(r io.Reader, max int) *eventReader {
	if max <= 0 {
		max = transport.DefaultMaxEventBytes
	}
	return &eventReader{r: bufio.NewReaderSize(r, 32<<10), max: max}
}

// next returns the next event. It returns io.EOF when the body ends cleanly
// between events, io.ErrUnexpectedEOF when it ends inside one, and an error
// wrapping transport.ErrEventTooLarge when an event exceeds the limit.
func (er *eventReader) next() (*sseEvent, error) {
	er.ev = sseEvent{data: er.ev.data[:0]}
	size := 0
	started, known := false, false
	for {
		line, err := er.readLine(er.max - size)
		if err != nil {
			if errors.Is(err, io.EOF) && (known || len(line) > 0 && line[0] != ':') {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(line) == 0 {
			if known {
				return &er.ev, nil
			}
			if started { // only comments or unknown fields: no event
				er.ev, size, started = sseEvent{data: er.ev.data[:0]}, 0, false
			}
			continue
		}
		if line[0] == ':' {
			continue // a comment: skipped unread, it does not count toward max
		}
		size += len(line) + 1
		started = true
		known = er.field(line) || known
	}
}

// commentLine stands for a comment line, which readLine discards unbuffered.
var commentLine = []byte{':'}

// readLine reads one line without its terminator. A non-empty line counts
// its length plus one against left, the bytes the event may still use. A
// comment line (one starting with ':') is discarded as it is read, however
// long, and returned as commentLine.
func (er *eventReader) readLine(left int) ([]byte, error) {
	er.line = er.line[:0]
	for {
		frag, err := er.r.ReadSlice('\n')
		if len(er.line) == 0 && len(frag) > 0 && frag[0] == ':' {
			return commentLine, er.skipComment(err)
		}
		er.line = append(er.line, frag...)
		line := er.line
		if err == nil {
			line = bytes.TrimSuffix(line[:len(line)-1], []byte{'\r'})
		}
		if len(line) > 0 && len(line)+1 > left {
			return nil, fmt.Errorf("SSE event over %d bytes: %w", er.max, transport.ErrEventTooLarge)
		}
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return er.line, err
		}
	}
}

// skipComment discards the rest of a comment line whose first fragment
// ReadSlice returned with err.
func (er *eventReader) skipComment(err error) error {
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = er.r.ReadSlice('\n')
	}
	return err
}

// field applies one non-empty line to the event being built and reports
// whether it was one of the known fields.
func (er *eventReader) field(line []byte) bool {
	if line[0] == ':' {
		return false // comment
	}
	name, value, found := bytes.Cut(line, []byte{':'})
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	ev := &er.ev
	switch string(name) {
	case "data":
		if ev.hasData {
			ev.data = append(ev.data, '\n')
		}
		ev.data = append(ev.data, value...)
		ev.hasData = true
	case "event":
		ev.name = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			ev.id, ev.hasID = string(value), true
		}
	case "retry":
		ms, err := strconv.ParseUint(string(value), 10, 31)
		if err != nil {
			return false
		}
		ev.retry, ev.hasRetry = time.Duration(ms)*time.Millisecond, true
	default:
		return false
	}
	return true
}
