package stream

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/rtfshost/rtfshost/rtfs"
)

// EventKind says what an Event reports.
type EventKind uint8

// The event kinds.
const (
	// EventOutput carries a processor's non-nil :output.
	EventOutput EventKind = iota + 1
	// EventEnd is the last event of a stream: it reached a terminal state;
	// or, on a provider sharing its store with other hosts
	// (Options.Cluster), it moved to another host: its Status.State is
	// then not terminal and Status.Message says so.
	EventEnd
	// EventChange says that the stream's snapshot (Provider.Info) changed
	// without an output: a chunk was processed, the stream was paused or
	// resumed, or the stream a Pending subscription waited for started. Only
	// subscriptions with SubscribeOptions.Changes receive it.
	EventChange
	// EventProgress reports a result that changed the stream's :progress
	// without an output (Progress is set).
	EventProgress
)

// An Event is what a Subscription receives.
type Event struct {
	Kind     EventKind
	StreamID string
	// Seq is the metadata :seq of the chunk whose result carried the output
	// (EventOutput), -1 for EventEnd and EventChange.
	Seq int64
	// Output is the processor's :output (EventOutput).
	Output rtfs.Value
	// Priority is the result's :priority (EventOutput; PriorityNormal
	// when it gave none).
	Priority Priority
	// OutputKind is the result's :kind ("" when it gave none): consecutive
	// outputs of one kind may be delivered as one (Outbox).
	OutputKind string
	// Progress is the stream's progress after the result, when the result
	// changed it (:progress, :milestone); nil otherwise.
	Progress *ProgressInfo
	// Status is the stream's final status (EventEnd).
	Status Status

	src *OutputTally // the publisher's :delivery policy and dropped-output counts
}

// An OutputTally is the one part of a stream that the outboxes of its
// subscribers reach: the stream's :delivery policy, which they read, and
// the counts of the outputs they drop, which they add to. An Event carries
// a pointer to its stream's tally, never to the stream, so the output path
// has one direction: a stream pushes events, a subscriber pulls them, and
// what a subscriber gives back is a count. Each stream owns one, made with
// it; the counts are atomic and the rest is set before the stream's
// goroutines start, so it is safe for concurrent use.
type OutputTally struct {
	Delivery *Delivery // the stream's :delivery, nil when it declared none
	dropped  [3]atomic.Int64
	obs      StreamObserver // told of each drop (nopObserver when nothing observes)
}

// OutputDropped counts n outputs of priority p that a subscriber dropped.
// t may be nil (events made by hand).
func (t *OutputTally) OutputDropped(p Priority, n int64) {
	if t == nil || n <= 0 {
		return
	}
	t.dropped[p].Add(n)
	t.obs.OutputsDropped(p.String(), int(n))
}

// SubscribeOptions configure a Subscription.
type SubscribeOptions struct {
	// Buffer is the channel's capacity (default 64).
	Buffer int
	// Lossless makes publishing wait while the buffer is full: the stream
	// then stalls until the subscriber reads (or the stream is cancelled or
	// the provider closes), and no event is lost. By default a full buffer
	// drops the event and counts it (Dropped), so a slow subscriber never
	// holds a stream up.
	Lossless bool
	// Streams, for a subscription to every stream (id ""), keeps the events
	// of the streams for which it returns true, as they are published: a
	// lossless subscription then holds up only those streams. It is called
	// on the publishing stream's goroutine, so it must be cheap and safe for
	// concurrent use. Nil keeps every stream's events.
	Streams func(id string) bool
	// Receive, when set, is called with each event instead of sending it
	// on the channel (which then stays empty): on the goroutine that
	// publishes it, the stream's, so Receive must return at once and must
	// not call the Provider. It gets every event of a stream, in order;
	// Buffer and Lossless do not apply. It is not called after Close
	// returns.
	Receive func(Event)
	// Pending makes a subscription to a stream id that no stream has yet
	// wait for the stream that starts (or is recovered) with that id,
	// instead of failing: it gets every event of that stream. Subscribing
	// before Start is how a caller sees a stream's first output.
	Pending bool
	// Changes makes the subscription also receive EventChange, for a
	// subscriber that shows the stream's state rather than its outputs.
	Changes bool
}

// A Subscription receives the events of one stream, or of every stream. Its
// channel is closed after the stream's EventEnd (for a one-stream
// subscription), on Close, or when the provider closes. Its methods are safe
// for concurrent use.
type Subscription struct {
	c        chan Event
	done     chan struct{}
	once     sync.Once
	mu       sync.RWMutex // held for reading while publishing, for writing to close c
	closed   bool
	lossless bool
	streams  func(id string) bool // SubscribeOptions.Streams
	receive  func(Event)
	changes  bool // it receives EventChange
	dropped  atomic.Int64
	detach   func(*Subscription) // takes it off what holds it (SetDetach)
	// counter is the Provider's count of Changes subscriptions, which this
	// one is in until it closes.
	counter *atomic.Int64
	// stream is the stream a Pending subscription was attached to, nil
	// while it waits; guarded by the Provider's mu.
	stream *Stream
}

// C returns the channel of events.
func (sub *Subscription) C() <-chan Event { return sub.c }

// Dropped returns how many events a non-lossless subscription dropped
// because its buffer was full.
func (sub *Subscription) Dropped() int64 { return sub.dropped.Load() }

// Close ends the subscription and closes its channel; events still buffered
// can be read. It is idempotent and never blocks for long: a publisher
// waiting on a full lossless buffer gives up.
func (sub *Subscription) Close() {
	sub.once.Do(func() {
		if sub.changes && sub.counter != nil {
			sub.counter.Add(-1)
		}
		close(sub.done)
		sub.mu.Lock()
		sub.closed = true
		close(sub.c)
		sub.mu.Unlock()
		if sub.detach != nil {
			sub.detach(sub)
		}
	})
}

// send delivers ev, or drops and counts it, as the options say. ctx bounds a
// lossless wait.
func (sub *Subscription) send(ctx context.Context, ev Event) {
	sub.mu.RLock()
	defer sub.mu.RUnlock()
	if sub.closed || ev.Kind == EventChange && !sub.changes {
		return
	}
	if sub.receive != nil {
		sub.receive(ev)
		return
	}
	if !sub.lossless {
		select {
		case sub.c <- ev:
		default:
			sub.dropped.Add(1)
		}
		return
	}
	select {
	case sub.c <- ev:
	case <-sub.done:
	case <-ctx.Done():
		sub.dropped.Add(1)
	}
}

// defaultSubscriberSize is a subscription's buffer when its options give
// none.
const defaultSubscriberSize = 64

func NewSubscription(opts SubscribeOptions) *Subscription {
	if opts.Buffer <= 0 {
		opts.Buffer = defaultSubscriberSize
	}
	if opts.Receive != nil {
		opts.Buffer = 0
	}
	return &Subscription{c: make(chan Event, opts.Buffer), done: make(chan struct{}), lossless: opts.Lossless, receive: opts.Receive, changes: opts.Changes, streams: opts.Streams}
}

// Subscribe adds sub to the stream's subscribers; to those of a stream
// whose worker has exited, it sends the stream's EventEnd and closes sub.
func (s *Stream) Subscribe(sub *Subscription) {
	s.Mu.Lock()
	for s.ReplacedBy.Load() != nil { // upgraded meanwhile: follow
		next := s.ReplacedBy.Load()
		s.Mu.Unlock()
		s = next
		s.Mu.Lock()
	}
	if s.Exited {
		st := s.statusLocked()
		s.Mu.Unlock()
		sub.send(context.Background(), Event{Kind: EventEnd, StreamID: s.ID, Seq: -1, Status: st})
		sub.Close()
		return
	}
	sub.mu.RLock()
	closed := sub.closed
	sub.mu.RUnlock()
	if !closed { // a Pending subscription closed while it was being attached
		s.Subs = append(s.Subs[:len(s.Subs):len(s.Subs)], sub)
	}
	s.Mu.Unlock()
	if sub.detach == nil {
		sub.detach = s.Unsubscribe
	}
}

// Unsubscribe removes sub from the stream's subscribers: those of the
// stream that replaced s in an upgrade, if one did (upgrade.go).
func (s *Stream) Unsubscribe(sub *Subscription) {
	s = s.Current()
	s.Mu.Lock()
	defer s.Mu.Unlock()
	s.Subs = Without(s.Subs, sub)
}

// Without returns a new slice of list without sub.
func Without(list []*Subscription, sub *Subscription) []*Subscription {
	out := make([]*Subscription, 0, len(list))
	for _, x := range list {
		if x != sub {
			out = append(out, x)
		}
	}
	return out
}

// hasSubscribers reports whether an event of the stream whose subscribers
// are subs would reach anyone: a stream nobody watches publishes nothing.
func (s *Stream) hasSubscribers(subs []*Subscription) bool {
	if len(subs) > 0 {
		return true
	}
	all := s.Env.AllSubs.Load()
	return all != nil && len(*all) > 0
}

// publish sends ev to the stream's subscribers and to the provider-wide ones.
func (s *Stream) publish(ctx context.Context, subs []*Subscription, ev Event) {
	for _, sub := range subs {
		sub.send(ctx, ev)
	}
	if all := s.Env.AllSubs.Load(); all != nil {
		for _, sub := range *all {
			if sub.streams == nil || sub.streams(ev.StreamID) {
				sub.send(ctx, ev)
			}
		}
	}
}

// changed publishes EventChange to the stream's subscribers that asked for
// it (subs, s.subs as read under s.mu), unless no subscription anywhere
// did: then it costs one atomic load.
func (s *Stream) changed(subs []*Subscription) {
	if s.Env.ChangeSubs.Load() == 0 {
		return
	}
	s.publish(s.Env.Ctx, subs, Event{Kind: EventChange, StreamID: s.ID, Seq: -1})
}

// The registry's side of a subscription. The provider's registry holds
// subscriptions that wait for a stream id no stream has yet, or that follow
// every stream; these functions are what it does with them. They are
// functions rather than methods so that Subscription, which the provider's
// users hold, shows none of it.

// WantsChanges reports whether sub receives EventChange
// (SubscribeOptions.Changes).
func WantsChanges(sub *Subscription) bool { return sub.changes }

// CountIn puts sub in n, a count of the subscriptions that want changes,
// until sub closes; call it before sub is attached.
func CountIn(sub *Subscription, n *atomic.Int64) { sub.counter = n }

// SetDetach sets what sub's Close calls to take it off what holds it.
func SetDetach(sub *Subscription, f func(*Subscription)) { sub.detach = f }

// Held reports whether a stream or the registry holds sub (SetDetach was
// called, or a stream attached it).
func Held(sub *Subscription) bool { return sub.detach != nil }

// AttachedTo returns the stream a Pending subscription was attached to,
// nil while it waits. The registry's lock guards it, as it does Attach.
func AttachedTo(sub *Subscription) *Stream { return sub.stream }

// Attach records that the Pending subscription sub is attached to s.
func Attach(sub *Subscription, s *Stream) { sub.stream = s }

// Send delivers ev to sub, or drops and counts it, as sub's options say;
// ctx bounds a lossless wait.
func Send(ctx context.Context, sub *Subscription, ev Event) { sub.send(ctx, ev) }

// SourceOf returns the tally of the stream that published ev: its :delivery
// policy and the counts of the outputs dropped on the way to a subscriber,
// which an Outbox adds to. Nil for an event no stream published.
func SourceOf(ev Event) *OutputTally { return ev.src }

// WithSource returns ev as published by the stream whose tally is t.
func WithSource(ev Event, t *OutputTally) Event { ev.src = t; return ev }
