// Package transport defines the contract between the streaming provider and the
// sources that feed it: a StreamTransport reads a source (raw SSE, MCP Streamable
// HTTP, legacy MCP HTTP+SSE, a mock channel) and hands each unit of data, a Chunk,
// to a Sink. The provider implements Sink with a bounded queue, so a Sink's Deliver
// blocks while the queue is full and the transport stops reading its source: that
// is how backpressure reaches the network.
//
// The main types are StreamTransport, Spec, Sink and Chunk. Implementations live
// in the sub-packages sse, mcp and mock. This package imports nothing else of
// rtfshost; chunks carry bytes, never RTFS values.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// A Chunk is one unit of data delivered by a transport. The transport owns the
// Data slice until Deliver returns; a Sink that keeps it must copy it.
type Chunk struct {
	// Data is the payload: an SSE event's data, or for MCP transports the JSON
	// params of a notifications/progress message or the tool's final result.
	Data []byte
	// Event is the SSE event name ("" for the default "message" event). MCP
	// transports set "progress" for progress notifications and "result" for the
	// tool's final result, which is always the last chunk.
	Event string
	// ID is the chunk's cursor: opaque to the host, it is what the host commits
	// after the chunk's effect and what it passes back to Run to resume after it.
	// Transports guarantee that a chunk replayed after a reconnect carries the
	// same ID as its first delivery, so the host can drop replays.
	ID string
	// ReceivedAt is when the transport read the chunk from its source.
	ReceivedAt time.Time
}

// A Sink receives chunks from a transport. It is implemented by the provider.
type Sink interface {
	// Deliver hands one chunk to the host. It blocks while the host's queue is
	// full and returns ctx.Err() if ctx ends first. Any other error means the host
	// accepts no more chunks for this stream (it was cancelled or completed): the
	// transport must stop reading and return that error from Run.
	Deliver(ctx context.Context, c Chunk) error
}

// A ReconnectObserver is a Sink that wants to know when a transport reconnects.
// Transports call Reconnecting before each wait between attempts.
type ReconnectObserver interface {
	Reconnecting(attempt int, delay time.Duration, cause error)
}

// A Replayable transport says whether its source can send chunks again from
// a cursor. Transports that do not implement it are taken to replay (SSE and
// MCP resume with Last-Event-ID). A transport whose Replayable returns false
// (the mock, and later stdio and exec) cannot: a chunk it delivered is gone
// from the source, so a host with persistence journals every such chunk
// durably before Deliver returns, and processes the journal again after a
// crash (docs/durability.md, journal mode). For these transports the cursor
// given to Run is the ID of the last chunk the host took durably, so that a
// producer can resume after it.
type Replayable interface {
	Replayable() bool
}

// Spec says what a transport connects to. It is built by the provider from the
// stream's start call and is read-only for transports.
type Spec struct {
	// StreamID names the stream, for logs and errors.
	StreamID string
	// ServerURL is the resolved base URL (for SSE, e.g. http://127.0.0.1:2025/sse).
	ServerURL string
	// Endpoint is the stream's endpoint: a path under ServerURL, an absolute URL,
	// or, for MCP transports, the tool name.
	Endpoint string
	// Query holds the start call's :config as strings; SSE appends them to the URL.
	Query map[string]string
	// Arguments is the start call's :config as a JSON object; MCP transports send
	// it as the tool's arguments.
	Arguments []byte
	// Header holds extra request headers, including the auth header. It carries
	// secrets: transports never log it or put it in an error.
	Header http.Header
	// RetryAttempts is the number of retries per failure streak (default 3).
	RetryAttempts int
	// MaxEventBytes bounds one event's size (default 16 MiB).
	MaxEventBytes int
	// Client is the HTTP client to use; nil means a default client without a
	// total timeout (streams are long-lived).
	Client *http.Client
	// Logger receives the transport's logs; nil means no logs.
	Logger *slog.Logger
}

// DefaultRetryAttempts and DefaultMaxEventBytes are the values used when a Spec
// leaves RetryAttempts or MaxEventBytes at zero.
const (
	DefaultRetryAttempts = 3
	DefaultMaxEventBytes = 16 << 20
)

// A StreamTransport reads one kind of source. Implementations are safe for
// concurrent use: one value serves many streams, each in its own Run call.
type StreamTransport interface {
	// Run delivers chunks to sink until the source ends cleanly (it returns nil),
	// ctx is cancelled (it returns ctx.Err() promptly, even mid-backoff), or the
	// source fails for good (it returns an error; errors.As reaches *Error). It
	// starts after cursor, the ID of the last chunk the host committed ("" for the
	// start). Run starts no goroutine that outlives it.
	Run(ctx context.Context, spec Spec, cursor string, sink Sink) error
}

// Error is a transport failure. Permanent errors were not retried (a 4xx other
// than 408/429, an oversized event, a protocol violation); others were retried
// until the attempts ran out.
type Error struct {
	StreamID  string
	Op        string // what failed, e.g. "connect", "read", "initialize"
	Status    int    // HTTP status, if any
	Permanent bool
	Err       error
}

// Error describes the failure: the stream, the operation, the HTTP status and
// the cause. It never contains request headers (the auth header is a secret).
func (e *Error) Error() string {
	msg := e.Op
	if e.StreamID != "" {
		msg = "stream " + e.StreamID + ": " + msg
	}
	if e.Status != 0 {
		msg += fmt.Sprintf(": HTTP %d", e.Status)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause, so errors.Is reaches ErrEventTooLarge or a
// network error.
func (e *Error) Unwrap() error { return e.Err }

// ErrEventTooLarge is wrapped by the error a transport returns when one event
// exceeds Spec.MaxEventBytes.
var ErrEventTooLarge = errors.New("event larger than the configured limit")

// IsPermanent reports whether err is a transport error that must not be retried.
func IsPermanent(err error) bool {
	var te *Error
	return errors.As(err, &te) && te.Permanent
}
