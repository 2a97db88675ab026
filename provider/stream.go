package provider

import (
	"context"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider/internal/stream"
	"github.com/rtfshost/rtfshost/rtfs"
)

// The types, constants and functions of a stream that the provider's API
// carries are declared with the stream, in package internal/stream; these
// names keep them where users of the provider find them. Each is the
// stream package's own: a type alias, the same constant, the same variable,
// or a function that calls the stream package's.

// A DeadLetter is a chunk a stream set aside: its :seq, the chunk and its
// metadata as the processor got them, and the failure that set it aside.
// It is a copy the caller owns.
type DeadLetter = stream.DeadLetter

// DeadLettersInfo is inspect's :dead-letters: how many chunks the stream
// set aside, and the last few (at most deadLettersShown, oldest first).
type DeadLettersInfo = stream.DeadLettersInfo

// A Delivery is the policy of a stream's normal and low outputs for each
// of its subscribers (immediate outputs are never held). A negative
// Interval or a MaxBatch below 1 is unset: Or fills it from another
// policy.
type Delivery = stream.Delivery

// DroppedOutputsInfo counts a stream's dropped outputs by priority. Low
// outputs are dropped first, by subscribers that fall behind; immediate and
// normal ones only with a subscriber that was cut off.
type DroppedOutputsInfo = stream.DroppedOutputsInfo

// An EndedError is the error of a request that needs a stream not ended,
// made of one that has: "cannot resume stream "s": it is cancelled". It
// matches ErrEnded. A request forwarded to another host of a cluster
// gives it too.
type EndedError = stream.EndedError

// An ErrorPolicy is a stream's :on-error start key: what a failure of its
// processor on a chunk does. The zero value holds the stream at once.
type ErrorPolicy = stream.ErrorPolicy

// An Event is what a Subscription receives.
type Event = stream.Event

// EventKind says what an Event reports.
type EventKind = stream.EventKind

// A Failure is why a stream is held as StateFailed: Status.Failure and
// inspect's :failure. It is a copy the caller owns.
type Failure = stream.Failure

// InspectOptions leave keys out of inspect maps. The zero value includes
// everything, as the :include-* flags of :mcp.stream.inspect default to true.
type InspectOptions = stream.InspectOptions

// A JSONValue is an RTFS value inside a StreamInfo: it marshals with
// rtfs.OutputJSON and unmarshals with rtfs.FromJSON (object keys become
// keywords), so a StreamInfo survives a trip through JSON up to the
// one-way JSON mapping of docs/rtfs-values.md. A nil V is nil.
type JSONValue = stream.JSONValue

// A Milestone is one step of a stream's :milestones: its id, its weight in
// the stream's progress, and how long it is expected to take (0: no
// estimate).
type Milestone = stream.Milestone

// A Priority says how urgently an output is delivered: a result's
// :priority. The zero value is PriorityNormal.
type Priority = stream.Priority

// A ProcessorError is why a stream failed in its processor: the processor,
// the chunk (its :seq) and the processor's error, an *rtfs.EvalError with
// the failing form's position and the thrown value for an RTFS processor.
// A StreamError of such a stream carries it as its Cause while the
// provider that ran the stream lives; the stored stream keeps only the
// message.
type ProcessorError = stream.ProcessorError

// A ProgramVersion is one program a stream's processor came from: the one
// it started with, then each that `rtfshost upgrade` swapped in. Inspect
// shows them as :programs.
type ProgramVersion = stream.ProgramVersion

// ProgressInfo is a stream's :progress, as inspect and the events show it.
type ProgressInfo = stream.ProgressInfo

// QueuedInfo is one entry of a stream's :queue.
type QueuedInfo = stream.QueuedInfo

// A Stale marks an answer about a stream that its owner, a host of the
// cluster that holds the stream's lease, did not give: it does not answer
// (it may have died, and another host takes the stream over when the lease
// expires), so the answer is the stream as its stored records say, as of
// the owner's last commit.
type Stale = stream.Stale

// A State is a stream's lifecycle state.
type State = stream.State

// StatsInfo is a stream's :stats. LastLatencyMs and LastEventEpochMs are -1
// before the first chunk (nil in the RTFS map, null in JSON).
type StatsInfo = stream.StatsInfo

// Status is a snapshot of a stream's lifecycle.
type Status = stream.Status

// StatusInfo is a stream's :status.
type StatusInfo = stream.StatusInfo

// StreamDesc describes an observed stream.
type StreamDesc = stream.StreamDesc

// A StreamError reports a stream that ended without completing, or that was
// interrupted by Close (State is then not terminal).
type StreamError = stream.StreamError

// A StreamInfo is the typed snapshot of one stream: what Inspect returns as
// an RTFS map (Value) and what the CLI and the MCP server render. The
// struct is the one definition of the inspect shape: its json tags are the
// keys of both the JSON form and the RTFS map, which Value makes from it
// (a test checks docs/streams.md and the dashboard against it), so a
// client of a running serve decodes the JSON back into a StreamInfo. It is
// a copy: the caller owns it.
type StreamInfo = stream.StreamInfo

// A StreamObserver watches one stream. Its methods other than
// TransportStarted and TransportEnded may be called from the stream's
// transport goroutine, its worker and control calls at once.
type StreamObserver = stream.StreamObserver

// A StuckStream is a stream that is paused for good, or held by a
// failure: nothing the provider or its source will do can move it on.
type StuckStream = stream.StuckStream

// SubscribeOptions configure a Subscription.
type SubscribeOptions = stream.SubscribeOptions

// A Subscription receives the events of one stream, or of every stream. Its
// channel is closed after the stream's EventEnd (for a one-stream
// subscription), on Close, or when the provider closes. Its methods are safe
// for concurrent use.
type Subscription = stream.Subscription

// A Throttle is how the outputs of one priority are delivered to one
// subscriber.
type Throttle = stream.Throttle

// A TimelineEvent is something that happened to a stream besides its
// chunks: its start, a directive applied (other than continue), a
// milestone reached (its id in Message), a reconnect of its source, its
// end. The dashboard shows a stream's
// timeline (Provider.Timeline).
type TimelineEvent = stream.TimelineEvent

// TransportInfo is a stream's :transport.
type TransportInfo = stream.TransportInfo

const (
	// EventChange says that the stream's snapshot (Provider.Info) changed
	// without an output: a chunk was processed, the stream was paused or
	// resumed, or the stream a Pending subscription waited for started. Only
	// subscriptions with SubscribeOptions.Changes receive it.
	EventChange = stream.EventChange
	// EventEnd is the last event of a stream: it reached a terminal state;
	// or, on a provider sharing its store with other hosts
	// (Options.Cluster), it moved to another host: its Status.State is
	// then not terminal and Status.Message says so.
	EventEnd = stream.EventEnd
	// EventOutput carries a processor's non-nil :output.
	EventOutput = stream.EventOutput
	// EventProgress reports a result that changed the stream's :progress
	// without an output (Progress is set).
	EventProgress = stream.EventProgress
	// FailureProcessor: the processor failed on the chunk Failure.Seq.
	FailureProcessor = stream.FailureProcessor
	// FailureSource: the stream's source gave up after its retries.
	FailureSource = stream.FailureSource
	// FailureStore: the store refused a commit (a full disk).
	FailureStore = stream.FailureStore
	// PriorityImmediate outputs are delivered at once, alone, never
	// coalesced nor dropped.
	PriorityImmediate = stream.PriorityImmediate
	// PriorityLow outputs are throttled harder (Delivery.Low); a
	// subscriber that falls behind on them loses the oldest, counted.
	PriorityLow = stream.PriorityLow
	// PriorityNormal outputs are throttled (Delivery.Normal) and never
	// dropped.
	PriorityNormal = stream.PriorityNormal
	StateActive    = stream.StateActive
	StateCancelled = stream.StateCancelled
	StateCompleted = stream.StateCompleted
	StateError     = stream.StateError
	// StateFailed is the state of a stream held by a failure (failure.go):
	// its processor failed on a chunk, or its source gave up, and its
	// :on-error policy holds it (the default). It is not an end: the state
	// after the last chunk processed is kept, the failed chunk stays where
	// it was (cursor or journal), a program awaiting the stream stays
	// parked, and Resume (retry), Skip (set the chunk aside as a dead
	// letter), Upgrade (a new processor, then Resume) or Cancel move it on.
	// It is stored, and a failed stream recovered after a restart is held
	// again.
	StateFailed = stream.StateFailed
	StatePaused = stream.StatePaused
	// StateUnrecoverable is the state of a stored stream that recovery
	// could not rebuild (its message says why): it is listed, and can be
	// inspected, removed or given a processor again (rtfshost upgrade),
	// but it does not run. It is never stored.
	StateUnrecoverable = stream.StateUnrecoverable
	ThenEnd            = stream.ThenEnd
	ThenHold           = stream.ThenHold
	ThenSkip           = stream.ThenSkip
)

var (
	// ErrEnded is matched (errors.Is) by the error of Pause, Resume or Skip
	// of a stream that has ended (completed, cancelled or errored): nothing
	// carries it on. The error is an *EndedError, which says the state.
	ErrEnded = stream.ErrEnded
	// ErrNoStoredStream is wrapped by the errors of the stored-stream
	// operations (SetStoredState, RemoveStored, UpgradeStored,
	// StoredDeadLetters) for an id the store does not hold. ErrNoStream is the
	// live provider's: the two say which side was asked.
	ErrNoStoredStream = stream.ErrNoStoredStream
	// ErrUnknownAnswer is wrapped by a legacy replay's error for a host call
	// whose answer the release that stored the run did not keep.
	ErrUnknownAnswer = stream.ErrUnknownAnswer
)

// DecodeChunk returns the value a processor receives for a chunk of data
// with SSE event name event, as a stream decodes it: JSON becomes a value
// with keyword keys (an MCP progress chunk's JSON :message decoded too),
// anything else a string. It is what `rtfshost test` and the playground
// give a processor for a recorded chunk. Safe for concurrent use; it
// allocates a decoder per call.
func DecodeChunk(data []byte, event string) rtfs.Value { return stream.DecodeChunk(data, event) }

// DefaultDelivery is the policy of a stream and a subscriber that set none:
// normal outputs at most one delivery per 200 ms carrying up to 10, low
// ones one per second carrying up to 20.
func DefaultDelivery() Delivery { return stream.DefaultDelivery() }

// DisplayCursor is the form of a stream's cursor that inspect shows (from
// RTFS, the CLI and MCP). Cursors are opaque and some carry secrets: an MCP
// cursor holds the server's session id, which lets its holder read the
// session's stream. A cursor of up to 40 bytes (an SSE event id, a journal
// position) is shown whole; a longer one as its first 12 bytes, "…" and 12
// hex digits of its SHA-256, enough to tell two cursors apart and to see it
// move, and nothing of what it carries past its first bytes. The store
// keeps the whole cursor for recovery.
func DisplayCursor(c string) string { return stream.DisplayCursor(c) }

// InspectKeys returns the keys of the inspect shape, from StreamInfo's json
// tags: the top-level ones, and those of the maps in it after their
// parent's and a dot ("stats.outputs", "queue.chunk"), in field order.
// Tests hold docs/streams.md and the dashboard to them.
func InspectKeys() []string { return stream.InspectKeys() }

// LoadRunJournal decodes a journal stored by a run: a head (PutRunJournal)
// with the segments it refers to, or a whole snapshot (earlier releases).
// Damage and missing segments are a *persistence.CorruptRecordError naming
// key, the record that holds the journal.
func LoadRunJournal(ctx context.Context, st persistence.Store, key, journal []byte) (*capabilities.Record, error) {
	return stream.LoadRunJournal(ctx, st, key, journal)
}

// ParseDelivery reads the :delivery map of a start call:
// {:normal {:interval-ms n :max-batch n} :low {:interval-ms n :max-batch n}},
// every key optional (an absent one keeps the subscriber's policy). Keys
// may be keywords or strings (JSON arguments). Errors name the key.
func ParseDelivery(v rtfs.Value) (Delivery, error) { return stream.ParseDelivery(v) }

// ParseErrorPolicy reads an :on-error map, {:retry 3 :backoff-ms 200 :then
// :skip}: every key optional, :then one of :hold (the default), :skip or
// :end. An error names the key and what it takes.
func ParseErrorPolicy(v rtfs.Value) (ErrorPolicy, error) { return stream.ParseErrorPolicy(v) }

// ParseMilestones reads the :milestones vector of a start call: [{:id :scan
// :weight 0.2 :estimated-ms 15000} ...]. :id (a keyword or string, unique)
// is required; :weight defaults to 1 and must be positive; :estimated-ms is
// optional.
func ParseMilestones(v rtfs.Value) ([]Milestone, error) { return stream.ParseMilestones(v) }

// PutRunJournal adds to b what a reference to j as it stands needs: the
// entries j recorded since it was last stored, as one segment, and the
// references that keep them, holder's (a stream's id; none when "") and,
// with the first segment of a run that goes on (j.Serving), the run's own.
// It returns the reference (j.Head; nil for a nil j) and the function to
// call once b has committed, which marks the entries stored. Cost: the
// head and a segment of the new entries; nothing for those stored before.
func PutRunJournal(b *persistence.Batch, j *capabilities.Journal, holder string) (head []byte, stored func()) {
	return stream.PutRunJournal(b, j, holder)
}

// ReleaseRunJournal deletes holder's reference to the journal a head refers
// to (holder "" is the run's own), and the journal's segments when no
// reference is left. A head of a journal stored whole (an earlier release's
// snapshot), or of one without entries, holds nothing: it returns nil.
// Cost: a scan of the references, which stops at the first; with none
// left, a scan of the segments and their deletion.
func ReleaseRunJournal(ctx context.Context, st persistence.Store, head []byte, holder string) error {
	return stream.ReleaseRunJournal(ctx, st, head, holder)
}

// StoredDeadLetters returns the dead letters of stream id in st, oldest
// first, reading the store only (no provider needed: the command line's
// dead-letters on a data directory). A stream the store does not hold is
// an error wrapping ErrNoStoredStream. Cost: a scan of the stream's dead
// letters.
func StoredDeadLetters(ctx context.Context, st persistence.Store, id string) ([]DeadLetter, error) {
	return stream.StoredDeadLetters(ctx, st, id)
}

// Unset is a Delivery whose every field is unset: Or fills it whole.
func Unset() Delivery { return stream.Unset() }

// A DryChunk is one chunk of a dry run (DryRun).
type DryChunk = stream.DryChunk

// A DryRunRequest is what DryRun drives.
type DryRunRequest = stream.DryRunRequest

// A DryStep is one processor call of a dry run.
type DryStep = stream.DryStep

// A DryResult is what a dry run did.
type DryResult = stream.DryResult

// DryRun drives a processor over chunks given in advance, without a
// source, a queue, workers or a store, as a stream would: the chunks are
// decoded, the metadata built, the processor called and its results read
// as a stream does. It is what `rtfshost test`'s run-processor and the
// dashboard's playground run.
func DryRun(ctx context.Context, req DryRunRequest) (*DryResult, error) {
	return stream.DryRun(ctx, req)
}
