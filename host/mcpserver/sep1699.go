package mcpserver

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// resumeRetry is the reconnection time, in milliseconds, that the priming
// event of a response stream suggests (SEP-1699): a client whose
// connection drops waits this long, then resumes with Last-Event-ID.
const resumeRetry = 1000

// primeWithRetry completes go-sdk's priming event on the SSE responses of
// the stateful era (2025-11-25: an event id and empty data, so that a client
// can resume a stream that breaks before its first message) with the retry
// field SEP-1699 also asks for. go-sdk writes the priming event as its
// first write; only that write is inspected. It also coalesces the flushes
// of a busy response stream (see retryWriter.Flush).
func primeWithRetry(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		rw := &retryWriter{ResponseWriter: w, window: flushWindow}
		defer rw.finish()
		next.ServeHTTP(rw, r)
	})
}

// flushWindow is the longest a written event waits for its flush: go-sdk
// flushes after every event, and a stream that sends events faster than
// this gets one flush (one write system call) per window instead, about a
// third of the cost of a progress notification on loopback.
const flushWindow = 500 * time.Microsecond

// retryWriter adds "retry:" to the priming event of an SSE response and
// coalesces its flushes. Its methods are safe for concurrent use: a flush
// it deferred runs on a timer's goroutine.
type retryWriter struct {
	http.ResponseWriter

	window time.Duration // flushWindow; tests set their own

	mu        sync.Mutex
	seen      bool // the first write is past
	lastFlush time.Time
	timer     *time.Timer // a deferred flush; nil when none is due
	done      bool        // the handler returned: no more deferred flushes
}

var (
	primeEvent = []byte("event: prime\n")
	retryLine  = []byte("retry: " + strconv.Itoa(resumeRetry) + "\n")
)

func (w *retryWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen {
		return w.ResponseWriter.Write(b)
	}
	w.seen = true
	if !bytes.HasPrefix(b, primeEvent) || bytes.Contains(b, []byte("\nretry:")) {
		return w.ResponseWriter.Write(b)
	}
	i := bytes.Index(b, []byte("data:"))
	if i < 0 {
		return w.ResponseWriter.Write(b)
	}
	out := make([]byte, 0, len(b)+len(retryLine))
	out = append(append(append(out, b[:i]...), retryLine...), b[i:]...)
	if _, err := w.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Flush flushes at once when the last flush is older than the window (a
// quiet stream's event goes out with no delay); otherwise it lets one timer
// flush at the end of the window, so that a burst of events shares a write.
func (w *retryWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil || w.done {
		return // a flush is due, or finish flushes
	}
	if since := time.Since(w.lastFlush); since < w.window {
		w.timer = time.AfterFunc(w.window-since, w.deferredFlush)
		return
	}
	w.flushLocked()
}

func (w *retryWriter) deferredFlush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer == nil || w.done {
		return
	}
	w.timer = nil
	w.flushLocked()
}

func (w *retryWriter) flushLocked() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
	w.lastFlush = time.Now()
}

// finish runs when the handler has returned: a deferred flush is done now,
// and none runs later.
func (w *retryWriter) finish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
		w.flushLocked()
	}
	w.done = true
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *retryWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
