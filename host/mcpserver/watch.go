package mcpserver

import (
	"sync"

	"github.com/rtfshost/rtfshost/provider"
)

// A watch collects the events of the streams one tool call started: each
// stream's provider subscription hands them to push, on the stream's
// goroutine, which never waits for the call, so a slow MCP client never
// holds a stream up. Its methods are safe for concurrent use.
type watch struct {
	wake chan struct{} // buffered 1: signalled by push

	mu      sync.Mutex
	ids     []string // every stream id added, in order
	pending []provider.Event
	logs    []logLine // printed lines not yet sent, oldest first
	dropped int       // lines left out since the last takeLogs
	// stops ends, for each stream, its subscription and its log route.
	stops map[string]func()
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

// add records stream id, watched until stop is called (by remove), and
// reports false if the watch has it already.
func (w *watch) add(id string, stop func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.stops[id]; ok {
		return false
	}
	if w.stops == nil {
		w.stops = make(map[string]func())
	}
	w.stops[id] = stop
	w.ids = append(w.ids, id)
	return true
}

// remove stops watching stream id.
func (w *watch) remove(id string) {
	w.mu.Lock()
	stop := w.stops[id]
	delete(w.stops, id)
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func newWatch() *watch { return &watch{wake: make(chan struct{}, 1)} }

// push queues an event for the call; it never blocks.
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
