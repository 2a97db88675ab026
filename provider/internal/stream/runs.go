package stream

import (
	"context"
	"fmt"
	"sync"
)

// One transport run at a time for a stream id. A provider stops a stream
// and starts it again in several ways: a live processor swap (upgrade.go),
// a hand-over that failed and a stream that left and came back
// (cluster.go), a stream removed and started again under the same id. The
// stopped stream's worker exits at once, but its transport's Run returns
// only once the transport has let go of its source (a connection closed, a
// child process reaped), which may be later. Two Runs of one stream must
// not overlap: they would read one source twice, and a chunk that the
// stopping Run takes is lost (a mock source is even shared by the two). So
// launch records each transport run of an id, and a stream's transport
// starts only once the previous run of its id has returned. Remove and a
// hand-over wait for the run as well, so that nothing of the stream still
// runs here when they are done.

// A RunTable records the transport runs in progress, by stream id. It is
// safe for concurrent use; a provider has one, which its streams share.
type RunTable struct {
	Mu sync.Mutex
	// runs holds, by stream id, the tdone of the transport goroutine last
	// launched for a stream of that id while it has not returned: the
	// next run of that id waits for it.
	runs map[string]chan struct{}
	// Waits counts, by stream id, the goroutines waiting for a run in
	// runs to return.
	Waits map[string]int
}

func NewRunTable() *RunTable {
	return &RunTable{runs: make(map[string]chan struct{}), Waits: make(map[string]int)}
}

// follow records the transport run of stream id that launch is about to
// start, whose goroutine closes tdone when it returns, as the current one of
// its id, and returns the run it must wait for: the previous one's tdone,
// nil when none is in progress.
func (r *RunTable) follow(id string, tdone chan struct{}) <-chan struct{} {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	prev := r.runs[id]
	r.runs[id] = tdone
	return prev
}

// returned records that the transport goroutine of stream id whose run
// tdone is returned: the next run of its id may start.
func (r *RunTable) returned(id string, tdone chan struct{}) {
	r.Mu.Lock()
	if r.runs[id] == tdone {
		delete(r.runs, id)
	}
	r.Mu.Unlock()
	close(tdone)
}

// Await waits until no transport run of stream id is in progress here,
// or ctx ends.
func (r *RunTable) Await(ctx context.Context, id string) error {
	for {
		r.Mu.Lock()
		run := r.runs[id]
		r.Mu.Unlock()
		if run == nil {
			return nil
		}
		if err := r.wait(ctx, id, run); err != nil {
			return fmt.Errorf("stream %q: waiting for its transport to stop: %w", id, err)
		}
	}
}

// awaitPrevious waits until prev, the previous transport run of s's id,
// has returned. It reports false when s ended first: its transport then
// does not run at all.
func (s *Stream) awaitPrevious(prev <-chan struct{}) bool {
	if prev != nil && s.Env.Runs.wait(s.ctx, s.ID, prev) != nil {
		return false
	}
	return s.ctx.Err() == nil
}

// wait waits until run, a transport run of stream id, has returned, or
// ctx ends; meanwhile waits counts it.
func (r *RunTable) wait(ctx context.Context, id string, run <-chan struct{}) error {
	r.Mu.Lock()
	r.Waits[id]++
	r.Mu.Unlock()
	defer func() {
		r.Mu.Lock()
		if r.Waits[id]--; r.Waits[id] == 0 {
			delete(r.Waits, id)
		}
		r.Mu.Unlock()
	}()
	select {
	case <-run:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Waiting reports whether something waits for a transport run of stream id
// to return: a stream's next run, Remove or a hand-over.
func (r *RunTable) Waiting(id string) bool {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	return r.Waits[id] > 0
}
