package provider

import "fmt"

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
	sub := newSubscription(opts)
	if sub.changes {
		sub.counter = &p.changeSubs
		p.changeSubs.Add(1)
		defer func() {
			if sub.detach == nil { // refused: never subscribed
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
	s.subscribe(sub)
	return sub, nil
}

// subscribePending keeps sub for the stream that will have id (see
// attachPendingLocked), or attaches it to the stream registered since the
// lookup.
func (r *registry) subscribePending(id string, sub *Subscription) error {
	sub.detach = func(sub *Subscription) {
		r.mu.Lock()
		s := sub.stream
		if s == nil {
			if list := without(r.pending[id], sub); len(list) > 0 {
				r.pending[id] = list
			} else {
				delete(r.pending, id)
			}
		}
		r.mu.Unlock()
		if s != nil {
			s.unsubscribe(sub)
		}
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	s, ok := r.streams[id]
	if ok && !s.moved.Load() && !s.handingOver.Load() {
		sub.stream = s
	} else {
		if r.pending == nil {
			r.pending = make(map[string][]*Subscription)
		}
		r.pending[id] = append(r.pending[id], sub)
		s = nil
	}
	r.mu.Unlock()
	if s != nil {
		s.subscribe(sub)
	}
	return nil
}

// attachPendingLocked takes the Pending subscriptions that wait for s's id;
// r.mu is held. The caller attaches them with s.subscribe once it has
// released r.mu, before s publishes anything.
func (r *registry) attachPendingLocked(s *stream) []*Subscription {
	subs := r.pending[s.id]
	delete(r.pending, s.id)
	for _, sub := range subs {
		sub.stream = s
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
	sub.detach = func(sub *Subscription) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if old := r.allSubs.Load(); old != nil {
			list := without(*old, sub)
			r.allSubs.Store(&list)
		}
	}
	return nil
}
