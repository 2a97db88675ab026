package provider

import (
	"context"

	"github.com/rtfshost/rtfshost/persistence"
)

// An Observer watches a provider's streams for metrics and traces
// (host/observe implements it with Prometheus and OpenTelemetry); set it in
// Options.Observer. The provider calls it from its streams' goroutines,
// several at once, so implementations must be safe for concurrent use; the
// calls of a StreamObserver come once per chunk and must be cheap and never
// block. The provider never imports a metrics or tracing library itself.
type Observer interface {
	// StreamStarted is called once when a stream starts running: a new
	// stream (ctx is StartRequest.Context, which carries the starting
	// caller's trace context) or an unfinished stream that Recover runs
	// again (ctx is context.Background()). A stream loaded for inspection
	// only is not reported. It returns the stream's observer; nil means the
	// stream is not observed.
	StreamStarted(ctx context.Context, s StreamDesc) StreamObserver
	// StoreCommitted reports one store commit of the provider's group
	// committer (Options.Store), on the committer's goroutine.
	StoreCommitted(c persistence.CommitInfo)
	// LimitHit reports that a limit of the provider refused work: kind is
	// "max-streams" (Options.MaxStreams).
	LimitHit(kind string)
}

// limitHit reports a limit to the observer, if any.
func (c *settings) limitHit(kind string) {
	if c.opts.Observer != nil {
		c.opts.Observer.LimitHit(kind)
	}
}
