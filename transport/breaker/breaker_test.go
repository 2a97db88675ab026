package breaker

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a clock the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestOpenProbeClose: five consecutive failures open the circuit of one
// origin (not of another); it refuses with the message that names the
// origin, the time, the count and the last cause until the cooldown ends;
// then one probe goes through while others are refused; the probe's failure
// opens it again, and the next probe's success closes it.
func TestOpenProbeClose(t *testing.T) {
	clk := &clock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := New(Options{Now: clk.now})
	const o = "http://127.0.0.1:9"
	for i := 1; i <= 4; i++ {
		s.Failure(o, fmt.Errorf("dial: refused %d", i))
		if err := s.Allow(o); err != nil {
			t.Fatalf("after %d failures: %v", i, err)
		}
	}
	s.Failure(o, errors.New("dial: refused 5"))
	err := s.Allow(o)
	var oe *OpenError
	if !errors.As(err, &oe) || !errors.Is(err, ErrOpen) {
		t.Fatalf("after 5 failures Allow = %v, want an *OpenError", err)
	}
	want := "circuit open for http://127.0.0.1:9 until 2025-01-02T03:04:35.000Z (5 failures; last: dial: refused 5)"
	if err.Error() != want {
		t.Fatalf("message\n%s\nwant\n%s", err, want)
	}
	if err := s.Allow("http://127.0.0.1:10"); err != nil {
		t.Fatalf("another origin is refused: %v", err)
	}
	if st := s.States(); len(st) != 1 || st[0].State != Open || st[0].Failures != 5 || *st[0].OpenUntilEpochMs != oe.Until.UnixMilli() {
		t.Fatalf("states %+v", st)
	}
	clk.add(DefaultCooldown - time.Millisecond)
	if s.Allow(o) == nil {
		t.Fatal("allowed before the cooldown ended")
	}
	clk.add(time.Millisecond)
	if err := s.Allow(o); err != nil {
		t.Fatalf("the probe is refused: %v", err)
	}
	if s.Allow(o) == nil {
		t.Fatal("a second attempt went through beside the probe")
	}
	if st := s.States(); st[0].State != HalfOpen {
		t.Fatalf("state during the probe %+v", st)
	}
	s.Failure(o, errors.New("still down"))
	if err := s.Allow(o); err == nil || !strings.Contains(err.Error(), "(6 failures; last: still down)") {
		t.Fatalf("after the probe failed: %v", err)
	}
	clk.add(DefaultCooldown)
	if err := s.Allow(o); err != nil {
		t.Fatalf("second probe: %v", err)
	}
	s.Success(o)
	if err := s.Allow(o); err != nil || len(s.States()) != 0 {
		t.Fatalf("after the probe succeeded: %v, states %+v", err, s.States())
	}
	if s.Opened() != 2 || s.Rejected() != 4 {
		t.Fatalf("opened %d rejected %d, want 2 and 4", s.Opened(), s.Rejected())
	}
}

// TestSuccessResets: a success between failures starts the count again, so
// only consecutive failures open the circuit; a probe that never reports
// stands for one cooldown, then another goes.
func TestSuccessResets(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	s := New(Options{Failures: 2, Cooldown: time.Second, Now: clk.now})
	s.Failure("o", errors.New("a"))
	s.Success("o")
	s.Failure("o", errors.New("b"))
	if err := s.Allow("o"); err != nil {
		t.Fatalf("opened after non-consecutive failures: %v", err)
	}
	s.Failure("o", errors.New("c"))
	if s.Allow("o") == nil {
		t.Fatal("not open after 2 consecutive failures")
	}
	clk.add(time.Second)
	if err := s.Allow("o"); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Second - time.Millisecond)
	if s.Allow("o") == nil {
		t.Fatal("a second probe went out while the first may still report")
	}
	clk.add(time.Millisecond)
	if err := s.Allow("o"); err != nil {
		t.Fatalf("the probe that never reported still blocks: %v", err)
	}
}

// TestDisabledAndBounded: negative Failures never opens; a Set remembers at
// most MaxOrigins origins, forgetting closed ones first.
func TestDisabledAndBounded(t *testing.T) {
	off := New(Options{Failures: -1})
	for range 100 {
		off.Failure("o", errors.New("x"))
	}
	if err := off.Allow("o"); err != nil {
		t.Fatalf("a disabled breaker refused: %v", err)
	}
	s := New(Options{Failures: 2, MaxOrigins: 3})
	s.Failure("open", errors.New("x"))
	s.Failure("open", errors.New("x"))
	for i := range 10 {
		s.Failure("", errors.New("ignored"))
		s.Failure(fmt.Sprintf("closed-%d", i), nil)
	}
	st := s.States()
	if len(st) != 3 {
		t.Fatalf("%d origins remembered, want 3: %+v", len(st), st)
	}
	if s.Allow("open") == nil {
		t.Fatal("the open circuit was forgotten before closed ones")
	}
	var nilSet *Set
	if nilSet.Allow("o") != nil || nilSet.States() != nil {
		t.Fatal("a nil Set refuses")
	}
}
