package mcpserver

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// The defaults of HTTPLimits (docs/security.md, "Slow and large requests").
const (
	DefaultHeaderTimeout  = 10 * time.Second
	DefaultBodyTimeout    = 30 * time.Second
	DefaultIdleTimeout    = 120 * time.Second
	DefaultMaxHeaderBytes = 64 << 10
	DefaultMaxBodyBytes   = 4 << 20 // go-sdk's DefaultMaxRequestBodyBytes
)

// HTTPLimits bound what one client connection can hold of a server built by
// NewHTTPServer (Serve uses it): the time to send a request's headers and
// its body, the time a keep-alive connection may sit idle, and the sizes of
// headers and body. None bounds a response: an SSE stream (a tool call's
// progress, the legacy /sse stream) runs as long as it has to. A zero
// field takes its default.
type HTTPLimits struct {
	// HeaderTimeout bounds reading a request's headers, from the first byte
	// of the request (default DefaultHeaderTimeout).
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from the end of its
	// headers to its last byte (default DefaultBodyTimeout). A client still
	// sending then gets its body read fail and its connection closed.
	BodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that starts no new request
	// for this long (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (default
	// DefaultMaxHeaderBytes; net/http allows 4 KiB more); larger headers
	// get 431.
	MaxHeaderBytes int
	// MaxBodyBytes bounds every request's body (default
	// DefaultMaxBodyBytes); reading more fails with *http.MaxBytesError,
	// which the handlers answer with 413.
	MaxBodyBytes int64
}

// withDefaults fills the zero fields.
func (l HTTPLimits) withDefaults() HTTPLimits {
	if l.HeaderTimeout <= 0 {
		l.HeaderTimeout = DefaultHeaderTimeout
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return l
}

// NewHTTPServer returns an *http.Server for h with the limits l: net/http's
// header timeout, idle timeout and header size, and, per request, a read
// deadline and a size bound on the body (limitBody). It sets no
// WriteTimeout, which would cut every long SSE response. Serve uses it;
// so does a command line that serves a handler on a listener of its own.
// The caller owns the server.
func NewHTTPServer(h http.Handler, l HTTPLimits) *http.Server {
	l = l.withDefaults()
	return &http.Server{
		Handler:           limitBody(h, l),
		ReadHeaderTimeout: l.HeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// limitBody bounds the reading of each request body: a read deadline of
// l.BodyTimeout from now on the connection (http.ResponseController), and
// at most l.MaxBodyBytes. The deadline is lifted once the body has been
// read to its end, so the response that follows, however long, is not
// affected; a request without a body sets none (net/http is then already
// watching the connection for the client going away).
func limitBody(next http.Handler, l HTTPLimits) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if err := rc.SetReadDeadline(time.Now().Add(l.BodyTimeout)); err == nil {
				r.Body = &deadlineBody{ReadCloser: http.MaxBytesReader(w, r.Body, l.MaxBodyBytes), rc: rc}
			} else {
				r.Body = http.MaxBytesReader(w, r.Body, l.MaxBodyBytes)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline of its connection when the body has
// been read to its end.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
