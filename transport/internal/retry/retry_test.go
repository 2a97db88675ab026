package retry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

type observer struct {
	attempts []int
}

func (o *observer) Deliver(context.Context, transport.Chunk) error { return nil }

func (o *observer) Reconnecting(attempt int, _ time.Duration, _ error) {
	o.attempts = append(o.attempts, attempt)
}

// TestPolicySequence: the delays of a streak double from 250 ms to 5 s, the
// streak ends after Attempts retries with the cause marked, an override
// replaces the policy's delay, and Reset starts again at 250 ms.
func TestPolicySequence(t *testing.T) {
	clk := &FakeClock{}
	obs := &observer{}
	r := Policy{Attempts: 8, Clock: clk}.Start("test", &transport.Spec{StreamID: "s"}, obs)
	cause := &transport.Error{StreamID: "s", Op: "read", Err: errors.New("boom")}
	for i := 0; i < 8; i++ {
		if err := r.Wait(context.Background(), cause, 0); err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
	}
	err := r.Wait(context.Background(), cause, 0)
	var te *transport.Error
	if !errors.As(err, &te) || te.Op != "read" || !strings.Contains(err.Error(), "gave up after 8 retries") {
		t.Fatalf("after the streak: %v", err)
	}
	ms := time.Millisecond
	want := []time.Duration{250 * ms, 500 * ms, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	if len(clk.Waits()) != len(want) {
		t.Fatalf("delays = %v, want %v", clk.Waits(), want)
	}
	for i := range want {
		if clk.Waits()[i] != want[i] {
			t.Fatalf("delays = %v, want %v", clk.Waits(), want)
		}
	}
	if len(obs.attempts) != 8 || obs.attempts[7] != 8 {
		t.Fatalf("observer saw attempts %v", obs.attempts)
	}
	r.Reset()
	if err := r.Wait(context.Background(), cause, 40*ms); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(context.Background(), cause, 0); err != nil {
		t.Fatal(err)
	}
	if got := clk.Waits()[8:]; got[0] != 40*ms || got[1] != 500*ms {
		t.Fatalf("after Reset, with an override then without: %v, want [40ms 500ms]", got)
	}
}

// TestWaitEndsWithContext: a cancelled context ends a wait at once.
func TestWaitEndsWithContext(t *testing.T) {
	r := Policy{Initial: time.Hour, Max: time.Hour}.Start("test", nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	if err := r.Wait(ctx, errors.New("x"), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait = %v, want context.Canceled", err)
	}
}

// gate is a sink whose circuit breaker opens after open failures, or after
// the wait when late is set.
type gate struct {
	observer
	failures int
	open     int
	late     bool
	refusal  error
}

func (g *gate) AttemptFailed(error) error {
	g.failures++
	if !g.late && g.failures >= g.open {
		return g.refusal
	}
	return nil
}

func (g *gate) AllowAttempt() error {
	if g.late && g.failures >= g.open {
		return g.refusal
	}
	return nil
}

// TestGate: every failure reaches the sink's breaker, the last of a streak
// included; once the breaker refuses, Wait returns its error without
// waiting or reporting a reconnect, and a breaker that opened during the
// wait stops the attempt after it.
func TestGate(t *testing.T) {
	refusal := errors.New("circuit open")
	clk := &FakeClock{}
	g := &gate{open: 3, refusal: refusal}
	r := Policy{Attempts: 8, Clock: clk}.Start("test", nil, g)
	cause := errors.New("refused")
	for i := 0; i < 2; i++ {
		if err := r.Wait(context.Background(), cause, 0); err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
	}
	if err := r.Wait(context.Background(), cause, 0); err != refusal {
		t.Fatalf("third wait = %v, want the breaker's refusal", err)
	}
	if g.failures != 3 || len(clk.Waits()) != 2 || len(g.attempts) != 2 {
		t.Fatalf("failures %d, waits %v, reconnects %v", g.failures, clk.Waits(), g.attempts)
	}

	g = &gate{open: 1, late: true, refusal: refusal}
	r = Policy{Attempts: 8, Clock: &FakeClock{}}.Start("test", nil, g)
	if err := r.Wait(context.Background(), cause, 0); err != refusal {
		t.Fatalf("a breaker that opened during the wait: %v", err)
	}

	g = &gate{open: 100, refusal: refusal}
	r = Policy{Attempts: 1, Clock: &FakeClock{}}.Start("test", nil, g)
	_ = r.Wait(context.Background(), cause, 0)
	if err := r.Wait(context.Background(), cause, 0); err == nil || g.failures != 2 {
		t.Fatalf("the last failure of a streak: %v, %d failures counted", err, g.failures)
	}
}
