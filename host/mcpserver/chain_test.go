package mcpserver

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/transport"
	tmcp "github.com/rtfshost/rtfshost/transport/mcp"
)

// TestChainFromReferenceServer: the server's stream reads the reference
// server's counter.v1 tool over MCP Streamable HTTP, so MCP progress goes
// in, through an RTFS processor, and out as MCP progress (here over go-sdk's
// in-memory transport, which the Server serves as well as HTTP).
func TestChainFromReferenceServer(t *testing.T) {
	src := localserver.New(localserver.Options{})
	if err := src.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	h, err := host.New(host.Options{
		Streams: provider.Options{Transports: transport.NewCatalog(tmcp.StreamableKind())},
		Stdout:  io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv, err := New(Options{Host: h, Delivery: &everyOutput})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	program := `
(defn step [state chunk meta]
  (if-let [m (:message chunk)]
    {:state (inc state) :output {:n (:n (:chunk m)) :progress (:progress chunk)}}
    {:state state}))`
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.mcp.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	log := newProgressLog()
	cs := connectTo(ctx, t, ct, log)
	params := &mcp.CallToolParams{Name: ToolStart, Arguments: map[string]any{
		"program": program, "processor": "step", "endpoint": "counter.v1", "transport": "mcp",
		"server-url": src.URL() + "/mcp", "config": map[string]any{"limit": 3, "interval_ms": 0}, "initial-state": 0,
	}}
	params.SetProgressToken("chain")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	got := decode(t, res)
	if got["state"] != "completed" || got["end-reason"] != "source-ended" || got["output-count"] != 3.0 {
		t.Errorf("result = %v", got)
	}
	notes := log.waitFor(t, 3)
	for i, n := range notes {
		if want := fmt.Sprintf(`{"n":%d,"progress":%d}`, i+1, i+1); n.Message != want || n.Progress != float64(i+1) {
			t.Errorf("notification %d: %q progress %v, want %q", i, n.Message, n.Progress, want)
		}
	}
}

// chunkLog is a transport.Sink that keeps what it is given.
type chunkLog struct{ chunks []transport.Chunk }

func (c *chunkLog) Deliver(_ context.Context, ch transport.Chunk) error {
	c.chunks = append(c.chunks, ch)
	return nil
}

func (c *chunkLog) Reconnecting(int, time.Duration, error) {}

// TestOwnClientSpeaksModernWithTasks: rtfshost's :mcp client against
// rtfshost serve speaks 2026-07-28 (it declares the tasks extension), so
// rtfs.eval answers with a task, which the client polls to its result.
func TestOwnClientSpeaksModernWithTasks(t *testing.T) {
	f := newFixture(t, Options{})
	spec := transport.Spec{StreamID: "own", Endpoint: ToolEval, Arguments: []byte(`{"program":"(+ 40 2)"}`), RetryAttempts: 3,
		HTTP: transport.HTTP{ServerURL: f.ts.URL + PathStreamable, Client: f.ts.Client()}}
	sink := &chunkLog{}
	if err := (tmcp.Streamable{}).Run(context.Background(), spec, "", sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var events []string
	for _, c := range sink.chunks {
		events = append(events, c.Event)
	}
	if len(events) < 2 || events[0] != "task" || events[len(events)-1] != "result" {
		t.Fatalf("events %v", events)
	}
	last := string(sink.chunks[len(sink.chunks)-1].Data)
	if !strings.Contains(last, `"structuredContent":{"value":42}`) || !strings.Contains(last, `"isError":false`) {
		t.Fatalf("result %s", last)
	}
}
