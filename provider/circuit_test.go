package provider

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/breaker"
	"github.com/rtfshost/rtfshost/transport/sse"
)

// deadOrigin is a server that hangs up on every request before answering,
// unless alive is set, and counts the requests it got.
type deadOrigin struct {
	*httptest.Server
	requests atomic.Int64
	alive    atomic.Bool
}

func newDeadOrigin(t *testing.T) *deadOrigin {
	d := &deadOrigin{}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.requests.Add(1)
		if d.alive.Load() {
			completeSSE(w)
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(d.Close)
	return d
}

// movableClock is a clock a test moves.
type movableClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *movableClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *movableClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestCircuitOpensOnADeadOrigin: eight streams started one after another on
// an origin that hangs up. With one retry per stream, the fifth failed
// attempt (the third stream's first) opens the circuit: that stream's
// retry, and every later start, fails at once with the breaker's message,
// and the origin sees no more requests. Another origin is not affected.
// After the cooldown one probe goes through; its success closes the
// circuit.
func TestCircuitOpensOnADeadOrigin(t *testing.T) {
	dead := newDeadOrigin(t)
	clk := &movableClock{t: time.Now()}
	f := newFixture(t, Options{
		Transports:    catalogOf(map[string]transport.StreamTransport{"sse": &sse.Transport{}}),
		ServerURL:     dead.URL + "/sse",
		RetryAttempts: 1,
		Breaker:       breaker.Options{Now: clk.now},
	})
	var msgs []string
	for i := range 8 {
		id, err := f.p.Start(StartRequest{Endpoint: "weather.monitor.v1", goProc: counter(), OnError: endOnError})
		if err != nil {
			msgs = append(msgs, err.Error())
			continue
		}
		st := f.Await(id)
		if st.State != StateError {
			t.Fatalf("stream %d on a dead origin: %+v", i, st)
		}
		msgs = append(msgs, st.Message)
	}
	origin := strings.TrimSuffix(dead.URL, "/")
	if n := dead.requests.Load(); n != 5 {
		t.Errorf("the dead origin got %d requests, want 5 (two streams of two attempts, then one)", n)
	}
	for i, m := range msgs {
		open := strings.Contains(m, "circuit open for "+origin+" until ") && strings.Contains(m, "(5 failures; last: ")
		if open != (i >= 2) {
			t.Errorf("start %d: %s", i+1, m)
		}
		if i >= 3 && !strings.HasPrefix(m, "start stream: circuit open") {
			t.Errorf("start %d did not fail in Start: %s", i+1, m)
		}
	}
	bs := f.p.Breakers()
	if len(bs) != 1 || bs[0].Origin != origin || bs[0].State != breaker.Open || bs[0].Failures != 5 {
		t.Fatalf("breakers %+v", bs)
	}
	if opened, rejected := f.p.BreakerCounts(); opened != 1 || rejected != 6 {
		t.Errorf("opened %d, rejected %d; want 1 and 6", opened, rejected)
	}
	sum := f.p.Summary(InspectOptions{}).String()
	if !strings.Contains(sum, `:breakers [{:origin "`+origin+`" :state :open :failures 5`) {
		t.Errorf("summary has no open breaker: %s", sum)
	}

	// Another origin's streams still start.
	other := newCanary(t)
	id, err := f.p.Start(StartRequest{Endpoint: "weather.monitor.v1", ServerURL: other.URL + "/sse", goProc: counter()})
	if err != nil {
		t.Fatalf("another origin: %v", err)
	}
	if st := f.Await(id); st.State != StateCompleted {
		t.Fatalf("another origin: %+v", st)
	}

	// The cooldown ends; the origin is back; the probe closes the circuit.
	clk.Add(breaker.DefaultCooldown)
	dead.alive.Store(true)
	id, err = f.p.Start(StartRequest{Endpoint: "weather.monitor.v1", goProc: counter()})
	if err != nil {
		t.Fatalf("the probe: %v", err)
	}
	if st := f.Await(id); st.State != StateCompleted {
		t.Fatalf("the probe's stream: %+v", st)
	}
	if bs := f.p.Breakers(); len(bs) != 0 {
		t.Fatalf("after the probe's success: %+v", bs)
	}
}
