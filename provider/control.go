package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/rtfs"
)

// Status returns the status of stream id. With Options.Cluster, a stream
// another host runs is asked there, within ctx (see Pause). A ctx already
// ended gives an error that wraps ctx.Err().
func (p *Provider) Status(ctx context.Context, id string) (Status, error) {
	s, err := p.lookupOpen(id)
	if err != nil {
		return p.fwd.forward(ctx, id, "status", err)
	}
	if err := ctx.Err(); err != nil {
		return Status{}, fmt.Errorf("status of stream %q: %w", id, err)
	}
	return s.Status(), nil
}

// forward runs verb on stream id, which this provider does not run (lookup
// said so with notHere): on its owner (Options.Cluster), or here once
// loaded from the store. Without a cluster it returns notHere. The request
// runs within ctx, bounded by DefaultForwardTimeout when ctx has no
// deadline, and ends when the provider closes (ErrClosed).
func (f forwarder) forward(ctx context.Context, id, verb string, notHere error) (Status, error) {
	p := f.p
	if p.opts.Cluster == nil {
		return Status{}, notHere
	}
	if err := ctx.Err(); err != nil {
		return Status{}, fmt.Errorf("%s stream %q: %w", verb, id, err)
	}
	fctx, cancel := forwardContext(ctx, p.ctx)
	defer cancel()
	a, s, err := p.fwd.remote(fctx, Request{Verb: verb, StreamID: id})
	switch {
	case err != nil:
		return Status{}, forwardErr(fctx, verb, id, err)
	case s == nil:
		return a.Status, nil
	case verb == "status":
		return s.Status(), nil
	case verb == "cancel":
		return p.Cancel(ctx, id)
	}
	return p.control(ctx, id, verb, nil)
}

// DefaultForwardTimeout bounds a request forwarded to the host that runs
// the stream (Options.Cluster) when the caller's context has no deadline.
const DefaultForwardTimeout = 10 * time.Second

// forwardContext is the context a request forwarded to another host runs
// in: ctx, bounded by DefaultForwardTimeout when it has no deadline, and
// ended with cause ErrClosed when closing (the provider's context) ends.
func forwardContext(ctx, closing context.Context) (context.Context, context.CancelFunc) {
	stopTimer := context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok {
		ctx, stopTimer = context.WithTimeout(ctx, DefaultForwardTimeout)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(closing, func() { cancel(ErrClosed) })
	return ctx, func() {
		stop()
		cancel(nil)
		stopTimer()
	}
}

// forwardErr is the error of a forwarded request that failed with err:
// when its context ended, it wraps why (the caller's ctx.Err(), the
// default timeout's DeadlineExceeded, or ErrClosed), whatever err the
// transport made of it.
func forwardErr(ctx context.Context, verb, id string, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%s stream %q: %w (%w)", verb, id, cause, err)
	}
	return err
}

// Pause pauses stream id: its worker stops taking chunks from the queue (the
// transport blocks once the queue is full); control chunks are still
// processed. Pausing a paused stream changes nothing; pausing an ended one is
// an error.
//
// Pause, Resume, Skip, Cancel and Status take effect within ctx, and never
// take effect halfway:
//   - On a stream this provider runs, the change is made under the
//     stream's lock (held only for short state changes, never across a
//     processor call or I/O) and the call returns without waiting for the
//     worker to act on it. A ctx that has ended when the lock is taken
//     changes nothing and gives an error wrapping ctx.Err(); a change
//     made is kept, and returned, even if ctx ends just after.
//   - With Options.Cluster, a stream another host runs is asked there:
//     ctx bounds the request (DefaultForwardTimeout when ctx has no
//     deadline). When ctx ends first, the error wraps ctx.Err() (or
//     context.DeadlineExceeded for the default bound, ErrClosed when the
//     provider closes); the owner applies the request whole or not at
//     all, but it may have applied it before its answer was lost: ask
//     Status. Pause, Resume and Cancel may be repeated safely (each
//     changes nothing the second time); a repeated Skip is refused unless
//     the stream failed again on its next chunk. A stream no live host
//     runs is claimed and loaded here from the store: that runs whole,
//     even when ctx ends first (the request is then not applied).
func (p *Provider) Pause(ctx context.Context, id string) (Status, error) {
	return p.control(ctx, id, "pause", stream.PauseChange)
}

// Resume resumes a paused stream id: its backlog drains in order at once.
// A failed stream (StateFailed) is repaired: the chunk it is held on is
// processed again, from the state after the chunk before, by the processor
// it has now (after an Upgrade, the new one); a stream whose source gave
// up connects it again from its cursor. Resuming an active stream changes
// nothing; resuming an ended one is an error. ctx bounds it as it bounds
// Pause.
func (p *Provider) Resume(ctx context.Context, id string) (Status, error) {
	return p.control(ctx, id, "resume", stream.ResumeChange)
}

// Skip sets the chunk a failed stream is held on aside as a dead letter
// (kept with the stream: DeadLetters) and goes on with the next one. A
// stream recovered after a restart whose held chunk has not come back from
// its source yet sets it aside when it comes. It is an error for a stream
// that is not held on a chunk (not StateFailed, or held by its source).
// ctx bounds it as it bounds Pause.
func (p *Provider) Skip(ctx context.Context, id string) (Status, error) {
	return p.control(ctx, id, "skip", nil)
}

// Cancel cancels stream id: its transport stops, its queued chunks are
// dropped and counted, its status becomes :cancelled. Cancelling an ended
// stream changes nothing and returns its status. ctx bounds it as it
// bounds Pause.
func (p *Provider) Cancel(ctx context.Context, id string) (Status, error) {
	s, err := p.lookupOpen(id)
	if err != nil {
		return p.fwd.forward(ctx, id, "cancel", err)
	}
	return s.CancelRequest(ctx)
}

// control makes change (verb's) to stream id under its lock, or forwards
// verb to the stream's owner; ctx is checked once the lock is held (Pause
// says why).
func (p *Provider) control(ctx context.Context, id, verb string, change func(*stream.Stream) error) (Status, error) {
	if change == nil {
		change = map[string]func(*stream.Stream) error{"pause": stream.PauseChange, "resume": stream.ResumeChange, "skip": stream.SkipChange}[verb]
	}
	s, err := p.lookupOpen(id)
	if err != nil {
		return p.fwd.forward(ctx, id, verb, err)
	}
	return s.Control(ctx, verb, change)
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
		return p.fwd.awaitRemote(ctx, id)
	}
	select {
	case <-s.Done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s = s.Current()
	if s.Moved.Load() || s.HandingOver.Load() {
		return p.fwd.awaitRemote(ctx, id)
	}
	st := s.Status()
	if st.State != StateCompleted {
		return nil, s.EndErr(st)
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
	return s.Done, nil
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
	s.Cancel()
	select {
	case <-s.Done:
	case <-ctx.Done():
		return fmt.Errorf("detach stream %q: %w", id, ctx.Err())
	}
	if p.ps != nil {
		if err := p.ps.Com.Flush(ctx); err != nil {
			return fmt.Errorf("detach stream %q: commit its progress: %w", id, err)
		}
	}
	p.forget(s)
	return nil
}
