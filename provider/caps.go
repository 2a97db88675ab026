package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// The ids of the stream capabilities.
const (
	CapStart   = "mcp.stream.start"
	CapInspect = "mcp.stream.inspect"
	CapPause   = "mcp.stream.pause"
	CapResume  = "mcp.stream.resume"
	CapCancel  = "mcp.stream.cancel"
	CapStatus  = "mcp.stream.status"
	CapAwait   = "mcp.stream.await"
)

// Capabilities returns the stream capabilities (docs/streams.md), served by p:
// :mcp.stream.start, :mcp.stream.inspect, :mcp.stream.pause,
// :mcp.stream.resume, :mcp.stream.cancel, :mcp.stream.status and
// :mcp.stream.await (which parks the caller until the stream ends). The host
// registers them.
func (p *Provider) Capabilities() []capabilities.Capability {
	h := capHandlers{p}
	idOnly := &capabilities.Schema{Type: "map", Keys: []capabilities.Key{streamIDKey()}}
	return []capabilities.Capability{
		{ID: CapStart, Description: "Start a stream whose processor is called for every chunk; returns a handle at once.",
			Input: startSchema(p.opts.Transports), Effects: []string{":network", ":streaming"}, Handler: h.capStart},
		{ID: CapInspect, Description: "Inspect one stream, or all streams without :stream-id.",
			Input: inspectSchema(), Handler: h.capInspect},
		{ID: CapPause, Description: "Pause a stream.", Input: idOnly, Handler: h.capControl(p.Pause)},
		{ID: CapResume, Description: "Resume a paused stream; retry the chunk a failed one is held on, or with :skip true set it aside as a dead letter.",
			Input: resumeSchema(), Handler: h.capResume},
		{ID: CapCancel, Description: "Cancel a stream.", Input: idOnly, Handler: h.capControl(p.Cancel)},
		{ID: CapStatus, Description: "A stream's status.", Input: idOnly, Handler: h.capControl(p.Status)},
		{ID: CapAwait, Description: "Wait for a stream to end; returns its result.",
			Input: awaitSchema(), Handler: h.capAwait},
	}
}

// capHandlers serve the stream capabilities of p: each turns a call's
// arguments into a call of p's Go API, and its result into an answer.
type capHandlers struct{ p *Provider }

func streamIDKey() capabilities.Key {
	return capabilities.Key{Name: "stream-id", Type: "string", Required: true, Doc: "the stream's id"}
}

// startSchema is the input of :mcp.stream.start: the keys every stream
// has, then the keys of the catalog's transports.
func startSchema(cat *transport.Catalog) *capabilities.Schema {
	keys := []capabilities.Key{
		{Name: "endpoint", Type: "string", Doc: "path under the server URL, absolute URL, or MCP tool name (what it means depends on the transport)"},
		{Name: "processor", Type: "fn|symbol|string", Required: true, Doc: "called as (processor state chunk metadata)"},
		{Name: "initial-state", Type: "any", Doc: "the first state (default {})"},
		{Name: "config", Type: "map", Doc: "query parameters (SSE) or tool arguments (MCP)"},
		{Name: "queue-capacity", Type: "int", Doc: "queue bound (default 32)"},
		{Name: "transport", Type: "keyword|string", Doc: transportDoc(cat)},
		{Name: "server-url", Type: "string", Doc: "overrides the resolved server URL"},
		{Name: "stream-id", Type: "string", Doc: "the stream's id (default generated)"},
		{Name: "idle-timeout-ms", Type: "int", Doc: "reconnect a source silent this long (default 60000; 0 disables)"},
		{Name: "delivery", Type: "map", Doc: "how outputs reach subscribers: {:normal {:interval-ms 200 :max-batch 10} :low {:interval-ms 1000 :max-batch 20}}"},
		{Name: "record", Type: "string", Doc: "write every chunk the stream receives to this file (NDJSON, one chunk a line; :transport :replay plays it)"},
		{Name: "milestones", Type: "vector|list", Doc: "the steps a result names with :milestone: [{:id :scan :weight 0.2 :estimated-ms 15000} ...]"},
		{Name: "on-error", Type: "map", Doc: "what a processor failure does: {:retry 3 :backoff-ms 200 :then :hold} (:then :hold, the default, keeps the stream failed until resumed; :skip sets the chunk aside as a dead letter; :end ends it in :error)"},
	}
	for _, u := range cat.Keys() {
		keys = append(keys, capabilities.Key{Name: u.Name, Type: u.Type, Doc: u.Doc + " (:" + strings.Join(u.Transports, ", :") + ")"})
	}
	return &capabilities.Schema{Type: "map", Keys: keys}
}

// transportDoc lists the catalog's transports for the :transport key.
func transportDoc(cat *transport.Catalog) string {
	names := cat.Names()
	if len(names) == 0 {
		return "the transport (this host has none)"
	}
	return ":" + strings.Join(names, " :") + "; default: chosen from the URL"
}

func inspectSchema() *capabilities.Schema {
	return &capabilities.Schema{Type: "map", Optional: true, Keys: []capabilities.Key{
		{Name: "stream-id", Type: "string", Doc: "one stream; all streams if absent"},
		{Name: "include-state", Type: "bool", Doc: "include :current-state (default true)"},
		{Name: "include-initial-state", Type: "bool", Doc: "include :initial-state (default true)"},
		{Name: "include-queue", Type: "bool", Doc: "include :queue (default true)"},
	}}
}

func awaitSchema() *capabilities.Schema {
	return &capabilities.Schema{Type: "map", Keys: []capabilities.Key{
		streamIDKey(),
		{Name: "timeout-ms", Type: "int", Doc: "give up after this many milliseconds"},
	}}
}

// argMap returns the single map argument (validated by the schema), or nil.
func argMap(c *capabilities.Call) *rtfs.Map {
	if len(c.Args) == 0 {
		return nil
	}
	m, _ := c.Args[0].(*rtfs.Map)
	return m
}

func field(m *rtfs.Map, name string) rtfs.Value {
	v, ok := capabilities.Field(m, name)
	if !ok {
		return rtfs.Nil
	}
	return v
}

func stringField(m *rtfs.Map, name string) string {
	if v := field(m, name); v != rtfs.Nil {
		return rtfs.TextOf(v)
	}
	return ""
}

// WithStreamID returns the arguments of a :mcp.stream.start call with a
// :stream-id, and that id: args as they are when their map names one,
// else the map with a fresh id (NewStreamID, for its :endpoint). Arguments
// of another shape, or a :stream-id that is not a non-empty string, come
// back as they are with id "" (the capability reports them). A host that
// follows the streams a program starts (the CLI, the MCP server) calls it
// before the start is served, so that it knows each stream's id before
// the stream's first event.
func (p *Provider) WithStreamID(args []rtfs.Value) ([]rtfs.Value, string) {
	if len(args) != 1 {
		return args, ""
	}
	m, ok := args[0].(*rtfs.Map)
	if !ok {
		return args, ""
	}
	if v, ok := capabilities.Field(m, "stream-id"); ok {
		if s, ok := v.(rtfs.String); ok && s != "" {
			return args, string(s)
		}
		return args, ""
	}
	id := p.NewStreamID(stream.StreamName(stringField(m, "endpoint"), stringField(m, "command"), stringField(m, "transport")))
	return []rtfs.Value{m.Assoc(rtfs.Keyword("stream-id"), rtfs.String(id))}, id
}

func (h capHandlers) capStart(ctx context.Context, c *capabilities.Call) (capabilities.Answer, error) {
	m := argMap(c)
	req := StartRequest{
		Context:      ctx,
		Endpoint:     stringField(m, "endpoint"),
		Processor:    field(m, "processor"),
		Globals:      c.Globals,
		InitialState: field(m, "initial-state"),
		Transport:    stringField(m, "transport"),
		ServerURL:    stringField(m, "server-url"),
		StreamID:     stringField(m, "stream-id"),
		Record:       stringField(m, "record"),
		Journal:      c.Journal,
	}
	if cfg, ok := field(m, "config").(*rtfs.Map); ok {
		// It becomes JSON arguments and query parameters: bounded as an
		// output is, whatever structure it shares.
		if err := rtfs.CheckOutputSize(cfg, h.p.opts.Limits.OutputLimit()); err != nil {
			return capabilities.Answer{}, &capabilities.Error{Capability: CapStart, Key: "config", Msg: err.Error()}
		}
		req.Config = cfg
	}
	for _, u := range h.p.opts.Transports.Keys() {
		v := field(m, u.Name)
		if v == rtfs.Nil {
			continue
		}
		b, err := rtfs.AppendJSON(nil, v, rtfs.EncodeOptions{MaxBytes: h.p.opts.Limits.OutputLimit()})
		if err != nil {
			return capabilities.Answer{}, &capabilities.Error{Capability: CapStart, Key: u.Name, Msg: err.Error()}
		}
		if req.TransportKeys == nil {
			req.TransportKeys = make(map[string]json.RawMessage)
		}
		req.TransportKeys[u.Name] = b
	}
	if n, ok := field(m, "queue-capacity").(rtfs.Int); ok {
		req.QueueCapacity = int(n)
		if req.QueueCapacity <= 0 || int64(req.QueueCapacity) != int64(n) {
			return capabilities.Answer{}, &capabilities.Error{Capability: CapStart, Key: "queue-capacity", Msg: fmt.Sprintf("must be a positive int, got %d", n)}
		}
	}
	if n, ok := field(m, "idle-timeout-ms").(rtfs.Int); ok {
		switch {
		case n < 0:
			return capabilities.Answer{}, &capabilities.Error{Capability: CapStart, Key: "idle-timeout-ms", Msg: fmt.Sprintf("must be 0 (no idle timeout) or a positive number of milliseconds, got %d", n)}
		case n == 0:
			req.IdleTimeout = -1
		default:
			req.IdleTimeout = time.Duration(n) * time.Millisecond
		}
	}
	if v := field(m, "on-error"); v != rtfs.Nil {
		pol, err := ParseErrorPolicy(v)
		if err != nil {
			return capabilities.Answer{}, &capabilities.Error{Capability: CapStart, Key: "on-error", Msg: err.Error()}
		}
		req.OnError = &pol
	}
	if err := parseDeliveryKeys(m, &req); err != nil {
		var ke *stream.KeyError
		errors.As(err, &ke)
		return capabilities.Answer{}, &capabilities.Error{Capability: CapStart, Key: ke.Key, Msg: ke.Err.Error()}
	}
	id, err := h.p.Start(req)
	if err != nil {
		var ke *stream.KeyError
		if errors.As(err, &ke) {
			return capabilities.Answer{}, &capabilities.Error{Capability: CapStart, Key: ke.Key, Msg: ke.Err.Error()}
		}
		return capabilities.Answer{}, err
	}
	return capabilities.Now(stream.StartAnswer(id, req.Endpoint)), nil
}

func (h capHandlers) capInspect(_ context.Context, c *capabilities.Call) (capabilities.Answer, error) {
	m := argMap(c)
	opts := InspectOptions{
		OmitState:        field(m, "include-state") == rtfs.False,
		OmitInitialState: field(m, "include-initial-state") == rtfs.False,
		OmitQueue:        field(m, "include-queue") == rtfs.False,
	}
	id := stringField(m, "stream-id")
	if id == "" {
		return capabilities.Now(h.p.Summary(opts)), nil
	}
	v, err := h.p.Inspect(id, opts)
	if err != nil {
		return capabilities.Answer{}, &capabilities.Error{Capability: CapInspect, Key: "stream-id", Msg: err.Error()}
	}
	return capabilities.Now(v), nil
}

func (h capHandlers) capControl(op func(context.Context, string) (Status, error)) capabilities.Handler {
	return func(ctx context.Context, c *capabilities.Call) (capabilities.Answer, error) {
		st, err := op(ctx, stringField(argMap(c), "stream-id"))
		if err != nil {
			return capabilities.Answer{}, &capabilities.Error{Capability: c.ID, Key: "stream-id", Err: err}
		}
		return capabilities.Now(StatusValue(st)), nil
	}
}

// resumeSchema is the input of :mcp.stream.resume.
func resumeSchema() *capabilities.Schema {
	return &capabilities.Schema{Type: "map", Keys: []capabilities.Key{streamIDKey(),
		{Name: "skip", Type: "bool", Doc: "a failed stream sets the chunk it is held on aside as a dead letter and goes on (default false: the chunk is retried)"}}}
}

// capResume serves :mcp.stream.resume: Resume, or Skip with :skip true.
func (h capHandlers) capResume(ctx context.Context, c *capabilities.Call) (capabilities.Answer, error) {
	op := h.p.Resume
	if field(argMap(c), "skip") == rtfs.True {
		op = h.p.Skip
	}
	return h.capControl(op)(ctx, c)
}

func (h capHandlers) capAwait(_ context.Context, c *capabilities.Call) (capabilities.Answer, error) {
	m := argMap(c)
	id := stringField(m, "stream-id")
	if _, err := h.p.lookup(id); err != nil && h.p.opts.Cluster == nil {
		return capabilities.Answer{}, &capabilities.Error{Capability: CapAwait, Key: "stream-id", Msg: err.Error()}
	}
	var timeout time.Duration
	if n, ok := field(m, "timeout-ms").(rtfs.Int); ok {
		if n < 0 {
			return capabilities.Answer{}, &capabilities.Error{Capability: CapAwait, Key: "timeout-ms", Msg: fmt.Sprintf("must not be negative, got %d", n)}
		}
		timeout = time.Duration(n) * time.Millisecond
	}
	return capabilities.Later(func(ctx context.Context) (rtfs.Value, error) {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		v, err := h.p.Await(ctx, id)
		if errors.Is(err, context.DeadlineExceeded) && timeout > 0 {
			return nil, fmt.Errorf("stream %q did not end within %d ms: %w", id, timeout.Milliseconds(), err)
		}
		return v, err
	}), nil
}

// parseDeliveryKeys reads the :delivery and :milestones of a start map into
// req. The error is a *KeyError.
func parseDeliveryKeys(m *rtfs.Map, req *StartRequest) error {
	if v := field(m, "delivery"); v != rtfs.Nil {
		d, err := ParseDelivery(v)
		if err != nil {
			return &stream.KeyError{Key: "delivery", Err: err}
		}
		req.Delivery = &d
	}
	if v := field(m, "milestones"); v != rtfs.Nil {
		ms, err := ParseMilestones(v)
		if err != nil {
			return &stream.KeyError{Key: "milestones", Err: err}
		}
		req.Milestones = ms
	}
	return nil
}

// ParseStartDelivery reads the "delivery" and "milestones" of a start
// request given as JSON (an MCP tool's arguments; either may be nil) into
// req, as :mcp.stream.start reads them.
func ParseStartDelivery(delivery, milestones json.RawMessage, req *StartRequest) error {
	var kvs []rtfs.Value
	for _, kv := range []struct {
		name string
		raw  json.RawMessage
	}{{"delivery", delivery}, {"milestones", milestones}} {
		if kv.raw == nil {
			continue
		}
		v, err := rtfs.FromJSON(kv.raw)
		if err != nil {
			return &stream.KeyError{Key: kv.name, Err: err}
		}
		kvs = append(kvs, rtfs.Keyword(kv.name), v)
	}
	return parseDeliveryKeys(rtfs.MapOf(kvs...), req)
}
