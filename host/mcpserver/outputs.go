package mcpserver

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/transport/breaker"
)

// The tools' output schemas are generated from the Go types of their
// structuredContent with jsonschema-go, as go-sdk does for its typed tools:
// a struct's json tags are the object's keys, a field without omitempty is
// required, and no other key is allowed. TestStructuredResults validates
// every tool's real answer against its advertised schema, so a type and
// the JSON a tool sends cannot drift apart.

// statusResult is the answer of mcp.stream.status, pause, resume and
// cancel: provider.StatusValue as JSON.
type statusResult struct {
	StreamID  string            `json:"stream-id"`
	State     provider.State    `json:"state"`
	Message   string            `json:"message,omitempty"`
	EndReason string            `json:"end-reason,omitempty"`
	Result    json.RawMessage   `json:"result" jsonschema:"the stream's result, any JSON value"`
	Failure   *provider.Failure `json:"failure,omitempty" jsonschema:"why a failed stream is held"`
	Stale     *provider.Stale   `json:"stale,omitempty" jsonschema:"set when the stream's host did not answer: the status is read from the stream's stored records"`
}

// startHandle is the answer of mcp.stream.start with detach.
type startHandle struct {
	Endpoint string         `json:"endpoint"`
	Status   provider.State `json:"status"`
	StreamID string         `json:"stream-id"`
}

// inspectSummary is the answer of mcp.stream.inspect without a stream-id:
// provider.SummaryPage as JSON.
type inspectSummary struct {
	Total              int                   `json:"total" jsonschema:"the streams of every page"`
	Streams            []provider.StreamInfo `json:"streams" jsonschema:"the streams of this page, in stream-id order"`
	AutoConnect        bool                  `json:"auto-connect"`
	ServerURL          string                `json:"server-url"`
	PersistenceEnabled bool                  `json:"persistence-enabled"`
	Breakers           []breaker.State       `json:"breakers" jsonschema:"the circuit breakers of the sources' origins"`
	ObservedAtEpochMs  int64                 `json:"observed-at-epoch-ms"`
	NextCursor         string                `json:"next-cursor,omitempty" jsonschema:"the cursor of the next page; absent on the last"`
}

// evalResult is the answer of rtfs.eval.
type evalResult struct {
	Value json.RawMessage `json:"value" jsonschema:"the program's value as JSON"`
}

// removeResult is the answer of mcp.stream.remove (its keys in JSON
// order, as a map marshals them).
type removeResult struct {
	Removed  bool           `json:"removed"`
	StreamID string         `json:"stream-id"`
	Was      provider.State `json:"was" jsonschema:"the stream's state before it was removed"`
}

// deadLettersResult is the answer of mcp.stream.dead-letters.
type deadLettersResult struct {
	Count       int                   `json:"count"`
	DeadLetters []provider.DeadLetter `json:"dead-letters" jsonschema:"oldest first"`
	StreamID    string                `json:"stream-id"`
}

// The tools' output schemas.
var (
	startOutput       = anyOf(schemaFor[streamResult](), schemaFor[startHandle]())
	inspectOutput     = anyOf(schemaFor[provider.StreamInfo](), schemaFor[inspectSummary]())
	statusOutput      = schemaFor[statusResult]()
	evalOutput        = schemaFor[evalResult]()
	removeOutput      = schemaFor[removeResult]()
	upgradeOutput     = schemaFor[provider.UpgradeResult]()
	deadLettersOutput = schemaFor[deadLettersResult]()
)

// outputTypes are the schemas of the types that marshal by hand: any JSON
// value for an RTFS value or raw JSON (its types listed, as jsonschema-go
// makes a pointer's schema by adding "null" to them), the states by name.
var outputTypes = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[provider.JSONValue](): anyJSON(),
	reflect.TypeFor[json.RawMessage]():    anyJSON(),
	reflect.TypeFor[provider.State](): {Type: "string", Enum: []any{
		string(provider.StateActive), string(provider.StatePaused), string(provider.StateFailed), string(provider.StateCompleted),
		string(provider.StateCancelled), string(provider.StateError), string(provider.StateUnrecoverable)}},
}

// schemaFor is the JSON schema of T's JSON. T is one of the types above: an
// error is a programming error, which every test that starts a server
// finds.
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: outputTypes})
	if err != nil {
		panic(fmt.Sprintf("mcpserver: the output schema of %T: %v", *new(T), err))
	}
	return s
}

// anyOf is the schema of an object of one of the schemas alts.
func anyOf(alts ...*jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", AnyOf: alts}
}

// anyJSON is the schema of any JSON value.
func anyJSON() *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{"null", "boolean", "number", "string", "array", "object"}}
}
