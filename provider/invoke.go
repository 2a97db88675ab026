package provider

import (
	"context"
	"fmt"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/rtfs/types"
)

// A processor turns (state chunk metadata) into a result. Each stream owns
// one and calls it from its worker goroutine only, so implementations need
// not be safe for concurrent use.
type processor interface {
	// name is the processor's name for inspect output and messages.
	name() string
	// call runs the processor once. ctx ends when the stream is cancelled or
	// the provider closes. meta is nil when wantsMeta is false. The result
	// may live in storage the processor reuses (rtfs.Thread.ReuseResults):
	// it is valid until the next call, and the stream reads its entries
	// (which it may keep) but never keeps the map itself.
	call(ctx context.Context, state, chunk, meta rtfs.Value) (rtfs.Value, error)
	// wantsMeta reports whether the processor reads its metadata argument:
	// the worker builds the metadata map only for one that does.
	wantsMeta() bool
	// function is the RTFS function value the processor calls, nil for a
	// Go processor; a store keeps it when it cannot be named.
	function() rtfs.Value
	// letGo reports whether the last call let go of its chunk: the
	// processor's code never keeps its chunk argument
	// (rtfs.Closure.MayKeepParam) and the call did not suspend (a
	// suspension's continuation holds the arguments, and its host call may
	// keep them). The worker then reuses the chunk's map for a later chunk.
	letGo() bool
	// begin tells the processor which chunk its next call processes: its
	// :seq and its source's id, which the host calls it makes carry
	// (capabilities.Call.Seq, ChunkID, Index).
	begin(seq int64, id string)
}

// goProcessor is a processor written in Go, for tests and benchmarks.
type goProcessor struct {
	label string
	fn    func(state, chunk, meta rtfs.Value) (rtfs.Value, error)
}

func (g *goProcessor) name() string { return g.label }

func (g *goProcessor) wantsMeta() bool { return true }

func (g *goProcessor) function() rtfs.Value { return nil }

func (g *goProcessor) letGo() bool { return false }

func (g *goProcessor) begin(int64, string) {}

func (g *goProcessor) call(_ context.Context, state, chunk, meta rtfs.Value) (rtfs.Value, error) {
	return g.fn(state, chunk, meta)
}

// rtfsProcessor calls an RTFS function value with the globals of the program
// that started the stream, on a Thread of its own created on the first chunk.
// Host calls the function makes are served from caps, one at a time, and the
// function is resumed with each answer. A declared return type is checked on
// every result.
type rtfsProcessor struct {
	label   string
	fn      rtfs.Value
	globals *rtfs.Globals
	ret     types.Type
	limits  rtfs.Limits
	caps    *capabilities.Registry
	th      *rtfs.Thread
	noMeta  bool   // a (state chunk) processor: called without the metadata
	meta    bool   // a (state chunk metadata) processor whose code reads its metadata
	stream  string // the id of the stream it processes (set by newStream)

	// The chunk being processed (begin) and the host calls made for it so
	// far: a host call's identity (capabilities.Call.Seq, ChunkID, Index).
	seq     int64
	chunkID string
	calls   int

	keepsChunk bool // its code may keep its chunk argument
	suspended  bool // the last call suspended at a host call
}

func newRTFSProcessor(label string, fn rtfs.Value, g *rtfs.Globals, limits rtfs.Limits, caps *capabilities.Registry) *rtfsProcessor {
	p := &rtfsProcessor{label: label, fn: fn, globals: g, limits: limits, caps: caps}
	if cl, ok := fn.(*rtfs.Closure); ok {
		p.ret = cl.ReturnType()
		// A processor of two parameters (state chunk) gets no metadata.
		p.noMeta = !cl.Accepts(3) && cl.Accepts(2)
		p.meta = !p.noMeta && cl.ReadsParam(2)
		p.keepsChunk = cl.MayKeepParam(1)
	} else {
		p.meta, p.keepsChunk = true, true // a builtin: it may do anything
	}
	return p
}

func (p *rtfsProcessor) name() string { return p.label }

func (p *rtfsProcessor) wantsMeta() bool { return p.meta }

func (p *rtfsProcessor) function() rtfs.Value { return p.fn }

func (p *rtfsProcessor) letGo() bool { return !p.keepsChunk && !p.suspended }

func (p *rtfsProcessor) begin(seq int64, id string) { p.seq, p.chunkID, p.calls = seq, id, 0 }

func (p *rtfsProcessor) call(ctx context.Context, state, chunk, meta rtfs.Value) (rtfs.Value, error) {
	if p.th == nil {
		p.th = rtfs.NewThread(p.limits)
		p.th.ReuseResults(true) // the worker reads a result's entries and drops it
	}
	var out rtfs.Outcome
	var err error
	if p.noMeta {
		out, err = p.th.Call(ctx, p.globals, p.fn, state, chunk)
	} else {
		out, err = p.th.Call(ctx, p.globals, p.fn, state, chunk, meta)
	}
	p.suspended = out.Call != nil
	if out, err = capabilities.Drive(ctx, p.th, out, err, p.serve); err != nil {
		return nil, err
	}
	if p.ret != nil {
		if cerr := types.Check(p.ret, out.Value); cerr != nil {
			return nil, fmt.Errorf("result does not match the declared return type %s: %w", p.ret, cerr)
		}
	}
	return out.Value, nil
}

// serve performs the host call out is suspended at, from the stream's
// registry.
func (p *rtfsProcessor) serve(ctx context.Context, out rtfs.Outcome) (rtfs.Value, error) {
	hc := out.Call
	if p.caps == nil {
		return nil, &capabilities.Error{Capability: hc.Capability, Msg: "no capabilities are available to stream processors", Err: capabilities.ErrUnknown}
	}
	c := &capabilities.Call{ID: hc.Capability, Args: hc.Args, Pos: hc.Pos, Globals: out.Globals, Stream: p.stream,
		Seq: p.seq, ChunkID: p.chunkID, Index: p.calls}
	p.calls++
	return p.caps.Call(ctx, c)
}
