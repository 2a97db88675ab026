package mcpserver

import (
	"bytes"
	"net/http"
	"strconv"
)

// resumeRetry is the reconnection time, in milliseconds, that the priming
// event of a response stream suggests (SEP-1699): a client whose
// connection drops waits this long, then resumes with Last-Event-ID.
const resumeRetry = 1000

// primeWithRetry completes go-sdk's priming event on the SSE responses of
// the stateful era (2025-11-25: an event id and empty data, so that a client
// can resume a stream that breaks before its first message) with the retry
// field SEP-1699 also asks for. go-sdk writes the priming event as its
// first write; only that write is inspected.
func primeWithRetry(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&retryWriter{ResponseWriter: w}, r)
	})
}

// retryWriter adds "retry:" to the priming event of an SSE response.
type retryWriter struct {
	http.ResponseWriter
	seen bool // the first write is past
}

var (
	primeEvent = []byte("event: prime\n")
	retryLine  = []byte("retry: " + strconv.Itoa(resumeRetry) + "\n")
)

func (w *retryWriter) Write(b []byte) (int, error) {
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

// Flush passes flushes through: the response is a live stream.
func (w *retryWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *retryWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
