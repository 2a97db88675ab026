package mcp

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestCallCarriesTraceContext checks that a tools/call made under a span
// carries its W3C trace context in params._meta, beside the progress
// token, and that one made without a span carries none.
func TestCallCarriesTraceContext(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled,
	}))
	meta := func(ctx context.Context) map[string]any {
		b, err := encodeRequest(callID, methodToolsCall, callParams(ctx, "tool", json.RawMessage(`{}`), "tok"))
		if err != nil {
			t.Fatal(err)
		}
		var msg struct {
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Fatal(err)
		}
		return msg.Params.Meta
	}
	m := meta(ctx)
	if m["traceparent"] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" || m["progressToken"] != "tok" {
		t.Errorf("_meta under a span = %v", m)
	}
	if m := meta(context.Background()); len(m) != 1 || m["progressToken"] != "tok" {
		t.Errorf("_meta without a span = %v, want the progress token only", m)
	}
}
