package provider

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/rtfs"
)

// The ring keeps FIFO order across wrap-around, growth beyond its first
// size (which is rounded up to a power of two) and removals from the middle.
func TestRingOrder(t *testing.T) {
	var r stream.Ring
	var want []int64
	next := int64(0)
	push := func(n int) {
		for i := 0; i < n; i++ {
			r.Push(stream.Item{Seq: next}, 5)
			want = append(want, next)
			next++
		}
	}
	pop := func(n int) {
		for i := 0; i < n; i++ {
			if got := r.Pop().Seq; got != want[0] {
				t.Fatalf("pop = %d, want %d", got, want[0])
			}
			want = want[1:]
		}
	}
	push(6) // first size 8 (5 rounded up)
	if len(r.Buf) != 8 {
		t.Fatalf("first size %d, want 8", len(r.Buf))
	}
	pop(5)
	push(6) // wraps
	if got := r.RemoveAt(2).Seq; got != want[2] {
		t.Fatalf("removeAt(2) = %d, want %d", got, want[2])
	}
	want = append(want[:2], want[3:]...)
	push(10) // grows while wrapped
	if len(r.Buf) != 16 {
		t.Fatalf("size after growth %d, want 16", len(r.Buf))
	}
	var got []int64
	for i := 0; i < r.Len(); i++ {
		got = append(got, r.At(i).Seq)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("queue %v, want %v", got, want)
	}
	pop(len(want))
	if r.Len() != 0 || r.Clear() != 0 {
		t.Fatalf("len %d after popping everything", r.Len())
	}
}

// A Deliver blocked on a full queue is released in batches while the worker
// drains the queue, but a worker that stops taking chunks (here: a pause
// right after it took one from the full queue) releases it at once, so a
// paused stream's queue still fills up to its capacity.
func TestPauseWhileDrainingFillsQueue(t *testing.T) {
	f := newFixture(t, Options{})
	reached, gate := make(chan struct{}), make(chan struct{})
	count := counter()
	proc := goProc(func(state, chunk, meta rtfs.Value) (rtfs.Value, error) {
		if path(chunk, "n") == rtfs.Int(1) {
			close(reached)
			<-gate
		}
		return count.Call(context.Background(), state, chunk, meta)
	})
	id := f.start(StartRequest{goProc: proc, QueueCapacity: 8})
	f.Send(id, `{"n":0}`)
	f.Send(id, `{"n":1}`)
	<-reached
	f.Send(id, `{"n":2,"reply":"pause"}`)
	for n := 3; n <= 10; n++ { // 3..9 fill the queue with 2, 10 waits in Deliver
		f.Send(id, fmt.Sprintf(`{"n":%d}`, n))
	}
	s, err := f.p.lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	f.waitFor("Deliver to wait for room", func() bool {
		s.Mu.Lock()
		defer s.Mu.Unlock()
		return s.Space != nil
	})
	close(gate)
	f.waitFor("a full paused queue", func() bool {
		m := f.Inspect(id)
		return path(m, "status", "state") == rtfs.Keyword("paused") && path(m, "stats", "queued-chunks") == rtfs.Int(8)
	})
	if _, err := f.p.Resume(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	f.mock.Source(id).Close()
	if st := f.Await(id); st.State != StateCompleted {
		t.Fatalf("status = %+v", st)
	}
	if got := seenInts(f.stateOf(id)); !reflect.DeepEqual(got, ints(0, 10)) {
		t.Errorf("processed %v, want 0..10 once each in order", got)
	}
}
