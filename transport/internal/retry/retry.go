// Package retry is the one reconnect policy of rtfshost's transports: the
// delays of a failure streak (250 ms doubling to 5 s, no jitter, a bounded
// number of retries), the wait between attempts on a Clock that tests can
// replace, and the report of each wait to the stream's
// transport.ReconnectObserver and log, and each failure to its circuit
// breaker (transport.AttemptGate, transport/breaker). The raw SSE transport, the MCP
// transports and the process transports (with :restart :on-failure) all
// retry through it.
//
// The main types are Policy and Retrier.
package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/rtfshost/rtfshost/transport"
)

// The project policy's delays.
const (
	DefaultInitial = 250 * time.Millisecond
	DefaultMax     = 5 * time.Second
)

// A Clock is a transport's view of time, so that tests can observe every
// wait without sleeping. Implementations are safe for concurrent use.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed, and a
	// function that releases the timer early.
	After(d time.Duration) (<-chan time.Time, func() bool)
}

// RealClock is the Clock of the time package.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// After starts a time.Timer.
func (RealClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// A Policy says how a transport waits between attempts. The zero value is
// the project policy: 250 ms doubling to 5 s, transport.DefaultRetryAttempts
// retries per failure streak, on the real clock. A Policy is a value; it is
// safe to share.
type Policy struct {
	Initial  time.Duration // first delay (0: DefaultInitial)
	Max      time.Duration // largest delay (0: DefaultMax)
	Attempts int           // retries per failure streak (0: transport.DefaultRetryAttempts)
	Clock    Clock         // nil: RealClock
}

// A Retrier counts one Run's failure streak and waits between its attempts.
// It is owned by one goroutine (the transport's Run) and not safe for
// concurrent use.
type Retrier struct {
	b       backoff.BackOff
	clk     Clock
	obs     transport.ReconnectObserver
	gate    transport.AttemptGate
	log     *slog.Logger
	stream  string
	name    string
	retries int
}

// Start returns the Retrier of one Run of the named transport ("sse",
// "mcp", ...) for spec's stream. It reports each wait to sink when sink is a
// transport.ReconnectObserver, and to spec.Logger at Info level. Attempts
// comes from spec.RetryAttempts when p leaves it zero.
func (p Policy) Start(name string, spec *transport.Spec, sink transport.Sink) *Retrier {
	initial, maxDelay, n := p.Initial, p.Max, p.Attempts
	if initial <= 0 {
		initial = DefaultInitial
	}
	if maxDelay <= 0 {
		maxDelay = DefaultMax
	}
	if n <= 0 && spec != nil {
		n = spec.RetryAttempts
	}
	if n <= 0 {
		n = transport.DefaultRetryAttempts
	}
	exp := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(initial),
		backoff.WithMultiplier(2),
		backoff.WithMaxInterval(maxDelay),
		backoff.WithRandomizationFactor(0),
		backoff.WithMaxElapsedTime(0),
	)
	r := &Retrier{b: backoff.WithMaxRetries(exp, uint64(n)), clk: p.Clock, name: name}
	if r.clk == nil {
		r.clk = RealClock{}
	}
	r.obs, _ = sink.(transport.ReconnectObserver)
	r.gate, _ = sink.(transport.AttemptGate)
	if spec != nil {
		r.log, r.stream = spec.Logger, spec.StreamID
	}
	return r
}

// Clock returns the clock the Retrier waits on.
func (r *Retrier) Clock() Clock { return r.clk }

// Wait sleeps before the next attempt after cause. A positive override (a
// Retry-After header, the server's SSE retry field) replaces the policy's
// delay, as the event stream specification says. It returns cause, marked
// with the number of retries spent, when the streak has used all its
// retries, and ctx.Err() if ctx ends first. When the sink is a
// transport.AttemptGate, every failure (the last of a streak included) is
// reported to it first, and its error (an open circuit) is returned in
// place of a wait; it is asked again after the wait.
func (r *Retrier) Wait(ctx context.Context, cause error, override time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.gate != nil {
		// The sink's circuit breaker counts the failure; an open circuit
		// ends the streak at once.
		if err := r.gate.AttemptFailed(cause); err != nil {
			return err
		}
	}
	d := r.b.NextBackOff()
	if d == backoff.Stop {
		return GiveUp(cause, r.retries)
	}
	if override > 0 {
		d = override
	}
	r.retries++
	if r.obs != nil {
		r.obs.Reconnecting(r.retries, d, cause)
	}
	// A reconnect is the policy working, not a fault: Info. A failure for
	// good comes back from Run as the one error to report.
	if r.log != nil {
		r.log.LogAttrs(ctx, slog.LevelInfo, r.name+": reconnecting",
			slog.String("stream", r.stream), slog.Int("attempt", r.retries),
			slog.Duration("delay", d), slog.String("cause", cause.Error()))
	}
	fired, stop := r.clk.After(d)
	defer stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-fired:
	}
	if r.gate != nil {
		return r.gate.AllowAttempt() // opened by another stream meanwhile
	}
	return nil
}

// Reset starts a new failure streak; transports call it when data flows.
func (r *Retrier) Reset() {
	r.b.Reset()
	r.retries = 0
}

// GiveUp returns cause annotated with the number of retries spent. A
// *transport.Error stays one (copied, with the note on its cause).
func GiveUp(cause error, retries int) error {
	var te *transport.Error
	if errors.As(cause, &te) {
		out := *te
		out.Err = fmt.Errorf("%w (gave up after %d retries)", te.Err, retries)
		return &out
	}
	return fmt.Errorf("gave up after %d retries: %w", retries, cause)
}
