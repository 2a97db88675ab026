package mcpserver

import (
	"sync"

	"github.com/rtfshost/rtfshost/provider"
)

// A router reads the provider-wide subscription and hands each event to the
// watch of the call that started its stream. It never blocks on a watch, so
// a slow MCP client never holds a stream up; events of streams that no call
// watches are dropped.
type router struct {
	sub  *provider.Subscription
	done chan struct{} // closed when run has returned

	mu      sync.Mutex
	watches map[string]*watch // by stream id
}

func newRouter(p *provider.Provider) (*router, error) {
	sub, err := p.Subscribe("", provider.SubscribeOptions{Buffer: 256, Lossless: true})
	if err != nil {
		return nil, err
	}
	r := &router{sub: sub, done: make(chan struct{}), watches: make(map[string]*watch)}
	go r.run()
	return r, nil
}

// run is the router's goroutine; it ends when the subscription closes.
func (r *router) run() {
	defer close(r.done)
	for ev := range r.sub.C() {
		r.mu.Lock()
		w := r.watches[ev.StreamID]
		if ev.Kind == provider.EventEnd {
			delete(r.watches, ev.StreamID)
		}
		r.mu.Unlock()
		if w != nil {
			w.push(ev)
		}
	}
}

// close stops the router and waits for its goroutine.
func (r *router) close() {
	r.sub.Close()
	<-r.done
}

// stopped reports whether the router's goroutine has returned: no event
// will be routed any more.
func (r *router) stopped() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// add routes the events of stream id to w from now on, and reports false if
// another watch has id already. Call it before the stream starts, so that no
// event is missed.
func (r *router) add(id string, w *watch) bool {
	r.mu.Lock()
	if other, ok := r.watches[id]; ok && other != w {
		r.mu.Unlock()
		return false
	}
	r.watches[id] = w
	r.mu.Unlock()
	w.mu.Lock()
	w.ids = append(w.ids, id)
	w.mu.Unlock()
	return true
}

// remove stops routing the events of stream id to w.
func (r *router) remove(id string, w *watch) {
	r.mu.Lock()
	if r.watches[id] == w {
		delete(r.watches, id)
	}
	r.mu.Unlock()
}

// A watch collects the events of the streams one tool call started. Its
// methods are safe for concurrent use.
type watch struct {
	wake chan struct{} // buffered 1: signalled by push

	mu      sync.Mutex
	ids     []string // every stream id added, in order
	pending []provider.Event
	logs    []logLine         // printed lines not yet sent, oldest first
	dropped int               // lines left out since the last takeLogs
	routes  map[string]func() // stops the log route of each stream
}

// A logLine is a line a program (stream "") or a stream's processor
// printed.
type logLine struct{ stream, text string }

// maxPendingLogs bounds the printed lines a watch holds for its call.
const maxPendingLogs = 1024

// pushLog queues a printed line for the call; beyond maxPendingLogs it
// counts the line as dropped. It never blocks.
func (w *watch) pushLog(stream, text string) {
	w.mu.Lock()
	if len(w.logs) < maxPendingLogs {
		w.logs = append(w.logs, logLine{stream, text})
	} else {
		w.dropped++
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// takeLogs returns the lines pushed since the last takeLogs and how many
// were dropped.
func (w *watch) takeLogs() ([]logLine, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, d := w.logs, w.dropped
	w.logs, w.dropped = nil, 0
	return l, d
}

// route records the function that stops stream id's log route.
func (w *watch) route(id string, stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.routes == nil {
		w.routes = make(map[string]func())
	}
	w.routes[id] = stop
}

// unroute stops stream id's log route.
func (w *watch) unroute(id string) {
	w.mu.Lock()
	stop := w.routes[id]
	delete(w.routes, id)
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func newWatch() *watch { return &watch{wake: make(chan struct{}, 1)} }

func (w *watch) push(ev provider.Event) {
	w.mu.Lock()
	w.pending = append(w.pending, ev)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// take returns the events pushed since the last take, oldest first. done
// is the slice the previous take returned, which the caller is done with:
// its array takes the next events, so that a busy call's events cost no
// allocation per batch (one that a burst grew beyond maxKeptEvents is
// dropped instead).
func (w *watch) take(done []provider.Event) []provider.Event {
	clear(done) // no stale outputs kept alive
	w.mu.Lock()
	defer w.mu.Unlock()
	evs := w.pending
	w.pending = nil
	if cap(done) <= maxKeptEvents {
		w.pending = done[:0]
	}
	return evs
}

// maxKeptEvents bounds the array a watch keeps for its next batch (16,384
// events of 128 bytes, 2 MiB: a call whose pump falls behind a firehose
// reuses arrays of that size rather than allocating them per batch).
const maxKeptEvents = 1 << 14

// streams returns the ids of the streams added to w.
func (w *watch) streams() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.ids...)
}
