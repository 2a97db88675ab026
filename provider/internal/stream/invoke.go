package stream

import (
	"context"
	"fmt"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/rtfs/types"
)

// A Processor turns (state chunk metadata) into a result. Each stream owns
// one and calls it from its worker goroutine only, so implementations need
// not be safe for concurrent use.
type Processor interface {
	// Name is the processor's name for inspect output and messages.
	Name() string
	// Call runs the processor once. ctx ends when the stream is cancelled or
	// the provider closes. meta is nil when WantsMeta is false. The result
	// may live in storage the processor reuses (rtfs.Thread.ReuseResults):
	// it is valid until the next call, and the stream reads its entries
	// (which it may keep) but never keeps the map itself.
	Call(ctx context.Context, state, chunk, meta rtfs.Value) (rtfs.Value, error)
	// WantsMeta reports whether the processor reads its metadata argument:
	// the worker builds the metadata map only for one that does.
	WantsMeta() bool
	// Function is the RTFS function value the processor calls, nil for a
	// Go processor; a store keeps it when it cannot be named.
	Function() rtfs.Value
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

// GoProcessor is a processor written in Go, for tests and benchmarks.
type GoProcessor struct {
	Label string
	Fn    func(state, chunk, meta rtfs.Value) (rtfs.Value, error)
}

func (g *GoProcessor) Name() string { return g.Label }

func (g *GoProcessor) WantsMeta() bool { return true }

func (g *GoProcessor) Function() rtfs.Value { return nil }

func (g *GoProcessor) letGo() bool { return false }

func (g *GoProcessor) begin(int64, string) {}

func (g *GoProcessor) Call(_ context.Context, state, chunk, meta rtfs.Value) (rtfs.Value, error) {
	return g.Fn(state, chunk, meta)
}

// RTFSProcessor calls an RTFS function value with the globals of the program
// that started the stream, on a Thread of its own created on the first chunk.
// Host calls the function makes are served from caps, one at a time, and the
// function is resumed with each answer. A declared return type is checked on
// every result.
type RTFSProcessor struct {
	label   string
	fn      rtfs.Value
	globals *rtfs.Globals
	ret     types.Type
	limits  rtfs.Limits
	caps    *capabilities.Registry
	th      *rtfs.Thread
	noMeta  bool   // a (state chunk) processor: called without the metadata
	meta    bool   // a (state chunk metadata) processor whose code reads its metadata
	Stream  string // the id of the stream it processes (set by NewStream)

	// The chunk being processed (begin) and the host calls made for it so
	// far: a host call's identity (capabilities.Call.Seq, ChunkID, Index).
	seq     int64
	chunkID string
	calls   int

	KeepsChunk bool // its code may keep its chunk argument
	suspended  bool // the last call suspended at a host call
}

func NewRTFSProcessor(label string, fn rtfs.Value, g *rtfs.Globals, limits rtfs.Limits, caps *capabilities.Registry) *RTFSProcessor {
	p := &RTFSProcessor{label: label, fn: fn, globals: g, limits: limits, caps: caps}
	if cl, ok := fn.(*rtfs.Closure); ok {
		p.ret = cl.ReturnType()
		// A processor of two parameters (state chunk) gets no metadata.
		p.noMeta = !cl.Accepts(3) && cl.Accepts(2)
		p.meta = !p.noMeta && cl.ReadsParam(2)
		p.KeepsChunk = cl.MayKeepParam(1)
	} else {
		p.meta, p.KeepsChunk = true, true // a builtin: it may do anything
	}
	return p
}

func (p *RTFSProcessor) Name() string { return p.label }

func (p *RTFSProcessor) WantsMeta() bool { return p.meta }

func (p *RTFSProcessor) Function() rtfs.Value { return p.fn }

func (p *RTFSProcessor) letGo() bool { return !p.KeepsChunk && !p.suspended }

func (p *RTFSProcessor) begin(seq int64, id string) { p.seq, p.chunkID, p.calls = seq, id, 0 }

func (p *RTFSProcessor) Call(ctx context.Context, state, chunk, meta rtfs.Value) (rtfs.Value, error) {
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
func (p *RTFSProcessor) serve(ctx context.Context, out rtfs.Outcome) (rtfs.Value, error) {
	hc := out.Call
	if p.caps == nil {
		return nil, &capabilities.Error{Capability: hc.Capability, Msg: "no capabilities are available to stream processors", Err: capabilities.ErrUnknown}
	}
	c := &capabilities.Call{ID: hc.Capability, Args: hc.Args, Pos: hc.Pos, Globals: out.Globals, Stream: p.Stream,
		Seq: p.seq, ChunkID: p.chunkID, Index: p.calls}
	p.calls++
	return p.caps.Call(ctx, c)
}

// CheckShape catches a processor of the wrong shape at start, not on the
// first chunk. (state chunk) processors are called without the metadata.
func CheckShape(fn rtfs.Value, label string) error {
	if cl, ok := fn.(*rtfs.Closure); ok && !cl.Accepts(3) && !cl.Accepts(2) {
		return fmt.Errorf("%s cannot be called as (processor state chunk metadata) or (processor state chunk)", label)
	}
	return nil
}

// ResolveProcessor accepts a function value, or a symbol or string naming a
// function among the globals, and returns the function and its name.
func ResolveProcessor(v rtfs.Value, g *rtfs.Globals) (rtfs.Value, string, error) {
	var name string
	switch v := v.(type) {
	case nil, rtfs.NilType:
		return nil, "", fmt.Errorf("a processor function is required")
	case *rtfs.Closure:
		if n := v.Name(); n != "" {
			return v, n, nil
		}
		return v, "anonymous fn", nil
	case *rtfs.Builtin:
		return v, v.Name(), nil
	case rtfs.Symbol:
		name = string(v)
	case rtfs.String:
		name = string(v)
	default:
		return nil, "", fmt.Errorf("expected a function, a symbol or a string, got %s", KindOf(v))
	}
	if g == nil {
		return nil, "", fmt.Errorf("processor %q is given by name, but there is no program to look it up in", name)
	}
	fn, ok := g.Get(name)
	if !ok {
		return nil, "", fmt.Errorf("no function named %q is defined in %s", name, g.Program().Name())
	}
	if fn.Kind().String() != "fn" {
		return nil, "", fmt.Errorf("%q is %s, not a function", name, KindOf(fn))
	}
	return fn, name, nil
}
