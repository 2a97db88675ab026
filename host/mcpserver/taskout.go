package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
)

// The outputs of a stream task, kept in the host's store as its stream
// gives them, so that the task's result lists them all, in order, also
// when serve restarted while the stream ran: the follower of the task
// (taskrun.go) stores each output as its stream publishes it, keyed by the
// :seq of its chunk, and the result is read back from the store when the
// stream ends. A chunk processed again after a restart (its commit was lost
// in the crash) gives its output under the same :seq: it is stored once.
// Without a store a task lives as long as the process, and its result is
// the follower's own list (call.go).
//
// Outputs are published before the provider commits their chunk, and
// stored by another committer: a crash in the instant between the
// provider's commit of a chunk and the commit of its output here would
// leave the output out. The result never hides that: it compares the list
// with the stream's own count of its outputs, which is exact across a
// crash, and counts what is missing in outputs-lost (docs/mcp-server.md,
// "Tasks").

// The store record of a task's output: its JSON as a result shows it.
const (
	kindTaskOutput persistence.RecordKind = 35
	taskOutVersion                        = 1
	taskOutPrefix                         = "mcp/taskout/"
)

// taskOutKey is the key of task id's output of chunk seq: the outputs of a
// task sort by seq.
func taskOutKey(id string, seq int64) []byte {
	return fmt.Appendf(taskOutPrefixOf(id), "%016x", uint64(seq))
}

// taskOutPrefixOf is the prefix of every output key of task id (a stream
// id never contains a NUL byte).
func taskOutPrefixOf(id string) []byte { return []byte(taskOutPrefix + id + "\x00") }

// parseTaskOutKey splits an output key into the task id and the seq.
func parseTaskOutKey(k []byte) (id string, seq int64, ok bool) {
	rest, found := bytes.CutPrefix(k, []byte(taskOutPrefix))
	i := bytes.IndexByte(rest, 0)
	if !found || i < 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(string(rest[i+1:]), 16, 64)
	if err != nil {
		return "", 0, false
	}
	return string(rest[:i]), int64(n), true
}

// taskOutputs is what a task's follower knows of the task's stored
// outputs. keep is called on the stream's goroutine (a subscription's
// Receive), the rest on the follower's; its methods are safe for
// concurrent use.
type taskOutputs struct {
	t   *tasks
	id  string
	max int // outputs kept at most (Options.MaxBufferedOutputs)

	mu   sync.Mutex
	kept int   // outputs stored
	last int64 // the :seq of the last one stored; -1: none
}

// outputsOf reads what the store holds of task id's outputs; nil without
// a store.
func (t *tasks) outputsOf(ctx context.Context, id string) *taskOutputs {
	if t.store == nil {
		return nil
	}
	o := &taskOutputs{t: t, id: id, max: t.s.opts.MaxBufferedOutputs, last: -1}
	err := t.store.Scan(ctx, taskOutPrefixOf(id), func(k, _ []byte) error {
		if _, seq, ok := parseTaskOutKey(k); ok {
			o.kept++
			o.last = max(o.last, seq)
		}
		return nil
	})
	if err != nil {
		t.s.log.Error("mcp tasks: reading a task's stored outputs", "task", id, "err", err)
	}
	return o
}

// watch subscribes keep to stream id's events (to those of the stream to
// come, when it has not started or been recovered here yet); the caller
// closes the subscription, or the stream does when it stops here. A nil o
// (no store) watches nothing and returns nil, which Close takes.
func (o *taskOutputs) watch(id string) *provider.Subscription {
	if o == nil {
		return nil
	}
	sub, err := o.t.s.prov.Subscribe(id, provider.SubscribeOptions{Pending: true, Receive: o.keep})
	if err != nil {
		return nil // the provider is closed
	}
	return sub
}

// keep stores the output ev carries, unless the task keeps as many as it
// may, or an output of its chunk is stored already (the chunk was processed
// again after a restart). The store is written behind; list waits for it.
func (o *taskOutputs) keep(ev provider.Event) {
	if o == nil || ev.Kind != provider.EventOutput {
		return
	}
	o.mu.Lock()
	if ev.Seq <= o.last || o.kept >= o.max {
		o.mu.Unlock()
		return
	}
	o.kept++
	o.last = ev.Seq
	o.mu.Unlock()
	var b persistence.Batch
	out := outputJSON(ev, o.t.s.opts.Limits.OutputLimit())
	b.Put(taskOutKey(o.id, ev.Seq), persistence.EncodeRecord(kindTaskOutput, taskOutVersion, out))
	err := o.t.com.Submit(context.Background(), &b, func(err error) {
		if err != nil {
			o.t.s.log.Error("mcp tasks: storing a task's output", "task", o.id, "seq", ev.Seq, "err", err)
		}
	})
	if errors.Is(err, persistence.ErrClosed) {
		// The server has closed, and its host runs the stream until it
		// stops it: stored at once, on the stream's goroutine, which the
		// host waits for before it closes the store.
		err = o.t.store.Commit(context.Background(), &b)
	}
	if err != nil {
		o.t.s.log.Error("mcp tasks: storing a task's output", "task", o.id, "seq", ev.Seq, "err", err)
	}
}

// list returns the task's stored outputs, in the order of their chunks,
// once every output kept so far is stored.
func (o *taskOutputs) list(ctx context.Context) ([]json.RawMessage, error) {
	if err := o.t.com.Flush(ctx); err != nil {
		return nil, err
	}
	outs := []json.RawMessage{}
	err := o.t.store.Scan(ctx, taskOutPrefixOf(o.id), func(k, v []byte) error {
		_, payload, err := persistence.DecodeRecord(k, v, kindTaskOutput, taskOutVersion)
		if err != nil {
			return err
		}
		outs = append(outs, bytes.Clone(payload))
		return nil
	})
	return outs, err
}

// result is the result of the task's stream, ended in st, with the
// outputs the store holds: res, the result the follower c made of what it
// saw itself, with its outputs and their counts replaced by the stored
// list and the stream's own count of its outputs.
func (o *taskOutputs) result(ctx context.Context, res streamResult) streamResult {
	outs, err := o.list(ctx)
	if err != nil {
		o.t.s.log.Error("mcp tasks: reading a task's stored outputs", "task", o.id, "err", err)
		return res // what this process saw
	}
	count := int64(len(outs))
	if in, err := o.t.s.prov.Info(res.StreamID, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true}); err == nil {
		count = max(count, in.Stats.Outputs)
	}
	res.Outputs, res.OutputCount, res.Truncated, res.Lost = outs, count, 0, 0
	switch missing := count - int64(len(outs)); {
	case missing <= 0:
	case len(outs) >= o.max:
		res.Truncated = missing // past the bound, and perhaps lost: not told apart
	default:
		res.Lost = missing
		o.t.s.log.Error("mcp tasks: outputs of a task were lost in a crash", "task", o.id, "lost", missing)
	}
	return res
}

// dropOutputs deletes the stored outputs of task id (its result holds
// them once it has ended), in batches a store commit takes.
func (t *tasks) dropOutputs(ctx context.Context, id string) {
	if t.store == nil {
		return
	}
	if err := t.com.Flush(ctx); err != nil {
		return // closed: the next load drops them
	}
	t.deleteKeys(ctx, taskOutPrefixOf(id), func([]byte) bool { return true })
}

// deleteKeys deletes the keys under prefix that drop accepts, at most
// deleteBatch to a commit.
func (t *tasks) deleteKeys(ctx context.Context, prefix []byte, drop func(k []byte) bool) {
	var keys [][]byte
	err := t.store.Scan(ctx, prefix, func(k, _ []byte) error {
		if drop(k) {
			keys = append(keys, bytes.Clone(k))
		}
		return nil
	})
	for len(keys) > 0 && err == nil {
		n := min(len(keys), deleteBatch)
		var b persistence.Batch
		for _, k := range keys[:n] {
			b.Delete(k)
		}
		err = t.store.Commit(ctx, &b)
		keys = keys[n:]
	}
	if err != nil {
		t.s.log.Error("mcp tasks: deleting stored outputs", "err", err)
	}
}

// deleteBatch bounds the deletes of one commit.
const deleteBatch = 256
