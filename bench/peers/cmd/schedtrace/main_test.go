package main

import (
	"bytes"
	"runtime/trace"
	"strings"
	"testing"
	"time"

	xtrace "golang.org/x/exp/trace"
)

// A traced hand-off between two goroutines: the consumer's time is split
// between running and waiting, it is made runnable by the producer at the
// channel send, and the report names both roles.
func TestAnalyzeHandOff(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	ch := make(chan int)
	done := make(chan struct{})
	go consumeForTest(ch, done)
	produceForTest(ch)
	<-done
	trace.Stop()

	tr, err := analyze(&buf, roleFlag{{"consumer", ".consumeForTest"}, {"producer", ".produceForTest"}})
	if err != nil {
		t.Fatal(err)
	}
	gs := tr.gs
	var consumer, producer *goroutine
	for _, g := range gs {
		switch g.role {
		case "consumer":
			consumer = g
		case "producer":
			producer = g
		}
	}
	if consumer == nil {
		t.Fatalf("no consumer among %d goroutines with a role", len(gs))
	}
	if consumer.in[xtrace.GoRunning] == 0 || consumer.in[xtrace.GoWaiting] < 10*100*time.Microsecond {
		t.Fatalf("consumer ran %v and waited %v; want both, and at least 1ms of waiting for the producer's sleeps", consumer.in[xtrace.GoRunning], consumer.in[xtrace.GoWaiting])
	}
	woken := 0
	for k, n := range consumer.wokenBy {
		if strings.HasPrefix(k, "producer at ") {
			woken += n
		}
	}
	if woken < 10 {
		t.Fatalf("consumer made runnable by the producer %d times, want at least 10 of 20 (%v)", woken, consumer.wokenBy)
	}
	if producer == nil {
		t.Fatalf("no producer among %d goroutines with a role", len(gs))
	}
	// The time one or both ran is no shorter than either one's running
	// and no longer than the two together.
	any := time.Duration(0)
	for n, d := range tr.concurrent {
		if n < 1 || n > 2 {
			t.Fatalf("%d goroutines with a role ran at once; there are 2", n)
		}
		any += d
	}
	c, p := consumer.in[xtrace.GoRunning], producer.in[xtrace.GoRunning]
	if any < max(c, p) || any > c+p {
		t.Fatalf("one or both ran %v (%v); want between %v and %v", any, tr.concurrent, max(c, p), c+p)
	}
	if len(consumer.runs) < 10 {
		t.Fatalf("consumer ran %d times, want at least 10", len(consumer.runs))
	}
	var out bytes.Buffer
	report(&out, tr, 0)
	for _, want := range []string{"consumer (goroutine", "made runnable by", "Waiting", "moved to another P", "idle Ps started:", "running at once: 1 for"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

//go:noinline
func produceForTest(ch chan<- int) {
	for i := 0; i < 20; i++ {
		time.Sleep(200 * time.Microsecond) // the consumer parks before each send
		ch <- i
	}
	close(ch)
}

//go:noinline
func consumeForTest(ch <-chan int, done chan<- struct{}) {
	for range ch {
	}
	close(done)
}
