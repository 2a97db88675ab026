package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	exactjson "github.com/segmentio/encoding/json"
)

// The JSON-RPC messages of /mcp, read once.
//
// readEnvelope, a layer near the front of /mcp (http.go lists them all),
// reads a POST's body once and decodes what the layers behind it look at
// into an envelope in the request's context: the method, id, tool name,
// progress token and task parameters of each message, whether the body is
// a batch, and the protocol era the request belongs to. The layers read
// the envelope, never the body; go-sdk gets the body as it came. Besides
// the envelope, this file holds the package's other reading of JSON-RPC:
// the responses the layers rewrite (jsonOnly, announceTasks) and the
// events the event store keeps (resume.go), which all decode as a message.

// headerProtocolVersion is the HTTP header in which clients of 2025-06-18
// and later name the request's protocol revision.
const headerProtocolVersion = "MCP-Protocol-Version"

// sessionlessVersion is the first MCP revision whose requests carry their
// protocol version in _meta and need no session; go-sdk answers those itself.
const sessionlessVersion = "2026-07-28"

// methodDiscover is the sessionless revision's capability query.
const methodDiscover = "server/discover"

// maxRequestBody bounds the request bodies readEnvelope reads: go-sdk's
// handlers, which read them next, take no more.
const maxRequestBody = mcp.DefaultMaxRequestBodyBytes

// An era is one of the two eras of MCP that /mcp serves.
type era uint8

const (
	eraAny era = iota // a layer's era: it sees every request
	// eraSessions: revisions 2025-03-26 to 2025-11-25, with initialize and
	// Mcp-Session-Id, served by go-sdk's stateful handler; GET and DELETE.
	eraSessions
	// eraSessionless: revision 2026-07-28 and later, with no session and
	// the revision in each request, served by go-sdk's stateless handler.
	eraSessionless
)

// Headers the layers set for the tool handlers, which go-sdk runs with the
// request's HTTP header (mcp.RequestExtra.Header) and nothing else of the
// HTTP request. readEnvelope deletes them from what a client sends.
const (
	// headerRequestID holds the JSON-RPC id of a tools/call, as its JSON
	// text (tagRequestID), for the call's span.
	headerRequestID = "Rtfshost-Jsonrpc-Id"
	// headerJSONOnly says the client reads one JSON response and no
	// notification (jsonOnly): the call sends no progress.
	headerJSONOnly = "Rtfshost-Json-Only"
)

// An envelope is what the layers of /mcp know of a request: its HTTP
// method and MCP headers and, for a POST with a JSON body, its messages.
// readEnvelope makes it; it is read-only afterwards.
type envelope struct {
	post     bool
	session  string // Mcp-Session-Id
	revision string // the MCP-Protocol-Version header, else the first message's _meta revision
	era      era
	jsonOnly bool // a POST whose Accept admits application/json but not text/event-stream
	batch    bool
	// msgs are the body's messages in order (one unless batch); nil when
	// the body was not read (not a POST with a JSON Content-Type) or is
	// not JSON-RPC.
	msgs []message
}

// A message is one JSON-RPC message as the package reads it: a request, a
// notification or a response.
type message struct {
	ID     json.RawMessage // nil: none (a notification)
	Method string
	Params params
	Result json.RawMessage // of a response
	Error  json.RawMessage // of an error response
	// full says Params was decoded whole; otherwise only its Meta is
	// known (a field of another type than the package reads).
	full bool
	// invalid says the message is not a JSON-RPC object: nothing is known.
	invalid bool
	raw     json.RawMessage // its params, for progress
}

// params are the parameters the package reads, of every method.
type params struct {
	Name      string          `json:"name"`      // tools/call
	Arguments json.RawMessage `json:"arguments"` // tools/call
	Task      *struct {       // tools/call of 2025-11-25 as a task
		TTL *int64 `json:"ttl"`
	} `json:"task"`
	TaskID string                     `json:"taskId"` // tasks/*
	Cursor string                     `json:"cursor"` // tasks/list
	Meta   map[string]json.RawMessage `json:"_meta"`
}

type envelopeKey struct{}

// readEnvelope is the layer that makes the envelope (see the top of this
// file). A body that cannot be read is answered here: 413 beyond
// maxRequestBody, else 400.
func readEnvelope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(headerRequestID)
		r.Header.Del(headerJSONOnly)
		env := headerEnvelope(r)
		if env.post && isJSON(r.Header.Get("Content-Type")) {
			body, ok := readBody(w, r)
			if !ok {
				return
			}
			setBody(r, body)
			env.decode(body)
		}
		env.era = env.eraOf()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), envelopeKey{}, env)))
	})
}

// envelopeOf returns the envelope of r; a request that did not pass
// readEnvelope gets one of its headers alone.
func envelopeOf(r *http.Request) *envelope {
	if env, ok := r.Context().Value(envelopeKey{}).(*envelope); ok {
		return env
	}
	env := headerEnvelope(r)
	env.era = env.eraOf()
	return env
}

// headerEnvelope is the envelope of r's method and headers.
func headerEnvelope(r *http.Request) *envelope {
	post := r.Method == http.MethodPost
	return &envelope{
		post:     post,
		session:  r.Header.Get("Mcp-Session-Id"),
		revision: r.Header.Get(headerProtocolVersion),
		jsonOnly: post && acceptsJSONOnly(r.Header.Values("Accept")),
	}
}

// decode reads the messages of body.
func (e *envelope) decode(body []byte) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var raws []json.RawMessage
		if json.Unmarshal(trimmed, &raws) != nil {
			return
		}
		e.batch = true
		e.msgs = make([]message, len(raws))
		for i, raw := range raws {
			e.msgs[i] = decodeMessage(raw)
		}
	} else if m := decodeMessage(trimmed); !m.invalid {
		e.msgs = []message{m}
	}
	if e.revision == "" && len(e.msgs) > 0 {
		e.revision = e.msgs[0].meta(mcp.MetaKeyProtocolVersion)
	}
}

// eraOf decides the request's era. A POST is of the sessionless era when
// it carries no Mcp-Session-Id and either its MCP-Protocol-Version header
// or, without the header, its body (a server/discover, or a _meta revision;
// the first message of a batch) says 2026-07-28 or later. Everything else
// (a session's requests, an initialize, GET and DELETE) is of the sessions
// era.
func (e *envelope) eraOf() era {
	if !e.post || e.session != "" {
		return eraSessions
	}
	if e.revision >= sessionlessVersion {
		return eraSessionless
	}
	if len(e.msgs) > 0 && e.msgs[0].Method == methodDiscover && e.revision == "" {
		return eraSessionless
	}
	return eraSessions
}

// single returns the one message of a body that is not a batch.
func (e *envelope) single() (*message, bool) {
	if e.batch || len(e.msgs) != 1 {
		return nil, false
	}
	return &e.msgs[0], true
}

// isCall reports whether the body is one tools/call request.
func (e *envelope) isCall() (*message, bool) {
	m, ok := e.single()
	return m, ok && m.Method == "tools/call" && m.ID != nil
}

// decodeMessage reads one JSON-RPC message. Params that hold a field of
// another type than the package reads leave only _meta known (full is
// false); a message that is not an object, or whose params or _meta are
// not objects, is invalid. Member names match exactly, as go-sdk reads
// them: a "Method" beside "method" cannot make the layers see another
// method than go-sdk serves (the scopes layer decides on what it reads).
func decodeMessage(data []byte) message {
	var top struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if unmarshalExact(data, &top) != nil {
		return message{invalid: true}
	}
	m := message{ID: top.ID, Method: top.Method, Result: top.Result, Error: top.Error, raw: top.Params, full: true}
	if len(top.Params) == 0 {
		return m
	}
	if unmarshalExact(top.Params, &m.Params) != nil {
		m.Params, m.full = params{}, false
		var metaOnly struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		if unmarshalExact(top.Params, &metaOnly) != nil {
			return message{invalid: true}
		}
		m.Params.Meta = metaOnly.Meta
	}
	return m
}

// unmarshalExact decodes data's first JSON value into v as go-sdk does:
// member names matched exactly, anything after the value ignored. Cost: no
// buffer of its own (a Decoder would take 32 KiB per call).
func unmarshalExact(data []byte, v any) error {
	_, err := exactjson.Parse(data, v, exactjson.DontMatchCaseInsensitiveStructFields)
	return err
}

// meta returns the string under key in the message's _meta ("" when it is
// absent or not a string).
func (m *message) meta(key string) string {
	var s string
	_ = json.Unmarshal(m.Params.Meta[key], &s)
	return s
}

// progressToken returns the JSON of the request's progress token, "" when
// it has none.
func (m *message) progressToken() string {
	tok := compactJSON(m.Params.Meta["progressToken"])
	if tok == "null" {
		return ""
	}
	return tok
}

// declares reports whether the request's client capabilities (in _meta,
// 2026-07-28) include the extension.
func (m *message) declares(extension string) bool {
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(m.Params.Meta[metaClientCaps], &caps) != nil {
		return false
	}
	_, ok := caps.Extensions[extension]
	return ok
}

// echoID is the id a response to m carries: m's id when it is a string or
// a number, else null, as JSON-RPC asks.
func (m *message) echoID() json.RawMessage {
	id := bytes.TrimSpace(m.ID)
	if len(id) > 0 && (id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9') {
		return id
	}
	return json.RawMessage("null")
}

// A progressParams is what the event store reads of a notifications/progress.
type progressParams struct {
	Token    json.RawMessage `json:"progressToken"`
	Progress float64         `json:"progress"`
	Message  string          `json:"message"`
	Meta     struct {
		Stream  string        `json:"rtfshost/stream-id"` // metaStream
		Seq     *float64      `json:"rtfshost/seq"`       // metaSeq
		Outputs []batchOutput `json:"rtfshost/outputs"`   // metaOutputs
	} `json:"_meta"`
}

// progress returns the parameters of a notifications/progress.
func (m *message) progress() (progressParams, bool) {
	var p progressParams
	ok := m.Method == "notifications/progress" && json.Unmarshal(m.raw, &p) == nil
	return p, ok
}

// isResponse reports whether m is a JSON-RPC response: an id with a result
// or an error.
func (m *message) isResponse() bool {
	return !m.invalid && m.Method == "" && m.ID != nil && (m.Result != nil || m.Error != nil)
}

// compactJSON is raw JSON without insignificant space, so that a value
// written two ways compares equal; "" when raw is not JSON.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return ""
	}
	return b.String()
}

// setBody makes body r's body, held in memory, so that go-sdk reads it
// without another read of the connection.
func setBody(r *http.Request, body []byte) {
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
}

// readBody reads r's body up to maxRequestBody bytes. On failure it answers
// 413 (too large) or 400 and returns false.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err == nil {
		return body, true
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
	} else {
		http.Error(w, "failed to read body", http.StatusBadRequest)
	}
	return nil, false
}

// isJSON reports whether a Content-Type is application/json.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// acceptsJSONOnly reports whether an Accept header admits application/json
// but not text/event-stream.
func acceptsJSONOnly(values []string) bool {
	jsonOK, sseOK := false, false
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*", "*/*":
				sseOK = true
			}
		}
	}
	return jsonOK && !sseOK
}

// sseData returns the data of each event of an SSE stream, in order (the
// data lines of an event joined by newlines).
func sseData(stream []byte) [][]byte {
	var out [][]byte
	for _, block := range bytes.Split(bytes.ReplaceAll(stream, []byte("\r\n"), []byte("\n")), []byte("\n\n")) {
		var data [][]byte
		for _, line := range bytes.Split(block, []byte("\n")) {
			if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(rest, []byte(" ")))
			}
		}
		if data != nil {
			out = append(out, bytes.Join(data, []byte("\n")))
		}
	}
	return out
}

// responseOf returns the data of the first SSE event in stream that holds a
// JSON-RPC response (an object with an id and a result or an error).
func responseOf(stream []byte) []byte {
	for _, data := range sseData(stream) {
		if m := decodeMessage(data); m.isResponse() {
			return data
		}
	}
	return nil
}

// A jsonObject is a decoded JSON object whose members a layer rewrites.
type jsonObject map[string]json.RawMessage

// decodeObject decodes data as a JSON object (ok false when it is not
// one, or null).
func decodeObject(data []byte) (o jsonObject, ok bool) {
	if json.Unmarshal(data, &o) != nil || o == nil {
		return nil, false
	}
	return o, true
}

// progressTokenValue is the request's progress token as go-sdk sends it
// back (a string, or a json.Number); nil when there is none.
func (m *message) progressTokenValue() any {
	tok := m.progressToken()
	if tok == "" {
		return nil
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(tok))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

// sdkMessage decodes data, a JSON-RPC message this server wrote, as
// go-sdk's message, for a connection of go-sdk's to write.
func sdkMessage(data []byte) (jsonrpc.Message, error) {
	return jsonrpc.DecodeMessage(data)
}

// object returns member key as an object (empty when absent or null; nil
// when it is something else).
func (o jsonObject) object(key string) jsonObject {
	var m jsonObject
	if json.Unmarshal(o[key], &m) != nil && o[key] != nil {
		return nil
	}
	if m == nil {
		m = jsonObject{}
	}
	return m
}

// str returns member key as a string ("" when it is not one).
func (o jsonObject) str(key string) string {
	var s string
	_ = json.Unmarshal(o[key], &s)
	return s
}

// set sets member key to v encoded.
func (o jsonObject) set(key string, v any) {
	if b, err := json.Marshal(v); err == nil {
		o[key] = b
	}
}

// objects returns member key as an array of objects (nil when it is not
// one).
func (o jsonObject) objects(key string) []jsonObject {
	var list []jsonObject
	if json.Unmarshal(o[key], &list) != nil {
		return nil
	}
	return list
}

// rewriteResults applies patch to the result of every JSON-RPC response in
// a recorded body: an application/json body, or the data lines of an SSE
// one.
func rewriteResults(body []byte, patch func(result jsonObject)) []byte {
	apply := func(msg []byte) []byte {
		var resp jsonObject
		if json.Unmarshal(msg, &resp) != nil || resp["result"] == nil {
			return msg
		}
		res := resp.object("result")
		if res == nil {
			return msg
		}
		patch(res)
		resp.set("result", res)
		out, err := json.Marshal(resp)
		if err != nil {
			return msg
		}
		return out
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return apply(trimmed)
	}
	lines := bytes.Split(body, []byte("\n"))
	for i, l := range lines {
		if data, ok := bytes.CutPrefix(l, []byte("data: ")); ok && len(data) > 0 && data[0] == '{' {
			lines[i] = append([]byte("data: "), apply(data)...)
		}
	}
	return bytes.Join(lines, []byte("\n"))
}
