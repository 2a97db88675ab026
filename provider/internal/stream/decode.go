package stream

import (
	"encoding/json"

	"github.com/rtfshost/rtfshost/rtfs"
)

// Decoding: a chunk's bytes become the processor's chunk argument in
// Deliver, on the transport's goroutine, which runs beside the worker (on
// the 2-core reference machine the pipeline is faster so than with the
// worker decoding: see the README); the metadata argument is built by the
// worker, only for a processor that reads it.

// DecodeChunkInto turns a chunk's data into an RTFS value: JSON becomes a value
// with keyword keys, anything else a string. For MCP progress chunks (event
// "progress") a JSON :message is decoded in place. dec reuses the keys it
// has seen (one allocation less per key and chunk); spare, when not nil, is
// a chunk map whose life has ended that a JSON object may be built in
// (queue.go). The value never refers to data, which the caller may reuse.
func DecodeChunkInto(dec *rtfs.JSONDecoder, data []byte, event string, spare *rtfs.Map) rtfs.Value {
	if !looksLikeJSON(data) {
		return rtfs.String(data)
	}
	v, err := dec.DecodeReusing(data, spare)
	if err != nil {
		return rtfs.String(data)
	}
	if event == "progress" {
		v = decodeMessage(dec, v)
	}
	return v
}

// looksLikeJSON is a cheap filter that spares the decoder the plain-text
// chunks.
func looksLikeJSON(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[', '"', '-', 't', 'f', 'n':
			return true
		}
		return c >= '0' && c <= '9'
	}
	return false
}

// decodeMessage decodes the :message of an MCP progress notification when it
// holds JSON text.
func decodeMessage(dec *rtfs.JSONDecoder, v rtfs.Value) rtfs.Value {
	m, ok := v.(*rtfs.Map)
	if !ok {
		return v
	}
	msg, ok := m.GetKeyword("message")
	s, isStr := msg.(rtfs.String)
	if !ok || !isStr || !json.Valid([]byte(s)) || !looksLikeJSON([]byte(s)) {
		return v
	}
	inner, err := dec.Decode([]byte(s))
	if err != nil {
		return v
	}
	return m.Assoc(rtfs.Keyword("message"), inner)
}

// ControlAction returns the directive a control chunk carries: a map chunk
// whose :action or "action" key holds one of the five directives, as a
// keyword or a string. Any other chunk gives ActNone.
func ControlAction(chunk rtfs.Value) Action {
	m, ok := chunk.(*rtfs.Map)
	if !ok {
		return ActNone
	}
	// One pass over the entries (most chunks have no action): :action,
	// else "action".
	var kw, str rtfs.Value
	m.Range(func(k, v rtfs.Value) bool {
		switch k := k.(type) {
		case rtfs.Keyword:
			if k == "action" {
				kw = v
				return false
			}
		case rtfs.String:
			if k == "action" {
				str = v
			}
		}
		return true
	})
	if kw == nil {
		kw = str
	}
	if kw == nil {
		return ActNone
	}
	a, _ := parseAction(kw)
	return a
}

// A metaBuilder builds the metadata maps of one stream's chunks, the
// processor's third argument: {:stream-id :seq :event :id :received-at-ms
// :endpoint}, and :fd for a process transport's chunks. The worker builds one only for a processor that reads its
// metadata (processor.wantsMeta). Each chunk gets a map of its own, but the
// boxed values in it are shared where they can be: the stream id and the
// endpoint are boxed once per stream, and the :event, :id and
// :received-at-ms values of the previous chunk are reused while they repeat
// (RTFS values are immutable, so maps may share them). This spares up to
// three allocations per chunk; :seq and the map itself are the ones left.
//
// A metaBuilder is not safe for concurrent use; a stream's belongs to its
// worker. Its zero value is not usable; use NewMetaBuilder.
type metaBuilder struct {
	id, endpoint rtfs.Value

	event    string
	eventVal rtfs.Value // nil until the first chunk
	cursor   string
	idVal    rtfs.Value
	ms       int64
	msVal    rtfs.Value
}

// NewMetaBuilder returns a builder for the stream whose boxed id and
// endpoint are given.
func NewMetaBuilder(id, endpoint rtfs.Value) metaBuilder {
	return metaBuilder{id: id, endpoint: endpoint}
}

// Build returns the metadata map of it.
func (mb *metaBuilder) Build(it *Item) rtfs.Value {
	if mb.eventVal == nil || it.Event != mb.event {
		mb.event, mb.eventVal = it.Event, eventValue(it.Event)
	}
	if mb.idVal == nil || it.ID != mb.cursor {
		mb.cursor, mb.idVal = it.ID, rtfs.String(it.ID)
	}
	if ms := it.Received.UnixMilli(); mb.msVal == nil || ms != mb.ms {
		mb.ms, mb.msVal = ms, rtfs.Int(ms)
	}
	m := rtfs.MapOf(
		rtfs.Keyword("stream-id"), mb.id,
		rtfs.Keyword("seq"), rtfs.Int(it.Number()),
		rtfs.Keyword("event"), mb.eventVal,
		rtfs.Keyword("id"), mb.idVal,
		rtfs.Keyword("received-at-ms"), mb.msVal,
		rtfs.Keyword("endpoint"), mb.endpoint,
	)
	if it.Fd != "" { // a process transport's chunk
		return m.Assoc(rtfs.Keyword("fd"), fdValue(it.Fd))
	}
	return m
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

// DecodeChunk returns the value a processor receives for a chunk of data
// with SSE event name event, as a stream decodes it: JSON becomes a value
// with keyword keys (an MCP progress chunk's JSON :message decoded too),
// anything else a string. It is what `rtfshost test` and the playground
// give a processor for a recorded chunk. Safe for concurrent use; it
// allocates a decoder per call.
func DecodeChunk(data []byte, event string) rtfs.Value {
	var dec rtfs.JSONDecoder
	return DecodeChunkInto(&dec, data, event, nil)
}
