package observe

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// CallInfo describes an MCP request for StartCall.
type CallInfo struct {
	Method    string // the JSON-RPC method, "tools/call"
	Tool      string // the tool's name
	SessionID string // Mcp-Session-Id; "" without a session
	RequestID string // the JSON-RPC id as JSON text ("7", "\"a\""); "" when unknown
	// Meta is the request's params._meta: its "traceparent" and
	// "tracestate" (W3C trace context) make the call's span a child of the
	// caller's.
	Meta map[string]any
}

// The outcomes of an MCP call, the values of the outcome label.
const (
	OutcomeOK        = "ok"        // a result without isError
	OutcomeError     = "error"     // a result with isError
	OutcomeInvalid   = "invalid"   // a JSON-RPC error: bad arguments, unknown tool
	OutcomeCancelled = "cancelled" // the client cancelled, or the server closed
	OutcomeRejected  = "rejected"  // refused by a limit (too many calls in flight)
)

// A Call is an MCP call being observed: its span and its start. End it
// once. A nil *Call (from a nil Observer) does nothing.
type Call struct {
	o     *Observer
	tool  string
	start time.Time
	span  trace.Span
}

// StartCall starts observing an MCP call. The returned context carries the
// call's span (named "tools/call TOOL", kind server, with the attributes of
// the OpenTelemetry MCP semantic conventions: mcp.method.name,
// gen_ai.tool.name, gen_ai.operation.name, mcp.session.id,
// jsonrpc.request.id), whose parent is the trace context in info.Meta, if
// any. A nil Observer returns ctx and a nil *Call.
func (o *Observer) StartCall(ctx context.Context, info CallInfo) (context.Context, *Call) {
	if o == nil {
		return ctx, nil
	}
	c := &Call{o: o, tool: info.Tool, start: time.Now()}
	if !o.traced {
		return ctx, c
	}
	carrier := propagation.MapCarrier{}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v, ok := info.Meta[k].(string); ok {
			carrier[k] = v
		}
	}
	ctx = propagation.TraceContext{}.Extract(ctx, carrier)
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", info.Method),
		attribute.String("gen_ai.tool.name", info.Tool),
		attribute.String("gen_ai.operation.name", "execute_tool"),
	}
	if info.SessionID != "" {
		attrs = append(attrs, attribute.String("mcp.session.id", info.SessionID))
	}
	if info.RequestID != "" {
		attrs = append(attrs, attribute.String("jsonrpc.request.id", info.RequestID))
	}
	name := info.Method
	if info.Tool != "" {
		name += " " + info.Tool
	}
	ctx, c.span = o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx, c
}

// End counts the call under outcome (one of the Outcome constants) and
// ends its span; msg, for an outcome other than ok, is the error's text.
func (c *Call) End(outcome, msg string) {
	if c == nil {
		return
	}
	c.o.mcpCalls.WithLabelValues(c.tool, outcome).Inc()
	c.o.mcpDuration.WithLabelValues(c.tool).Observe(time.Since(c.start).Seconds())
	if c.span == nil {
		return
	}
	if outcome != OutcomeOK {
		c.span.SetAttributes(attribute.String("error.type", outcome))
		c.span.SetStatus(codes.Error, msg)
	}
	c.span.End()
}

// CountLimit counts a limit hit of kind; a nil Observer does nothing.
func (o *Observer) CountLimit(kind string) {
	if o != nil {
		o.LimitHit(kind)
	}
}
