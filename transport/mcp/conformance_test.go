package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
	"github.com/rtfshost/rtfshost/transport/transporttest"
)

// confTransport is one MCP transport under the conformance table.
type confTransport struct {
	name   string
	legacy bool
	new    func(p retry.Policy) transport.StreamTransport
}

var confTransports = []confTransport{
	{"Streamable", false, func(p retry.Policy) transport.StreamTransport { return Streamable{policy: p} }},
	{"LegacySSE", true, func(p retry.Policy) transport.StreamTransport { return LegacySSE{policy: p} }},
}

// confCase is one behaviour every MCP transport must show, in the style of
// Redpanda Connect's StreamTestDefinitions; the names follow the raw SSE
// transport's table. Each case starts its own misbehaving server and is
// followed by a goroutine leak check.
type confCase struct {
	name string
	run  func(t *testing.T, tr confTransport)
}

func TestConformance(t *testing.T) {
	cases := []confCase{
		{"OpenClose", confOpenClose},
		{"OrderedDelivery", confOrderedDelivery},
		{"ResumeAfterDrop", confResumeAfterDrop},
		{"EventOver64KiB", confEventOver64KiB},
		{"OversizedEventPermanent", confOversized},
		{"CommentOverLimitSkipped", confLongComment},
		{"RetryFieldHonoured", confRetryField},
		{"EOFBeforeEnd", confEOFBeforeEnd},
		{"Status401NotRetried", conf401},
		{"Status500BackoffSequence", conf500Backoff},
		{"CancelMidBackoff", confCancelMidBackoff},
		{"Backpressure", confBackpressure},
	}
	for _, tr := range confTransports {
		t.Run(tr.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					before := goleak.IgnoreCurrent() // the goroutines from before the case
					t.Run("case", func(t *testing.T) { c.run(t, tr) })
					goleak.VerifyNone(t, before)
				})
			}
		})
	}
}

// confRun runs tr against s with policy p and returns Run's error.
func confRun(tr confTransport, p retry.Policy, spec transport.Spec, sink *recSink) error {
	return tr.new(p).Run(context.Background(), spec, "", sink)
}

func progressRange(c *callWriter, from, to int) {
	for i := from; i <= to; i++ {
		c.progress(fmt.Sprint(i), float64(i))
	}
}

func confOpenClose(t *testing.T, tr confTransport) {
	s := newConfServer(t, &confServer{legacy: tr.legacy, script: func(c *callWriter) {
		progressRange(c, 1, 3)
		c.result()
	}})
	sink := &recSink{}
	if err := confRun(tr, fastPolicy, s.spec(), sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.events(); !slices.Equal(got, wantEvents(3)) {
		t.Fatalf("events = %v", got)
	}
	s.waitStreamsClosed(t)
	reqs := s.log.all()
	want := []string{"POST initialize", "POST notifications/initialized", "POST tools/call"}
	if tr.legacy {
		want = append([]string{"GET"}, want...)
	}
	var seen []string
	for _, r := range reqs {
		if slices.Contains(want, r) {
			seen = append(seen, r)
		}
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("requests %v, want %v in that order", reqs, want)
	}
	if !tr.legacy && reqs[len(reqs)-1] != "DELETE" {
		t.Fatalf("requests %v: the session was not ended with DELETE", reqs)
	}
}

func confOrderedDelivery(t *testing.T, tr confTransport) {
	const n = 500
	s := newConfServer(t, &confServer{legacy: tr.legacy, script: func(c *callWriter) {
		progressRange(c, 1, n)
		c.result()
	}})
	sink := &recSink{}
	if err := confRun(tr, fastPolicy, s.spec(), sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.progressValues(t); !slices.Equal(got, wantProgress(n)) || sink.last().Event != "result" {
		t.Fatalf("%d progress chunks, last %q; want 1..%d in order, then the result", len(got), sink.last().Event, n)
	}
}

// confResumeAfterDrop: the call's stream breaks inside event 6. Streamable
// resumes from event 5 with nothing lost or repeated; a legacy call cannot
// be resumed, which is a permanent error after the chunks already read.
func confResumeAfterDrop(t *testing.T, tr confTransport) {
	s := newConfServer(t, &confServer{legacy: tr.legacy,
		script: func(c *callWriter) {
			progressRange(c, 1, 5)
			c.raw("id: 6\nevent: message\ndata: {\"jsonrpc\":")
			c.drop()
		},
		resume: func(c *callWriter, last string) {
			var from int
			fmt.Sscan(last, &from)
			progressRange(c, from+1, 10)
			c.result()
		}})
	sink := &recSink{}
	err := confRun(tr, fastPolicy, s.spec(), sink)
	if n := s.log.count("POST tools/call"); n != 1 {
		t.Fatalf("tools/call sent %d times", n)
	}
	if tr.legacy {
		if !transport.IsPermanent(err) || !strings.Contains(err.Error(), "a legacy HTTP+SSE call cannot be resumed") {
			t.Fatalf("err = %v, want the permanent cannot-be-resumed error", err)
		}
		if got := sink.progressValues(t); !slices.Equal(got, wantProgress(5)) || s.connects() != 1 {
			t.Fatalf("progress %v over %d connections", got, s.connects())
		}
		return
	}
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.progressValues(t); !slices.Equal(got, wantProgress(10)) || sink.last().Event != "result" {
		t.Fatalf("progress = %v, want 1..10 once each, then the result", got)
	}
	if got := s.resumeIDs(); !slices.Equal(got, []string{"5"}) {
		t.Fatalf("resume GETs with Last-Event-ID %q, want [5]", got)
	}
}

func confEventOver64KiB(t *testing.T, tr confTransport) {
	big := strings.Repeat("x", 1<<20)
	s := newConfServer(t, &confServer{legacy: tr.legacy, script: func(c *callWriter) {
		writeSSE(c.w, "1", fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%q,"progress":1,"message":%q}}`, c.tok, big))
		c.result()
	}})
	sink := &recSink{}
	if err := confRun(tr, fastPolicy, s.spec(), sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.events(); !slices.Equal(got, wantEvents(1)) || !strings.Contains(string(sink.chunks[0].Data), big) {
		t.Fatalf("events = %v", got)
	}
	if s.connects() != 1 || len(s.resumeIDs()) != 0 || len(sink.delays) != 0 {
		t.Fatalf("%d connections, resumes %q, waits %v: want no reconnect", s.connects(), s.resumeIDs(), sink.delays)
	}
}

func confOversized(t *testing.T, tr confTransport) {
	s := newConfServer(t, &confServer{legacy: tr.legacy,
		script: func(c *callWriter) {
			c.progress("1", 1)
			writeSSE(c.w, "2", `{"pad":"`+strings.Repeat("y", 8192)+`"}`)
			c.result()
		},
		resume: func(c *callWriter, last string) { c.result() }})
	spec := s.spec()
	spec.MaxEventBytes = 4096
	sink := &recSink{}
	err := confRun(tr, fastPolicy, spec, sink)
	if !errors.Is(err, transport.ErrEventTooLarge) || !transport.IsPermanent(err) || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("err = %v, want a permanent ErrEventTooLarge naming the limit", err)
	}
	if got := sink.progressValues(t); !slices.Equal(got, wantProgress(1)) {
		t.Fatalf("progress = %v", got)
	}
	if s.connects() != 1 || len(s.resumeIDs()) != 0 || len(sink.delays) != 0 || s.log.count("POST tools/call") != 1 {
		t.Fatalf("%d connections, resumes %q, waits %v, requests %v: want no retry", s.connects(), s.resumeIDs(), sink.delays, s.log.all())
	}
}

// confLongComment: a comment line far over the event limit is discarded; the
// limit applies to the event's fields.
func confLongComment(t *testing.T, tr confTransport) {
	note := ":" + strings.Repeat("k", 1<<20) + "\n"
	s := newConfServer(t, &confServer{legacy: tr.legacy, script: func(c *callWriter) {
		c.raw(note)
		c.progress("1", 1)
		c.raw(note + "\n")
		c.result()
	}})
	spec := s.spec()
	spec.MaxEventBytes = 4096
	sink := &recSink{}
	if err := confRun(tr, fastPolicy, spec, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.events(); !slices.Equal(got, wantEvents(1)) || s.connects() != 1 {
		t.Fatalf("events = %v over %d connections", got, s.connects())
	}
}

// confRetryField: a "retry: 40" field makes the next reconnect wait 40 ms,
// longer than the 1 ms backoff. Streamable reconnects to resume the call;
// legacy reconnects when its stream ends before the endpoint event.
func confRetryField(t *testing.T, tr confTransport) {
	s := newConfServer(t, &confServer{legacy: tr.legacy,
		prelude: func(n int) (string, bool) { return "retry: 40\n\n", n == 1 },
		script: func(c *callWriter) {
			if !tr.legacy {
				c.raw("retry: 40\n\n")
				c.progress("1", 1)
				c.drop()
			}
			c.progress("1", 1)
			c.result()
		},
		resume: func(c *callWriter, last string) { c.result() }})
	clk := &fakeClock{}
	sink := &recSink{}
	if err := confRun(tr, retry.Policy{Initial: time.Millisecond, Max: 16 * time.Millisecond, Clock: clk}, s.spec(), sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []time.Duration{40 * time.Millisecond}
	if got := clk.Waits(); !slices.Equal(got, want) || !slices.Equal(sink.delays, want) {
		t.Fatalf("waits %v, reported %v; want %v", got, sink.delays, want)
	}
	if got := sink.events(); !slices.Equal(got, wantEvents(1)) {
		t.Fatalf("events = %v", got)
	}
	if tr.legacy && s.connects() != 2 || !tr.legacy && !slices.Equal(s.resumeIDs(), []string{"1"}) {
		t.Fatalf("%d connections, resumes %q", s.connects(), s.resumeIDs())
	}
}

// confEOFBeforeEnd: the call's stream ends cleanly before the result.
// Streamable resumes after one backoff wait; legacy fails for good.
func confEOFBeforeEnd(t *testing.T, tr confTransport) {
	s := newConfServer(t, &confServer{legacy: tr.legacy,
		script: func(c *callWriter) {
			progressRange(c, 1, 2)
			c.end()
		},
		resume: func(c *callWriter, last string) {
			progressRange(c, 3, 4)
			c.result()
		}})
	clk := &fakeClock{}
	sink := &recSink{}
	err := confRun(tr, retry.Policy{Clock: clk}, s.spec(), sink)
	if tr.legacy {
		if !transport.IsPermanent(err) || !containsAll(err.Error(), "stream ended before the tool's result", "cannot be resumed") {
			t.Fatalf("err = %v", err)
		}
		if got := sink.progressValues(t); !slices.Equal(got, wantProgress(2)) || s.connects() != 1 || len(clk.Waits()) != 0 {
			t.Fatalf("progress %v, %d connections, waits %v", got, s.connects(), clk.Waits())
		}
		return
	}
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.progressValues(t); !slices.Equal(got, wantProgress(4)) || sink.last().Event != "result" {
		t.Fatalf("progress = %v", got)
	}
	if !slices.Equal(clk.Waits(), []time.Duration{retry.DefaultInitial}) || !slices.Equal(s.resumeIDs(), []string{"2"}) {
		t.Fatalf("waits %v, resumes %q", clk.Waits(), s.resumeIDs())
	}
}

func conf401(t *testing.T, tr confTransport) {
	s := newConfServer(t, &confServer{legacy: tr.legacy, connectFail: []int{401, 401, 401}})
	clk := &fakeClock{}
	sink := &recSink{}
	err := confRun(tr, retry.Policy{Clock: clk}, s.spec(), sink)
	var te *transport.Error
	if !errors.As(err, &te) || te.Status != 401 || !te.Permanent || te.StreamID != "conf" {
		t.Fatalf("err = %#v, want a permanent 401 *transport.Error", err)
	}
	if s.connects() != 1 || len(clk.Waits()) != 0 || len(sink.delays) != 0 {
		t.Fatalf("%d connection attempts, waits %v: want 1 and none", s.connects(), clk.Waits())
	}
}

// conf500Backoff: a server that answers 500 forever gets the project
// backoff, exactly: 250 ms doubling to the 5 s cap, RetryAttempts waits.
func conf500Backoff(t *testing.T, tr confTransport) {
	s := newConfServer(t, &confServer{legacy: tr.legacy, connectFail: slices.Repeat([]int{500}, 20)})
	spec := s.spec()
	spec.RetryAttempts = 7
	clk := &fakeClock{}
	sink := &recSink{}
	err := confRun(tr, retry.Policy{Clock: clk}, spec, sink)
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second,
		2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	if got := clk.Waits(); !slices.Equal(got, want) || !slices.Equal(sink.delays, want) {
		t.Fatalf("waits %v, reported %v; want %v", got, sink.delays, want)
	}
	var te *transport.Error
	if !errors.As(err, &te) || te.Status != 500 || te.Permanent || !strings.Contains(err.Error(), "gave up after 7 retries") {
		t.Fatalf("err = %v", err)
	}
	if s.connects() != 8 {
		t.Fatalf("%d connection attempts, want 8", s.connects())
	}
}

// confCancelMidBackoff: cancel during an hour-long reconnect wait (the real
// clock) ends Run at once, with context.Canceled.
func confCancelMidBackoff(t *testing.T, tr confTransport) {
	s := newConfServer(t, &confServer{legacy: tr.legacy, connectFail: slices.Repeat([]int{500}, 20)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	var once atomic.Bool
	sink := &recSink{onRetry: func(int) {
		if !once.Swap(true) {
			close(ready)
		}
	}}
	p := retry.Policy{Initial: time.Hour, Max: time.Hour}
	transporttest.CancelEnds(t, cancel, ready, startRun(func() error { return tr.new(p).Run(ctx, s.spec(), "", sink) }))
	if !slices.Equal(sink.delays, []time.Duration{time.Hour}) || s.connects() != 1 {
		t.Fatalf("waits %v after %d attempts", sink.delays, s.connects())
	}
}

// confBackpressure: while the sink blocks, the transport stops reading, so a
// server that could send 64 MiB writes only what the socket buffers and the
// reader's buffer hold.
func confBackpressure(t *testing.T, tr confTransport) {
	const (
		total = 64 << 20
		bound = 1 << 20 // socket buffers at both ends + the 32 KiB reader, with room
	)
	var written atomic.Int64
	pad := strings.Repeat("p", 4<<10)
	s := newConfServer(t, &confServer{legacy: tr.legacy, smallBuffers: true, script: func(c *callWriter) {
		for i := 1; written.Load() < total; i++ {
			ev := fmt.Sprintf("id: %d\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%q,\"progress\":%d,\"message\":%q}}\n\n", i, c.tok, i, pad)
			if c.raw(ev) != nil {
				return
			}
			written.Add(int64(len(ev)))
		}
	}})
	client, httpTr := smallBufClient()
	defer httpTr.CloseIdleConnections()
	spec := s.spec()
	spec.HTTP.Client = client
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blocked := make(chan struct{})
	var once atomic.Bool
	sink := &recSink{onChunk: func(int, transport.Chunk) error {
		if !once.Swap(true) {
			close(blocked)
		}
		<-ctx.Done() // the host's queue is full and stays full
		return ctx.Err()
	}}
	wait := startRun(func() error { return tr.new(fastPolicy).Run(ctx, spec, "", sink) })
	<-blocked
	n, settled := transporttest.Settle(written.Load)
	if !settled {
		t.Fatalf("the server kept writing while the sink was blocked: %d bytes and counting", written.Load())
	}
	t.Logf("server wrote %d bytes while the sink was blocked", n)
	if n >= bound || n < int64(len(pad)) {
		t.Errorf("server wrote %d bytes while the sink was blocked; want between one event and %d", n, bound)
	}
	cancel()
	if err := wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if len(sink.chunks) != 1 {
		t.Fatalf("%d chunks delivered, want the one that blocked", len(sink.chunks))
	}
}
