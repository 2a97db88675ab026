package provider

import (
	"fmt"

	"github.com/rtfshost/rtfshost/provider/internal/stream"
)

// A provider's subscribers: Subscribe, and the subscriptions its registry
// holds for a stream id that no stream has yet (Pending) or for every
// stream. The stream's own side of a subscription is subscribe.go.

// Subscribe returns a Subscription to the events of stream id, or with id ""
// to the events of every stream, including those started later. An id
// CheckStreamID refuses is an error. Subscribing
// to a stream that has already ended yields its EventEnd at once. An id no
// stream has is an error, unless opts.Pending.
func (p *Provider) Subscribe(id string, opts SubscribeOptions) (*Subscription, error) {
	if err := CheckStreamID(id); err != nil {
		return nil, fmt.Errorf("subscribing: %w", err)
	}
	sub := stream.NewSubscription(opts)
	if stream.WantsChanges(sub) {
		stream.CountIn(sub, &p.changeSubs)
		p.changeSubs.Add(1)
		defer func() {
			if !stream.Held(sub) { // refused: never subscribed
				sub.Close()
			}
		}()
	}
	if id == "" {
		return sub, p.subscribeAll(sub)
	}
	s, err := p.lookup(id)
	if err != nil && opts.Pending {
		return sub, p.subscribePending(id, sub)
	}
	if err != nil {
		return nil, err
	}
	s.Subscribe(sub)
	return sub, nil
}

// subscribePending keeps sub for the stream that will have id (see
// attachPendingLocked), or attaches it to the stream registered since the
// lookup.
func (r *registry) subscribePending(id string, sub *Subscription) error {
	stream.SetDetach(sub, func(sub *Subscription) {
		r.mu.Lock()
		s := stream.AttachedTo(sub)
		if s == nil {
			if list := stream.Without(r.pending[id], sub); len(list) > 0 {
				r.pending[id] = list
			} else {
				delete(r.pending, id)
			}
		}
		r.mu.Unlock()
		if s != nil {
			s.Unsubscribe(sub)
		}
	})
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	s, ok := r.streams[id]
	if ok && !s.Moved.Load() && !s.HandingOver.Load() {
		stream.Attach(sub, s)
	} else {
		if r.pending == nil {
			r.pending = make(map[string][]*Subscription)
		}
		r.pending[id] = append(r.pending[id], sub)
		s = nil
	}
	r.mu.Unlock()
	if s != nil {
		s.Subscribe(sub)
	}
	return nil
}

// attachPendingLocked takes the Pending subscriptions that wait for s's id;
// r.mu is held. The caller attaches them with s.subscribe once it has
// released r.mu, before s publishes anything.
func (r *registry) attachPendingLocked(s *stream.Stream) []*Subscription {
	subs := r.pending[s.ID]
	delete(r.pending, s.ID)
	for _, sub := range subs {
		stream.Attach(sub, s)
	}
	return subs
}

func (r *registry) subscribeAll(sub *Subscription) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	var list []*Subscription
	if old := r.allSubs.Load(); old != nil {
		list = append(list, *old...)
	}
	list = append(list, sub)
	r.allSubs.Store(&list)
	stream.SetDetach(sub, func(sub *Subscription) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if old := r.allSubs.Load(); old != nil {
			list := stream.Without(*old, sub)
			r.allSubs.Store(&list)
		}
	})
	return nil
}
