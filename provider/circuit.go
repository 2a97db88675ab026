package provider

import (
	"github.com/rtfshost/rtfshost/provider/internal/stream"
	"github.com/rtfshost/rtfshost/transport"
)

// A stream and the circuit breaker of its origin (transport/breaker): the
// provider holds one breaker.Set for every stream. Each failed attempt of
// the stream's transport counts once: those its transport retries through
// the retry policy reach AttemptFailed (the stream is the transport's
// transport.AttemptGate), and a failure for good that did not (a process
// transport without :restart) is counted when Run returns. The first chunk
// after a failure, or after the start, is the origin working: its circuit
// closes. Start (and runTransport, for a recovered stream) refuses an
// origin whose circuit is open before anything is dialled.

var _ transport.AttemptGate = (*stream.Stream)(nil)
