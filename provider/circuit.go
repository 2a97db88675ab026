package provider

import (
	"errors"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/breaker"
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

var _ transport.AttemptGate = (*stream)(nil)

// AttemptFailed implements transport.AttemptGate: it counts a failed attempt
// of the stream's transport and says whether another may follow.
func (s *stream) AttemptFailed(cause error) error {
	s.mu.Lock()
	s.connected, s.failCounted = false, true
	s.mu.Unlock()
	s.env.breakers.Failure(s.def.origin, cause)
	return s.env.breakers.Allow(s.def.origin)
}

// AllowAttempt implements transport.AttemptGate.
func (s *stream) AllowAttempt() error { return s.env.breakers.Allow(s.def.origin) }

// connectedLocked records that a chunk arrived: the origin works. Called
// with mu held by the first chunk after a start or a failed attempt.
func (s *stream) connectedLocked() {
	s.connected, s.failCounted = true, false
	// The Set's lock is taken under mu, never the other way round.
	s.env.breakers.Success(s.def.origin)
}

// runFailed counts the failure for good of the stream's transport that the
// retry policy did not report: one that was never retried. A permanent
// error (a refusal of the server, a bad configuration) says nothing of the
// origin's health, and an open circuit's refusal is no attempt.
func (s *stream) runFailed(err error) {
	if err == nil || transport.IsPermanent(err) || errors.Is(err, breaker.ErrOpen) {
		return
	}
	s.env.breakers.Failure(s.def.origin, err)
}
