package provider

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/rtfshost/rtfshost/rtfs"
)

// 1,000 streams at once, each fed by its own producer: every stream
// processes its chunks in order and completes.
func TestThousandStreams(t *testing.T) {
	const streams, chunks = 1000, 5
	f := newFixture(t, Options{})
	ids := make([]string, streams)
	for i := range ids {
		ids[i] = f.start(StartRequest{StreamID: fmt.Sprintf("s%04d", i), goProc: counter(), QueueCapacity: 2})
	}
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for _, id := range ids {
		wg.Add(1)
		go func(src string) {
			defer wg.Done()
			s := f.mock.Source(src)
			for n := 1; n <= chunks; n++ {
				if err := s.Send(context.Background(), rtfsChunk(n)); err != nil {
					errs <- err
					return
				}
			}
			s.Close()
		}(id)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := f.p.WaitAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		st, _ := f.p.Status(t.Context(), id)
		got := seenInts(f.stateOf(id))
		if st.State != StateCompleted || len(got) != chunks || got[0] != 1 || got[chunks-1] != chunks {
			t.Fatalf("%s: %+v seen %v", id, st, got)
		}
	}
	if n := path(f.p.Summary(InspectOptions{OmitQueue: true}), "total"); n != rtfs.Int(streams) {
		t.Errorf("summary total = %v", n)
	}
}
