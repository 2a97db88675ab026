package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"
)

// Info returns the typed snapshot of stream id (Inspect is its Value). It
// holds the stream's lock for a copy of its fields only and costs O(queue
// length).
func (p *Provider) Info(id string, opts InspectOptions) (StreamInfo, error) {
	s, err := p.lookupOpen(id)
	if err != nil {
		if p.opts.Cluster == nil {
			return StreamInfo{}, err
		}
		ctx, cancel := context.WithTimeout(p.ctx, DefaultForwardTimeout)
		defer cancel()
		a, s, err := p.fwd.remote(ctx, Request{Verb: "inspect", StreamID: id, Inspect: opts})
		switch {
		case err != nil:
			return StreamInfo{}, err
		case s == nil && a.Info == nil:
			return StreamInfo{}, fmt.Errorf("stream %q: its host sent no snapshot", id)
		case s == nil:
			return *a.Info, nil
		}
		return s.Info(opts, time.Now()), nil
	}
	return s.Info(opts, time.Now()), nil
}

// Infos returns the snapshot of every stream, in start order.
func (p *Provider) Infos(opts InspectOptions) []StreamInfo {
	p.mu.Lock()
	order := append([]*stream.Stream(nil), p.order...)
	p.mu.Unlock()
	now := time.Now()
	out := make([]StreamInfo, len(order))
	for i, s := range order {
		out[i] = s.Info(opts, now)
	}
	return out
}

// Timeline returns the events of stream id since this provider started it
// (or recovered it), oldest first, the last timelineCap of them, and how
// many older ones were left out. Safe for concurrent use; O(events).
func (p *Provider) Timeline(id string) ([]TimelineEvent, int64, error) {
	s, err := p.lookup(id)
	if err != nil {
		return nil, 0, err
	}
	events, dropped := s.Timeline()
	return events, dropped, nil
}
