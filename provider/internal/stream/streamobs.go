package stream

import (
	"context"
	"time"
)

// StreamDesc describes an observed stream.
type StreamDesc struct {
	ID        string
	Endpoint  string
	Transport string // "sse", "mcp", "mcp-sse", "mock"...
	Processor string
	Recovered bool // run again by Recover after a restart
}

// A StreamObserver watches one stream. Its methods other than
// TransportStarted and TransportEnded may be called from the stream's
// transport goroutine, its worker and control calls at once.
type StreamObserver interface {
	// ChunkReceived reports a chunk of size bytes taken into the queue.
	ChunkReceived(bytes int)
	// ProcessorCalled reports one processor call: the chunk's seq, when the
	// call began, how long it took and its error (nil for a result, even
	// one that puts the stream in :error).
	ProcessorCalled(seq int64, start time.Time, d time.Duration, err error)
	// Directive reports a directive applied: action is "continue",
	// "pause", "resume", "cancel" or "complete"; source is "processor",
	// "control-chunk" (the chunk's own :action) or "request" (Pause,
	// Resume, Cancel).
	Directive(action, source string)
	// ChunksDropped reports n queued chunks dropped by a cancel or an error.
	ChunksDropped(n int)
	// OutputsDropped reports n outputs of the given priority ("low", or
	// with a subscriber cut off "normal" and "immediate") that a
	// subscriber's Outbox dropped; it is called from the subscriber's
	// goroutine.
	OutputsDropped(priority string, n int)
	// TransportStarted reports that the stream's transport starts reading
	// its source; the transport runs under the context it returns (derived
	// from ctx, e.g. with a span, whose trace context outgoing requests
	// carry).
	TransportStarted(ctx context.Context) context.Context
	// Reconnecting reports that the transport retries after cause.
	Reconnecting(attempt int, cause error)
	// TransportEnded reports that the transport returned: nil when its
	// source ended cleanly or the stream stopped it.
	TransportEnded(err error)
	// Held reports that a failure holds the stream as StateFailed: kind is
	// FailureProcessor, FailureSource or FailureStore.
	Held(kind string)
	// DeadLettered reports that chunk seq was set aside as a dead letter.
	DeadLettered(seq int64)
	// Ended reports the stream's end: a terminal status, or the status it
	// had when the provider closed (not terminal). It is the last call.
	Ended(st Status)
}

// nopObserver observes nothing: the default StreamObserver of a stream.
type nopObserver struct{}

func (nopObserver) ChunkReceived(int)                                      {}
func (nopObserver) ProcessorCalled(int64, time.Time, time.Duration, error) {}
func (nopObserver) Directive(string, string)                               {}
func (nopObserver) ChunksDropped(int)                                      {}
func (nopObserver) OutputsDropped(string, int)                             {}
func (nopObserver) TransportStarted(ctx context.Context) context.Context   { return ctx }
func (nopObserver) Reconnecting(int, error)                                {}
func (nopObserver) TransportEnded(error)                                   {}
func (nopObserver) Held(string)                                            {}
func (nopObserver) DeadLettered(int64)                                     {}
func (nopObserver) Ended(Status)                                           {}

// ActionNames names the directives for observers.
var ActionNames = [...]string{ActNone: "none", ActContinue: "continue", ActPause: "pause",
	ActResume: "resume", ActCancel: "cancel", ActComplete: "complete"}
