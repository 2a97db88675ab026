package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
)

// Status returns the status of stream id. With Options.Cluster, a stream
// another host runs is asked there.
func (p *Provider) Status(id string) (Status, error) {
	s, err := p.lookupOpen(id)
	if err != nil {
		return p.forward(id, "status", err)
	}
	return s.status(), nil
}

// forward runs verb on stream id, which this provider does not run (lookup
// said so with notHere): on its owner (Options.Cluster), or here once
// loaded from the store. Without a cluster it returns notHere.
func (p *Provider) forward(id, verb string, notHere error) (Status, error) {
	if p.opts.Cluster == nil {
		return Status{}, notHere
	}
	ctx, cancel := context.WithTimeout(p.ctx, forwardTimeout)
	defer cancel()
	a, s, err := p.remote(ctx, Request{Verb: verb, StreamID: id})
	switch {
	case err != nil:
		return Status{}, err
	case s == nil:
		return a.Status, nil
	case verb == "status":
		return s.status(), nil
	case verb == "cancel":
		return p.Cancel(id)
	}
	return p.control(id, verb, nil)
}

// forwardTimeout bounds a request forwarded to another host.
const forwardTimeout = 10 * time.Second

// Pause pauses stream id: its worker stops taking chunks from the queue (the
// transport blocks once the queue is full); control chunks are still
// processed. Pausing a paused stream changes nothing; pausing an ended one is
// an error.
func (p *Provider) Pause(id string) (Status, error) {
	return p.control(id, "pause", pauseChange)
}

func pauseChange(s *stream) error {
	if s.st == StateFailed {
		return fmt.Errorf("cannot pause stream %q: it is failed (%s); resume, skip or cancel it", s.id, s.msg)
	}
	if s.st != StatePaused {
		s.obs.Directive("pause", "request") // pausing a paused stream applies nothing
		s.noteLocked(TimelineEvent{Kind: "pause", Source: "request"})
	}
	s.st, s.resumeAt, s.pausedByRequest = StatePaused, time.Time{}, true
	return nil
}

// Resume resumes a paused stream id: its backlog drains in order at once.
// A failed stream (StateFailed) is repaired: the chunk it is held on is
// processed again, from the state after the chunk before, by the processor
// it has now (after an Upgrade, the new one); a stream whose source gave
// up connects it again from its cursor. Resuming an active stream changes
// nothing; resuming an ended one is an error.
func (p *Provider) Resume(id string) (Status, error) {
	return p.control(id, "resume", resumeChange)
}

func resumeChange(s *stream) error {
	if s.st == StateFailed {
		if s.resumeFailedLocked() && !s.taskActive {
			s.reconnect = true // its transport returned: it runs again
		}
		return nil
	}
	if s.st != StateActive {
		s.obs.Directive("resume", "request") // resuming an active stream applies nothing
		s.noteLocked(TimelineEvent{Kind: "resume", Source: "request"})
	}
	s.st, s.resumeAt = StateActive, time.Time{}
	return nil
}

// Cancel cancels stream id: its transport stops, its queued chunks are
// dropped and counted, its status becomes :cancelled. Cancelling an ended
// stream changes nothing and returns its status.
func (p *Provider) Cancel(id string) (Status, error) {
	s, err := p.lookupOpen(id)
	if err != nil {
		return p.forward(id, "cancel", err)
	}
	s.mu.Lock()
	if s.dormant || s.upgrade != nil {
		defer s.mu.Unlock()
		return Status{}, errDormant(s, "cancel")
	}
	if !s.st.Terminal() {
		s.obs.Directive("cancel", "request")
		s.noteLocked(TimelineEvent{Kind: "cancel", Source: "request"})
		s.cancelLocked("request")
	}
	st := s.statusLocked()
	s.mu.Unlock()
	s.signal()
	return st, nil
}

// errDormant reports a request to a stream that was recovered without
// connecting (Options.ManualConnect), or could not be recovered, or is
// stopped for an upgrade: it can be inspected, not driven. s.mu is held.
func errDormant(s *stream, verb string) error {
	switch {
	case s.st == StateUnrecoverable:
		return fmt.Errorf("cannot %s stream %q: it is unrecoverable (%s); give it a processor again (rtfshost upgrade) or remove it", verb, s.id, s.msg)
	case s.upgrade != nil || s.swapping:
		return fmt.Errorf("cannot %s stream %q: its processor is being swapped; try again in a moment", verb, s.id)
	}
	return fmt.Errorf("cannot %s stream %q: it was loaded from the store without running (manual connect); inspect only", verb, s.id)
}

func (p *Provider) control(id, verb string, change func(*stream) error) (Status, error) {
	if change == nil {
		change = map[string]func(*stream) error{"pause": pauseChange, "resume": resumeChange, "skip": skipChange}[verb]
	}
	s, err := p.lookupOpen(id)
	if err != nil {
		return p.forward(id, verb, err)
	}
	s.mu.Lock()
	if s.dormant || s.upgrade != nil || s.swapping {
		defer s.mu.Unlock()
		return Status{}, errDormant(s, verb)
	}
	if s.st.Terminal() {
		st := s.st
		s.mu.Unlock()
		return Status{}, fmt.Errorf("cannot %s stream %q: it is %s", verb, id, st)
	}
	if err := change(s); err != nil {
		s.mu.Unlock()
		return Status{}, err
	}
	st := s.statusLocked()
	subs := s.subs
	reconnect := s.reconnect
	s.reconnect = false
	s.mu.Unlock()
	if reconnect {
		s.p.reconnect(s)
	}
	s.changed(subs)
	if s.ps != nil {
		s.ps.changed()
	}
	s.signal()
	return st, nil
}

// Await blocks until stream id ends, or ctx ends, and returns the :result of
// a completed stream. A cancelled or failed stream (or one interrupted by
// Close) gives a *StreamError.
func (p *Provider) Await(ctx context.Context, id string) (rtfs.Value, error) {
	s, err := p.lookup(id)
	if err != nil {
		if p.opts.Cluster == nil {
			return nil, err
		}
		return p.awaitRemote(ctx, id)
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s = s.current()
	if s.moved.Load() || s.handingOver.Load() {
		return p.awaitRemote(ctx, id)
	}
	st := s.status()
	if st.State != StateCompleted {
		return nil, s.endErr(st)
	}
	return st.Result, nil
}

// Done returns a channel closed when stream id has ended (or the provider
// closed) and its final events are published.
func (p *Provider) Done(id string) (<-chan struct{}, error) {
	s, err := p.lookup(id)
	if err != nil {
		return nil, err
	}
	return s.done, nil
}

// Detach stops stream id the way Close stops every stream, and forgets it:
// its transport and worker end, its progress is committed, and its stored
// records stay unfinished, so that a later Recover (rtfshost resume)
// carries it on from its cursor. Its subscriptions close without an
// EventEnd; Await on it returns a *StreamError whose state is not
// terminal. An ended stream is only forgotten (its records stay). A host
// running several programs' streams uses it to interrupt one program's
// streams and leave the others running. It waits for the stream's
// goroutines and its last commit, at most until ctx ends.
func (p *Provider) Detach(ctx context.Context, id string) error {
	s, err := p.lookup(id)
	if err != nil {
		return err
	}
	s.cancel()
	select {
	case <-s.done:
	case <-ctx.Done():
		return fmt.Errorf("detach stream %q: %w", id, ctx.Err())
	}
	if p.ps != nil {
		if err := p.ps.com.Flush(ctx); err != nil {
			return fmt.Errorf("detach stream %q: commit its progress: %w", id, err)
		}
	}
	p.forget(s)
	return nil
}
