package sseread

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"unsafe"

	"github.com/rtfshost/rtfshost/transport"
)

// refEvent is an event as the reference parser sees it.
type refEvent struct {
	Data  string
	Name  string
	ID    string
	HasID bool
}

// refParse is a deliberately naive reading of the WHATWG event stream rules,
// written independently of Reader to cross-check it: split into lines,
// then interpret fields. It returns the events that carry data or an id, the
// last retry value (-1 if none), the size of the largest complete block and
// the size of the incomplete block at the end. Comment lines count toward
// neither size.
func refParse(in []byte) (evs []refEvent, retry int64, largest, pending int) {
	in = bytes.TrimPrefix(in, bom)
	retry = -1
	var cur refEvent
	var data []string
	hasData, block := false, 0
	for len(in) > 0 {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			if in[0] != ':' { // an unterminated line is discarded, but counts
				pending = block + len(in)
			}
			break
		}
		n := i + 1
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			n++
		}
		line := string(in[:i])
		in = in[n:]
		if line != "" && line[0] == ':' {
			continue // comments are discarded and do not count toward the limit
		}
		block += n
		if line == "" {
			largest = max(largest, block)
			block = 0
			if hasData || cur.HasID {
				cur.Data = strings.Join(data, "\n")
				evs = append(evs, cur)
			}
			cur, data, hasData = refEvent{}, nil, false
			continue
		}
		name, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "data":
			data = append(data, value)
			hasData = true
		case "event":
			cur.Name = value
		case "id":
			if !strings.Contains(value, "\x00") {
				cur.ID, cur.HasID = value, true
			}
		case "retry":
			if ms, ok := parseRetry([]byte(value)); ok {
				retry = ms
			}
		}
	}
	pending = max(pending, block)
	return evs, retry, largest, pending
}

// readAll runs a Reader over in and collects what it returns.
func readAll(src io.Reader, limit, bufSize int) ([]refEvent, int64, error) {
	rd := New(limit, bufSize)
	rd.Reset(src)
	var evs []refEvent
	for {
		ev, err := rd.Next()
		if err == io.EOF || err == io.ErrUnexpectedEOF { // a cut-off event is discarded either way
			return evs, rd.retry, nil
		}
		if err != nil {
			return evs, rd.retry, err
		}
		evs = append(evs, refEvent{Data: string(ev.Data), Name: string(ev.Name), ID: string(ev.ID), HasID: ev.HasID})
	}
}

func TestEventReaderCases(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  []refEvent
		retry int64
	}{
		{"single", "id: 1\nevent: chunk\ndata: {\"a\":1}\n\n",
			[]refEvent{{Data: `{"a":1}`, Name: "chunk", ID: "1", HasID: true}}, -1},
		{"multi-line data", "data: l1\ndata: l2\ndata\n\n",
			[]refEvent{{Data: "l1\nl2\n"}}, -1},
		{"CRLF and CR endings", "data: a\r\n\r\ndata: b\r\rdata: c\n\n",
			[]refEvent{{Data: "a"}, {Data: "b"}, {Data: "c"}}, -1},
		{"comment and retry only", ": hello\nretry: 1500\n\n: keepalive\n\n", nil, 1500},
		{"bad retry ignored", "retry: 15x\n\nretry: -3\n\n", nil, -1},
		{"BOM stripped once", "\xEF\xBB\xBFdata: x\n\n\xEF\xBB\xBFdata: y\n\n",
			[]refEvent{{Data: "x"}}, -1}, // the second BOM makes an unknown field name
		{"no space trim beyond one", "data:  two\n\n", []refEvent{{Data: " two"}}, -1},
		{"no colon is an empty field", "data\n\n", []refEvent{{Data: ""}}, -1},
		{"id with NUL ignored", "id: a\x00b\ndata: z\n\n", []refEvent{{Data: "z"}}, -1},
		{"empty id resets", "id:\ndata: z\n\n", []refEvent{{Data: "z", HasID: true}}, -1},
		{"id only block", "id: 7\n\n", []refEvent{{ID: "7", HasID: true}}, -1},
		{"incomplete event at EOF discarded", "data: a\n\ndata: b\n", []refEvent{{Data: "a"}}, -1},
		{"unknown fields ignored", "foo: bar\ndata: a\n\n", []refEvent{{Data: "a"}}, -1},
		{"last event name wins", "event: a\nevent: b\ndata: x\n\n", []refEvent{{Data: "x", Name: "b"}}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, bufSize := range []int{minBufSize, DefaultBufSize} {
				got, retry, err := readAll(iotest.OneByteReader(strings.NewReader(tt.in)), 1<<20, bufSize)
				if err != nil {
					t.Fatalf("buf %d: %v", bufSize, err)
				}
				if !reflect.DeepEqual(got, tt.want) || retry != tt.retry {
					t.Errorf("buf %d: got %+v retry %d, want %+v retry %d", bufSize, got, retry, tt.want, tt.retry)
				}
			}
		})
	}
}

func TestEventReaderLongLines(t *testing.T) {
	big := strings.Repeat("x", 100<<10) // over 64 KiB, far over the buffer
	in := "id: 1\ndata: " + big + "\n\nid: 2\ndata: small\n\n"
	got, _, err := readAll(strings.NewReader(in), 1<<20, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Data != big || got[1].Data != "small" || got[1].ID != "2" {
		t.Fatalf("got %d events; first data %d bytes", len(got), len(got[0].Data))
	}
}

func TestEventReaderTooLarge(t *testing.T) {
	const limit = 4096
	tests := map[string]string{
		"one long line":    "data: " + strings.Repeat("x", limit) + "\n\n",
		"many short lines": strings.Repeat("data: 0123456789\n", limit/10) + "\n",
		"endless line":     "data: " + strings.Repeat("y", 10*limit),
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			for _, bufSize := range []int{minBufSize, 1024, DefaultBufSize} {
				_, _, err := readAll(strings.NewReader("data: ok\n\n"+in), limit, bufSize)
				if !errors.Is(err, transport.ErrEventTooLarge) {
					t.Fatalf("buf %d: err = %v, want ErrEventTooLarge", bufSize, err)
				}
				if !strings.Contains(err.Error(), fmt.Sprint(limit)) {
					t.Errorf("error %q does not name the limit", err)
				}
			}
		})
	}
	// An event just under the limit passes.
	in := "data: " + strings.Repeat("x", limit-10) + "\n\n"
	if _, _, err := readAll(strings.NewReader(in), limit, 1024); err != nil {
		t.Fatalf("event of %d bytes under a %d limit: %v", len(in), limit, err)
	}
}

// TestEventReaderLongComment: comment lines of any length are skipped
// without being buffered and do not count toward the event limit.
func TestEventReaderLongComment(t *testing.T) {
	const limit = 64
	note := ":" + strings.Repeat("c", 1<<20)
	in := note + "\r\nid: 1\n" + note + "\rdata: a\n" + note + "\n\n" + note
	for _, bufSize := range []int{minBufSize, 1024, DefaultBufSize} {
		rd := New(limit, bufSize)
		rd.Reset(&chunkedReader{in: []byte(in), sizes: []byte{15, 3, 7}})
		ev, err := rd.Next()
		if err != nil || string(ev.Data) != "a" || string(ev.ID) != "1" {
			t.Fatalf("buf %d: next = %+v, %v", bufSize, ev, err)
		}
		if _, err := rd.Next(); err != io.EOF {
			t.Fatalf("buf %d: after the trailing comment err = %v, want io.EOF", bufSize, err)
		}
		if c := cap(rd.long); c > 0 {
			t.Fatalf("buf %d: a comment was buffered (%d bytes)", bufSize, c)
		}
	}
}

func TestEventReaderStopsAtNeed(t *testing.T) {
	// The reader must not consume input beyond the event it returns when that
	// event ends exactly at a read boundary: it reads only when it needs to.
	src := &countingReader{chunks: []string{"data: a\n\n", "data: b\n\n"}}
	rd := New(1<<20, 1024)
	rd.Reset(src)
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	if src.reads != 1 {
		t.Fatalf("reads = %d after the first event, want 1", src.reads)
	}
}

// TestEventReaderLendsAndKeeps: an event read whole from the buffer points
// into it; an event whose reading refills the buffer midway is copied before
// the refill, multi-line data included; and a caller's append to an event's
// slices never writes into the buffer.
func TestEventReaderLendsAndKeeps(t *testing.T) {
	in := "id: 1\nevent: e\ndata: one\n\n" + // one read
		"id: 22\nevent: ee\ndata: two\n" + "data: 2b\n\n" + // split across reads
		"data: three\n\n"
	rd := New(1<<20, 64)
	rd.Reset(&countingReader{chunks: []string{in[:26], in[26:55], in[55:]}})
	inBuf := func(b []byte) bool {
		return len(b) > 0 &&
			uintptr(unsafe.Pointer(&b[0]))-uintptr(unsafe.Pointer(&rd.buf[0])) < uintptr(len(rd.buf))
	}
	ev, err := rd.Next()
	if err != nil || string(ev.Data) != "one" || string(ev.ID) != "1" || string(ev.Name) != "e" {
		t.Fatalf("event 1 = %+v, %v", ev, err)
	}
	if !inBuf(ev.Data) || !inBuf(ev.ID) || !inBuf(ev.Name) {
		t.Errorf("event 1, read whole from the buffer, was copied")
	}
	_ = append(ev.Data, "XXXXXXXXXXXX"...) // must not clobber the next event
	_ = append(ev.ID, "YYYYYYYYYYYYY"...)
	ev, err = rd.Next()
	if err != nil || string(ev.Data) != "two\n2b" || string(ev.ID) != "22" || string(ev.Name) != "ee" {
		t.Fatalf("event 2 = %+v, %v", ev, err)
	}
	if inBuf(ev.Data) || inBuf(ev.ID) || inBuf(ev.Name) {
		t.Errorf("event 2, split across a refill, still points into the buffer")
	}
	ev, err = rd.Next()
	if err != nil || string(ev.Data) != "three" || string(ev.ID) != "" || ev.HasID {
		t.Fatalf("event 3 = %+v, %v", ev, err)
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Fatalf("after the last event err = %v, want io.EOF", err)
	}
}

// TestEventReaderReads: Reads counts the reads that returned bytes, and
// an event comes with the read that brought its last line.
func TestEventReaderReads(t *testing.T) {
	rd := New(1<<20, 1024)
	rd.Reset(&countingReader{chunks: []string{"data: a\n\ndata: b\n\ndata: c", "\n\n"}})
	for i, want := range []uint64{1, 1, 2} {
		if _, err := rd.Next(); err != nil {
			t.Fatal(err)
		}
		if got := rd.Reads(); got != want {
			t.Fatalf("event %d: Reads = %d, want %d", i+1, got, want)
		}
	}
}

type countingReader struct {
	chunks []string
	reads  int
}

func (c *countingReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	c.reads++
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func TestEventReaderNoProgress(t *testing.T) {
	_, _, err := readAll(zeroReader{}, 1<<20, 64)
	if !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// chunkedReader returns its input in pieces of the given sizes, cycling.
type chunkedReader struct {
	in    []byte
	sizes []byte
	i     int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := len(c.in)
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)])%16 + 1
		c.i++
	}
	n = min(n, len(p), len(c.in))
	copy(p, c.in[:n])
	c.in = c.in[n:]
	return n, nil
}

// FuzzParseEvent checks the event reader against refParse on any input, with
// any read sizes and buffer size, and checks the size limit.
func FuzzParseEvent(f *testing.F) {
	f.Add([]byte("id: 1\nevent: chunk\ndata: {\"a\":1}\n\n"), []byte{3, 7}, uint8(0))
	f.Add([]byte("data: a\r\n\r\ndata: b\r\rdata: c\n\n: c\nretry: 10\n\n"), []byte{1}, uint8(1))
	f.Add([]byte("\xEF\xBB\xBFdata\ndata:x\nid\x00:\nid: \x00\n\n"), []byte{}, uint8(2))
	f.Add([]byte("data: "+strings.Repeat("z", 200)+"\r\ndata: q\r\n\r\n"), []byte{15, 2}, uint8(3))
	f.Add([]byte(":"+strings.Repeat("c", 300)+"\rdata: a\n:"+strings.Repeat("k", 90)+"\r\n\n:tail"), []byte{5, 9}, uint8(0))
	f.Fuzz(func(t *testing.T, in, sizes []byte, buf uint8) {
		if len(in) > 1<<14 {
			return // long inputs add nothing the short ones miss, and slow the search
		}
		bufSize := minBufSize + int(buf)
		want, wantRetry, largest, pending := refParse(in)
		src := &chunkedReader{in: in, sizes: sizes}
		got, retry, err := readAll(src, 1<<20, bufSize)
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		if len(got) == 0 && len(want) == 0 {
			got, want = nil, nil
		}
		if !reflect.DeepEqual(got, want) || retry != wantRetry {
			t.Fatalf("input %q:\n got %+v retry %d\nwant %+v retry %d", in, got, retry, want, wantRetry)
		}
		// With a small limit the reader reports an oversized event exactly
		// when a block (comments excluded) is over the limit; the LF of a
		// CRLF split across reads may count toward the next block, hence the
		// one byte of slack.
		limit := 64
		got, _, err = readAll(&chunkedReader{in: in, sizes: sizes}, limit, bufSize)
		switch {
		case errors.Is(err, transport.ErrEventTooLarge):
			if max(largest, pending)+1 <= limit {
				t.Fatalf("input %q: too large with every block within %d bytes", in, limit)
			}
		case err != nil:
			t.Fatalf("unexpected error: %v", err)
		case largest > limit+1:
			t.Fatalf("input %q: a block of %d bytes passed a %d-byte limit", in, largest, limit)
		case len(got) != len(want):
			t.Fatalf("input %q: %d events under a limit, want %d", in, len(got), len(want))
		}
	})
}

// TestParseRetryField: the retry field takes ASCII digits only, within time.Duration.
func TestParseRetryField(t *testing.T) {
	tests := []struct {
		in   string
		ms   int64
		okay bool
	}{
		{"1500", 1500, true},
		{"0", 0, true},
		{"", 0, false},
		{"1.5", 0, false},
		{" 15", 0, false},
		{"9223372036855", 0, false}, // would overflow time.Duration
		{"9223372036854", 9223372036854, true},
	}
	for _, tt := range tests {
		ms, ok := parseRetry([]byte(tt.in))
		if ms != tt.ms || ok != tt.okay {
			t.Errorf("parseRetry(%q) = %d, %v; want %d, %v", tt.in, ms, ok, tt.ms, tt.okay)
		}
	}
}
