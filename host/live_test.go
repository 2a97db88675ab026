package host_test

import (
	"context"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/sse"
)

// T14, against the reference server started in-process on a free loopback
// port: the server URL comes from CCOS_MCP_STREAM_ENDPOINT, the stream runs
// over the real SSE transport, every reading of the weather dataset is
// processed once, and the terminal status event completes the stream (a
// clean end does not replay the dataset).
func TestLiveLocalServerOverSSE(t *testing.T) {
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h, err := host.New(host.Options{Streams: provider.Options{
		LookupEnv:  env(map[string]string{provider.EnvStreamEndpoint: srv.URL() + "/sse"}),
		Transports: transport.NewCatalog(sse.Kind()),
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	prog, err := rtfs.Compile("live.rtfs", []byte(`
(defn count-readings [state chunk meta]
  (let [city (get-in chunk [:chunk :city])]
    {:state {:count (inc (:count state)) :cities (conj (:cities state) city)}
     :output {:count (inc (:count state)) :seq (:seq chunk)}}))
(def handle (call :mcp.stream.start {:endpoint "weather.monitor.v1" :config {:interval_ms 1}
                                     :processor count-readings :initial-state {:count 0 :cities []}}))
(call :mcp.stream.await {:stream-id (:stream-id handle) :timeout-ms 20000})`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.Run(ctx, prog)
	if err != nil {
		t.Fatal(err)
	}
	ids := h.Provider().StreamIDs()
	if len(ids) != 1 {
		t.Fatalf("streams = %v", ids)
	}
	v, _ := h.Provider().Inspect(ids[0], provider.InspectOptions{})
	state := get(v, "current-state")
	cities, _ := get(state, "cities").(*rtfs.Vector)
	if num(get(state, "count")) != 6 || cities == nil || cities.Len() != 6 {
		t.Fatalf("state = %v, want the 6 readings once each", state)
	}
	if get(v, "status", "state") != rtfs.Keyword("completed") || get(v, "status", "end-reason") != rtfs.Keyword("source-ended") {
		t.Errorf("status = %v", get(v, "status"))
	}
	if !rtfs.Equal(res, get(v, "last-output")) || num(get(res, "count")) != 6 {
		t.Errorf("result = %v, last output = %v", res, get(v, "last-output"))
	}
	if get(v, "transport", "kind") != rtfs.Keyword("sse") || get(v, "transport", "task-active") != rtfs.False {
		t.Errorf("transport = %v", get(v, "transport"))
	}
}
