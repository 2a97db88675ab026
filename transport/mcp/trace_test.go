package mcp

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestCallCarriesTraceContext checks on the wire that the requests of a
// Run made under a span carry its W3C trace context in params._meta,
// beside the progress token, in both eras, and that a Run without a span
// sends none.
func TestCallCarriesTraceContext(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	spanCtx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled,
	}))
	const want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, era := range []struct {
		name string
		cfg  sdkConfig
	}{
		{"2026-07-28", sdkConfig{version: version20260728, stateless: true}},
		{"2025-11-25", sdkConfig{version: version20251125}},
	} {
		t.Run(era.name, func(t *testing.T) {
			leakCheck(t)
			s := newSDKServer(t, era.cfg)
			if err := (Streamable{policy: fastPolicy}).Run(spanCtx, s.spec("count", `{"n":1}`), "", &recSink{}); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":1}`), "", &recSink{}); err != nil {
				t.Fatalf("Run: %v", err)
			}
			calls := s.log.postsOf(methodToolsCall)
			m := calls[0].meta(t)
			if m["traceparent"] != want || m["progressToken"] == nil {
				t.Errorf("tools/call _meta under a span = %v", m)
			}
			for _, d := range s.log.postsOf(methodDiscover)[:1] {
				if got := d.meta(t)["traceparent"]; got != want {
					t.Errorf("server/discover traceparent = %v", got)
				}
			}
			if m := calls[1].meta(t); m["traceparent"] != nil || m["progressToken"] == nil {
				t.Errorf("tools/call _meta without a span = %v, want no trace context", m)
			}
		})
	}
}
