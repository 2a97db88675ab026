// Package mock implements transport.StreamTransport over Go channels, for tests
// and for embedders that produce chunks in Go.
//
// The main types are Transport and Source. A Transport keeps one Source per
// stream id; either side (the test feeding chunks or the provider running the
// stream) may create it first, so there is no "no channel yet" race. The
// producer calls Source.Send for each chunk and Source.Close for a clean end of
// the stream (or Source.Fail for a transport failure). Run takes the next chunk
// from the Source only after the sink accepted the previous one, so a full
// queue in the host blocks Send exactly as a full TCP window blocks a server:
// with the default unbuffered Source, Send returns once Run holds the chunk,
// and while the host's queue is full Run holds at most one chunk and every
// further Send blocks until the host makes room.
package mock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// ErrEnded is returned by Source.Send when the stream the Source fed has ended
// (its Run returned) or the Source was closed.
var ErrEnded = errors.New("mock source has ended")

// Transport is a StreamTransport whose sources are Go channels. The zero value
// is ready to use and a Transport is safe for concurrent use.
type Transport struct {
	// Buffer is the channel buffer of each new Source (default 0: Send hands the
	// chunk directly to Run). Set it before the first Source is created.
	Buffer int

	mu      sync.Mutex
	sources map[string]*Source
}

var (
	_ transport.StreamTransport = (*Transport)(nil)
	_ transport.Replayable      = (*Transport)(nil)
)

// Replayable implements transport.Replayable: a mock source cannot send a
// chunk again, so a persisting host journals its chunks.
func (t *Transport) Replayable() bool { return false }

// Source returns the Source that feeds stream id, creating it if needed. It is
// the same Source that Run uses for a Spec with that StreamID, until that
// Run's context ends (the Run is stopping: what is sent to it now would be
// lost with it) or it returns; afterwards Source returns a fresh Source for
// a later Run.
func (t *Transport) Source(id string) *Source {
	return t.source(id, nil)
}

// source returns the Source of id, fresh when there is none or when the
// Run that took the current one is stopping. A non-nil run is the context
// of the Run taking it.
func (t *Transport) source(id string, run context.Context) *Source {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.sources[id]; ok && (s.run == nil || s.run.Err() == nil) {
		if run != nil {
			s.run = run
		}
		return s
	}
	if t.sources == nil {
		t.sources = make(map[string]*Source)
	}
	s := &Source{
		id:      id,
		ch:      make(chan transport.Chunk, t.Buffer),
		closed:  make(chan struct{}),
		ended:   make(chan struct{}),
		started: make(chan struct{}),
		run:     run,
	}
	t.sources[id] = s
	return s
}

// forget removes s from the map if it is still the Source for its id.
func (t *Transport) forget(s *Source) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sources[s.id] == s {
		delete(t.sources, s.id)
	}
}

// Run delivers the chunks sent to the Source of spec.StreamID to sink until the
// Source is closed (it returns nil, after delivering every chunk sent before
// Close), failed (a permanent *transport.Error wrapping the cause), ctx ends
// (ctx.Err()) or the sink refuses a chunk (the sink's error). A chunk without an
// ID gets its sequence number in this Run ("0", "1", ...) and a zero
// ReceivedAt becomes the time Run took it (its wall reading derived from the
// monotonic clock, resynchronised with the wall clock every 100 ms). A mock
// cannot replay: Run only records cursor, which the producer reads with
// Source.Cursor to resume after the last chunk the host took.
func (t *Transport) Run(ctx context.Context, spec transport.Spec, cursor string, sink transport.Sink) error {
	s := t.source(spec.StreamID, ctx)
	defer t.forget(s)
	defer s.end()
	s.start(cursor)
	var seq int64
	var clk clock
	for {
		c, ok, err := s.next(ctx)
		if err != nil || !ok {
			return err
		}
		if c.ID == "" {
			c.ID = strconv.FormatInt(seq, 10)
		}
		seq++
		if c.ReceivedAt.IsZero() {
			c.ReceivedAt = clk.now()
		}
		if err := sink.Deliver(ctx, c); err != nil {
			return err
		}
	}
}

// A Source is the producer's end of one mock stream. It is safe for concurrent
// use, but chunks sent concurrently arrive in an unspecified order.
type Source struct {
	id        string
	ch        chan transport.Chunk
	closed    chan struct{} // closed by Close or Fail
	closeOnce sync.Once
	failure   error         // set before closed is closed
	ended     chan struct{} // closed when Run returns
	endOnce   sync.Once
	started   chan struct{} // closed when a Run takes this Source
	startOnce sync.Once
	cursor    string // the cursor of that Run; set before started is closed
	// run is the context of the Run that took the Source (nil before
	// one did); once it ends, Transport.Source hands out a fresh Source.
	// Guarded by the Transport's mu.
	run context.Context
}

// Started returns a channel closed when a Run has taken this Source.
func (s *Source) Started() <-chan struct{} { return s.started }

// Cursor returns the cursor the Run that took this Source was given: "" for
// a new stream, else the ID of the last chunk the host took before it
// stopped (for a persisting host, the last one it journaled). A producer that
// resumes a stream sends the chunks after it. Cursor is "" until Started is
// closed.
func (s *Source) Cursor() string {
	select {
	case <-s.started:
		return s.cursor
	default:
		return ""
	}
}

func (s *Source) start(cursor string) {
	s.startOnce.Do(func() {
		s.cursor = cursor
		close(s.started)
	})
}

// Send hands c to the stream. It blocks until Run takes the chunk (or, with a
// Buffer, until the buffer has room), which happens only after the sink
// accepted the previous one (see the package doc). It returns ctx.Err() if ctx
// has ended or ends first, and ErrEnded if the Source was closed or its stream
// ended; a chunk for which Send returns an error is never delivered. When the
// stream can take the chunk at once, Send costs no more than a channel send.
func (s *Source) Send(ctx context.Context, c transport.Chunk) error {
	if err := s.sendable(ctx); err != nil {
		return err
	}
	select {
	case s.ch <- c: // fast path: Run is waiting or the buffer has room
		return nil
	default:
	}
	select {
	case s.ch <- c:
		return nil
	case <-s.ended:
		return fmt.Errorf("mock stream %q: %w", s.id, ErrEnded)
	case <-s.closed:
		return fmt.Errorf("mock stream %q: send after close: %w", s.id, ErrEnded)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sendable returns the error Send must return before it tries to send: the
// checks are non-blocking receives, which cost no lock while the channels
// are open.
func (s *Source) sendable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-s.closed:
		return fmt.Errorf("mock stream %q: send after close: %w", s.id, ErrEnded)
	default:
	}
	select {
	case <-s.ended:
		return fmt.Errorf("mock stream %q: %w", s.id, ErrEnded)
	default:
	}
	return nil
}

// SendJSON sends v encoded as JSON as a chunk's data, with the given SSE event
// name ("" for none). It is Send with a marshalled payload.
func (s *Source) SendJSON(ctx context.Context, event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("mock stream %q: encode chunk: %w", s.id, err)
	}
	return s.Send(ctx, transport.Chunk{Data: data, Event: event})
}

// Close ends the stream cleanly: Run delivers the chunks already handed over
// and returns nil. Close is idempotent and never blocks.
func (s *Source) Close() { s.finish(nil) }

// Fail ends the stream with a transport failure: Run returns a permanent
// *transport.Error wrapping err once it has delivered the chunks already
// handed over. Fail after Close (or a second Fail) has no effect.
func (s *Source) Fail(err error) {
	if err == nil {
		err = errors.New("mock failure")
	}
	s.finish(err)
}

// Ended returns a channel closed when the Run that used this Source returned.
func (s *Source) Ended() <-chan struct{} { return s.ended }

func (s *Source) finish(err error) {
	s.closeOnce.Do(func() {
		s.failure = err
		close(s.closed)
	})
}

func (s *Source) end() { s.endOnce.Do(func() { close(s.ended) }) }

// next returns the next chunk, ok=false at a clean end, or the error to end
// Run with. Chunks already in the channel are delivered before the end.
func (s *Source) next(ctx context.Context) (transport.Chunk, bool, error) {
	if err := ctx.Err(); err != nil {
		return transport.Chunk{}, false, err
	}
	select {
	case c := <-s.ch: // fast path: a chunk is waiting
		return c, true, nil
	default:
	}
	select {
	case c := <-s.ch:
		return c, true, nil
	case <-ctx.Done():
		return transport.Chunk{}, false, ctx.Err()
	case <-s.closed:
	}
	select {
	case c := <-s.ch:
		return c, true, nil
	default:
	}
	if s.failure != nil {
		return transport.Chunk{}, false, &transport.Error{StreamID: s.id, Op: "mock", Permanent: true, Err: s.failure}
	}
	return transport.Chunk{}, false, nil
}

// clockResync bounds how long a clock derives wall time from the monotonic
// clock alone before it reads the wall clock again.
const clockResync = 100 * time.Millisecond

// A clock stamps chunks for one Run with one monotonic clock read per chunk
// instead of time.Now's two reads (wall and monotonic): it adds the monotonic
// time elapsed since its last time.Now to that reading. The stamps carry
// monotonic readings, so they order and subtract exactly like time.Now's; the
// wall reading follows a step of the system clock within clockResync. The
// zero value is ready to use; a clock is not safe for concurrent use.
type clock struct {
	base time.Time // the last time.Now; zero before the first stamp
}

// now returns the current time.
func (c *clock) now() time.Time {
	if !c.base.IsZero() {
		if d := time.Since(c.base); d >= 0 && d < clockResync {
			return c.base.Add(d)
		}
	}
	c.base = time.Now()
	return c.base
}
