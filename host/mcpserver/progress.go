package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
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
	metaCoalesced = "rtfshost/coalesced" // outputs folded into another of their :kind
	metaOutputs   = "rtfshost/outputs"   // every output a notification carries; rtfs.eval results: every output of the call
	metaPriority  = "rtfshost/priority"  // the priority of a notification's outputs, unless normal
	metaDropped   = "rtfshost/dropped"   // low outputs of the stream dropped since its previous notification
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
	//lint:ignore SA1019 logging is deprecated from MCP 2026-07-28; we serve the revisions before it
	Log(context.Context, *mcp.LoggingMessageParams) error
}

// A reporter keeps the outputs of one call for its result (up to a bound)
// and, with a progress token, turns them into notifications/progress
// messages on the call's stream, as the call's provider.Outbox delivers
// them (docs/streams.md, "Delivery"): one notification per batch. It is
// used by one goroutine.
type reporter struct {
	ctx      context.Context // the call's context: it routes notifications to the call's stream
	session  peer            // nil: no notifications
	token    any             // the progress token; nil: no progress notifications
	max      int
	maxBytes int64 // bound on one output's JSON (Limits.OutputLimit); 0: none
	log      *slog.Logger
	obs      *observe.Observer // counts the first output left out; nil: none

	outputs   []output
	count     int64 // outputs seen
	truncated int64 // outputs not kept because of max

	box       *provider.Outbox // nil without a token
	batches   []provider.Batch
	note      notifier
	sent      int64  // notifications sent
	coalesced int64  // outputs folded into another of their kind
	dropped   int64  // low outputs left out of the notifications
	cut       string // why the notifications stopped; "" while they go on
	// params is the notification flush sends, reused: go-sdk encodes it
	// before NotifyProgress returns (jsonrpc2.NewNotification) and keeps
	// nothing of it, so its _meta map is filled again rather than made
	// anew for every notification.
	params mcp.ProgressNotificationParams
}

// add records the output of ev for the result and hands ev to the Outbox.
// An output is encoded to JSON only when it is kept or notified, and once.
func (r *reporter) add(ev provider.Event) {
	var enc json.RawMessage
	if ev.Kind == provider.EventOutput {
		r.count++
		keep := len(r.outputs) < r.max
		if !keep {
			r.truncated++
			if r.truncated == 1 {
				r.obs.CountLimit("buffered-outputs")
			}
		}
		if !keep && r.box == nil {
			return
		}
		enc = outputJSON(ev, r.maxBytes)
		if keep {
			r.outputs = append(r.outputs, output{StreamID: ev.StreamID, Seq: ev.Seq, Output: enc})
		}
	}
	if r.box != nil {
		r.box.AddEncoded(ev, enc)
	}
}

// behind tells the Outbox how many immediate and normal outputs evs, a
// burst about to be added in parts, holds: a client that fell that far
// behind is cut off.
func (r *reporter) behind(evs []provider.Event) {
	if r.box == nil || r.cut != "" {
		return
	}
	n := 0
	for i := range evs {
		if evs[i].Kind == provider.EventOutput && evs[i].Priority != provider.PriorityLow {
			n++
		}
	}
	r.box.Behind(n)
}

// due returns when the next notification is due, if one is held.
func (r *reporter) due() (time.Time, bool) {
	if r.box == nil || r.cut != "" {
		return time.Time{}, false
	}
	return r.box.Next()
}

// flush sends the notifications due at now; with all, every one held.
// Once the client is cut off it sends nothing (the Outbox then holds
// nothing, and counts what it is given as dropped).
func (r *reporter) flush(now time.Time, all bool) {
	if r.box == nil || r.cut != "" {
		return
	}
	if all {
		r.batches = r.box.Drain(r.batches[:0])
	} else {
		r.batches = r.box.Take(now, r.batches[:0])
	}
	for i := range r.batches {
		r.send(&r.batches[i])
	}
	clear(r.batches) // no outputs kept alive
	if err := r.box.Err(); err != nil {
		r.stop(err)
	}
}

// send sends the notification of one batch.
func (r *reporter) send(b *provider.Batch) {
	r.dropped += b.Dropped
	if b.End != nil {
		return // the call's result follows
	}
	params := &r.params
	r.coalesced += r.note.fill(params, b)
	params.ProgressToken = r.token
	r.sent++
	if err := r.session.NotifyProgress(r.ctx, params); err != nil {
		// The event store keeps what a dropped client missed; an error here
		// means the session is gone, and the final result still has it all.
		r.log.Debug("progress notification not sent", "stream", b.StreamID, "err", err)
	}
}

// stop ends the call's notifications: its client fell too far behind. It
// is told once, as a warning; the result says so too.
func (r *reporter) stop(err error) {
	r.cut = err.Error()
	r.obs.CountLimit("pending-notifications")
	if r.session == nil {
		return
	}
	//lint:ignore SA1019 logging is deprecated from MCP 2026-07-28; we serve the revisions before it
	_ = r.session.Log(r.ctx, &mcp.LoggingMessageParams{Level: "warning", Logger: "rtfshost",
		Data: "progress notifications stopped: " + r.cut + "; the call's result still lists every output"})
}

// A notifier fills the progress notifications of one call from the
// batches of its Outbox: progress, total and message (docs/mcp-server.md,
// "Progress notifications"). It is used by one goroutine.
type notifier struct {
	// base is the progress of the notifications sent before this notifier
	// (a call followed again after a restart of the server).
	base float64
	last float64 // the progress of the last notification; it only rises
	any  bool    // a notification was sent (last is its progress)
	// streams holds the latest progress of each stream of the call that
	// has one.
	streams  map[string]*provider.ProgressInfo
	outs     []batchOutput // reused by fill
	maxBytes int64         // bound on an output's JSON not encoded before (Limits.OutputLimit)
}

// batchOutput is one output of a notification's rtfshost/outputs.
type batchOutput struct {
	Seq    int64           `json:"seq"`
	Output json.RawMessage `json:"output"`
	Count  int64           `json:"count,omitempty"` // outputs it stands for, when more than one
	Kind   string          `json:"kind,omitempty"`
}

// fill sets p from batch b and returns the outputs b coalesced. p.Meta is
// reused; the rest of p is overwritten.
func (n *notifier) fill(p *mcp.ProgressNotificationParams, b *provider.Batch) (coalesced int64) {
	if p.Meta == nil {
		p.Meta = make(mcp.Meta, 6)
	}
	m := p.Meta
	for _, k := range [...]string{metaOutputs, metaPriority, metaDropped} {
		delete(m, k)
	}
	if b.Progress != nil {
		if n.streams == nil {
			n.streams = make(map[string]*provider.ProgressInfo)
		}
		n.streams[b.StreamID] = b.Progress
	}
	// progress: the work done of the call's streams that report one, out
	// of their total; else the outputs so far. It must rise with every
	// notification: when it would not, it rises by the least amount.
	progress, total := n.base+float64(b.Through), 0.0
	if len(n.streams) > 0 {
		progress = 0
		for _, pr := range n.streams {
			progress += pr.Done
			if pr.Total != nil {
				total += *pr.Total
			}
		}
	}
	if n.any && progress <= n.last {
		progress = math.Nextafter(n.last, math.Inf(1))
	}
	n.last, n.any = progress, true
	p.Progress, p.Total, p.Message = progress, total, ""
	m[metaStream] = b.StreamID
	n.outs = n.outs[:0]
	many := len(b.Outputs) > 1
	for _, o := range b.Outputs {
		enc := json.RawMessage(o.Encoded)
		if enc == nil {
			enc = shownJSON(o.Value, n.maxBytes, fmt.Sprintf("output of stream %s, chunk %d", b.StreamID, o.Seq))
		}
		bo := batchOutput{Seq: o.Seq, Output: enc, Kind: o.Kind}
		if o.Count > 1 {
			bo.Count, coalesced, many = o.Count, coalesced+o.Count-1, true
		}
		n.outs = append(n.outs, bo)
	}
	if k := len(n.outs); k > 0 {
		last := n.outs[k-1]
		p.Message, m[metaSeq] = string(last.Output), last.Seq
	} else {
		m[metaSeq] = noSeq
	}
	if b.Progress != nil && b.Progress.Message != "" {
		p.Message, many = b.Progress.Message, len(n.outs) > 0
	}
	if many {
		m[metaOutputs] = n.outs
	}
	m[metaCoalesced] = coalesced
	if b.Priority != provider.PriorityNormal {
		m[metaPriority] = b.Priority.String()
	}
	if b.Dropped > 0 {
		m[metaDropped] = b.Dropped
	}
	return coalesced
}

// noSeq is the rtfshost/seq of a notification without an output, boxed
// once.
var noSeq any = int64(-1)

// valueJSON encodes v as docs/rtfs-values.md maps values to JSON, with
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
// The words that name the output are built only when it is not sent.
func outputJSON(ev provider.Event, max int64) json.RawMessage {
	b, err := valueJSON(ev.Output, max)
	if err == nil {
		return b
	}
	return notSent(fmt.Sprintf("output of stream %s, chunk %d", ev.StreamID, ev.Seq), err)
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
	return notSent(what, err)
}

// notSent is the object that stands for a value (named by what) that err
// kept from being encoded.
func notSent(what string, err error) json.RawMessage {
	note, _ := json.Marshal(map[string]string{"error": fmt.Sprintf("%s not sent: %v", what, err)})
	return note
}
