package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

var versions = []string{version20250326, version20250618, version20251125}

// forVersions runs f as a subtest for every supported protocol version.
func forVersions(t *testing.T, f func(t *testing.T, version string)) {
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			leakCheck(t)
			f(t, v)
		})
	}
}

func wantEvents(n int) []string {
	out := make([]string, 0, n+1)
	for range n {
		out = append(out, "progress")
	}
	return append(out, "result")
}

func wantProgress(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i + 1)
	}
	return out
}

func TestStreamableProgressThenResult(t *testing.T) {
	forVersions(t, func(t *testing.T, version string) {
		s := newSDKServer(t, sdkConfig{version: version})
		sink := &recSink{}
		if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":5}`), "", sink); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := sink.events(); !slices.Equal(got, wantEvents(5)) {
			t.Fatalf("events = %v, want %v", got, wantEvents(5))
		}
		if got := sink.progressValues(t); !slices.Equal(got, wantProgress(5)) {
			t.Fatalf("progress = %v", got)
		}
		first := sink.chunks[0]
		var p struct {
			Token   string  `json:"progressToken"`
			Message string  `json:"message"`
			Total   float64 `json:"total"`
		}
		if err := json.Unmarshal(first.Data, &p); err != nil || p.Message != "step 1" || p.Total != 5 || !strings.HasPrefix(p.Token, "rtfs-") {
			t.Fatalf("first progress params = %s (%v)", first.Data, err)
		}
		last := sink.last()
		if !strings.Contains(string(last.Data), "counted 5") {
			t.Fatalf("result data = %s", last.Data)
		}
		st, err := decodeCursor(last.ID, kindStreamable)
		if err != nil || !st.Done || st.Proto != version || st.Session == "" || st.Token != p.Token {
			t.Fatalf("result cursor = %+v (%v)", st, err)
		}
		if s.log.count("DELETE") != 1 {
			t.Fatalf("requests %v: want one DELETE ending the session", s.log.all())
		}
		// The result's cursor means the stream is over: nothing is sent.
		before := len(s.log.all())
		if err := (Streamable{}).Run(context.Background(), s.spec("count", `{"n":5}`), last.ID, &recSink{}); err != nil {
			t.Fatalf("Run from the result's cursor: %v", err)
		}
		if after := len(s.log.all()); after != before {
			t.Fatalf("Run from the result's cursor sent %d requests", after-before)
		}
	})
}

func TestStreamableIsError(t *testing.T) {
	forVersions(t, func(t *testing.T, version string) {
		s := newSDKServer(t, sdkConfig{version: version})
		sink := &recSink{}
		err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":2,"fail":true}`), "", sink)
		if !errors.Is(err, ErrToolFailed) || !strings.Contains(err.Error(), "boom: bad input") || !transport.IsPermanent(err) {
			t.Fatalf("Run error = %v, want a permanent ErrToolFailed with the tool's text", err)
		}
		if got := sink.events(); !slices.Equal(got, []string{"progress", "progress"}) {
			t.Fatalf("events = %v: the failed result must not be a chunk", got)
		}
		if s.log.count("DELETE") != 1 {
			t.Fatalf("requests %v: want the session ended", s.log.all())
		}
	})
}

func TestStreamableResumeAfterDrop(t *testing.T) {
	forVersions(t, func(t *testing.T, version string) {
		s := newSDKServer(t, sdkConfig{version: version})
		spec := s.spec("count", `{"n":6}`)
		spec.HTTP.Client = &http.Client{Transport: &cutter{base: s.http.Client().Transport, after: 3}}
		sink := &recSink{}
		if err := (Streamable{policy: fastPolicy}).Run(context.Background(), spec, "", sink); err != nil {
			t.Fatalf("Run: %v (requests %v)", err, s.log.all())
		}
		if got := sink.events(); !slices.Equal(got, wantEvents(6)) {
			t.Fatalf("events = %v", got)
		}
		if got := sink.progressValues(t); !slices.Equal(got, wantProgress(6)) {
			t.Fatalf("progress = %v: lost or duplicated", got)
		}
		if n := s.calls.Load(); n != 1 {
			t.Fatalf("tool ran %d times", n)
		}
		if s.log.count("POST tools/call") != 1 || s.log.count("GET resume") < 1 {
			t.Fatalf("requests %v: want one tools/call and a GET resume", s.log.all())
		}
		if len(sink.delays) == 0 {
			t.Fatalf("the sink was not told about the reconnect")
		}
	})
}

// TestStreamableResumeFromCursor is a host restart: the first Run fails for
// good (every GET fails) and keeps the session; a second Run from the last
// committed cursor resumes the same call.
func TestStreamableResumeFromCursor(t *testing.T) {
	forVersions(t, func(t *testing.T, version string) {
		s := newSDKServer(t, sdkConfig{version: version})
		spec := s.spec("count", `{"n":5}`)
		spec.RetryAttempts = 2
		spec.HTTP.Client = &http.Client{Transport: &cutter{base: failGET{s.http.Client().Transport}, after: 3}}
		first := &recSink{}
		err := (Streamable{policy: fastPolicy}).Run(context.Background(), spec, "", first)
		if err == nil || transport.IsPermanent(err) || !strings.Contains(err.Error(), "gave up after 2 retries") {
			t.Fatalf("first Run error = %v, want a transient error after 2 retries", err)
		}
		if s.log.count("DELETE") != 0 {
			t.Fatalf("the failed Run ended the session: %v", s.log.all())
		}
		n := len(first.chunks)
		if n == 0 {
			t.Fatalf("the first Run delivered nothing")
		}
		second := &recSink{}
		if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":5}`), first.last().ID, second); err != nil {
			t.Fatalf("resumed Run: %v", err)
		}
		all := append(first.progressValues(t), second.progressValues(t)...)
		if !slices.Equal(all, wantProgress(5)) || second.last().Event != "result" {
			t.Fatalf("progress across runs = %v, last event %q", all, second.last().Event)
		}
		if c := s.calls.Load(); c != 1 || s.log.count("POST tools/call") != 1 {
			t.Fatalf("tool ran %d times; requests %v", c, s.log.all())
		}
	})
}

// failGET fails every GET as an unreachable server would.
type failGET struct{ base http.RoundTripper }

func (f failGET) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		return nil, errors.New("connection refused (test)")
	}
	return f.base.RoundTrip(req)
}

func TestStreamableCancelReachesTool(t *testing.T) {
	forVersions(t, func(t *testing.T, version string) {
		s := newSDKServer(t, sdkConfig{version: version})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sink := &recSink{onChunk: func(int, transport.Chunk) error { cancel(); return nil }}
		err := (Streamable{policy: fastPolicy}).Run(ctx, s.spec("block", ""), "", sink)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run error = %v, want context.Canceled", err)
		}
		select {
		case <-s.cancelled:
		case <-time.After(10 * time.Second):
			t.Fatalf("the tool's context was never cancelled; requests %v", s.log.all())
		}
		reqs := s.log.all()
		iCancel := slices.Index(reqs, `POST notifications/cancelled {"reason":"cancelled by the host","requestId":2}`)
		iDelete := slices.Index(reqs, "DELETE")
		if iCancel < 0 || iDelete < iCancel {
			t.Fatalf("requests %v: want notifications/cancelled for request 2, then DELETE", reqs)
		}
	})
}

// TestStreamableResponseModes is the conformance table over go-sdk's
// response modes: in JSON-response mode go-sdk sends a call's progress on
// the session's standalone GET stream and the result as the POST's JSON body;
// every progress chunk must still arrive, in order, before the result.
// Without an event store go-sdk drops notifications while no GET stream is
// connected, so that case passes only because the stream is opened before
// tools/call.
func TestStreamableResponseModes(t *testing.T) {
	modes := []struct {
		name string
		cfg  sdkConfig
	}{
		{"SSE", sdkConfig{}},
		{"JSON", sdkConfig{json: true}},
		{"JSON without event store", sdkConfig{json: true, noStore: true}},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			forVersions(t, func(t *testing.T, version string) {
				cfg := mode.cfg
				cfg.version = version
				s := newSDKServer(t, cfg)
				t.Run("progress then result", func(t *testing.T) {
					sink := &recSink{}
					if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":7}`), "", sink); err != nil {
						t.Fatalf("Run: %v (requests %v)", err, s.log.all())
					}
					if got := sink.events(); !slices.Equal(got, wantEvents(7)) {
						t.Fatalf("events = %v, want %v", got, wantEvents(7))
					}
					if got := sink.progressValues(t); !slices.Equal(got, wantProgress(7)) {
						t.Fatalf("progress = %v", got)
					}
					last := sink.last()
					if !strings.Contains(string(last.Data), "counted 7") {
						t.Fatalf("result data = %s", last.Data)
					}
					st, err := decodeCursor(last.ID, kindStreamable)
					if err != nil || !st.Done || st.Chunks != 8 || st.Proto != version {
						t.Fatalf("result cursor = %+v (%v)", st, err)
					}
					if mode.cfg.json && st.Event != "" {
						t.Fatalf("JSON-mode cursor records event %q of the standalone stream", st.Event)
					}
				})
				t.Run("isError after progress", func(t *testing.T) {
					sink := &recSink{}
					err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":3,"fail":true}`), "", sink)
					if !errors.Is(err, ErrToolFailed) || !strings.Contains(err.Error(), "boom: bad input") {
						t.Fatalf("Run error = %v, want ErrToolFailed with the tool's text", err)
					}
					if got := sink.progressValues(t); !slices.Equal(got, wantProgress(3)) || len(sink.chunks) != 3 {
						t.Fatalf("progress = %v, events %v", got, sink.events())
					}
				})
				if n := s.log.count("POST tools/call"); n != 2 {
					t.Fatalf("tools/call sent %d times, want once per Run", n)
				}
			})
		})
	}
}

func TestStreamableSessionGone(t *testing.T) {
	forVersions(t, func(t *testing.T, version string) {
		s := newSDKServer(t, sdkConfig{version: version})
		spec := s.spec("count", `{"n":4}`)
		spec.RetryAttempts = 1
		spec.HTTP.Client = &http.Client{Transport: &cutter{base: failGET{s.http.Client().Transport}, after: 2}}
		first := &recSink{}
		if err := (Streamable{policy: fastPolicy}).Run(context.Background(), spec, "", first); err == nil {
			t.Fatalf("first Run succeeded through failing GETs")
		}
		for ss := range s.srv.Sessions() { // the server forgets the session
			ss.Close()
		}
		before := len(s.log.all())
		err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":4}`), first.last().ID, &recSink{})
		if !transport.IsPermanent(err) || statusOf(err) != http.StatusNotFound || !strings.Contains(err.Error(), "cannot be resumed") {
			t.Fatalf("Run on a gone session = %v, want a permanent 404 error saying it cannot be resumed", err)
		}
		if c := s.calls.Load(); c != 1 {
			t.Fatalf("tool ran %d times", c)
		}
		// The 404 re-initializes (a fresh session, which is then ended) and
		// never re-sends the call.
		want := []string{"GET resume", "POST initialize", "POST notifications/initialized", "DELETE"}
		if got := s.log.all()[before:]; !slices.Equal(got, want) {
			t.Fatalf("requests after the 404 run = %v, want %v", got, want)
		}
	})
}

// TestSessionGoneOnResume: a 404 on the resume GET re-initializes once,
// DELETEs the fresh session (a 405 answer is fine) and reports the call as
// unrecoverable; a failing or stalled re-initialize changes only the text,
// and nothing hangs.
func TestSessionGoneOnResume(t *testing.T) {
	cursor := (&callState{Kind: kindStreamable, Session: "sess-old", Proto: version20250326,
		Req: callID, Token: "tok", Event: "e5", Progress: 5, HasProgress: true}).encode()
	gone := func(w http.ResponseWriter, r *http.Request, tok string) {
		http.Error(w, "session not found", http.StatusNotFound)
	}
	cases := []struct {
		name    string
		hook    func(w http.ResponseWriter, r *http.Request) bool
		deletes []string
		text    string
	}{
		{"re-initialized", nil, []string{"sess-1"}, "cannot be resumed (it is not re-run)"},
		{"re-initialize refused", func(w http.ResponseWriter, r *http.Request) bool {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return true
		}, nil, "re-initializing failed too"},
		{"re-initialize stalls", func(w http.ResponseWriter, r *http.Request) bool {
			<-r.Context().Done()
			return true
		}, nil, "re-initializing failed too"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			f := newFakeServer(t, &fakeServer{get: gone, initHook: tc.hook, deleteStatus: http.StatusMethodNotAllowed})
			sink := &recSink{}
			done := make(chan error, 1)
			go func() {
				done <- (Streamable{policy: fastPolicy}).Run(context.Background(), f.spec().build(), cursor, sink)
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run hangs after a 404 on resume")
			}
			if !transport.IsPermanent(err) || statusOf(err) != http.StatusNotFound || !containsAll(err.Error(), "cannot be resumed", tc.text) {
				t.Fatalf("err = %v, want a permanent 404 error containing %q", err, tc.text)
			}
			if f.log.count("POST initialize") != 1 || f.log.count("POST tools/call") != 0 || len(sink.chunks) != 0 {
				t.Fatalf("requests %v, %d chunks: want one initialize and no call", f.log.all(), len(sink.chunks))
			}
			if got := f.deleted(); !slices.Equal(got, tc.deletes) {
				t.Fatalf("DELETEs for sessions %q, want %q", got, tc.deletes)
			}
			if !slices.Equal(f.getIDs(), []string{"e5"}) {
				t.Fatalf("resume GETs %q, want one from e5", f.getIDs())
			}
		})
	}
}

// TestStreamable404OnCallReinitializes: a 404 on the tools/call POST means
// the server did not run it; the client re-initializes and calls once.
func TestStreamable404OnCallReinitializes(t *testing.T) {
	leakCheck(t)
	rejected := false
	s := newSDKServer(t, sdkConfig{intercept: func(w http.ResponseWriter, r *http.Request, entry string) bool {
		if entry == "POST tools/call" && !rejected {
			rejected = true
			http.Error(w, "session not found", http.StatusNotFound)
			return true
		}
		return false
	}})
	sink := &recSink{}
	if err := (Streamable{policy: fastPolicy}).Run(context.Background(), s.spec("count", `{"n":2}`), "", sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.events(); !slices.Equal(got, wantEvents(2)) {
		t.Fatalf("events = %v", got)
	}
	if s.log.count("POST initialize") != 2 || s.calls.Load() != 1 {
		t.Fatalf("requests %v, tool calls %d: want a second initialize and one run", s.log.all(), s.calls.Load())
	}
}

func TestLegacySSE(t *testing.T) {
	leakCheck(t)
	s := newSDKServer(t, sdkConfig{legacy: true})
	spec := s.spec("count", `{"n":4}`)
	spec.HTTP.ServerURL = s.http.URL + "/mcp-sse"
	t.Run("progress then result", func(t *testing.T) {
		sink := &recSink{}
		if err := (LegacySSE{policy: fastPolicy}).Run(context.Background(), spec, "", sink); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := sink.events(); !slices.Equal(got, wantEvents(4)) {
			t.Fatalf("events = %v", got)
		}
		if got := sink.progressValues(t); !slices.Equal(got, wantProgress(4)) {
			t.Fatalf("progress = %v", got)
		}
		// A finished call's cursor ends at once; any other is refused.
		if err := (LegacySSE{}).Run(context.Background(), spec, sink.last().ID, &recSink{}); err != nil {
			t.Fatalf("Run from the result cursor: %v", err)
		}
		err := (LegacySSE{}).Run(context.Background(), spec, sink.chunks[0].ID, &recSink{})
		if !transport.IsPermanent(err) || !strings.Contains(err.Error(), "cannot be resumed") {
			t.Fatalf("Run from a progress cursor = %v", err)
		}
	})
	t.Run("isError", func(t *testing.T) {
		spec := spec
		spec.Arguments = []byte(`{"n":1,"fail":true}`)
		err := (LegacySSE{policy: fastPolicy}).Run(context.Background(), spec, "", &recSink{})
		if !errors.Is(err, ErrToolFailed) || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("Run error = %v", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		spec := spec
		spec.Endpoint, spec.Arguments = "block", nil
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sink := &recSink{onChunk: func(int, transport.Chunk) error { cancel(); return nil }}
		if err := (LegacySSE{policy: fastPolicy}).Run(ctx, spec, "", sink); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run error = %v", err)
		}
		select {
		case <-s.cancelled:
		case <-time.After(10 * time.Second):
			t.Fatalf("the tool's context was never cancelled")
		}
		if !slices.ContainsFunc(s.log.all(), func(r string) bool { return strings.HasPrefix(r, "POST notifications/cancelled") }) {
			t.Fatalf("requests %v: no notifications/cancelled", s.log.all())
		}
	})
	t.Run("sink refuses", func(t *testing.T) {
		stop := fmt.Errorf("host completed the stream")
		sink := &recSink{onChunk: func(n int, _ transport.Chunk) error {
			if n == 2 {
				return stop
			}
			return nil
		}}
		if err := (LegacySSE{policy: fastPolicy}).Run(context.Background(), spec, "", sink); !errors.Is(err, stop) {
			t.Fatalf("Run error = %v, want the sink's error", err)
		}
	})
}
