package sse

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/transporttest"
)

// TestTransportSuite runs the transport conformance suite on loopback SSE
// servers: n events then the terminal status event, events written as fast
// as the socket takes them, and a 404.
func TestTransportSuite(t *testing.T) { transporttest.Run(t, suiteHarness()) }

// BenchmarkCancel: how long Run takes to return after a cancel.
func BenchmarkCancel(b *testing.B) { transporttest.BenchmarkCancel(b, suiteHarness()) }

func suiteHarness() transporttest.Harness {
	serve := func(t testing.TB, h http.HandlerFunc) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	spec := func(url string) transport.Spec {
		return transport.Spec{StreamID: "suite", Endpoint: "ep", HTTP: transport.HTTP{ServerURL: url + "/sse"}}
	}
	head := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
	}
	return transporttest.Harness{
		Finite: func(t testing.TB, n int) transporttest.Source {
			url := serve(t, func(w http.ResponseWriter, r *http.Request) {
				head(w)
				for i := range n {
					fmt.Fprintf(w, "id: %d\ndata: %d\n\n", i, i)
				}
				fmt.Fprint(w, "event: status\ndata: {\"status\":\"complete\"}\n\n")
			})
			return transporttest.Source{Transport: new(Transport), Spec: spec(url)}
		},
		Endless: func(t testing.TB) transporttest.Source {
			var produced atomic.Int64
			url := serve(t, func(w http.ResponseWriter, r *http.Request) {
				head(w)
				for i := 0; r.Context().Err() == nil; i++ {
					if _, err := fmt.Fprintf(w, "id: %d\ndata: %d\n\n", i, i); err != nil {
						return
					}
					w.(http.Flusher).Flush()
					produced.Add(1)
				}
			})
			return transporttest.Source{Transport: new(Transport), Spec: spec(url),
				Produced: func() int { return int(produced.Load()) }}
		},
		Failing: func(t testing.TB) transporttest.Source {
			url := serve(t, http.NotFound)
			return transporttest.Source{Transport: new(Transport), Spec: spec(url)}
		},
		Index: func(c transport.Chunk) (int, bool) {
			i, err := strconv.Atoi(string(c.Data))
			return i, err == nil
		},
	}
}
