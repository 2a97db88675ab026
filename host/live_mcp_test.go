package host_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mcp"
)

// The same dataset as an MCP tool over Streamable HTTP and legacy HTTP+SSE
// (the transport chosen from the server URL's path): each progress
// notification is a chunk with :event "progress" whose JSON :message is
// decoded, and the tool's result is the last chunk, with :event "result".
func TestLiveLocalServerOverMCP(t *testing.T) {
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, path := range []string{"/mcp", "/mcp-sse"} {
		h, err := host.New(host.Options{Streams: provider.Options{
			LookupEnv:  env(map[string]string{provider.EnvStreamEndpoint: srv.URL() + path}),
			Transports: transport.NewCatalog(mcp.StreamableKind(), mcp.LegacyKind()),
		}})
		if err != nil {
			t.Fatal(err)
		}
		prog, err := rtfs.Compile("mcp.rtfs", []byte(`
(defn collect [state chunk meta]
  (let [ev (:event meta)]
    {:state (update state (if (= ev "result") :results :progress) conj chunk)
     :output ev}))
(def handle (call :mcp.stream.start {:endpoint "weather.monitor.v1" :config {:interval_ms 1}
                                     :processor collect :initial-state {:progress [] :results []}}))
(call :mcp.stream.await {:stream-id (:stream-id handle) :timeout-ms 20000})`))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := h.Run(ctx, prog)
		cancel()
		if err != nil {
			h.Close()
			t.Fatalf("%s: %v", path, err)
		}
		v, _ := h.Provider().Inspect(h.Provider().StreamIDs()[0], provider.InspectOptions{})
		h.Close()
		progress, _ := get(v, "current-state", "progress").(*rtfs.Vector)
		results, _ := get(v, "current-state", "results").(*rtfs.Vector)
		if progress == nil || progress.Len() != 6 || results == nil || results.Len() != 1 || res != rtfs.String("result") {
			t.Fatalf("%s: result %v, state %v", path, res, get(v, "current-state"))
		}
		if city, ok := get(progress.Index(0), "message", "chunk", "city").(rtfs.String); !ok || city == "" {
			t.Errorf("%s: progress :message not decoded: %v", path, progress.Index(0))
		}
		if _, ok := get(results.Index(0), "content").(*rtfs.Vector); !ok {
			t.Errorf("%s: result chunk = %v", path, results.Index(0))
		}
		// The cursor carries the MCP session id: inspect shows it shortened.
		if c, _ := get(v, "cursor").(rtfs.String); len(c) > 30 || !strings.Contains(string(c), "…") {
			t.Errorf("%s: inspect shows the cursor %q, want it shortened", path, c)
		}
		if get(v, "transport", "kind") != rtfs.Keyword(path[1:]) {
			t.Errorf("%s: transport = %v", path, get(v, "transport"))
		}
	}
}
