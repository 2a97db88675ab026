package sse

import (
	"context"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
)

// tickClock is a fake clock whose every Now is one second after the last.
type tickClock struct {
	retry.FakeClock
	t0    time.Time
	calls int
}

func (c *tickClock) Now() time.Time {
	c.calls++
	return c.t0.Add(time.Duration(c.calls) * time.Second)
}

// readsOf returns its pieces one per Read call.
type readsOf []string

func (r *readsOf) Read(p []byte) (int, error) {
	if len(*r) == 0 {
		return 0, io.EOF
	}
	n := copy(p, (*r)[0])
	(*r)[0] = (*r)[0][n:]
	if (*r)[0] == "" {
		*r = (*r)[1:]
	}
	return n, nil
}

// TestReceivedAtIsTheRead: a chunk's ReceivedAt is when the read that
// completed it returned, so the clock is read once per read, not per event.
func TestReceivedAtIsTheRead(t *testing.T) {
	clk := &tickClock{t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var got []time.Time
	sink := &recSink{deliver: func(_ context.Context, c transport.Chunk) error {
		got = append(got, c.ReceivedAt)
		return nil
	}}
	s, err := newSession(transport.Spec{Endpoint: "http://127.0.0.1:1/s"}, "", sink, retry.Policy{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	s.rd.Reset(&readsOf{
		"id: 1\ndata: a\n\nid: 2\ndata: b\n\nid: 3\ndata: c", // 1, 2 and the start of 3
		"\n\nid: 4\ndata: d\n\n",                             // 3 ends here; 4
		"id: 5\ndata: e\n\nevent: status\ndata: {\"status\":\"complete\"}\n\n",
	})
	if _, err := s.stream(context.Background()); err != nil {
		t.Fatalf("stream: %v", err)
	}
	at := func(n int) time.Time { return clk.t0.Add(time.Duration(n) * time.Second) }
	want := []time.Time{at(1), at(1), at(2), at(2), at(3)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ReceivedAt = %v, want %v", got, want)
	}
	if clk.calls != 3 {
		t.Fatalf("the clock was read %d times for 3 reads", clk.calls)
	}
}

// TestIDStrings: ids cut from shared blocks keep their values while later
// ids fill the block and new blocks are taken; a long id gets a string of
// its own.
func TestIDStrings(t *testing.T) {
	var p idStrings
	var got, want []string
	for i := range 5000 {
		id := strconv.Itoa(i * 7919)
		if i%97 == 0 {
			id = strings.Repeat("x", idBlock/8+1+i%5)
		}
		got = append(got, p.of([]byte(id)))
		want = append(want, id)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("an id string changed after later ids were made")
	}
	if s := p.of(nil); s != "" {
		t.Fatalf("empty id = %q", s)
	}
}
