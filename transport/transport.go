// Package transport defines the contract between the streaming provider and the
// sources that feed it: a StreamTransport reads a source (raw SSE, MCP Streamable
// HTTP, legacy MCP HTTP+SSE, a mock channel) and hands each unit of data, a Chunk,
// to a Sink. The provider implements Sink with a bounded queue, so a Sink's Deliver
// blocks while the queue is full and the transport stops reading its source: that
// is how backpressure reaches the network.
//
// The main types are StreamTransport, Spec, Sink and Chunk. Implementations live
// in the sub-packages sse, mcp and mock. This package imports nothing else of
// rtfshost but transport/egress (the URL a network transport dials);
// chunks carry bytes, never RTFS values.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/rtfshost/rtfshost/transport/egress"
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
	// FD names the output of a process transport the chunk came from,
	// "stdout" or "stderr" (the metadata's :fd); "" for other transports.
	FD string
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

// An AttemptGate is a Sink that keeps a circuit breaker for the stream's
// origin (the provider's, shared by every stream of the host; see
// transport/breaker). The retry policy reports each failed attempt to
// AttemptFailed before it waits, and asks AllowAttempt after the wait: a
// non-nil error from either (the origin's circuit is open) ends the
// failure streak, and Run returns that error without another attempt.
type AttemptGate interface {
	AttemptFailed(cause error) error
	AllowAttempt() error
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

// Spec says what a transport reads for one stream. It is built by the
// provider from the stream's start call and is read-only for transports.
type Spec struct {
	// StreamID names the stream, for logs and errors.
	StreamID string
	// Endpoint is the stream's endpoint: for raw SSE a path under the server
	// URL or an absolute URL, for MCP transports (over HTTP or stdio) the
	// tool name; process transports that take none get "".
	Endpoint string
	// Arguments is the start call's :config as a JSON object; MCP
	// transports send it as the tool's arguments.
	Arguments []byte
	// HTTP is set for transports that reach a URL (Kind.Target ==
	// TargetURL) and is zero for the others.
	HTTP HTTP
	// Config is the transport's own configuration, made by its
	// Kind.Configure from the start keys it reads (nil when it has none).
	Config any
	// RetryAttempts is the number of retries per failure streak (default 3).
	RetryAttempts int
	// MaxEventBytes bounds one event, line or message (default 16 MiB).
	MaxEventBytes int
	// IdleTimeout is the stream's idle timeout (:idle-timeout-ms; zero:
	// none): a source that sends nothing for this long is broken. Network
	// transports need not read it, since HTTP.Client applies it
	// (transport/egress); :stdio applies it to the server's stdout once
	// the call is made.
	IdleTimeout time.Duration
	// Logger receives the transport's logs; nil means no logs.
	Logger *slog.Logger
	// Resumed says the stream ran before a host restart and Run continues
	// it. A transport that cannot resume its source (a process it started
	// is gone) returns an error wrapping ErrSourceLost, unless its
	// configuration says it may start the source again.
	Resumed bool
	// Stale is a process group that the stream's previous host started
	// and recorded (ChildObserver) and whose end it did not see: the host
	// may have died with it still running. A transport that starts
	// processes ends it first (when it is still the same process group),
	// before anything else, so that a resumed stream never runs its
	// program twice at once, and reports its end with ChildExited. The
	// zero value (PID 0) is none.
	Stale ChildProcess
}

// A ChildProcess identifies a process group that a transport started (the
// :exec and :stdio transports start one per run of their program): its
// leader's pid, which is also the group's id, and when the leader started,
// so that a later host never takes another process that got the same pid
// for it. It is a plain value, stored with the stream.
type ChildProcess struct {
	PID int
	// Start is the leader's start time as the OS counts it (Linux: clock
	// ticks since boot, field 22 of /proc/PID/stat); 0 when the OS does not
	// say.
	Start uint64
	// Boot identifies the boot Start counts from (Linux: the kernel's
	// boot_id); "" when unknown. A group of another boot, or another
	// machine, is never touched.
	Boot string
}

// A ChildObserver is a Sink that records the process groups its stream's
// transport starts, so that a host restarted after a crash can end one that
// outlived its host (Spec.Stale). A transport calls ChildStarted once the
// group runs and ChildExited once no process of it is left (or a stale one
// was ended). Both may block briefly; neither fails.
type ChildObserver interface {
	ChildStarted(ChildProcess)
	ChildExited(ChildProcess)
}

// HTTP is the part of a Spec that network transports (raw SSE, MCP
// Streamable HTTP, legacy MCP HTTP+SSE) use.
type HTTP struct {
	// ServerURL is the resolved base URL (for SSE, e.g.
	// http://127.0.0.1:2025/sse; for MCP the MCP endpoint).
	ServerURL string
	// URL is the URL the transport dials, as the provider classified and
	// checked it (egress.Parse): for raw SSE the endpoint, absolute or
	// under ServerURL; for MCP the server URL. A transport sends this URL
	// and no other reading of ServerURL or Endpoint. Nil (a Spec built by
	// hand): the transport derives it from ServerURL and Endpoint with the
	// same egress functions.
	URL *egress.URL
	// Query holds the start call's :config as strings; SSE appends them to
	// the URL.
	Query map[string]string
	// Header holds extra request headers, including the auth header. It
	// carries secrets: transports never log it or put it in an error.
	Header http.Header
	// Client is the HTTP client to use; nil means a default client without
	// a total timeout (streams are long-lived).
	Client *http.Client
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

// ErrSourceLost is wrapped by the error of a transport that cannot go on
// with a resumed stream's source (Spec.Resumed): the host ends the stream
// in :error with the end reason :source-lost once its journaled chunks are
// processed.
var ErrSourceLost = errors.New("the source did not survive the host restart")

// ErrEventTooLarge is wrapped by the error a transport returns when one event
// exceeds Spec.MaxEventBytes.
var ErrEventTooLarge = errors.New("event larger than the configured limit")

// IsPermanent reports whether err is a transport error that must not be retried.
func IsPermanent(err error) bool {
	var te *Error
	return errors.As(err, &te) && te.Permanent
}
