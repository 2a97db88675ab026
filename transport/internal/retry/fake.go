package retry

import (
	"sync"
	"time"
)

// FakeClock is the Clock of the transports' tests: it records every wait it
// is asked for and fires at once, or never while Hold is set. It is safe
// for concurrent use.
type FakeClock struct {
	Hold bool // set before use: timers never fire

	mu     sync.Mutex
	delays []time.Duration
}

// Now returns time.Now().
func (c *FakeClock) Now() time.Time { return time.Now() }

// After records d and returns a channel that has fired already (or, with
// Hold, never fires).
func (c *FakeClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	c.delays = append(c.delays, d)
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !c.Hold {
		ch <- time.Time{}
	}
	return ch, func() bool { return true }
}

// Waits returns the waits asked for so far, in order.
func (c *FakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.delays...)
}
