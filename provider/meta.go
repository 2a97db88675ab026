package provider

import (
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// A metaBuilder builds the metadata maps of one stream's chunks, the
// processor's third argument: {:stream-id :seq :event :id :received-at-ms
// :endpoint}, and :fd for a process transport's chunks. Each chunk gets a map of its own, but the boxed values in it
// are shared where they can be: the stream id and the endpoint are boxed
// once per stream, and the :event, :id and :received-at-ms values of the
// previous chunk are reused while they repeat (RTFS values are immutable, so
// maps may share them). This spares up to three allocations per chunk; :seq
// and the map itself are the ones left.
//
// A metaBuilder is not safe for concurrent use; a stream's is guarded by the
// stream's mu. Its zero value is not usable; use newMetaBuilder.
type metaBuilder struct {
	id, endpoint rtfs.Value

	event    string
	eventVal rtfs.Value // nil until the first chunk
	cursor   string
	idVal    rtfs.Value
	ms       int64
	msVal    rtfs.Value
}

// newMetaBuilder returns a builder for the stream whose boxed id and
// endpoint are given.
func newMetaBuilder(id, endpoint rtfs.Value) metaBuilder {
	return metaBuilder{id: id, endpoint: endpoint}
}

// build returns the metadata map of chunk c, numbered seq.
func (mb *metaBuilder) build(seq int64, c transport.Chunk) rtfs.Value {
	if mb.eventVal == nil || c.Event != mb.event {
		mb.event, mb.eventVal = c.Event, eventValue(c.Event)
	}
	if mb.idVal == nil || c.ID != mb.cursor {
		mb.cursor, mb.idVal = c.ID, rtfs.String(c.ID)
	}
	if ms := c.ReceivedAt.UnixMilli(); mb.msVal == nil || ms != mb.ms {
		mb.ms, mb.msVal = ms, rtfs.Int(ms)
	}
	if c.FD != "" {
		return rtfs.MapOf(
			rtfs.Keyword("stream-id"), mb.id,
			rtfs.Keyword("seq"), rtfs.Int(seq),
			rtfs.Keyword("event"), mb.eventVal,
			rtfs.Keyword("id"), mb.idVal,
			rtfs.Keyword("received-at-ms"), mb.msVal,
			rtfs.Keyword("endpoint"), mb.endpoint,
			rtfs.Keyword("fd"), fdValue(c.FD),
		)
	}
	return rtfs.MapOf(
		rtfs.Keyword("stream-id"), mb.id,
		rtfs.Keyword("seq"), rtfs.Int(seq),
		rtfs.Keyword("event"), mb.eventVal,
		rtfs.Keyword("id"), mb.idVal,
		rtfs.Keyword("received-at-ms"), mb.msVal,
		rtfs.Keyword("endpoint"), mb.endpoint,
	)
}

// fdValue is a process chunk's :fd, a keyword (:stdout, :stderr).
func fdValue(fd string) rtfs.Value {
	switch fd {
	case "stdout":
		return kwStdout
	case "stderr":
		return kwStderr
	}
	return rtfs.Keyword(fd)
}

var kwStdout, kwStderr rtfs.Value = rtfs.Keyword("stdout"), rtfs.Keyword("stderr")

// eventValue is the :event of a chunk: its SSE event name, nil for none.
func eventValue(name string) rtfs.Value {
	if name == "" {
		return rtfs.Nil
	}
	return rtfs.String(name)
}
