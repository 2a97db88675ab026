package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rtfshost/rtfshost/host/observe"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// The _meta keys of the progress notifications and results of this server.
const (
	metaStream    = "rtfshost/stream-id" // the stream that produced the output
	metaSeq       = "rtfshost/seq"       // the :seq of the chunk whose result carried it
	metaCoalesced = "rtfshost/coalesced" // outputs folded into this notification, not sent alone
	metaOutputs   = "rtfshost/outputs"   // rtfs.eval results: every output of the call
)

// An output is one processor :output seen by a call.
type output struct {
	StreamID string          `json:"stream-id"`
	Seq      int64           `json:"seq"`
	Output   json.RawMessage `json:"output"`
}

// A peer is where a call's notifications go: the session of the client
// that called (an *mcp.ServerSession), or, for a task, the session that
// created it (a taskPeer).
type peer interface {
	NotifyProgress(context.Context, *mcp.ProgressNotificationParams) error
	Log(context.Context, *mcp.LoggingMessageParams) error
}

// A reporter turns the outputs of one call into notifications/progress
// messages on the call's stream, at most one per interval; outputs in
// between are coalesced into the next one and counted. It also keeps every
// output (up to a bound) for the final result. It is used by one goroutine.
type reporter struct {
	ctx      context.Context // the call's context: it routes notifications to the call's stream
	session  peer            // nil: no notifications
	token    any             // the progress token; nil: no progress notifications
	interval time.Duration
	max      int
	maxBytes int64 // bound on one output's JSON (Limits.OutputLimit); 0: none
	log      *slog.Logger
	obs      *observe.Observer // counts the first output left out; nil: none

	outputs    []output
	count      int64  // outputs seen
	truncated  int64  // outputs not kept because of max
	sent       int64  // notifications sent
	coalesced  int64  // outputs folded into notifications without being sent alone
	pending    output // the output of the next notification, when hasPending
	hasPending bool
	folded     int64 // outputs behind pending that were not sent
	last       time.Time
	// params is the notification flush sends, reused: go-sdk encodes it
	// before NotifyProgress returns (jsonrpc2.NewNotification) and keeps
	// nothing of it, so its _meta map is filled again rather than made
	// anew for every notification.
	params mcp.ProgressNotificationParams
}

// add records the output of ev and sends or schedules its notification. An
// output is encoded to JSON only when it is kept or notified.
func (r *reporter) add(ev provider.Event) {
	r.count++
	keep := len(r.outputs) < r.max
	if !keep {
		r.truncated++
		if r.truncated == 1 {
			r.obs.CountLimit("buffered-outputs")
		}
	}
	if !keep && r.token == nil {
		return
	}
	out := output{StreamID: ev.StreamID, Seq: ev.Seq, Output: outputJSON(ev, r.maxBytes)}
	if keep {
		r.outputs = append(r.outputs, out)
	}
	if r.token == nil {
		return
	}
	if r.hasPending {
		r.folded++
	}
	r.pending, r.hasPending = out, true
	if r.interval <= 0 || time.Since(r.last) >= r.interval {
		r.flush()
	}
}

// due returns when the pending notification must be sent, if one is pending.
func (r *reporter) due() (time.Time, bool) {
	if !r.hasPending {
		return time.Time{}, false
	}
	return r.last.Add(r.interval), true
}

// flush sends the pending notification, if any. progress is the number of
// outputs so far, so it rises with every notification.
func (r *reporter) flush() {
	if !r.hasPending {
		return
	}
	out := r.pending
	params := &r.params
	if params.Meta == nil {
		params.Meta = make(mcp.Meta, 3)
	}
	params.ProgressToken, params.Progress, params.Message = r.token, float64(r.count), string(out.Output)
	params.Meta[metaStream], params.Meta[metaSeq], params.Meta[metaCoalesced] = out.StreamID, out.Seq, r.folded
	r.coalesced += r.folded
	r.pending, r.hasPending, r.folded, r.last = output{}, false, 0, time.Now()
	r.sent++
	if err := r.session.NotifyProgress(r.ctx, params); err != nil {
		// The event store keeps what a dropped client missed; an error here
		// means the session is gone, and the final result still has it all.
		r.log.Debug("progress notification not sent", "stream", out.StreamID, "seq", out.Seq, "err", err)
	}
}

// valueJSON encodes v as DESIGN §7 maps values to JSON, with
// rtfs.OutputJSON: what JSON cannot hold (NaN, a function) is written in
// place (null, "#<fn f>"), the rest of the value kept. Past max bytes
// (Limits.OutputLimit; 0: none) it stops with a *rtfs.LimitError: a value
// that shares structure is written in full, however little memory it takes.
func valueJSON(v rtfs.Value, max int64) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage("null"), nil
	}
	return rtfs.OutputJSON(v, max)
}

// outputJSON is the JSON of an output for a notification and a result (see
// shownJSON).
func outputJSON(ev provider.Event, max int64) json.RawMessage {
	return shownJSON(ev.Output, max, fmt.Sprintf("output of stream %s, chunk %d", ev.StreamID, ev.Seq))
}

// shownJSON is the JSON of a stream's value (an output, its :result) inside
// a result or a notification: the value, or, past max bytes, an object
// {"error": ...} that names what is not there and the limit. The provider
// refuses an output past the limit before it publishes it (its stream ends
// in :error), so this is for the rare value that passes the provider's
// count and not this encoding.
func shownJSON(v rtfs.Value, max int64, what string) json.RawMessage {
	b, err := valueJSON(v, max)
	if err == nil {
		return b
	}
	note, _ := json.Marshal(map[string]string{"error": fmt.Sprintf("%s not sent: %v", what, err)})
	return note
}
