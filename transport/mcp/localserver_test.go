package mcp

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/transport"
)

// TestAgainstLocalServer runs both transports against the project's
// reference server, including a resume after its injected drop.
func TestAgainstLocalServer(t *testing.T) {
	leakCheck(t)
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cases := []struct {
		name string
		tr   transport.StreamTransport
		url  string
		drop bool
	}{
		{"streamable", Streamable{policy: fastPolicy}, srv.URL() + "/mcp", false},
		{"streamable with a drop", Streamable{policy: fastPolicy}, srv.URL() + "/mcp?drop_after=2&drop_times=1", true},
		{"legacy", LegacySSE{policy: fastPolicy}, srv.URL() + "/mcp-sse", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sink := &recSink{}
			spec := transport.Spec{StreamID: "w", Endpoint: "weather.monitor.v1", Arguments: []byte(`{"limit":5,"interval_ms":0}`), RetryAttempts: 8, HTTP: transport.HTTP{ServerURL: tc.url}}
			if err := tc.tr.Run(context.Background(), spec, "", sink); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := sink.progressValues(t); !slices.Equal(got, wantProgress(5)) || sink.last().Event != "result" {
				t.Fatalf("progress %v, events %v", got, sink.events())
			}
			if reconnected := len(sink.delays) > 0; reconnected != tc.drop {
				t.Fatalf("reconnects %v, want a reconnect: %v", sink.delays, tc.drop)
			}
			var p struct {
				Message string `json:"message"`
			}
			if err := json.Unmarshal(sink.chunks[0].Data, &p); err != nil || !json.Valid([]byte(p.Message)) {
				t.Fatalf("first chunk %s: message is not the dataset's JSON (%v)", sink.chunks[0].Data, err)
			}
		})
	}
}
