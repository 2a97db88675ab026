package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/rtfshost/rtfshost/transport"
)

// retryPolicy is the reconnect delay policy: initial doubling to max, no
// jitter, waited on clk. The zero value means the project policy, 250 ms
// doubling to 5 s, on the real clock.
type retryPolicy struct {
	initial time.Duration
	max     time.Duration
	clk     clock // nil: realClock
}

// clock starts the timers of reconnect waits, so that tests can observe every
// wait without sleeping.
type clock interface {
	// after returns a channel that receives once d has passed, and a
	// function that releases the timer early.
	after(d time.Duration) (<-chan time.Time, func() bool)
}

type realClock struct{}

func (realClock) after(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

const (
	defaultInitialDelay = 250 * time.Millisecond
	defaultMaxDelay     = 5 * time.Second
)

// newBackOff builds the backoff for attempts retries per failure streak.
func (p retryPolicy) newBackOff(attempts int) backoff.BackOff {
	initial, max := p.initial, p.max
	if initial <= 0 {
		initial = defaultInitialDelay
	}
	if max <= 0 {
		max = defaultMaxDelay
	}
	exp := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(initial),
		backoff.WithMultiplier(2),
		backoff.WithMaxInterval(max),
		backoff.WithRandomizationFactor(0),
		backoff.WithMaxElapsedTime(0),
	)
	return backoff.WithMaxRetries(exp, uint64(attempts))
}

// retrier counts one failure streak and waits between its attempts. It is
// owned by one Run.
type retrier struct {
	b       backoff.BackOff
	clk     clock
	obs     transport.ReconnectObserver
	retries int
}

func newRetrier(p retryPolicy, spec *transport.Spec, sink transport.Sink) *retrier {
	n := spec.RetryAttempts
	if n <= 0 {
		n = transport.DefaultRetryAttempts
	}
	obs, _ := sink.(transport.ReconnectObserver)
	clk := p.clk
	if clk == nil {
		clk = realClock{}
	}
	return &retrier{b: p.newBackOff(n), clk: clk, obs: obs}
}

// wait sleeps before the next attempt after cause, at least hint (the
// server's retry field). It returns cause, marked as final, when the streak
// has used all its retries, and ctx.Err() if ctx ends first.
func (r *retrier) wait(ctx context.Context, cause error, hint time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := r.b.NextBackOff()
	if d == backoff.Stop {
		return giveUp(cause, r.retries)
	}
	d = max(d, hint)
	r.retries++
	if r.obs != nil {
		r.obs.Reconnecting(r.retries, d, cause)
	}
	fired, stop := r.clk.after(d)
	defer stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-fired:
		return nil
	}
}

// reset starts a new failure streak; called when data flows.
func (r *retrier) reset() {
	r.b.Reset()
	r.retries = 0
}

// giveUp returns cause annotated with the number of retries spent.
func giveUp(cause error, retries int) error {
	var te *transport.Error
	if errors.As(cause, &te) {
		out := *te
		out.Err = fmt.Errorf("%w (gave up after %d retries)", te.Err, retries)
		return &out
	}
	return fmt.Errorf("gave up after %d retries: %w", retries, cause)
}
