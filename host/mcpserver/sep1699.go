package mcpserver

import (
	"bytes"
	"context"
	"fmt"
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
// of a busy response stream and holds what it writes until the events in
// it are stored (see retryWriter).
func (s *Server) primeWithRetry(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		rw := &retryWriter{ResponseWriter: w, window: flushWindow, stored: s.events.sync}
		defer rw.finish()
		next.ServeHTTP(rw, r)
	})
}

// flushWindow is the longest a written event waits for its flush: go-sdk
// flushes after every event, and a stream that sends events faster than
// this gets one flush (one write system call, one group commit of its
// events) per window instead.
const flushWindow = 500 * time.Microsecond

// retryWriter adds "retry:" to the priming event of an SSE response,
// coalesces its flushes, and keeps what go-sdk writes until a flush, which
// first waits until the events written so far are stored (the event store
// writes behind, durableEvents), so that a client never sees an event a
// restarted server does not have. A quiet stream's flush happens at once; a
// busy stream's at the end of a window, on a timer's goroutine. Its methods
// are safe for concurrent use.
type retryWriter struct {
	http.ResponseWriter
	window time.Duration                   // flushWindow; tests set their own
	stored func(ctx context.Context) error // waits until the events written so far are stored; nil: none

	out sync.Mutex // held by a flush from taking buf to writing it: flushes go out in order

	mu        sync.Mutex
	buf       []byte // written, not yet flushed
	spare     []byte // the array of the last flush's buf, for the next (see flushOut)
	seen      bool   // the first write is past
	lastFlush time.Time
	timer     *time.Timer // a deferred flush; nil when none is due
	done      bool        // the handler returned: no more deferred flushes
	err       error       // the first error of the underlying writer
}

// maxSpareBuf bounds the array a retryWriter keeps between flushes (1 MiB:
// a busy response holds at most that beside the buffer being filled; a
// window's burst beyond it is allocated afresh each time).
const maxSpareBuf = 1 << 20

var (
	primeEvent = []byte("event: prime\n")
	retryLine  = []byte("retry: " + strconv.Itoa(resumeRetry) + "\n")
)

// Write keeps b for the next flush.
func (w *retryWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if !w.seen {
		w.seen = true
		if bytes.HasPrefix(b, primeEvent) && !bytes.Contains(b, []byte("\nretry:")) {
			if i := bytes.Index(b, []byte("data:")); i >= 0 {
				w.buf = append(append(append(w.buf, b[:i]...), retryLine...), b[i:]...)
				return len(b), nil
			}
		}
	}
	w.buf = append(w.buf, b...)
	return len(b), nil
}

// Flush sends what was written at once when the last flush is older than
// the window; otherwise it lets one timer flush at the end of the window,
// so that a burst of events shares one write and one commit.
func (w *retryWriter) Flush() {
	w.mu.Lock()
	if w.timer != nil || w.done {
		w.mu.Unlock()
		return // a flush is due, or finish flushes
	}
	if since := time.Since(w.lastFlush); since < w.window {
		w.timer = time.AfterFunc(w.window-since, w.deferredFlush)
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.flushOut()
}

func (w *retryWriter) deferredFlush() {
	w.mu.Lock()
	if w.timer == nil || w.done {
		w.mu.Unlock()
		return
	}
	w.timer = nil
	w.mu.Unlock()
	w.flushOut()
}

// flushOut waits until the events written so far are stored, then writes
// and flushes them.
func (w *retryWriter) flushOut() {
	w.out.Lock()
	defer w.out.Unlock()
	w.mu.Lock()
	b := w.buf
	w.buf, w.spare = w.spare, nil
	w.lastFlush = time.Now()
	w.mu.Unlock()
	if w.stored != nil && len(b) > 0 {
		if err := w.stored(context.Background()); err != nil {
			w.fail(fmt.Errorf("storing the events of the response: %w", err))
			return
		}
	}
	if len(b) > 0 {
		if _, err := w.ResponseWriter.Write(b); err != nil {
			w.fail(err)
			return
		}
		// The ResponseWriter does not retain b: the next flush's events
		// go into its array (out is held, so no other flush has it). An
		// array a burst grew large is dropped instead.
		if cap(b) <= maxSpareBuf {
			w.mu.Lock()
			w.spare = b[:0]
			w.mu.Unlock()
		}
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *retryWriter) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// finish runs when the handler has returned: what is written goes out now,
// and no timer flushes later.
func (w *retryWriter) finish() {
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.done = true
	w.mu.Unlock()
	w.flushOut()
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *retryWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
