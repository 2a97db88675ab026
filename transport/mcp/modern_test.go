package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rtfshost/rtfshost/transport"
)

// TestModernServer: against go-sdk's stateless server, which speaks
// 2026-07-28, the client asks server/discover and calls the tool with no
// initialize and no session, every POST naming its method in Mcp-Method
// and the revision in MCP-Protocol-Version and _meta; progress and result
// arrive as with the session revisions.
func TestModernServer(t *testing.T) {
	var mu sync.Mutex
	var bad []string
	s := newSDKServer(t, sdkConfig{stateless: true, intercept: func(_ http.ResponseWriter, r *http.Request, entry string) bool {
		if r.Method != http.MethodPost {
			return false
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		method := strings.TrimPrefix(entry, "POST ")
		ok := r.Header.Get(headerMethod) == method && r.Header.Get(headerProtocol) == version20260728 &&
			r.Header.Get(headerSession) == "" && strings.Contains(string(body), `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`)
		if method == methodToolsCall {
			ok = ok && r.Header.Get(headerName) == "count"
		}
		if !ok {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("%s %v %s", entry, r.Header, body))
			mu.Unlock()
		}
		return false
	}})
	sink := &recSink{}
	if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":3}`), "", sink); err != nil {
		t.Fatalf("Run: %v (requests %v)", err, s.log.all())
	}
	if got := sink.events(); !slices.Equal(got, wantEvents(3)) {
		t.Fatalf("events = %v", got)
	}
	if got := s.log.all(); !slices.Equal(got, []string{"POST server/discover", "POST tools/call"}) {
		t.Fatalf("requests %v, want discover and the call only", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("requests without the 2026-07-28 headers or _meta:\n%s", strings.Join(bad, "\n"))
	}
	st, err := decodeCursor(sink.last().ID, kindStreamable)
	if err != nil || st.Proto != version20260728 || st.Session != "" {
		t.Fatalf("cursor %+v, %v", st, err)
	}
}

// TestModernFallsBackToSessions: a server of the session revisions refuses
// server/discover (go-sdk's stateful one answers -32022); the client then
// initializes and speaks the newest revision both have.
func TestModernFallsBackToSessions(t *testing.T) {
	s := newSDKServer(t, sdkConfig{})
	sink := &recSink{}
	if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":2}`), "", sink); err != nil {
		t.Fatalf("Run: %v (requests %v)", err, s.log.all())
	}
	if got := s.log.all(); len(got) < 3 || !slices.Equal(got[:3], []string{"POST server/discover", "POST initialize", "POST notifications/initialized"}) {
		t.Fatalf("requests %v", got)
	}
	st, err := decodeCursor(sink.last().ID, kindStreamable)
	if err != nil || st.Proto != version20251125 || st.Session == "" {
		t.Fatalf("cursor %+v, %v", st, err)
	}
}

// TestModernReissueRules: under 2026-07-28 a tools/call whose response
// stream breaks is lost. It is sent again only for a tool annotated
// idempotentHint: true or a stream with :restart :on-failure; otherwise the
// stream fails saying why, and the tool ran once.
func TestModernReissueRules(t *testing.T) {
	for _, tc := range []struct {
		name, tool string
		restart    bool
		calls      int32
		wantErr    string
	}{
		{"not idempotent", "count", false, 1, "is not annotated idempotentHint: true nor does the stream set :restart :on-failure, so it is not called again"},
		{"idempotentHint", "count-idempotent", false, 2, ""},
		{"restart on-failure", "count", true, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSDKServer(t, sdkConfig{stateless: true})
			spec := s.spec(tc.tool, `{"n":4}`)
			spec.HTTP.Client = &http.Client{Transport: &cutter{base: s.http.Client().Transport, after: 2}}
			spec.Config = StreamableConfig{Restart: tc.restart}
			sink := &recSink{}
			err := (Streamable{policy: fastPolicy}).Run(context.Background(), spec, "", sink)
			if n := s.calls.Load(); n != tc.calls {
				t.Fatalf("the tool ran %d times, want %d (requests %v)", n, tc.calls, s.log.all())
			}
			if tc.wantErr != "" {
				var te *transport.Error
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &te) || !te.Permanent {
					t.Fatalf("Run: %v, want a permanent error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run: %v (requests %v)", err, s.log.all())
			}
			if ev := sink.events(); ev[len(ev)-1] != "result" {
				t.Fatalf("events = %v", ev)
			}
		})
	}
}

// taskServer is an MCP server whose tool answers with a task, in the shape
// of 2026-07-28 (modern) or 2025-11-25, as host/mcpserver writes them:
// tasks/get reports "working" with a message per poll until polls runs
// out, then "completed" (with the result inline under 2026-07-28;
// 2025-11-25 fetches it by tasks/result).
type taskServer struct {
	http   *httptest.Server
	log    wireLog
	modern bool
	polls  int

	mu    sync.Mutex
	gets  int
	calls int
}

func newTaskServer(t *testing.T, modern bool, polls int) *taskServer {
	s := &taskServer{modern: modern, polls: polls}
	s.http = httptest.NewServer(s.log.record(http.HandlerFunc(s.serve), nil))
	t.Cleanup(s.http.Close)
	return s
}

func (s *taskServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "no GET stream", http.StatusMethodNotAllowed)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &m)
	reply := func(result string) {
		w.Header().Set("Content-Type", contentJSON)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}
	const toolResult = `{"content":[{"type":"text","text":"done"}],"isError":false}`
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.Method {
	case methodDiscover:
		if !s.modern {
			http.Error(w, "unsupported", http.StatusBadRequest)
			return
		}
		reply(`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}`)
	case methodInitialize:
		w.Header().Set(headerSession, "task-session")
		reply(`{"protocolVersion":"2025-11-25","capabilities":{"tasks":{}},"serverInfo":{"name":"tasks","version":"1"}}`)
	case methodToolsCall:
		s.calls++
		if s.modern {
			reply(`{"resultType":"task","taskId":"t-1","status":"working","ttlMs":60000,"pollIntervalMs":1}`)
		} else {
			reply(`{"task":{"taskId":"t-1","status":"working","ttl":60000,"pollInterval":1}}`)
		}
	case methodTasksGet:
		s.gets++
		switch {
		case s.gets <= s.polls:
			reply(fmt.Sprintf(`{"taskId":"t-1","status":"working","statusMessage":"step %d","pollInterval":1}`, s.gets))
		case s.modern:
			reply(`{"taskId":"t-1","status":"completed","result":` + toolResult + `}`)
		default:
			reply(`{"taskId":"t-1","status":"completed"}`)
		}
	case methodTasksResult:
		reply(toolResult)
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

func (s *taskServer) spec() transport.Spec {
	return transport.Spec{StreamID: "task", Endpoint: "slow", RetryAttempts: 3, HTTP: transport.HTTP{ServerURL: s.http.URL + "/mcp", Client: s.http.Client()}}
}

// TestTaskResults: a tool call answered with a task (either shape) is not
// taken for an empty result: the transport polls the task, delivers each
// status change as a "task" chunk and the tool's result as the last chunk.
// A Run from the cursor of a task chunk (a host restart) polls the same
// task and never calls the tool again.
func TestTaskResults(t *testing.T) {
	for _, modern := range []bool{true, false} {
		t.Run(map[bool]string{true: "2026-07-28", false: "2025-11-25"}[modern], func(t *testing.T) {
			s := newTaskServer(t, modern, 2)
			sink := &recSink{}
			if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec(), "", sink); err != nil {
				t.Fatalf("Run: %v (requests %v)", err, s.log.all())
			}
			if got := sink.events(); !slices.Equal(got, []string{"task", "task", "task", "task", "result"}) {
				t.Fatalf("events = %v", got)
			}
			if !strings.Contains(string(sink.chunks[2].Data), `"step 2"`) || !strings.Contains(string(sink.last().Data), `"done"`) {
				t.Fatalf("chunks %q", sink.chunks)
			}
			if !modern && s.log.count("POST tasks/result") != 1 {
				t.Fatalf("requests %v: want the result from tasks/result", s.log.all())
			}
			st, err := decodeCursor(sink.chunks[0].ID, kindStreamable)
			if err != nil || st.Task != "t-1" {
				t.Fatalf("cursor of the task chunk: %+v, %v", st, err)
			}

			// A restart after the first chunk: the same task is polled.
			s.mu.Lock()
			s.gets = 0
			s.mu.Unlock()
			again := &recSink{}
			if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec(), sink.chunks[0].ID, again); err != nil {
				t.Fatalf("Run from the cursor: %v", err)
			}
			if ev := again.events(); ev[len(ev)-1] != "result" {
				t.Fatalf("events after the restart = %v", ev)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.calls != 1 {
				t.Fatalf("the tool was called %d times (requests %v)", s.calls, s.log.all())
			}
		})
	}
}

// TestModernRestartWithoutTask: a host restart during a 2026-07-28 call
// that is not a task finds nothing to resume; it follows the re-issue rule.
func TestModernRestartWithoutTask(t *testing.T) {
	s := newSDKServer(t, sdkConfig{stateless: true})
	cursor := (&callState{Kind: kindStreamable, Proto: version20260728, Req: callID, Token: "rtfs-x", Progress: 1, HasProgress: true}).encode()
	err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":2}`), cursor, &recSink{})
	if err == nil || !strings.Contains(err.Error(), "the host stopped while the call was in flight") || s.calls.Load() != 0 {
		t.Fatalf("Run: %v, tool calls %d", err, s.calls.Load())
	}
	sink := &recSink{}
	if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count-idempotent", `{"n":2}`), cursor, sink); err != nil || s.calls.Load() != 1 {
		t.Fatalf("Run of an idempotent tool: %v, tool calls %d", err, s.calls.Load())
	}
}
