// Package replay is the recording of a stream's chunks and the transport
// that plays a recording back as a source.
//
// A recording is NDJSON: one line per chunk, in the order the stream
// received them, no header line. Each line is an object with the chunk's
// payload and its metadata:
//
//	{"seq":1,"id":"41","event":"message","fd":"stdout","received-at-ms":1764331200123,"data":{"city":"Paris"}}
//	{"seq":2,"id":"42","received-at-ms":1764331200456,"text":"a line that is not JSON"}
//
// "data" holds a payload that is JSON as it is (so a recording reads as the
// source's own data); "text" holds any other payload as a string. "id" is
// the chunk's cursor at its source; "event" (an SSE event name, "progress"
// and "result" for MCP) and "fd" (a process's "stdout" or "stderr") are
// left out when empty. "seq" is the chunk's number in the stream. Writer
// writes it, Read reads it; the transport (Transport) and `rtfshost test`
// feed it to a processor exactly as the recorded stream's processor got it.
package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// line is one line of a recording.
type line struct {
	Seq        int64           `json:"seq"`
	ID         string          `json:"id,omitempty"`
	Event      string          `json:"event,omitempty"`
	FD         string          `json:"fd,omitempty"`
	ReceivedAt int64           `json:"received-at-ms"`
	Data       json.RawMessage `json:"data,omitempty"`
	Text       *string         `json:"text,omitempty"`
}

// MaxLine bounds one line of a recording (a chunk and its metadata).
const MaxLine = 16 << 20

// A Writer appends chunks to a recording. It is safe for concurrent use;
// each Write is one line, written with one call to the underlying writer.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer
}

// NewWriter returns a Writer that appends lines to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write appends chunk c, the stream's chunk number seq.
func (w *Writer) Write(seq int64, c transport.Chunk) error {
	l := line{Seq: seq, ID: c.ID, Event: c.Event, FD: c.FD, ReceivedAt: c.ReceivedAt.UnixMilli()}
	if json.Valid(c.Data) && len(bytes.TrimSpace(c.Data)) > 0 {
		var compact bytes.Buffer
		if err := json.Compact(&compact, c.Data); err != nil {
			return fmt.Errorf("record chunk %d: %w", seq, err)
		}
		l.Data = compact.Bytes()
	} else {
		s := string(c.Data)
		l.Text = &s
	}
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("record chunk %d: %w", seq, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Reset()
	w.buf.Write(b)
	w.buf.WriteByte('\n')
	if _, err := w.w.Write(w.buf.Bytes()); err != nil {
		return fmt.Errorf("record chunk %d: %w", seq, err)
	}
	return nil
}

// A Recorded is one chunk of a recording: the chunk as the transport
// delivered it, and its number in the recorded stream.
type Recorded struct {
	Seq   int64
	Chunk transport.Chunk
}

// Read reads a whole recording. name is used in errors, which give the
// line number of a line that is not a chunk. Blank lines are skipped.
func Read(name string, r io.Reader) ([]Recorded, error) {
	var out []Recorded
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		rec, err := parseLine(b)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, n+1, err)
	}
	return out, nil
}

func parseLine(b []byte) (Recorded, error) {
	var l line
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Recorded{}, fmt.Errorf("not a recorded chunk: %w", err)
	}
	c := transport.Chunk{ID: l.ID, Event: l.Event, FD: l.FD, ReceivedAt: time.UnixMilli(l.ReceivedAt)}
	switch {
	case l.Data != nil && l.Text != nil:
		return Recorded{}, fmt.Errorf("a recorded chunk has \"data\" or \"text\", not both")
	case l.Data != nil:
		c.Data = []byte(l.Data)
	case l.Text != nil:
		c.Data = []byte(*l.Text)
	default:
		return Recorded{}, fmt.Errorf("a recorded chunk needs \"data\" (JSON) or \"text\"")
	}
	return Recorded{Seq: l.Seq, Chunk: c}, nil
}
