package provider

import (
	"fmt"
	"sync"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/rtfs"
)

// An Outbox is a subscriber's side of delivery, the one place where the
// delivery policy is applied (docs/streams.md, "Delivery"): it receives a
// subscription's events (Add, which is a SubscribeOptions.Receive) and
// hands them out as Batches when they are due (Take), per stream and in
// the order they were published:
//
//   - an immediate output goes out at once, alone, never coalesced nor
//     dropped; the outputs held before it go out first, in order;
//   - normal outputs go out at most once per Normal.Interval, or as soon
//     as Normal.MaxBatch of them wait, up to MaxBatch per batch;
//   - low outputs go out at most once per Low.Interval, up to Low.MaxBatch
//     per batch; when more wait, the oldest is dropped and counted (in the
//     stream's inspect map and the metrics): a subscriber is behind on low
//     outputs as soon as more than one batch of them waits;
//   - a normal or low output whose :kind is that of the output held just
//     before it (same priority) replaces it, and the one held counts both
//     (Output.Count);
//   - a batch that is due takes every output held before it along, in
//     batches of one priority each, so that nothing is reordered;
//   - a stream's end goes out after everything it published.
//
// A stream's :delivery policy overrides the Outbox's for its outputs. When
// more than MaxPending immediate and normal outputs wait (which are never
// dropped), the subscriber cannot keep up: the Outbox is cut (Err), drops
// and counts everything it holds, and takes nothing more.
//
// Add is safe for concurrent use (publishers call it); Take, Next and Drain
// are called by the one consumer goroutine.
type Outbox struct {
	policy     Delivery
	maxPending int

	wake chan struct{} // buffered 1: signalled by Add

	mu      sync.Mutex
	lanes   map[string]*lane
	last    *lane   // the lane of the last event: a stream's events come in runs
	order   []*lane // lanes in the order of their first event
	held    int     // immediate and normal outputs held, in all lanes
	ord     int64   // outputs added so far (Batch.Through)
	cut     error
	outputs []Output // the arena of the Outputs of the last Take's batches
	starts  []int    // where each of those batches' outputs start in it
}

// OutboxOptions configure an Outbox.
type OutboxOptions struct {
	// Delivery is the subscriber's policy, its unset fields (Unset)
	// DefaultDelivery's; nil: DefaultDelivery.
	Delivery *Delivery
	// MaxPending bounds the immediate and normal outputs held; one more
	// cuts the subscriber off. 0: no bound (a subscriber that holds the
	// stream up instead, with a Lossless subscription).
	MaxPending int
}

// A Batch is what an Outbox hands out at once for one stream: outputs of
// one priority, or the stream's progress, or its end.
type Batch struct {
	StreamID string
	Priority Priority
	// Outputs are the batch's outputs, oldest first; empty for a batch of
	// progress only or of the end. The slice is valid until the next Take
	// or Drain.
	Outputs []Output
	// Progress is the stream's progress as of the batch's last output,
	// when the events it stands for changed it; nil otherwise.
	Progress *ProgressInfo
	// Dropped counts the stream's low outputs dropped since its previous
	// batch.
	Dropped int64
	// Through is the number of outputs (of every stream) added to the
	// Outbox up to this batch's last one, those coalesced or dropped
	// included: it rises from batch to batch of one stream.
	Through int64
	// End is the stream's final status (its EventEnd), on its last batch,
	// which carries nothing else.
	End *Status
}

// An Output is one output delivered, or several of one :kind delivered as
// one.
type Output struct {
	Seq   int64 // the :seq of the chunk that produced Value
	Value rtfs.Value
	// Encoded is what the consumer gave AddEncoded with Value; nil after
	// Add.
	Encoded []byte
	Kind    string // the result's :kind; "" none
	// Count is how many outputs it stands for: 1, or more when consecutive
	// outputs of its kind were coalesced (Value is the last of them).
	Count int64
}

// NewOutbox returns an empty Outbox.
func NewOutbox(opts OutboxOptions) *Outbox {
	policy := DefaultDelivery()
	if opts.Delivery != nil {
		policy = opts.Delivery.Or(policy)
	}
	return &Outbox{
		policy:     policy,
		maxPending: opts.MaxPending,
		wake:       make(chan struct{}, 1),
		lanes:      make(map[string]*lane),
	}
}

// Policy returns the Outbox's own policy.
func (o *Outbox) Policy() Delivery { return o.policy }

// Wake returns a channel that receives after Add; the consumer then calls
// Take.
func (o *Outbox) Wake() <-chan struct{} { return o.wake }

// Err returns the reason the Outbox was cut off, nil while it was not.
func (o *Outbox) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cut
}

// A lane is one stream's events held by an Outbox.
type lane struct {
	id     string
	src    *stream.OutputTally
	policy Delivery
	items  []held // items[head:] are held, in order
	head   int
	lows   []int // the indexes of the live low items, oldest first
	count  [3]int
	last   [3]int // index of the last item of each priority; -1 none
	sent   [3]time.Time
	drops  int64
	end    *Status
	ended  bool // its end was taken
	// progressOnly counts the held changes of progress without an output
	// (they are normal items, but fill no batch).
	progressOnly int
	queued       bool // in Outbox.order
}

// held is one output (or a progress change) an Outbox holds.
type held struct {
	out      Output
	prio     Priority
	progress *ProgressInfo
	ord      int64
	noOutput bool // a change of progress only
	dead     bool // a low output dropped
}

// Add takes an event of a subscription; it never blocks. It can be used as
// SubscribeOptions.Receive.
func (o *Outbox) Add(ev Event) { o.AddEncoded(ev, nil) }

// AddEncoded is Add for a consumer that has encoded the event's output
// already (its JSON, for the call's result): the Output delivered carries
// enc in Encoded, so that it is not encoded again.
func (o *Outbox) AddEncoded(ev Event, enc []byte) {
	o.mu.Lock()
	o.addLocked(ev, enc)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *Outbox) addLocked(ev Event, enc []byte) {
	if o.cut != nil {
		if ev.Kind == EventOutput {
			stream.SourceOf(ev).OutputDropped(ev.Priority, 1)
		}
		return
	}
	l := o.last
	if l == nil || l.id != ev.StreamID {
		l = o.lanes[ev.StreamID]
	}
	if l == nil {
		l = &lane{id: ev.StreamID, src: stream.SourceOf(ev), policy: o.policy, last: [3]int{-1, -1, -1}}
		if src := stream.SourceOf(ev); src != nil && src.Delivery != nil {
			l.policy = src.Delivery.Or(o.policy)
		}
		o.lanes[ev.StreamID] = l
	}
	o.last = l
	if !l.queued {
		l.queued = true
		o.order = append(o.order, l)
	}
	switch ev.Kind {
	case EventEnd:
		st := ev.Status
		l.end = &st
		return
	case EventOutput:
		o.ord++
		if o.coalesce(l, ev, enc) {
			return
		}
		l.Push(held{out: Output{Seq: ev.Seq, Value: ev.Output, Encoded: enc, Kind: ev.OutputKind, Count: 1}, prio: ev.Priority, progress: ev.Progress, ord: o.ord})
		if ev.Priority != PriorityLow {
			o.held++
		}
	case EventProgress:
		n := len(l.items)
		if n > l.head && l.items[n-1].noOutput {
			l.items[n-1].progress = ev.Progress
			return
		}
		l.Push(held{prio: PriorityNormal, progress: ev.Progress, ord: o.ord, noOutput: true})
		l.progressOnly++
		o.held++
	default:
		return
	}
	if l.count[PriorityLow] > l.policy.Low.MaxBatch {
		l.dropOldestLow()
	}
	if o.maxPending > 0 && o.held > o.maxPending {
		o.cutLocked()
	}
}

// coalesce folds an output into the one held just before it when both have
// the same non-empty :kind and priority (not immediate).
func (o *Outbox) coalesce(l *lane, ev Event, enc []byte) bool {
	n := len(l.items)
	if ev.OutputKind == "" || ev.Priority == PriorityImmediate || n == l.head {
		return false
	}
	h := &l.items[n-1]
	if h.noOutput || h.dead || h.prio != ev.Priority || h.out.Kind != ev.OutputKind {
		return false
	}
	h.out.Seq, h.out.Value, h.out.Encoded, h.ord = ev.Seq, ev.Output, enc, o.ord
	h.out.Count++
	if ev.Progress != nil {
		h.progress = ev.Progress
	}
	return true
}

func (l *lane) Push(h held) {
	i := len(l.items)
	l.items = append(l.items, h)
	l.count[h.prio]++
	l.last[h.prio] = i
	if h.prio == PriorityLow {
		l.lows = append(l.lows, i)
	}
}

// fullBatches returns the index of the last normal output that fills a
// whole batch of max: the normal outputs after it wait for the interval.
func (l *lane) fullBatches(max int) int {
	want := (l.count[PriorityNormal] - l.progressOnly) / max * max
	for i := l.head; i < len(l.items); i++ {
		if h := &l.items[i]; h.prio == PriorityNormal && !h.noOutput {
			if want--; want == 0 {
				return i
			}
		}
	}
	return len(l.items) - 1
}

// dropOldestLow drops the oldest low output held, counting it.
func (l *lane) dropOldestLow() {
	i := l.lows[0]
	l.lows = l.lows[1:]
	h := &l.items[i]
	h.dead = true
	l.count[PriorityLow]--
	l.drops += h.out.Count
	l.src.OutputDropped(PriorityLow, h.out.Count)
	if h.progress != nil {
		// The progress it carried goes with the next item, unless that
		// one carries a later one.
		for j := i + 1; j < len(l.items); j++ {
			if n := &l.items[j]; !n.dead {
				if n.progress == nil {
					n.progress = h.progress
				}
				break
			}
		}
	}
}

// cutLocked cuts the subscriber off: everything held is dropped and
// counted, by priority.
func (o *Outbox) cutLocked() {
	o.cut = fmt.Errorf("delivery stopped: the subscriber fell more than %d immediate and normal outputs behind (those are never dropped), so it was cut off; the streams go on", o.maxPending)
	for _, l := range o.order {
		for _, h := range l.items[l.head:] {
			if !h.dead && !h.noOutput {
				l.src.OutputDropped(h.prio, h.out.Count)
			}
		}
	}
	o.lanes, o.order, o.held, o.last = make(map[string]*lane), nil, 0, nil
}

// Behind tells the Outbox that its consumer has n more immediate and
// normal outputs that it took from its subscription but has not added
// yet (a consumer that adds a burst in parts): they count toward
// MaxPending, so that a consumer that falls behind is cut off however it
// adds.
func (o *Outbox) Behind(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cut == nil && o.maxPending > 0 && o.held+n > o.maxPending {
		o.cutLocked()
	}
}

// Next returns when the next batch is due, if anything is held.
func (o *Outbox) Next() (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var next time.Time
	found := false
	for _, l := range o.order {
		if at, ok := l.due(); ok && (!found || at.Before(next)) {
			next, found = at, true
		}
	}
	return next, found
}

// due returns when the lane's next batch is due; the zero time is now.
func (l *lane) due() (time.Time, bool) {
	if l.end != nil || l.count[PriorityImmediate] > 0 {
		return time.Time{}, true
	}
	var at time.Time
	found := false
	if n := l.count[PriorityNormal]; n > 0 {
		at, found = l.sent[PriorityNormal].Add(l.policy.Normal.Interval), true
		if n >= l.policy.Normal.MaxBatch {
			at = time.Time{}
		}
	}
	if l.count[PriorityLow] > 0 {
		if low := l.sent[PriorityLow].Add(l.policy.Low.Interval); !found || low.Before(at) {
			at, found = low, true
		}
	}
	return at, found
}

// Take appends to dst the batches due at now, each stream's in order, and
// returns it. The batches' Outputs are valid until the next Take or Drain.
func (o *Outbox) Take(now time.Time, dst []Batch) []Batch {
	return o.take(now, false, dst)
}

// Drain appends every batch held, due or not (the subscriber is done
// waiting: its call ends).
func (o *Outbox) Drain(dst []Batch) []Batch {
	return o.take(time.Time{}, true, dst)
}

func (o *Outbox) take(now time.Time, all bool, dst []Batch) []Batch {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.outputs) // no stale outputs kept alive
	o.outputs, o.starts = o.outputs[:0], o.starts[:0]
	base := len(dst)
	kept := o.order[:0]
	for _, l := range o.order {
		dst = o.takeLane(l, now, all, dst)
		if l.head < len(l.items) {
			kept = append(kept, l)
			continue
		}
		l.queued = false
		if l.ended {
			delete(o.lanes, l.id)
			if o.last == l {
				o.last = nil
			}
		}
	}
	clear(o.order[len(kept):])
	o.order = kept
	// The outputs of the batches are in the arena in batch order: each
	// batch's run ends where the next one's starts.
	for j := range o.starts {
		end := len(o.outputs)
		if j+1 < len(o.starts) {
			end = o.starts[j+1]
		}
		dst[base+j].Outputs = o.outputs[o.starts[j]:end:end]
	}
	return dst
}

// takeLane appends the lane's batches that are due: every item up to the
// last one whose priority is due.
func (o *Outbox) takeLane(l *lane, now time.Time, all bool, dst []Batch) []Batch {
	upto := len(l.items) - 1
	if !all && l.end == nil {
		upto = -1
		if l.count[PriorityImmediate] > 0 {
			upto = max(upto, l.last[PriorityImmediate])
		}
		np := l.policy.Normal
		if n := l.count[PriorityNormal]; n > 0 {
			switch {
			case !now.Before(l.sent[PriorityNormal].Add(np.Interval)):
				upto = max(upto, l.last[PriorityNormal])
			case n-l.progressOnly >= np.MaxBatch:
				upto = max(upto, l.fullBatches(np.MaxBatch))
			}
		}
		if l.count[PriorityLow] > 0 && !now.Before(l.sent[PriorityLow].Add(l.policy.Low.Interval)) {
			upto = max(upto, l.last[PriorityLow])
		}
	}
	if upto < l.head {
		return o.endOf(l, dst)
	}
	stamp := now
	if all {
		stamp = time.Now()
	}
	b, n := -1, 0 // the batch being built (index in dst) and its outputs
	for i := l.head; i <= upto; i++ {
		h := &l.items[i]
		if h.dead {
			continue
		}
		l.count[h.prio]--
		if h.prio == PriorityLow {
			l.lows = l.lows[1:]
		} else {
			o.held--
		}
		if h.noOutput {
			l.progressOnly--
		}
		join := b >= 0 && (h.noOutput || (dst[b].Priority == h.prio && h.prio != PriorityImmediate && n < stream.BatchSize(l.policy, h.prio)))
		if !join {
			dst = append(dst, Batch{StreamID: l.id, Priority: h.prio, Dropped: l.drops})
			o.starts = append(o.starts, len(o.outputs))
			b, n, l.drops = len(dst)-1, 0, 0
			l.sent[h.prio] = stamp
		}
		if !h.noOutput {
			o.outputs = append(o.outputs, h.out)
			n++
		}
		if h.progress != nil {
			dst[b].Progress = h.progress
		}
		dst[b].Through = h.ord
		*h = held{}
	}
	l.head = upto + 1
	l.compact()
	return o.endOf(l, dst)
}

// endOf appends the lane's end once nothing else is held.
func (o *Outbox) endOf(l *lane, dst []Batch) []Batch {
	if l.end == nil || l.head < len(l.items) {
		return dst
	}
	dst = append(dst, Batch{StreamID: l.id, End: l.end, Dropped: l.drops, Through: o.ord})
	o.starts = append(o.starts, len(o.outputs))
	l.drops, l.end, l.ended = 0, nil, true
	return dst
}

// compact moves the held items to the front once half the slice is spent.
func (l *lane) compact() {
	if l.head == len(l.items) {
		clear(l.items)
		l.items, l.head, l.lows = l.items[:0], 0, l.lows[:0]
		l.last = [3]int{-1, -1, -1}
		return
	}
	if l.head < len(l.items)/2 || l.head < 64 {
		return
	}
	n := copy(l.items, l.items[l.head:])
	clear(l.items[n:])
	shift := l.head
	l.items, l.head = l.items[:n], 0
	for i := range l.lows {
		l.lows[i] -= shift
	}
	for p := range l.last {
		l.last[p] = max(l.last[p]-shift, -1)
	}
}
