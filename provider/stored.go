package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/persistence"
)

// Operations on the streams of a store that no provider is running: what
// the command line's cancel, pause, resume and rm do to a data directory.
// They read and rewrite a stream's progress record (and its journal) in
// one commit each, as a running provider would. The caller holds the store
// (it is locked to one process), so no provider writes meanwhile.

// SetStoredState moves a stored, unfinished stream to to: StatePaused (it
// stays paused when the store is next resumed), StateActive (a paused one
// runs on; a failed one retries the chunk it was held on, with the
// processor its records name then, when the store is next recovered), or
// StateCancelled (it ends with end reason "request"; its journaled chunks
// are dropped and counted). It returns the state it found. A stream that
// has ended cannot change: the error says its state. To set a failed
// stream's held chunk aside offline, recover the store with a provider and
// call Skip: the recovered stream is held again, and sets the chunk aside
// when its source or journal sends it.
func SetStoredState(ctx context.Context, st persistence.Store, id string, to State) (State, error) {
	r, err := stream.LoadProgress(ctx, st, id)
	if err != nil {
		return "", err
	}
	from := State(r.Status)
	if from.Terminal() {
		return from, fmt.Errorf("stream %q has ended (%s): it can only be removed (rtfshost rm)", id, from)
	}
	b := &persistence.Batch{}
	switch to {
	case StatePaused, StateActive:
		r.Status, r.ResumeAt, r.Message, r.Failure = string(to), 0, "", nil
	case StateCancelled:
		r.Status, r.Reason, r.Message, r.Failure = string(to), "request", "", nil
		var n int64
		err := st.Scan(ctx, stream.JournalPrefix(id), func(key, value []byte) error {
			b.Delete(append([]byte(nil), key...))
			_, _, seq, _ := stream.ParseStreamKey(key)
			if entries, err := stream.DecodeJournal(key, value, seq); err == nil {
				n += int64(len(entries))
			} else {
				n++ // a damaged entry is deleted all the same, counted as one chunk
			}
			return nil
		})
		if err != nil {
			return from, err
		}
		r.Dropped += n
	default:
		return from, fmt.Errorf("stream %q: cannot set a stored stream to %s", id, to)
	}
	b.Put(stream.StreamKey(id, stream.SuffixProg), r.Encode())
	return from, st.Commit(ctx, b)
}

// RemoveStored deletes every record of stream id from the store, so that its
// id can be used again, and its reference to the journal of the run that
// started it (runjournal.go: the journal goes with its last reference). An
// unfinished stream is refused unless force is set (its progress would be
// lost). It returns the state the stream had.
func RemoveStored(ctx context.Context, st persistence.Store, id string, force bool) (State, error) {
	r, err := stream.LoadProgress(ctx, st, id)
	if err != nil {
		return "", err
	}
	state := State(r.Status)
	if !state.Terminal() && !force {
		return state, fmt.Errorf("stream %q is %s, not ended: cancel it first, or remove it with --force (its progress is lost)", id, state)
	}
	// The stream's records (its journal may hold many) and its dead letters
	// (as many as it set aside) go first, in batches the store takes; the
	// records that make the stream exist (its definition and progress, its
	// origin and delivery records) go last, in one batch, so that a removal
	// cut short leaves a stream that rm removes again, never records nobody
	// can name.
	prefix := stream.StreamKey(id, 0)
	prefix = prefix[:len(prefix)-1] // stream/<id>\x00: every record of the stream
	last := [][]byte{stream.StreamKey(id, stream.SuffixDef), stream.StreamKey(id, stream.SuffixProg), stream.OriginKey(id), stream.DeliveryKey(id)}
	var keys [][]byte
	collect := func(key []byte) error {
		for _, k := range last {
			if bytes.Equal(key, k) {
				return nil
			}
		}
		keys = append(keys, bytes.Clone(key))
		return nil
	}
	if err := persistence.ScanKeys(ctx, st, prefix, collect); err != nil {
		return state, err
	}
	if err := persistence.ScanKeys(ctx, st, stream.DeadLetterPrefix(id), collect); err != nil {
		return state, err
	}
	origin, oerr := stream.LoadOrigin(ctx, st, id)
	size := 0
	for _, group := range [][][]byte{keys, last} {
		for _, k := range group {
			size += len(k)
		}
	}
	if ops, maxSize := stream.DeleteBatchLimits(st); len(keys)+len(last) <= ops && size <= maxSize {
		keys = append(keys, last...) // all in one commit
		last = nil
	}
	if err := stream.DeleteKeys(ctx, st, st.Commit, keys); err != nil {
		return state, fmt.Errorf("removing stream %q: %w", id, err)
	}
	if len(last) > 0 {
		var b persistence.Batch
		for _, k := range last {
			b.Delete(k)
		}
		if err := st.Commit(ctx, &b); err != nil {
			return state, fmt.Errorf("removing stream %q: %w", id, err)
		}
	}
	if oerr != nil || origin == nil {
		return state, nil // a damaged origin is deleted all the same; its journal, if any, stays
	}
	if err := ReleaseRunJournal(ctx, st, origin.Journal, id); err != nil {
		return state, fmt.Errorf("stream %q removed, the journal of the run that started it not released: %w", id, err)
	}
	return state, nil
}

// Remove forgets an ended stream: its records leave the store (so that its
// id can be used again) and it leaves the provider's list. An unfinished
// stream is refused unless force is set; then it is cancelled first. It
// waits for the stream's goroutines to finish (at most ctx). It returns the
// state the stream had.
func (p *Provider) Remove(ctx context.Context, id string, force bool) (State, error) {
	s, err := p.lookup(id)
	if err != nil {
		return "", err
	}
	st := s.Status()
	if !st.State.Terminal() {
		if !force {
			return st.State, fmt.Errorf("stream %q is %s, not ended: cancel it first, or remove it with force (its progress is lost)", id, st.State)
		}
		if _, err := p.Cancel(ctx, id); err != nil {
			return st.State, err
		}
	}
	select {
	case <-s.Done:
	case <-ctx.Done():
		return st.State, ctx.Err()
	}
	// The id is free once nothing of the stream runs: a stream started
	// again under it must not meet this one's transport (runs.go).
	if err := p.runs.Await(ctx, id); err != nil {
		return st.State, err
	}
	if p.opts.Store != nil {
		if _, err := RemoveStored(ctx, p.opts.Store, id, true); err != nil && !errors.Is(err, ErrNoStoredStream) {
			return st.State, err
		}
	}
	p.mu.Lock()
	delete(p.streams, id)
	for i, o := range p.order {
		if o == s {
			p.order = append(p.order[:i:i], p.order[i+1:]...)
			break
		}
	}
	p.mu.Unlock()
	return st.State, nil
}

// DeadLetters returns every dead letter of stream id, oldest first: from
// the store, with one (once the commits submitted before are made), else
// the newest maxMemDeadLetters the provider kept. Cost: a scan of the
// stream's dead letters.
func (p *Provider) DeadLetters(ctx context.Context, id string) ([]DeadLetter, error) {
	s, err := p.lookup(id)
	if err != nil {
		if p.ps == nil {
			return nil, err
		}
		// Another host's, or one this provider does not hold: the store
		// says.
		return StoredDeadLetters(ctx, p.ps.Store, id)
	}
	if p.ps == nil {
		return s.KeptDeadLetters(), nil
	}
	if s.Ps != nil {
		s.Ps.Flush() // the dead letters set aside since the last snapshot
	}
	if err := p.ps.Com.Flush(ctx); err != nil {
		return nil, fmt.Errorf("dead letters of stream %q: %w", id, err)
	}
	return StoredDeadLetters(ctx, p.ps.Store, id)
}

// ReleaseRunJournal is the function ReleaseRunJournal on p's store, its
// commits made through p's committer (which the Observer sees). Without a
// store it does nothing.
func (p *Provider) ReleaseRunJournal(ctx context.Context, head []byte, holder string) error {
	if p.ps == nil {
		return nil
	}
	return stream.ReleaseRunJournalWith(ctx, p.ps.Store, p.ps.Com.Commit, head, holder)
}
