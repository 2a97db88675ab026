package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/transport"
)

// modernServer is go-sdk's stateless handler restricted to 2026-07-28: a
// server that offers only the current revision.
func modernServer(t *testing.T) *sdkServer {
	t.Helper()
	return newSDKServer(t, sdkConfig{version: version20260728, stateless: true})
}

// TestModernProgressThenResult: against a server of 2026-07-28 only, the
// client discovers it, sends the call with the per-request _meta and the
// Mcp-* headers, and delivers the progress in order, then the result; no
// initialize, no session, no standalone GET, no DELETE.
func TestModernProgressThenResult(t *testing.T) {
	leakCheck(t)
	s := modernServer(t)
	sink := &recSink{}
	if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":5}`), "", sink); err != nil {
		t.Fatalf("Run: %v (requests %v)", err, s.log.all())
	}
	if got := sink.events(); !slices.Equal(got, wantEvents(5)) {
		t.Fatalf("events = %v, want %v", got, wantEvents(5))
	}
	if got := sink.progressValues(t); !slices.Equal(got, wantProgress(5)) {
		t.Fatalf("progress = %v", got)
	}
	if !strings.Contains(string(sink.last().Data), "counted 5") {
		t.Fatalf("result = %s", sink.last().Data)
	}
	st, err := decodeCursor(sink.last().ID, kindStreamable)
	if err != nil || !st.Done || st.Proto != version20260728 || st.Session != "" {
		t.Fatalf("result cursor = %+v (%v)", st, err)
	}
	if want := []string{"POST server/discover", "POST tools/call"}; !slices.Equal(s.log.all(), want) {
		t.Fatalf("requests %v, want %v", s.log.all(), want)
	}
	call := s.log.postsOf(methodToolsCall)[0]
	h := call.header
	if h.Get(headerProtocol) != version20260728 || h.Get(headerMethod) != methodToolsCall || h.Get(headerName) != "count" || h.Get(headerSession) != "" {
		t.Fatalf("tools/call headers %v", h)
	}
	meta := call.meta(t)
	caps, _ := meta[sdk.MetaKeyClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	if meta[sdk.MetaKeyProtocolVersion] != version20260728 || meta[sdk.MetaKeyClientInfo] == nil || ext[extensionTasks] == nil ||
		!strings.HasPrefix(meta["progressToken"].(string), "rtfs-") {
		t.Fatalf("tools/call _meta = %v", meta)
	}
	if d := s.log.postsOf(methodDiscover)[0].header; d.Get(headerMethod) != methodDiscover || d.Get(headerProtocol) != version20260728 {
		t.Fatalf("server/discover headers %v", d)
	}
}

// TestModernFallsBackToSession: a server of the session era answers
// server/discover without 2026-07-28 (go-sdk's stateful handler lists only
// the older revisions), so the client initializes a 2025-11-25 session, as
// go-sdk's own client does.
func TestModernFallsBackToSession(t *testing.T) {
	leakCheck(t)
	s := newSDKServer(t, sdkConfig{}) // every revision go-sdk knows, stateful
	sink := &recSink{}
	if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":2}`), "", sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// The standalone GET is sent before tools/call; its order in the log is
	// not asserted (the client stops waiting for its headers after 500 ms).
	want := []string{"POST server/discover", "POST initialize", "POST notifications/initialized", "POST tools/call", "DELETE"}
	got := s.log.all()
	if !slices.Equal(slices.DeleteFunc(slices.Clone(got), func(r string) bool { return r == "GET" }), want) || !slices.Contains(got, "GET") {
		t.Fatalf("requests %v, want %v and the standalone GET", got, want)
	}
	st, _ := decodeCursor(sink.last().ID, kindStreamable)
	if st.Proto != version20251125 || st.Session == "" {
		t.Fatalf("cursor = %+v, want a 2025-11-25 session", st)
	}
	if h := s.log.postsOf(methodToolsCall)[0].header; h.Get(headerMethod) != "" || h.Get(headerProtocol) != version20251125 {
		t.Fatalf("session-era tools/call headers %v", h)
	}
}

// TestModernRetriesUnsupportedVersion: a 2026-07-28 server that refuses
// the first server/discover with -32022 (unsupported protocol version)
// and lists 2026-07-28 among its versions is asked again with it, and the
// call goes on in that revision, never as a session. One whose list lacks
// 2026-07-28 is asked for a session instead.
func TestModernRetriesUnsupportedVersion(t *testing.T) {
	refuse := func(supported string) func(http.ResponseWriter, *http.Request, string) bool {
		var refused atomic.Bool
		return func(w http.ResponseWriter, r *http.Request, entry string) bool {
			if entry != "POST "+methodDiscover || !refused.CompareAndSwap(false, true) {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":[%s],"requested":"2026-07-28"}}}`, discoverID, supported)
			return true
		}
	}
	t.Run("retried", func(t *testing.T) {
		leakCheck(t)
		s := newSDKServer(t, sdkConfig{version: version20260728, stateless: true, intercept: refuse(`"2026-07-28"`)})
		sink := &recSink{}
		if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":2}`), "", sink); err != nil {
			t.Fatalf("Run: %v (requests %v)", err, s.log.all())
		}
		if want := []string{"POST server/discover", "POST server/discover", "POST tools/call"}; !slices.Equal(s.log.all(), want) {
			t.Fatalf("requests %v, want %v", s.log.all(), want)
		}
		for _, p := range s.log.postsOf(methodDiscover) {
			if p.header.Get(headerProtocol) != version20260728 || p.meta(t)[sdk.MetaKeyProtocolVersion] != version20260728 {
				t.Errorf("server/discover without the version: headers %v, _meta %v", p.header, p.meta(t))
			}
		}
		if st, _ := decodeCursor(sink.last().ID, kindStreamable); st.Proto != version20260728 {
			t.Errorf("cursor %+v, want 2026-07-28", st)
		}
	})
	t.Run("no common version", func(t *testing.T) {
		leakCheck(t)
		s := newSDKServer(t, sdkConfig{intercept: refuse(`"2099-01-01"`)})
		sink := &recSink{}
		if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":1}`), "", sink); err != nil {
			t.Fatalf("Run: %v (requests %v)", err, s.log.all())
		}
		if got := s.log.postsOf(methodDiscover); len(got) != 1 || len(s.log.postsOf(methodInitialize)) != 1 {
			t.Fatalf("requests %v, want one server/discover then a session", s.log.all())
		}
	})
}

// TestModernIsError: a tool's isError result under 2026-07-28 is the same
// permanent ErrToolFailed.
func TestModernIsError(t *testing.T) {
	leakCheck(t)
	s := modernServer(t)
	sink := &recSink{}
	err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":2,"fail":true}`), "", sink)
	if !errors.Is(err, ErrToolFailed) || !strings.Contains(err.Error(), "boom: bad input") || !transport.IsPermanent(err) {
		t.Fatalf("Run error = %v", err)
	}
	if got := sink.events(); !slices.Equal(got, []string{"progress", "progress"}) {
		t.Fatalf("events = %v", got)
	}
}

// TestModernReissueRules: under 2026-07-28 a response stream cut after two
// progress events loses the call. It is sent again (a new request) only for
// a tool annotated idempotentHint true or a stream with :restart
// :on-failure; otherwise Run ends with a permanent error saying why, and
// tools/call was sent once.
func TestModernReissueRules(t *testing.T) {
	cases := []struct {
		name      string
		tool      string
		restart   bool
		calls     int // tools/call POSTs
		lists     int // tools/list POSTs
		wantError string
	}{
		{"not idempotent", "count", false, 1, 1, errNotIdempotent},
		{"idempotentHint", "count-idempotent", false, 2, 1, ""},
		{"restart on-failure", "count", true, 2, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			s := modernServer(t)
			spec := s.spec(tc.tool, `{"n":5}`)
			spec.HTTP.Client = &http.Client{Transport: &cutter{base: s.http.Client().Transport, after: 2}}
			spec.Config = &StreamableConfig{Restart: tc.restart}
			sink := &recSink{}
			err := (Streamable{policy: fastPolicy}).Run(context.Background(), spec, "", sink)
			if got := s.log.count("POST tools/call"); got != tc.calls {
				t.Fatalf("tools/call sent %d times, want %d (requests %v)", got, tc.calls, s.log.all())
			}
			if got := s.log.count("POST tools/list"); got != tc.lists {
				t.Fatalf("tools/list sent %d times, want %d", got, tc.lists)
			}
			if tc.wantError != "" {
				t.Logf("Run error: %v", err)
				if !transport.IsPermanent(err) || !containsAll(err.Error(), tc.wantError, "idempotentHint") {
					t.Fatalf("Run error = %v, want a permanent error saying %q", err, tc.wantError)
				}
				if got := sink.progressValues(t); !slices.Equal(got, wantProgress(2)) || len(sink.chunks) != 2 {
					t.Fatalf("events %v, progress %v: want the two chunks read before the break", sink.events(), got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run: %v (requests %v)", err, s.log.all())
			}
			if got := sink.progressValues(t); !slices.Equal(got, wantProgress(5)) || sink.last().Event != "result" {
				t.Fatalf("progress %v, events %v: want 1..5 once each, then the result", got, sink.events())
			}
			calls := s.log.postsOf(methodToolsCall)
			if id1, id2 := requestID(t, calls[0]), requestID(t, calls[1]); id1 == id2 {
				t.Fatalf("the call was sent again with the same request id %v", id1)
			}
			if len(sink.delays) != 1 {
				t.Fatalf("waits %v: want one retry wait before the second call", sink.delays)
			}
		})
	}
}

// requestID returns the JSON-RPC id of a POSTed message.
func requestID(t *testing.T, p wirePost) any {
	t.Helper()
	var m struct {
		ID any `json:"id"`
	}
	if err := json.Unmarshal(p.body, &m); err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// TestModernAfterHostRestart: a 2026-07-28 call's cursor (no task) after a
// host restart: its response stream is gone. A tool that is not idempotent
// is not called again, and the error wraps transport.ErrSourceLost; an
// idempotent one is called again, and the progress already delivered is not
// delivered twice.
func TestModernAfterHostRestart(t *testing.T) {
	cursor := (&callState{Kind: kindStreamable, Proto: version20260728, Req: callID, Token: "rtfs-tok",
		Progress: 2, HasProgress: true, Chunks: 2}).encode()
	t.Run("not idempotent", func(t *testing.T) {
		leakCheck(t)
		s := modernServer(t)
		spec := s.spec("count", `{"n":5}`)
		spec.Resumed = true
		err := (Streamable{policy: fastPolicy}).Run(context.Background(), spec, cursor, &recSink{})
		if !errors.Is(err, transport.ErrSourceLost) || !transport.IsPermanent(err) || !strings.Contains(err.Error(), errNotIdempotent) {
			t.Fatalf("Run error = %v, want a permanent ErrSourceLost saying %q", err, errNotIdempotent)
		}
		if want := []string{"POST tools/list"}; !slices.Equal(s.log.all(), want) {
			t.Fatalf("requests %v, want %v", s.log.all(), want)
		}
	})
	t.Run("idempotent", func(t *testing.T) {
		leakCheck(t)
		s := modernServer(t)
		spec := s.spec("count-idempotent", `{"n":5}`)
		spec.Resumed = true
		sink := &recSink{}
		if err := (Streamable{policy: fastPolicy}).Run(context.Background(), spec, cursor, sink); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := sink.progressValues(t); !slices.Equal(got, []float64{3, 4, 5}) || sink.last().Event != "result" {
			t.Fatalf("progress %v, events %v: want 3..5, then the result", got, sink.events())
		}
		if want := []string{"POST tools/list", "POST tools/call"}; !slices.Equal(s.log.all(), want) {
			t.Fatalf("requests %v, want %v", s.log.all(), want)
		}
		if tok := s.log.postsOf(methodToolsCall)[0].meta(t)["progressToken"]; tok != "rtfs-tok" {
			t.Fatalf("progress token %v, want the cursor's", tok)
		}
	})
}

// TestStreamableKindRestart: :mcp reads :restart, the key the process
// transports read, into a *StreamableConfig; Run refuses a Config of
// another type.
func TestStreamableKindRestart(t *testing.T) {
	k := StreamableKind()
	if !slices.ContainsFunc(k.Keys, func(key transport.Key) bool { return key.Name == "restart" }) {
		t.Fatalf("keys %v lack :restart", k.Keys)
	}
	for _, tc := range []struct {
		keys map[string]json.RawMessage
		want bool
	}{
		{nil, false},
		{map[string]json.RawMessage{"restart": json.RawMessage(`"never"`)}, false},
		{map[string]json.RawMessage{"restart": json.RawMessage(`"on-failure"`)}, true},
		{map[string]json.RawMessage{"restart": json.RawMessage(`":on-failure"`)}, true},
	} {
		cfg, err := k.Configure(tc.keys)
		if c, ok := cfg.(*StreamableConfig); err != nil || !ok || c.Restart != tc.want {
			t.Fatalf("Configure(%s) = %#v, %v; want Restart %v", tc.keys["restart"], cfg, err, tc.want)
		}
	}
	if _, err := k.Configure(map[string]json.RawMessage{"restart": json.RawMessage(`"always"`)}); err == nil || !strings.Contains(err.Error(), ":restart") {
		t.Fatalf("Configure(always) error = %v", err)
	}
	spec := transport.Spec{StreamID: "k", Endpoint: "tool", Config: "on-failure", HTTP: transport.HTTP{ServerURL: "http://127.0.0.1:1/mcp"}}
	if err := (Streamable{}).Run(context.Background(), spec, "", &recSink{}); !transport.IsPermanent(err) || !strings.Contains(err.Error(), "StreamableConfig") {
		t.Fatalf("Run with a string Config = %v", err)
	}
}
