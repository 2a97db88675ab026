package provider

import (
	"context"
	"reflect"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/rtfs"
)

// Inspect returns the inspect map of stream id (docs/streams.md lists the
// keys). It holds the stream's lock for the time of a copy of its fields
// only; the map costs O(queue length) to build.
func (p *Provider) Inspect(id string, opts InspectOptions) (rtfs.Value, error) {
	s, err := p.lookupOpen(id)
	if err != nil {
		if p.opts.Cluster == nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(p.ctx, DefaultForwardTimeout)
		defer cancel()
		a, s, err := p.fwd.remote(ctx, Request{Verb: "inspect", StreamID: id, Inspect: opts})
		switch {
		case err != nil:
			return nil, err
		case s == nil:
			return a.Inspect, nil
		}
		return s.Inspect(opts, time.Now()), nil
	}
	return s.Inspect(opts, time.Now()), nil
}

// statusValue is the :status map: {:state kw} plus :message and :end-reason
// when set.
func statusValue(st Status) *rtfs.Map {
	m := rtfs.MapOf(rtfs.Keyword("state"), rtfs.Keyword(st.State))
	if st.Message != "" {
		m = m.Assoc(rtfs.Keyword("message"), rtfs.String(st.Message))
	}
	if st.EndReason != "" {
		m = m.Assoc(rtfs.Keyword("end-reason"), rtfs.Keyword(st.EndReason))
	}
	return m
}

// StatusValue returns st as the map :mcp.stream.status answers: {:stream-id
// :state :message :end-reason :result}, :failure when a failure holds the
// stream, and :stale when st is stale.
func StatusValue(st Status) rtfs.Value {
	m := statusValue(st).Assoc(rtfs.Keyword("stream-id"), rtfs.String(st.StreamID))
	result := st.Result
	if result == nil {
		result = rtfs.Nil
	}
	m = m.Assoc(rtfs.Keyword("result"), result)
	if st.Failure != nil {
		m = m.Assoc(rtfs.Keyword("failure"), stream.ShapeValue(reflect.ValueOf(*st.Failure)))
	}
	if st.Stale != nil {
		m = m.Assoc(rtfs.Keyword("stale"), stream.ShapeValue(reflect.ValueOf(*st.Stale)))
	}
	return m
}
