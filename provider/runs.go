package provider

import (
	"context"
	"fmt"
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

// followRun records s's transport run, which launch is about to start, as
// the current one of its id, and returns the run it must wait for: the
// previous one's tdone, nil when none is in progress.
func (p *Provider) followRun(s *stream, tdone chan struct{}) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.runs[s.id]
	p.runs[s.id] = tdone
	return prev
}

// runReturned records that s's transport goroutine returned: the next run
// of its id may start.
func (p *Provider) runReturned(s *stream, tdone chan struct{}) {
	p.mu.Lock()
	if p.runs[s.id] == tdone {
		delete(p.runs, s.id)
	}
	p.mu.Unlock()
	close(tdone)
}

// awaitRun waits until no transport run of stream id is in progress here,
// or ctx ends.
func (p *Provider) awaitRun(ctx context.Context, id string) error {
	for {
		p.mu.Lock()
		run := p.runs[id]
		p.mu.Unlock()
		if run == nil {
			return nil
		}
		if err := p.waitRun(ctx, id, run); err != nil {
			return fmt.Errorf("stream %q: waiting for its transport to stop: %w", id, err)
		}
	}
}

// awaitPrevious waits until prev, the previous transport run of s's id,
// has returned. It reports false when s ended first: its transport then
// does not run at all.
func (s *stream) awaitPrevious(prev <-chan struct{}) bool {
	if prev != nil && s.p.waitRun(s.ctx, s.id, prev) != nil {
		return false
	}
	return s.ctx.Err() == nil
}

// waitRun waits until run, a transport run of stream id, has returned, or
// ctx ends; meanwhile runWaits counts it.
func (p *Provider) waitRun(ctx context.Context, id string, run <-chan struct{}) error {
	p.mu.Lock()
	p.runWaits[id]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if p.runWaits[id]--; p.runWaits[id] == 0 {
			delete(p.runWaits, id)
		}
		p.mu.Unlock()
	}()
	select {
	case <-run:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
