package sse

import "time"

// clock is the transport's view of time, so that tests can observe every
// backoff wait without sleeping.
type clock interface {
	now() time.Time
	// after returns a channel that receives once d has passed, and a function
	// that releases the timer early.
	after(d time.Duration) (<-chan time.Time, func() bool)
}

type realClock struct{}

func (realClock) now() time.Time { return time.Now() }

func (realClock) after(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}
