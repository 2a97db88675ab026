// Package breaker is the circuit breaker of rtfshost's transports: one
// circuit per origin (a server URL's origin as transport/egress classifies
// it, or the program an :exec or :stdio stream runs), shared by every
// stream of a host. The retry policy (transport/internal/retry) reports
// each failed attempt to the stream's transport.AttemptGate, which the
// provider backs with a Set; after Options.Failures consecutive failures
// the origin's circuit opens for Options.Cooldown, and every start of a
// stream and every reconnect to that origin fails at once with an
// *OpenError instead of dialling. Once the cooldown has passed, one attempt
// (the probe) goes through: a success closes the circuit, a failure opens
// it again for another cooldown.
//
// The main type is Set. docs/transports.md describes the behaviour.
package breaker

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// The defaults of Options.
const (
	DefaultFailures   = 5
	DefaultCooldown   = 30 * time.Second
	DefaultMaxOrigins = 1024
)

// Options configure a Set. The zero value is the project's policy.
type Options struct {
	// Failures is how many consecutive failed attempts open an origin's
	// circuit (0: DefaultFailures; negative: circuits never open).
	Failures int
	// Cooldown is how long an open circuit refuses attempts before it lets
	// one probe through (0: DefaultCooldown).
	Cooldown time.Duration
	// MaxOrigins bounds the origins a Set remembers (0: DefaultMaxOrigins).
	// Only origins with failures are remembered; beyond the bound the one
	// whose last failure is oldest (closed circuits first) is forgotten.
	MaxOrigins int
	// Now reads the clock (nil: time.Now); tests move it.
	Now func() time.Time
}

// Circuit states, as State.State reports them.
const (
	Closed   = "closed"    // attempts go through; some failed lately
	Open     = "open"      // attempts fail at once until the cooldown ends
	HalfOpen = "half-open" // the cooldown ended and one probe is under way
)

// ErrOpen is what every *OpenError is (errors.Is).
var ErrOpen = errors.New("circuit open")

// An OpenError refuses an attempt because its origin's circuit is open.
type OpenError struct {
	Origin string
	// Until is when the circuit lets an attempt through again.
	Until    time.Time
	Failures int
	// Last is the message of the last failure.
	Last string
}

// Error reads "circuit open for ORIGIN until T (N failures; last: MSG)".
func (e *OpenError) Error() string {
	return fmt.Sprintf("circuit open for %s until %s (%d failures; last: %s)",
		e.Origin, e.Until.Format("2006-01-02T15:04:05.000Z07:00"), e.Failures, e.Last)
}

// Is makes errors.Is(err, ErrOpen) true.
func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// State is one origin's circuit, as inspect, the dashboard and the metrics
// show it.
type State struct {
	Origin string `json:"origin"`
	State  string `json:"state" rtfs:"keyword"` // Closed, Open or HalfOpen
	// Failures counts the consecutive failed attempts.
	Failures int `json:"failures"`
	// OpenUntilEpochMs is when an open circuit lets a probe through (Unix
	// milliseconds); nil when closed.
	OpenUntilEpochMs *int64 `json:"open-until-epoch-ms"`
	LastError        string `json:"last-error"`
}

// A Set holds the circuits of a host. It is safe for concurrent use; each
// method costs one lock and a map lookup (States costs O(origins)).
type Set struct {
	failures   int
	cooldown   time.Duration
	maxOrigins int
	now        func() time.Time

	opened   atomic.Int64
	rejected atomic.Int64

	mu sync.Mutex
	m  map[string]*circuit // origins with failures; absent: closed and clean
}

type circuit struct {
	failures  int
	last      string
	lastAt    time.Time
	openUntil time.Time // zero: closed
	probeAt   time.Time // the probe went out then; zero: none under way
}

// New returns a Set with opts.
func New(opts Options) *Set {
	s := &Set{failures: opts.Failures, cooldown: opts.Cooldown, maxOrigins: opts.MaxOrigins, now: opts.Now, m: make(map[string]*circuit)}
	if s.failures == 0 {
		s.failures = DefaultFailures
	}
	if s.cooldown <= 0 {
		s.cooldown = DefaultCooldown
	}
	if s.maxOrigins <= 0 {
		s.maxOrigins = DefaultMaxOrigins
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Allow says whether an attempt on origin may go out: nil while its circuit
// is closed, and for the one probe once an open circuit's cooldown has
// passed; else an *OpenError. An empty origin, or a nil Set, always
// allows.
func (s *Set) Allow(origin string) error {
	if s == nil || origin == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.m[origin]
	if c == nil || c.openUntil.IsZero() {
		return nil
	}
	now := s.now()
	until := c.openUntil
	if !c.probeAt.IsZero() {
		// A probe that never reported (its stream ended first) stands
		// for one cooldown; then another may go.
		until = c.probeAt.Add(s.cooldown)
	}
	if now.Before(until) {
		s.rejected.Add(1)
		return &OpenError{Origin: origin, Until: until, Failures: c.failures, Last: c.last}
	}
	c.probeAt = now
	return nil
}

// Failure counts a failed attempt on origin, with its cause. It opens the
// circuit at the Set's threshold, and again when the probe fails.
func (s *Set) Failure(origin string, cause error) {
	if s == nil || origin == "" {
		return
	}
	msg := "unknown error"
	if cause != nil {
		msg = cut(cause.Error(), 300)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	c := s.m[origin]
	if c == nil {
		s.makeRoomLocked()
		c = &circuit{}
		s.m[origin] = c
	}
	c.failures++
	c.last, c.lastAt = msg, now
	probeFailed := !c.probeAt.IsZero()
	if probeFailed || (c.openUntil.IsZero() && s.failures > 0 && c.failures >= s.failures) {
		c.openUntil, c.probeAt = now.Add(s.cooldown), time.Time{}
		s.opened.Add(1)
	}
}

// Success reports that an attempt on origin worked (data arrived): the
// circuit closes and its failures are forgotten.
func (s *Set) Success(origin string) {
	if s == nil || origin == "" {
		return
	}
	s.mu.Lock()
	delete(s.m, origin)
	s.mu.Unlock()
}

// makeRoomLocked forgets one origin when the Set is full: a closed one
// first, else the one whose circuit reopens soonest; among those, the one
// whose last failure is oldest.
func (s *Set) makeRoomLocked() {
	if len(s.m) < s.maxOrigins {
		return
	}
	var victim string
	var vc *circuit
	for o, c := range s.m {
		if vc == nil || worse(c, vc) {
			victim, vc = o, c
		}
	}
	delete(s.m, victim)
}

// worse reports whether a is a better origin to forget than b.
func worse(a, b *circuit) bool {
	if a.openUntil.IsZero() != b.openUntil.IsZero() {
		return a.openUntil.IsZero()
	}
	if !a.openUntil.Equal(b.openUntil) {
		return a.openUntil.Before(b.openUntil)
	}
	return a.lastAt.Before(b.lastAt)
}

// States returns the circuits with failures, by origin.
func (s *Set) States() []State {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make([]State, 0, len(s.m))
	for o, c := range s.m {
		st := State{Origin: o, State: Closed, Failures: c.failures, LastError: c.last}
		if !c.openUntil.IsZero() {
			until := c.openUntil
			st.State = Open
			if !c.probeAt.IsZero() {
				until = c.probeAt.Add(s.cooldown)
				if now.Before(until) {
					st.State = HalfOpen
				}
			}
			ms := until.UnixMilli()
			st.OpenUntilEpochMs = &ms
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Origin < out[j].Origin })
	return out
}

// Opened returns how many times a circuit opened.
func (s *Set) Opened() int64 {
	if s == nil {
		return 0
	}
	return s.opened.Load()
}

// Rejected returns how many attempts an open circuit refused.
func (s *Set) Rejected() int64 {
	if s == nil {
		return 0
	}
	return s.rejected.Load()
}

// cut shortens m to n bytes at a rune boundary.
func cut(m string, n int) string {
	if len(m) <= n {
		return m
	}
	for n > 0 && m[n]&0xC0 == 0x80 {
		n--
	}
	return m[:n] + "…"
}
