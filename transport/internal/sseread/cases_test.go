package sseread

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// parsed is an event as these cases write it; retry is the reader's Retry
// after the event.
type parsed struct {
	name, data, id string
	hasID          bool
	retry          time.Duration
}

func parseAll(t *testing.T, in string, max int) ([]parsed, error) {
	t.Helper()
	er := New(max, 0)
	er.Reset(strings.NewReader(in))
	var out []parsed
	for {
		ev, err := er.Next()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return out, err
		}
		retry, _ := er.Retry()
		out = append(out, parsed{string(ev.Name), string(ev.Data), string(ev.ID), ev.HasID, retry})
	}
}

func TestReaderCases(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []parsed
		err  error
	}{
		{"simple", "event: message\nid: 7\ndata: {}\n\n", []parsed{{"message", "{}", "7", true, 0}}, nil},
		{"multi-line data", "data: a\ndata: b\ndata\n\n", []parsed{{"", "a\nb\n", "", false, 0}}, nil},
		{"CRLF", "id: x\r\ndata: y\r\n\r\n", []parsed{{"", "y", "x", true, 0}}, nil},
		{"LF lines then CR and CRLF ones", "data: a\n\ndata: b\r\rid: 1\ndata: c\r\n\r\ndata: d\n\n",
			[]parsed{{"", "a", "", false, 0}, {"", "b", "", false, 0}, {"", "c", "1", true, 0}, {"", "d", "", false, 0}}, nil},
		{"no space after colon", "data:z\n\n", []parsed{{"", "z", "", false, 0}}, nil},
		{"two spaces keep one", "data:  z\n\n", []parsed{{"", " z", "", false, 0}}, nil},
		{"comments and blank lines", ": hi\n\n\n\ndata: d\n\n", []parsed{{"", "d", "", false, 0}}, nil},
		{"comment at the end", "data: d\n\n: bye", []parsed{{"", "d", "", false, 0}}, nil},
		{"comment-only tail", "data: d\n\n: ping\nfoo: x\n\n", []parsed{{"", "d", "", false, 0}}, nil},
		{"priming", "event: prime\nid: s_0\ndata:\n\n", []parsed{{"prime", "", "s_0", true, 0}}, nil},
		{"retry", "retry: 1500\ndata: x\n\n", []parsed{{"", "x", "", false, 1500 * time.Millisecond}}, nil},
		{"retry-only block is no event", "retry: 1500\n\ndata: y\n\n", []parsed{{"", "y", "", false, 1500 * time.Millisecond}}, nil},
		{"bad retry ignored", "retry: soon\ndata: x\n\n", []parsed{{"", "x", "", false, 0}}, nil},
		{"id with NUL ignored", "id: a\x00b\ndata: x\n\n", []parsed{{"", "x", "", false, 0}}, nil},
		{"unknown field", "foo: bar\ndata: x\n\n", []parsed{{"", "x", "", false, 0}}, nil},
		{"truncated event", "data: x\n\ndata: partial", []parsed{{"", "x", "", false, 0}}, io.ErrUnexpectedEOF},
		{"truncated before blank line", "data: x\n", nil, io.ErrUnexpectedEOF},
		{"too large", "data: " + strings.Repeat("x", 100) + "\n\n", nil, transport.ErrEventTooLarge},
		{"too large over lines", strings.Repeat("data: 0123456789\n", 6) + "\n", nil, transport.ErrEventTooLarge},
		{"comment over the limit", ": " + strings.Repeat("c", 1000) + "\ndata: d\n\n", []parsed{{"", "d", "", false, 0}}, nil},
		{"comment over the limit at the end", "data: d\n\n:" + strings.Repeat("c", 1000), []parsed{{"", "d", "", false, 0}}, nil},
		{"comment inside an event", "data: a\n:" + strings.Repeat("c", 1000) + "\ndata: b\n\n", []parsed{{"", "a\nb", "", false, 0}}, nil},
		{"at the limit", "data: " + strings.Repeat("x", 56) + "\n\n", []parsed{{"", strings.Repeat("x", 56), "", false, 0}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseAll(t, tc.in, 64)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("events = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("event %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestReaderLongLines reads events longer than the read buffer.
func TestReaderLongLines(t *testing.T) {
	big := strings.Repeat("y", 200<<10)
	got, err := parseAll(t, "data: "+big+"\n\ndata: after\n\n", 1<<20)
	if err != nil || len(got) != 2 || got[0].data != big || got[1].data != "after" {
		t.Fatalf("err %v, %d events", err, len(got))
	}
}

// TestReaderLongComment: a comment line far longer than the limit and
// the bufio buffer is skipped without being buffered.
func TestReaderLongComment(t *testing.T) {
	in := ":" + strings.Repeat("c", 1<<20) + "\r\nid: 1\ndata: after\n\n"
	er := New(64, 0)
	er.Reset(strings.NewReader(in))
	ev, err := er.Next()
	if err != nil || string(ev.Data) != "after" || string(ev.ID) != "1" {
		t.Fatalf("next = %+v, %v", ev, err)
	}
	if c := cap(er.long); c > 64 {
		t.Fatalf("the comment was buffered: line buffer of %d bytes", c)
	}
}

// FuzzReaderMCPSeeds checks that any input ends in io.EOF,
// io.ErrUnexpectedEOF or ErrEventTooLarge, never a panic or a loop, and that
// no event exceeds the limit.
func FuzzReaderMCPSeeds(f *testing.F) {
	for _, s := range []string{
		"event: message\nid: 1\ndata: {}\n\n", "data: a\r\ndata: b\r\n\r\n", "retry: 10\n\n",
		": c\n\n", "data: x", "id: \x00\n\n", "data:" + strings.Repeat("z", 300) + "\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 256
		er := New(max, 0)
		er.Reset(strings.NewReader(string(in)))
		for n := 0; ; n++ {
			if n > len(in) {
				t.Fatalf("more events than input bytes")
			}
			ev, err := er.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, transport.ErrEventTooLarge) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(ev.Data) > max {
				t.Fatalf("event data of %d bytes passed a %d-byte limit", len(ev.Data), max)
			}
		}
	})
}
