package mcp

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/rtfshost/rtfshost/transport"
)

// countSink counts chunks and keeps nothing.
type countSink struct{ n int }

func (s *countSink) Deliver(context.Context, transport.Chunk) error { s.n++; return nil }

const benchEvents = 1000

// progressBody is an SSE body of n progress events for token and a result.
func progressBody(token string, n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "event: message\nid: s_%d\ndata: %s\n\n", i, progressMsg(token, float64(i)))
	}
	fmt.Fprintf(&b, "event: message\nid: s_%d\ndata: %s\n\n", n+1, resultMsg("done", false))
	return b.Bytes()
}

// BenchmarkReadSSE measures the client's per-chunk cost without a network:
// SSE parsing, JSON-RPC decoding, the progress filter, cursor encoding and
// Deliver. One op is a call of 1000 progress events plus the result.
func BenchmarkReadSSE(b *testing.B) {
	body := progressBody("tok", benchEvents)
	sink := &countSink{}
	c := &conn{streamID: "bench", maxEvent: transport.DefaultMaxEventBytes}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := &streamRun{conn: c, retry: fastPolicy.Start("mcp", &transport.Spec{}, sink),
			tr: tracker{sink: sink, st: callState{Kind: kindStreamable, Req: callID, Token: "tok"}}}
		done, err := r.readSSE(context.Background(), bytes.NewReader(body), "bench")
		if !done || err != nil {
			b.Fatalf("done %v, err %v", done, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(benchEvents+1)), "ns/chunk")
}

// BenchmarkStreamableLoopback runs whole calls (initialize, tools/call with
// 1000 progress events over SSE, DELETE) against a loopback server.
func BenchmarkStreamableLoopback(b *testing.B) {
	f := newFakeServer(b, &fakeServer{version: version20251125, call: func(w http.ResponseWriter, tok string) {
		sseHeaders(w)
		w.Write(progressBody(tok, benchEvents))
	}})
	spec := transport.Spec{StreamID: "bench", Endpoint: "tool", HTTP: transport.HTTP{ServerURL: f.http.URL + "/mcp", Client: f.http.Client()}}
	sink := &countSink{}
	b.ReportAllocs()
	for b.Loop() {
		if err := (Streamable{}).Run(context.Background(), spec, "", sink); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*(benchEvents+1))/b.Elapsed().Seconds(), "chunks/s")
}

// BenchmarkCallOverhead measures one whole call of one progress event and
// the result against a loopback server, per revision: a 2025-11-25 session
// (server/discover refused, initialize, initialized, the standalone GET,
// tools/call, DELETE) against 2026-07-28 (server/discover, tools/call).
func BenchmarkCallOverhead(b *testing.B) {
	for _, era := range []struct {
		name   string
		modern bool
	}{{"session", false}, {"modern", true}} {
		b.Run(era.name, func(b *testing.B) {
			f := newFakeServer(b, &fakeServer{version: version20251125, modern: era.modern, call: func(w http.ResponseWriter, tok string) {
				sseHeaders(w)
				w.Write(progressBody(tok, 1))
			}})
			spec := transport.Spec{StreamID: "bench", Endpoint: "tool", HTTP: transport.HTTP{ServerURL: f.http.URL + "/mcp", Client: f.http.Client()}}
			sink := &countSink{}
			b.ReportAllocs()
			for b.Loop() {
				if err := (Streamable{}).Run(context.Background(), spec, "", sink); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
