package stream

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/rtfs"
)

// A dry run drives a processor over chunks given in advance, without a
// source, a queue, workers or a store: what `rtfshost test`'s
// run-processor and the dashboard's playground do. Each chunk goes the way
// a stream's does: a recorded chunk's bytes are decoded as Deliver decodes
// them (DecodeChunkInto), a control chunk carries its own action, the metadata
// is built by the stream's metaBuilder, the processor is called as a
// stream calls it (RTFSProcessor, under the same budgets and the same
// output limit), and its result is read by ReadResult, as applyLocked
// reads it. What is a stream's alone is the order: a pause holds the
// ordinary chunks back until a control chunk resumes the stream (control
// chunks are taken while paused, in order); no time passes, so a pause
// with :resume-after-ms resumes before the next chunk.

// A DryChunk is one chunk of a dry run: either the value the processor
// receives (Value), or the bytes a source sent (Data), decoded as a
// stream decodes them. The other fields are its metadata.
type DryChunk struct {
	Value rtfs.Value // nil: decode Data
	Data  []byte
	// Event is the SSE event name ("progress" for MCP progress), ID the
	// chunk's cursor (default its number), FD a process chunk's stream
	// ("stdout", "stderr"), ReceivedAt when it arrived (zero: the Unix
	// epoch, so that runs repeat exactly).
	Event, ID, FD string
	ReceivedAt    time.Time
}

// A DryRunRequest is what DryRun drives.
type DryRunRequest struct {
	// Processor is a function value, or a symbol or string naming one in
	// Globals (as :processor of a start).
	Processor rtfs.Value
	Globals   *rtfs.Globals
	// InitialState is the first state; nil means {}.
	InitialState rtfs.Value
	Chunks       []DryChunk
	// Limits bound each processor call, as Options.Limits does a
	// stream's.
	Limits rtfs.Limits
	// Capabilities serves the host calls the processor makes; nil refuses
	// them.
	Capabilities *capabilities.Registry
	// StreamID and Endpoint are the metadata's :stream-id and :endpoint
	// (default "dry-run" and "").
	StreamID, Endpoint string
}

// A DryStep is one chunk processed: the chunk as the processor received
// it, the state before and after, the action applied ("" when the result
// named none and the chunk is not a control chunk), the output (nil for
// none), and Err when the processor failed on it or its result could not
// be applied (the run is held there: StateFailed).
type DryStep struct {
	Seq         int64
	Chunk       rtfs.Value
	StateBefore rtfs.Value
	State       rtfs.Value
	Action      string
	Output      rtfs.Value
	Err         error
}

// A DryResult is how a dry run went: its steps in the order the chunks were
// processed, and the status, end reason, message and result the stream
// would end with; or the state it would be held in, with Waiting chunks
// held back: StatePaused when the chunks ran out while it was paused,
// StateFailed (no end reason, the error as Message) when the processor
// failed on the chunk of the last step, as a stream under the default
// :on-error policy is held on it (its repairs, a resume or a skip, are a
// stream's: a dry run goes no further). Dropped counts the chunks a cancel
// or a completion left unprocessed.
type DryResult struct {
	Steps   []DryStep
	Status  State
	Reason  string
	Message string
	Result  rtfs.Value
	Waiting int
	Dropped int
}

// DryRun drives req's processor over its chunks and returns how the stream
// would go. An error is returned only when the run cannot start (no such
// processor, one of the wrong shape) or ctx ends (its message says so);
// the processor's own failures are in the result, as a stream's are. It
// runs on the caller's goroutine and keeps nothing.
func DryRun(ctx context.Context, req DryRunRequest) (*DryResult, error) {
	fn, label, err := ResolveProcessor(req.Processor, req.Globals)
	if err == nil {
		err = CheckShape(fn, label)
	}
	if err != nil {
		return nil, fmt.Errorf("processor: %w", err)
	}
	proc := NewRTFSProcessor(label, fn, req.Globals, req.Limits, req.Capabilities)
	id := req.StreamID
	if id == "" {
		id = "dry-run"
	}
	proc.Stream = id
	mb := NewMetaBuilder(rtfs.String(id), rtfs.String(req.Endpoint))
	var dec rtfs.JSONDecoder
	pending := make([]Item, len(req.Chunks))
	for i, c := range req.Chunks {
		v := c.Value
		if v == nil {
			v = DecodeChunkInto(&dec, c.Data, c.Event, nil)
		}
		at := c.ReceivedAt
		if at.IsZero() {
			at = time.UnixMilli(0)
		}
		it := Item{Chunk: v, Event: c.Event, ID: c.ID, Fd: c.FD, Received: at, Seq: int64(i), Ctrl: ControlAction(v)}
		if it.ID == "" {
			it.ID = strconv.Itoa(i + 1)
		}
		pending[i] = it
	}
	var state rtfs.Value = rtfs.MapOf()
	if req.InitialState != nil {
		state = req.InitialState
	}
	run := &DryResult{Status: StateActive}
	var lastOut rtfs.Value
	end := func(st State, reason, msg string) (*DryResult, error) {
		run.Status, run.Reason, run.Message, run.Dropped = st, reason, msg, len(pending)
		return run, nil
	}
	// failed holds the run on the chunk of the last step, as a stream's
	// default :on-error policy holds the stream: the chunks after it wait.
	failed := func(msg string) (*DryResult, error) {
		run.Status, run.Message, run.Waiting = StateFailed, msg, len(pending)
		return run, nil
	}
	paused := false
	for len(pending) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("dry run stopped after %d chunks: %w", len(run.Steps), context.Cause(ctx))
		}
		next := 0
		if paused {
			next = -1
			for i := range pending {
				if pending[i].Ctrl != ActNone {
					next = i
					break
				}
			}
			if next < 0 {
				run.Status, run.Reason, run.Waiting = StatePaused, "processor", len(pending)
				return run, nil
			}
		}
		it := pending[next]
		pending = append(pending[:next], pending[next+1:]...)
		var meta rtfs.Value = rtfs.Nil
		if proc.WantsMeta() {
			meta = mb.Build(&it)
		}
		step := DryStep{Seq: it.Number(), Chunk: it.Chunk, StateBefore: state, State: state}
		res, err := CallGuarded(ctx, proc, state, &it, meta)
		if err == nil {
			err = CheckOutput(res, req.Limits.OutputLimit())
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("dry run stopped on chunk %d: %w", it.Number(), context.Cause(ctx))
			}
			pe := &ProcessorError{Processor: label, Chunk: it.Number(), Err: err}
			step.Err = pe
			run.Steps = append(run.Steps, step)
			return failed(pe.Error())
		}
		m, ok := res.(*rtfs.Map)
		if !ok {
			msg := ShapeError(label, it.Number(), res)
			step.Err = fmt.Errorf("%s", msg)
			run.Steps = append(run.Steps, step)
			return failed(msg)
		}
		r, d, _, _, err := ReadResult(m, it.Ctrl)
		if err != nil {
			msg := fmt.Sprintf("processor %s on chunk %d: %v", label, it.Number(), err)
			step.Err = fmt.Errorf("%s", msg)
			run.Steps = append(run.Steps, step)
			return failed(msg)
		}
		if r.State != nil {
			state = r.State
		}
		var out rtfs.Value
		if v := r.Output; v != nil && v != rtfs.Nil {
			out, lastOut = v, v
		}
		step.State, step.Output = state, out
		if d.Act != ActNone {
			step.Action = ActionNames[d.Act]
		}
		run.Steps = append(run.Steps, step)
		switch d.Act {
		case ActPause:
			paused = !d.Timed
		case ActResume:
			paused = false
		case ActCancel:
			return end(StateCancelled, d.Reason, "")
		case ActComplete:
			run.Result = Completion(out, lastOut)
			return end(StateCompleted, d.Reason, "")
		}
	}
	if paused {
		run.Status, run.Reason = StatePaused, "processor"
		return run, nil
	}
	run.Result = Completion(nil, lastOut)
	return end(StateCompleted, "source-ended", "")
}
