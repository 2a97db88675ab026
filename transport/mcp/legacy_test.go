package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rtfshost/rtfshost/transport"
)

// TestLegacyConnectFailures covers the legacy handshake against a
// hand-written server: a bad first event, an endpoint on another origin,
// and a 503 that is retried before the call is sent.
func TestLegacyConnectFailures(t *testing.T) {
	cases := []struct {
		name      string
		firstFail int // GETs answered 503 before the stream works
		first     string
		want      string
	}{
		{"first event not endpoint", 0, "event: message\ndata: {}\n\n", `first SSE event is "message"`},
		{"endpoint on another origin", 0, ": hello\n\nevent: endpoint\ndata: http://evil.example/post\n\n", "not on the SSE URL's origin"},
		{"retries then origin check", 2, "event: endpoint\ndata: //evil.example/post\n\n", "not on the SSE URL's origin"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			var gets atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if int(gets.Add(1)) <= tc.firstFail {
					http.Error(w, "busy", http.StatusServiceUnavailable)
					return
				}
				sseHeaders(w)
				fmt.Fprint(w, tc.first)
			}))
			defer srv.Close()
			spec := transport.Spec{StreamID: "l", Endpoint: "tool", RetryAttempts: 3, HTTP: transport.HTTP{ServerURL: srv.URL + "/sse", Client: srv.Client()}}
			sink := &recSink{}
			err := (LegacySSE{policy: fastPolicy}).Run(context.Background(), spec, "", sink)
			if !transport.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if got := int(gets.Load()); got != tc.firstFail+1 || len(sink.delays) != tc.firstFail {
				t.Fatalf("%d GETs, %d reconnect waits", got, len(sink.delays))
			}
		})
	}
}

// TestLegacyDropAfterCall: the GET stream ends after the call was sent; the
// call cannot be resumed, so Run fails for good without a second call.
func TestLegacyDropAfterCall(t *testing.T) {
	leakCheck(t)
	s := newSDKServer(t, sdkConfig{legacy: true})
	spec := s.spec("count", `{"n":5}`)
	spec.HTTP.ServerURL = s.http.URL + "/sse"
	// Events on the GET: endpoint, initialize's response, then progress.
	spec.HTTP.Client = &http.Client{Transport: &cutter{base: s.http.Client().Transport, after: 4, onGET: true}}
	sink := &recSink{}
	err := (LegacySSE{policy: fastPolicy}).Run(context.Background(), spec, "", sink)
	if !transport.IsPermanent(err) || !strings.Contains(err.Error(), "cannot be resumed") {
		t.Fatalf("err = %v", err)
	}
	if n := s.log.count("POST tools/call"); n != 1 || len(sink.chunks) != 2 {
		t.Fatalf("tools/call sent %d times, %d chunks", n, len(sink.chunks))
	}
}
