package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
)

// InspectOptions leave keys out of inspect maps. The zero value includes
// everything, as the :include-* flags of :mcp.stream.inspect default to true.
type InspectOptions struct {
	OmitState        bool // leave out :current-state
	OmitInitialState bool // leave out :initial-state
	OmitQueue        bool // leave out :queue
}

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
		a, s, err := p.remote(ctx, Request{Verb: "inspect", StreamID: id, Inspect: opts})
		switch {
		case err != nil:
			return nil, err
		case s == nil:
			return a.Inspect, nil
		}
		return s.inspect(opts, time.Now()), nil
	}
	return s.inspect(opts, time.Now()), nil
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
		m = m.Assoc(rtfs.Keyword("failure"), shapeValue(reflect.ValueOf(*st.Failure)))
	}
	if st.Stale != nil {
		m = m.Assoc(rtfs.Keyword("stale"), shapeValue(reflect.ValueOf(*st.Stale)))
	}
	return m
}

// maxCursorDisplay is the longest cursor inspect shows whole.
const maxCursorDisplay = 40

// DisplayCursor is the form of a stream's cursor that inspect shows (from
// RTFS, the CLI and MCP). Cursors are opaque and some carry secrets: an MCP
// cursor holds the server's session id, which lets its holder read the
// session's stream. A cursor of up to 40 bytes (an SSE event id, a journal
// position) is shown whole; a longer one as its first 12 bytes, "…" and 12
// hex digits of its SHA-256, enough to tell two cursors apart and to see it
// move, and nothing of what it carries past its first bytes. The store
// keeps the whole cursor for recovery.
func DisplayCursor(c string) string {
	if len(c) <= maxCursorDisplay {
		return c
	}
	sum := sha256.Sum256([]byte(c))
	return c[:12] + "…" + hex.EncodeToString(sum[:6])
}

func (s *stream) inspect(opts InspectOptions, now time.Time) rtfs.Value {
	return s.info(opts, now).Value()
}
