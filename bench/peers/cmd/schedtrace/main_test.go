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

	gs, err := analyze(&buf, roleFlag{{"consumer", ".consumeForTest"}, {"producer", ".produceForTest"}})
	if err != nil {
		t.Fatal(err)
	}
	var consumer *goroutine
	for _, g := range gs {
		if g.role == "consumer" {
			consumer = g
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
	var out bytes.Buffer
	report(&out, gs, 0)
	for _, want := range []string{"consumer (goroutine", "made runnable by", "Waiting"} {
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
