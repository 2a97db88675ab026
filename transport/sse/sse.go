// Package sse implements transport.StreamTransport for raw Server-Sent Events
// streams: an HTTP GET answered with text/event-stream, resumable with the
// Last-Event-ID header.
//
// The main type is Transport. Its Run method connects, parses the event stream,
// delivers every event that carries data to the sink as a transport.Chunk, and
// reconnects from the cursor of the last delivered chunk when the connection
// drops before the terminal event (an event named "status" whose JSON data has
// "status":"complete"). The retry policy, the cursor format and the error
// classification are described in docs/transports.md; in short:
//
//   - delays grow from 250 ms, doubling, to a 5 s cap, without jitter; a server's
//     retry field, or a Retry-After header on a 429 or 503, replaces the delay;
//   - Spec.RetryAttempts retries are allowed per failure streak, and the streak
//     resets as soon as a connection delivers a chunk;
//   - 4xx statuses other than 408 and 429, other non-200 statuses below 500, a
//     content type other than text/event-stream and an event larger than
//     Spec.MaxEventBytes are permanent and never retried;
//   - an event without an id gets the cursor "<last id>+<k>", which is stable
//     across replays, so the host can drop replayed chunks.
//
// The transport reads the socket only when the sink has accepted the previous
// chunk, so a blocked Deliver stops the reading and the server feels the
// backpressure through TCP.
package sse

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
)

// Transport is the raw SSE StreamTransport. The zero value is ready to use and
// a Transport is safe for concurrent use: each Run call owns all of its state.
type Transport struct {
	policy retry.Policy // the zero value is the project policy; tests set a fake clock
}

var _ transport.StreamTransport = (*Transport)(nil)

// Run streams spec's endpoint into sink, starting after cursor, as
// transport.StreamTransport describes. It returns nil after the terminal status
// event, ctx.Err() when ctx ends (even in the middle of a backoff wait), the
// sink's error unchanged when Deliver fails with anything but ctx.Err(), and
// otherwise a *transport.Error. When spec.HTTP.Client is nil, Run uses a client of
// its own and closes its connections before returning; a caller's Client keeps
// its idle connections in its own pool. Spec.Header is sent on every request
// and never appears in logs or errors; Spec.Arguments is not used.
//
// Run works in the calling goroutine only. Its memory is a 16 KiB read
// buffer plus the event in flight (at most Spec.MaxEventBytes); Chunk.Data
// points into that memory and is valid until Deliver returns.
func (t *Transport) Run(ctx context.Context, spec transport.Spec, cursor string, sink transport.Sink) error {
	s, err := newSession(spec, cursor, sink, t.policy)
	if err != nil {
		return err
	}
	defer s.close()
	return s.run(ctx)
}

// configError is a permanent error in the Spec, found before connecting.
func configError(spec transport.Spec, format string, args ...any) error {
	return &transport.Error{StreamID: spec.StreamID, Op: "config", Permanent: true, Err: fmt.Errorf(format, args...)}
}

// streamURL builds the request URL: spec.HTTP.URL (the URL the provider
// checked), else the endpoint as egress.Endpoint reads it (an absolute URL,
// or a path under spec.HTTP.ServerURL), with spec.HTTP.Query merged into
// the query string.
func streamURL(spec transport.Spec) (*url.URL, error) {
	if spec.Endpoint == "" {
		return nil, configError(spec, "the endpoint is empty")
	}
	target := spec.HTTP.URL
	if target == nil {
		if spec.HTTP.ServerURL == "" && !egress.IsURL(spec.Endpoint) {
			return nil, configError(spec, "endpoint %q is not an absolute URL and the server URL is empty", spec.Endpoint)
		}
		var err error
		if target, err = egress.Endpoint(spec.HTTP.ServerURL, spec.Endpoint); err != nil {
			return nil, configError(spec, "stream URL: %w", err)
		}
	}
	u := target.URL()
	if len(spec.HTTP.Query) > 0 {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			return nil, configError(spec, "query of stream URL %q: %w", target.Redacted(), err)
		}
		for k, v := range spec.HTTP.Query {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
	}
	return u, nil
}

// ownClient returns a client for one Run and the function that releases its
// connections. Streams are long-lived, so there is no total timeout; a server
// that accepts the connection but never answers is caught by the response
// header timeout and retried.
func ownClient() (*http.Client, func()) {
	tr := egress.NewTransport()
	return &http.Client{Transport: tr}, tr.CloseIdleConnections
}

// sinkError marks an error returned by the sink, which Run returns unchanged.
type sinkError struct{ err error }

func (e sinkError) Error() string { return e.err.Error() }

func unwrapSink(err error) error {
	var se sinkError
	if errors.As(err, &se) {
		return se.err
	}
	return err
}
