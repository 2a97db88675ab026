package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/rtfs"
)

// Sharing a store with other hosts (package cluster, docs/cluster.md).
// Several providers on several machines share one Store; each stream runs
// on one of them, its owner. A provider claims a stream before it writes
// its first record (Start, Recover), releases it when it ends, and stops it
// locally, writing nothing, when the store refuses its commit because
// another host took the stream over (persistence.ErrFenced). Requests for a
// stream another host runs are forwarded to that host.

// A Cluster is what a provider asks of the hosts it shares its Store with
// (Options.Cluster). The host implements it over package cluster; its
// methods are called from any goroutine and must be safe for concurrent
// use.
type Cluster interface {
	// Claim makes this host the owner of stream id before the provider
	// writes the stream's records. It fails with an error wrapping
	// ErrOwned when another live host owns the stream.
	Claim(ctx context.Context, id string) error
	// Release gives up stream id: ended (its records need no host any
	// more) or handed over to whichever host claims it next.
	Release(ctx context.Context, id string, ended bool) error
	// Forget drops stream id without writing: another host owns it now.
	Forget(id string)
	// Forward runs req on the host that owns req.StreamID and returns its
	// answer (that host's Provider.Answer). It fails with an error
	// wrapping ErrNotRunning when no live host runs the stream.
	Forward(ctx context.Context, req Request) (Answer, error)
	// Place says where stream id, just started here, should run: "" for
	// this host, else the host to offer it to (placement by load).
	Place(ctx context.Context, id string) (string, error)
	// Offer hands stream id over to host to, after the provider stopped
	// it with its progress committed.
	Offer(ctx context.Context, id, to string) error
}

// ErrOwned is wrapped by Cluster.Claim's error when another live host owns
// the stream.
var ErrOwned = errors.New("another host owns the stream")

// An OwnedError is a Cluster.Claim error that says which host owns the
// stream, and when it was last heard from: with it, a status or inspect
// request that its owner does not answer is answered from the stream's
// stored records, marked stale. Err wraps ErrOwned.
type OwnedError struct {
	Owner     string    // the owner's node name
	Heartbeat time.Time // the owner's last heartbeat; zero when not known
	Err       error
}

func (e *OwnedError) Error() string { return e.Err.Error() }
func (e *OwnedError) Unwrap() error { return e.Err }

// ErrNotRunning is wrapped by Cluster.Forward's error when no live host runs
// the stream (it ended, or its owner died and no host has claimed it yet).
var ErrNotRunning = errors.New("no live host runs the stream")

// A Request is a request on a stream that may run on another host: Verb is
// "status", "pause", "resume", "cancel", "inspect" or "upgrade" (with
// Upgrade).
type Request struct {
	Verb     string         `json:"verb"`
	StreamID string         `json:"stream"`
	Inspect  InspectOptions `json:"inspect"`
	Upgrade  *UpgradeSource `json:"upgrade,omitempty"`
}

// An UpgradeSource is an Upgrade as it travels to another host: the new
// program as source, compiled there.
type UpgradeSource struct {
	File      string `json:"file"`
	Source    string `json:"source"`
	Processor string `json:"processor,omitempty"`
}

// An Answer is a host's answer to a Request: the stream's status after it,
// and for "inspect" its snapshot (Info) and inspect map (Inspect, its
// Value).
type Answer struct {
	Status   Status
	Info     *StreamInfo
	Inspect  rtfs.Value
	Upgraded *UpgradeResult // for "upgrade"
}

// Answer runs req on a stream this provider runs, for another host of the
// cluster (it is never forwarded again). It fails with an error wrapping
// ErrNotRunning when this provider does not run the stream.
func (p *Provider) Answer(ctx context.Context, req Request) (Answer, error) {
	s, err := p.lookup(req.StreamID)
	if err != nil || s.Moved.Load() {
		return Answer{}, fmt.Errorf("stream %q: %w here", req.StreamID, ErrNotRunning)
	}
	var st Status
	switch req.Verb {
	case "status":
		st = s.Status()
	case "pause":
		st, err = p.Pause(ctx, req.StreamID)
	case "resume":
		st, err = p.Resume(ctx, req.StreamID)
	case "skip":
		st, err = p.Skip(ctx, req.StreamID)
	case "cancel":
		st, err = p.Cancel(ctx, req.StreamID)
	case "inspect":
		in := s.Info(req.Inspect, time.Now())
		return Answer{Status: s.Status(), Info: &in, Inspect: in.Value()}, nil
	case "upgrade":
		if req.Upgrade == nil {
			return Answer{}, errors.New("an upgrade request without its program")
		}
		prog, err := rtfs.Compile(req.Upgrade.File, []byte(req.Upgrade.Source))
		if err != nil {
			return Answer{}, fmt.Errorf("upgrade stream %q: %w: %w", req.StreamID, ErrCannotUpgrade, err)
		}
		res, err := p.Upgrade(ctx, Upgrade{StreamID: req.StreamID, Program: prog, Processor: req.Upgrade.Processor, Limits: p.opts.Limits})
		return Answer{Status: s.Current().Status(), Upgraded: &res}, err
	default:
		return Answer{}, fmt.Errorf("unknown request %q", req.Verb)
	}
	return Answer{Status: st}, err
}

// KeyOwner returns the stream whose records include key: the keys a
// provider writes under "stream/<id>\x00", its origin record
// "origin/<id>", its delivery record "delivery/<id>" and its dead letters
// "dead/<id>\x00<seq>". Package cluster
// fences writes of such keys by the stream's ownership. It costs a scan of
// key.
func KeyOwner(key []byte) (string, bool) {
	if id, ok := bytes.CutPrefix(key, []byte(stream.OriginPrefix)); ok {
		return string(id), true
	}
	if id, ok := bytes.CutPrefix(key, []byte(stream.DeliveryPrefix)); ok {
		return string(id), true
	}
	if rest, ok := bytes.CutPrefix(key, []byte(stream.DeadLetterPrefixStr)); ok {
		if i := bytes.IndexByte(rest, 0); i >= 0 {
			return string(rest[:i]), true
		}
		return "", false
	}
	rest, ok := bytes.CutPrefix(key, []byte(stream.StreamPrefix))
	if !ok {
		return "", false
	}
	i := bytes.IndexByte(rest, 0)
	if i < 0 {
		return "", false
	}
	return string(rest[:i]), true
}

// claim makes this host the owner of stream id, when the provider shares
// its store.
func (c *settings) claim(ctx context.Context, id string) error {
	if c.opts.Cluster == nil {
		return nil
	}
	if err := c.opts.Cluster.Claim(ctx, id); err != nil {
		return fmt.Errorf("stream %q: %w", id, err)
	}
	return nil
}

// A forwarder is what a provider does for the streams that run, or
// should run, on another host of its cluster: placing a fresh stream,
// forwarding a request to the host that runs a stream, taking over a
// stream whose host died, waiting for a stream another host runs. It is
// the provider's, and as safe for concurrent use as the provider.
type forwarder struct{ p *Provider }

// place runs after a fresh stream started without a local follower
// (StartRequest.Local): when the cluster says another host should run it,
// the stream stops here with its progress committed and is offered to that
// host, which takes it over from its cursor.
func (f forwarder) place(s *stream.Stream) {
	p := f.p
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(p.ctx, DefaultForwardTimeout)
	defer cancel()
	to, err := p.opts.Cluster.Place(ctx, s.ID)
	if err != nil {
		p.log.Warn("cluster: placement failed; the stream stays here", "stream", s.ID, "err", err)
	}
	if err != nil || to == "" {
		return
	}
	s.HandingOver.Store(true)
	s.Cancel()
	select {
	case <-s.Done:
	case <-p.ctx.Done():
		return
	}
	if s.Status().State.Terminal() {
		s.HandingOver.Store(false) // it ended before it stopped: nothing to hand over
		return
	}
	// The host it goes to starts its transport once this one's returned,
	// as a run here after a failed offer does (runs.go).
	err = p.runs.Await(ctx, s.ID)
	if err == nil {
		err = p.ps.Com.Flush(ctx)
	}
	if err == nil {
		err = p.opts.Cluster.Offer(ctx, s.ID, to)
	}
	p.forget(s)
	if err != nil {
		// Not handed over: it runs here again, from its committed cursor.
		p.log.Warn("cluster: a stream not handed over; it goes on here", "stream", s.ID, "to", to, "err", err)
		if err := p.RecoverStream(ctx, s.ID); err != nil {
			p.log.Error("cluster: a stream neither handed over nor resumed", "stream", s.ID, "err", err)
		}
	}
}

// forget removes a stream that moved to another host from this provider,
// once its goroutines have exited.
func (r *registry) forget(s *stream.Stream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.streams[s.ID] == s {
		delete(r.streams, s.ID)
	}
	for i, o := range r.order {
		if o == s {
			r.order = append(r.order[:i:i], r.order[i+1:]...)
			break
		}
	}
}

// remote runs req for a stream this provider does not run: on the host
// that runs it, or, when no live host does, here, after loading it from
// the store (an ended stream becomes inspectable; an unfinished one whose
// owner died is claimed and runs here).
func (f forwarder) remote(ctx context.Context, req Request) (Answer, *stream.Stream, error) {
	p := f.p
	if p.opts.Cluster == nil || p.ps == nil {
		return Answer{}, nil, &noStreamError{id: req.StreamID}
	}
	a, err := p.opts.Cluster.Forward(ctx, req)
	if err == nil || !errors.Is(err, ErrNotRunning) {
		return a, nil, err
	}
	if err := p.fwd.recoverDetached(ctx, req.StreamID); err != nil && !p.has(req.StreamID) {
		var owned *OwnedError
		switch {
		case errors.Is(err, ErrNotPersisted):
			return Answer{}, nil, &noStreamError{id: req.StreamID, err: err}
		case errors.As(err, &owned) && (req.Verb == "status" || req.Verb == "inspect"):
			a, err := p.load.storedAnswer(ctx, req, owned)
			return a, nil, err
		case errors.As(err, &owned):
			return Answer{}, nil, fmt.Errorf("cannot %s stream %q: its owner %s does not answer, and no other host may take it over before its lease expires; try again then: %w",
				req.Verb, req.StreamID, owned.Owner, err)
		}
		return Answer{}, nil, err
	}
	s, err := p.lookup(req.StreamID)
	return Answer{}, s, err
}

// recoverDetached is RecoverStream for a request on a stream no live host
// runs. Loading it claims it, and a claim whose stream never loaded would
// keep it from every other host while this one lives: so the claim and the
// load run whole, on a goroutine of the provider bounded by
// DefaultForwardTimeout and Close, whatever ctx does. ctx bounds only the
// wait for them; the stream may be loaded after ctx ended.
func (f forwarder) recoverDetached(ctx context.Context, id string) error {
	p := f.p
	if !p.enter() {
		return fmt.Errorf("stream %q: %w", id, ErrClosed)
	}
	done := make(chan error, 1)
	go func() {
		defer p.wg.Done()
		rctx, cancel := context.WithTimeout(p.ctx, DefaultForwardTimeout)
		defer cancel()
		done <- p.RecoverStream(rctx, id)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("stream %q: loading it from the store goes on: %w", id, context.Cause(ctx))
	}
}

// storedAnswer answers a status or inspect request on a stream whose owner
// holds its lease but did not answer (owned), from the stream's stored
// records, marked stale. Cost: a scan of the stream's records and, unless
// this provider knows it, a compile of its program.
func (ld *loader) storedAnswer(ctx context.Context, req Request, owned *OwnedError) (Answer, error) {
	wrap := func(err error) error {
		return fmt.Errorf("stream %q: its owner %s does not answer, and its stored records cannot be read: %w", req.StreamID, owned.Owner, err)
	}
	all, err := ld.ps.ScanStreams(ctx, append([]byte(stream.StreamPrefix+req.StreamID), 0))
	if err != nil {
		return Answer{}, wrap(err)
	}
	if len(all) == 0 {
		return Answer{}, wrap(ErrNotPersisted)
	}
	if err := all[0].Complete(); err != nil {
		return Answer{}, wrap(err)
	}
	s, err := ld.rebuild(ctx, all[0])
	if err != nil {
		return Answer{}, wrap(err)
	}
	defer s.Cancel()
	stale := &Stale{Owner: owned.Owner}
	if !owned.Heartbeat.IsZero() {
		ms := owned.Heartbeat.UnixMilli()
		stale.SinceEpochMs = &ms
	}
	a := Answer{Status: s.Status()}
	a.Status.Stale = stale
	if req.Verb == "inspect" {
		in := s.Info(req.Inspect, time.Now())
		in.Stale = stale
		a.Info, a.Inspect = &in, in.Value()
	}
	return a, nil
}

// awaitRemote waits for a stream another host runs to end, asking its
// owner every pollEvery; when the stream comes to this provider (its owner
// died) it waits for it here. Failures to ask (NATS unreachable, the owner
// just died) are retried until ctx ends.
func (f forwarder) awaitRemote(ctx context.Context, id string) (rtfs.Value, error) {
	p := f.p
	const pollEvery = 200 * time.Millisecond
	for {
		if _, err := p.lookup(id); err == nil {
			return p.Await(ctx, id)
		}
		a, s, err := p.fwd.remote(ctx, Request{Verb: "status", StreamID: id})
		switch {
		case errors.Is(err, ErrNotPersisted):
			return nil, err
		case err != nil:
			p.log.Debug("await: asking the stream's host failed; retrying", "stream", id, "err", err)
		case s != nil:
			return p.Await(ctx, id)
		case a.Status.State == StateCompleted:
			return a.Status.Result, nil
		case a.Status.State.Terminal():
			return nil, stream.StatusErr(a.Status)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.ctx.Done():
			return nil, ErrClosed
		case <-time.After(pollEvery):
		}
	}
}
