package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// tracker turns the JSON-RPC messages of one tools/call into chunks: it
// filters progress by token, drops regressions and replays, and delivers the
// final result. It is owned by one Run.
type tracker struct {
	st       callState
	total    float64 // the last delivered progress's total, if it had one
	hasTotal bool
	sink     transport.Sink
	streamID string
	log      *slog.Logger
	taskSeen string // the status and message of the task last delivered (modern.go)
}

// sinkError marks an error returned by Sink.Deliver, so that Run can tell the
// host's refusal from a transport failure.
type sinkError struct{ err error }

func (e *sinkError) Error() string { return e.err.Error() }
func (e *sinkError) Unwrap() error { return e.err }

// handle processes the messages of one SSE event or JSON body. When hasID is
// true, eventID becomes the call's last event id once the event's last
// message is processed; the chunks of earlier messages of a batch keep the
// previous id in their cursor, so a restart after one of them replays the
// whole event and the progress filter drops what was already delivered.
func (t *tracker) handle(ctx context.Context, msgs []rpcMessage, eventID string, hasID bool) (done bool, err error) {
	for i := range msgs {
		if hasID && i == len(msgs)-1 {
			t.st.Event = eventID
		}
		m := &msgs[i]
		switch {
		case m.isResponseTo(t.st.Req):
			return true, t.result(ctx, m)
		case m.Method == methodProgress:
			if err := t.progress(ctx, m.Params); err != nil {
				return false, err
			}
		default:
			t.debug("ignoring message", "method", m.Method)
		}
	}
	if hasID {
		t.st.Event = eventID
	}
	return false, nil
}

func (t *tracker) progress(ctx context.Context, params json.RawMessage) error {
	var p progressParams
	if err := json.Unmarshal(params, &p); err != nil {
		return t.protocolError(fmt.Errorf("malformed notifications/progress params: %w", err))
	}
	if !t.ownToken(p.ProgressToken) {
		t.debug("ignoring progress for another token")
		return nil
	}
	if p.Progress == nil {
		return t.protocolError(errors.New("notifications/progress without a numeric progress value"))
	}
	if t.st.HasProgress && *p.Progress <= t.st.Progress {
		t.debug("dropping non-increasing progress", "progress", *p.Progress, "last", t.st.Progress)
		return nil
	}
	t.st.Progress, t.st.HasProgress = *p.Progress, true
	t.total, t.hasTotal = 0, p.Total != nil && *p.Total > 0
	if t.hasTotal {
		t.total = *p.Total
	}
	return t.deliver(ctx, "progress", params)
}

// ownToken reports whether raw, a JSON progress token, is this call's.
func (t *tracker) ownToken(raw json.RawMessage) bool {
	tok := t.st.Token
	if len(raw) == len(tok)+2 && raw[0] == '"' && string(raw[1:len(raw)-1]) == tok {
		return true // the common case: echoed without escapes
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == tok
}

// progressComplete reports whether the last delivered progress reached its
// total.
func (t *tracker) progressComplete() bool {
	return t.hasTotal && t.st.Progress >= t.total
}

func (t *tracker) result(ctx context.Context, m *rpcMessage) error {
	if m.Error != nil {
		return &transport.Error{StreamID: t.streamID, Op: "tools/call", Permanent: true, Err: m.Error}
	}
	if task, raw, ok := taskOf(m.Result); ok {
		t.st.Task, t.taskSeen = task.TaskID, task.Status+"\x00"+task.StatusMessage
		if err := t.deliver(ctx, "task", raw); err != nil {
			return err
		}
		return &transport.Error{StreamID: t.streamID, Op: "tools/call", Permanent: true,
			Err: fmt.Errorf("%w: task %s (only :transport :mcp follows tasks)", errTaskCreated, task.TaskID)}
	}
	var r toolResult
	if err := json.Unmarshal(m.Result, &r); err != nil {
		return t.protocolError(fmt.Errorf("malformed tools/call result: %w", err))
	}
	if r.IsError {
		return &transport.Error{StreamID: t.streamID, Op: "tools/call", Permanent: true,
			Err: fmt.Errorf("%w: %s", ErrToolFailed, r.text())}
	}
	t.st.Done = true
	return t.deliver(ctx, "result", m.Result)
}

func (t *tracker) deliver(ctx context.Context, event string, data []byte) error {
	t.st.Chunks++
	c := transport.Chunk{Data: data, Event: event, ID: t.st.encode(), ReceivedAt: time.Now()}
	if err := t.sink.Deliver(ctx, c); err != nil {
		return &sinkError{err}
	}
	return nil
}

func (t *tracker) protocolError(err error) error {
	return &transport.Error{StreamID: t.streamID, Op: "read", Permanent: true, Err: err}
}

func (t *tracker) debug(msg string, args ...any) {
	if t.log != nil {
		t.log.Debug(msg, append(args, "stream", t.streamID)...)
	}
}

// isToolOutcome reports whether err is the tool's own failure (isError or a
// JSON-RPC error): the call is over, so its session can be ended.
func isToolOutcome(err error) bool {
	var re *rpcError
	return errors.Is(err, ErrToolFailed) || errors.As(err, &re)
}
