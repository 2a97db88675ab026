//lint:file-ignore SA1019 this file tests logging (notifications/message), deprecated from MCP 2026-07-28 but served for the revisions before it

package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// messageLog records the notifications/message a client receives.
type messageLog struct {
	mu   sync.Mutex
	list []string // "logger: data"
}

func (m *messageLog) handler(_ context.Context, req *mcp.LoggingMessageRequest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.list = append(m.list, fmt.Sprintf("%s %s: %v", req.Params.Level, req.Params.Logger, req.Params.Data))
}

func (m *messageLog) snapshot() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.list...)
}

func connectLogging(ctx context.Context, t *testing.T, f *fixture, version string, log *messageLog) *mcp.ClientSession {
	t.Helper()
	return f.connectWith(ctx, version, &mcp.ClientOptions{LoggingMessageHandler: log.handler})
}

// connectWith connects a go-sdk client with opts, of revision version
// ("": go-sdk's newest), to the fixture's Streamable HTTP endpoint.
func (f *fixture) connectWith(ctx context.Context, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	f.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.ts.URL + PathStreamable}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		f.t.Fatalf("connect: %v", err)
	}
	f.t.Cleanup(func() { closeWithin(f.t, cs) })
	return cs
}

// printingProgram prints itself, and starts a stream whose processor
// prints every chunk.
const printingProgram = `
(defn step [state chunk meta]
  (println "chunk" (:value chunk))
  (if (= (:kind chunk) "end") {:state state :action :complete} {:state (inc state)}))
(println "hello from" "eval" 42)
(call :mcp.stream.start {:transport :mock :endpoint "x" :stream-id "p1" :processor step :initial-state 0})
(:result (call :mcp.stream.await {:stream-id "p1"}))`

// TestPrintedLinesReachTheCaller: what a program run by rtfs.eval and the
// processor of the stream it starts print reaches the calling client as
// notifications/message, at the level it asked for (logging/setLevel on
// 2025-11-25, the request's _meta on 2026-07-28), and not the server's
// stdout; a client that asked for no level gets none.
func TestPrintedLinesReachTheCaller(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		setLevel      bool
		want          bool
	}{
		{"2025-11-25 setLevel info", "2025-11-25", true, true},
		{"2025-11-25 no level", "2025-11-25", false, false},
		{"2026-07-28 _meta logLevel", "2026-07-28", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			ctx := context.Background()
			log := &messageLog{}
			cs := connectLogging(ctx, t, f, tc.version, log)
			params := &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": printingProgram}}
			if tc.setLevel {
				if tc.version == "2025-11-25" {
					if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
						t.Fatal(err)
					}
				} else {
					params.Meta = mcp.Meta{mcp.MetaKeyLogLevel: "info"}
				}
			}
			ch := callAsync(ctx, cs, params)
			waitFor(t, "the stream p1", func() bool { _, err := f.host.Provider().Status(ctx, "p1"); return err == nil })
			f.feed(ctx, "p1", map[string]any{"value": 1}, map[string]any{"value": 2}, end)
			r := await(t, ch)
			if r.err != nil || r.res.IsError {
				t.Fatalf("rtfs.eval: %v %s", r.err, text(t, r.res))
			}
			want := []string{"info rtfs.eval: hello from eval 42", "info stream p1: chunk 1", "info stream p1: chunk 2", "info stream p1: chunk nil"}
			if !tc.want {
				time.Sleep(50 * time.Millisecond) // a notification sent in error would have arrived
				if got := log.snapshot(); len(got) != 0 {
					t.Errorf("a client that set no level got %q", got)
				}
			} else {
				waitFor(t, "the log messages", func() bool { return len(log.snapshot()) >= len(want) })
				if got := log.snapshot(); strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
			if out := f.stdout.String(); out != "" {
				t.Errorf("the server's stdout got %q", out)
			}
		})
	}
}

// TestDuplicateStartKeepsTheLines: a second start of a running stream's id
// fails, and what the running stream prints still reaches the call that
// started it, not the second caller nor the server's stdout.
func TestDuplicateStartKeepsTheLines(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	log := &messageLog{}
	cs := connectLogging(ctx, t, f, "2025-11-25", log)
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": printingProgram}})
	waitFor(t, "the stream p1", func() bool { _, err := f.host.Provider().Status(ctx, "p1"); return err == nil })
	other := f.connectSession(ctx, nil, nil)
	res, err := other.CallTool(ctx, &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("p1")})
	if err != nil || !res.IsError || !strings.Contains(text(t, res), `"p1"`) {
		t.Fatalf("the second start of p1: %v %+v", err, res)
	}
	f.feed(ctx, "p1", map[string]any{"value": 1}, end)
	if r := await(t, ch); r.err != nil || r.res.IsError {
		t.Fatalf("rtfs.eval: %v %+v", r.err, r.res)
	}
	want := []string{"info rtfs.eval: hello from eval 42", "info stream p1: chunk 1", "info stream p1: chunk nil"}
	waitFor(t, "the log messages", func() bool { return len(log.snapshot()) >= len(want) })
	if got := log.snapshot(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if out := f.stdout.String(); out != "" {
		t.Errorf("the server's stdout got %q", out)
	}
}
