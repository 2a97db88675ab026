package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rtfshost/rtfshost/transport"
)

// TestStandaloneStreamRequest checks the standalone GET's headers, and that
// a server answering it 405 still yields the result (progress cannot
// arrive then), without a resume GET or a second call.
func TestStandaloneStreamRequest(t *testing.T) {
	forVersions(t, func(t *testing.T, version string) {
		var mu sync.Mutex
		var gets []http.Header
		s := newSDKServer(t, sdkConfig{version: version, json: true,
			intercept: func(w http.ResponseWriter, r *http.Request, entry string) bool {
				if r.Method != http.MethodGet {
					return false
				}
				mu.Lock()
				gets = append(gets, r.Header.Clone())
				mu.Unlock()
				http.Error(w, "no standalone stream", http.StatusMethodNotAllowed)
				return true
			}})
		spec := s.spec("count", `{"n":3}`)
		spec.HTTP.Header = http.Header{"Authorization": {"Bearer t0ken"}}
		sink := &recSink{}
		if err := (Streamable{policy: fastPolicy}).Run(context.Background(), spec, "", sink); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := sink.events(); !slices.Equal(got, []string{"result"}) {
			t.Fatalf("events = %v, want only the result (no stream for progress)", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(gets) != 1 {
			t.Fatalf("%d GETs, want one standalone GET; requests %v", len(gets), s.log.all())
		}
		h := gets[0]
		st, _ := decodeCursor(sink.last().ID, kindStreamable)
		if h.Get("Accept") != contentSSE || h.Get(headerSession) != st.Session || st.Session == "" ||
			h.Get(headerProtocol) != version || h.Get("Authorization") != "Bearer t0ken" || h.Get(headerLastEventID) != "" {
			t.Fatalf("standalone GET headers = %v, session %q", h, st.Session)
		}
		if reqs := s.log.all(); slices.Index(reqs, "GET") > slices.Index(reqs, "POST tools/call") {
			t.Fatalf("requests %v: the GET stream must be opened before tools/call", reqs)
		}
		if s.calls.Load() != 1 {
			t.Fatalf("tool ran %d times", s.calls.Load())
		}
	})
}

// progressTotal is a progress notification with a total.
func progressTotal(token string, p, total float64) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%q,"progress":%v,"total":%v}}`,
		token, p, total)
}

// jsonModeFake is a fake server in JSON-response mode: the call is answered
// with the JSON result at once, and standalone writes the call's
// notifications on the standalone stream given the token and a channel
// closed once the JSON answer was written; it then holds the stream open.
func jsonModeFake(t *testing.T, standalone func(w http.ResponseWriter, token string, answered <-chan struct{})) *fakeServer {
	answered := make(chan struct{})
	tokens := make(chan string, 1)
	return newFakeServer(t, &fakeServer{
		call: func(w http.ResponseWriter, tok string) {
			tokens <- tok
			w.Header().Set("Content-Type", contentJSON)
			fmt.Fprint(w, resultMsg("json result", false))
			w.(http.Flusher).Flush()
			close(answered)
		},
		standalone: func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			fmt.Fprint(w, ": ok\n\n")
			w.(http.Flusher).Flush()
			select {
			case tok := <-tokens:
				standalone(w, tok, answered)
			case <-r.Context().Done():
				return
			}
			<-r.Context().Done()
		},
	})
}

// TestTrailingProgress: progress that reaches the client after the JSON
// result is still delivered before it, in order, without duplicates; the
// wait ends when progress reaches its total.
func TestTrailingProgress(t *testing.T) {
	leakCheck(t)
	f := jsonModeFake(t, func(w http.ResponseWriter, tok string, answered <-chan struct{}) {
		writeSSE(w, "_0", progressTotal(tok, 1, 4))
		<-answered
		for _, p := range []float64{2, 2, 1, 3, 4, 4} {
			writeSSE(w, "", progressTotal(tok, p, 4))
		}
	})
	sink := &recSink{}
	if err := runFake(t, f, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.progressValues(t); !slices.Equal(got, []float64{1, 2, 3, 4}) {
		t.Fatalf("progress = %v, want 1..4 once each", got)
	}
	if got := sink.events(); !slices.Equal(got, wantEvents(4)) {
		t.Fatalf("events = %v: the result must come last", got)
	}
	if st, _ := decodeCursor(sink.last().ID, kindStreamable); st.Event != "" || !st.Done {
		t.Fatalf("result cursor %+v: standalone ids must not become the call's resume point", st)
	}
	if ids := f.getIDs(); len(ids) != 0 {
		t.Fatalf("GETs after the call %q, want none", ids)
	}
}

// TestTrailingProgressWithoutTotal: without a total the client cannot know
// more is coming; it delivers what arrives and then the result once the
// stream stays quiet, instead of hanging on the open stream.
func TestTrailingProgressWithoutTotal(t *testing.T) {
	leakCheck(t)
	f := jsonModeFake(t, func(w http.ResponseWriter, tok string, answered <-chan struct{}) {
		<-answered
		writeSSE(w, "", progressMsg(tok, 1))
		writeSSE(w, "", progressMsg("someone-else", 2))
	})
	sink := &recSink{}
	if err := runFake(t, f, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.events(); !slices.Equal(got, wantEvents(1)) {
		t.Fatalf("events = %v, want the trailing progress then the result", got)
	}
}

// TestTrailingWaitHonoursContext: cancelling while the client waits for
// trailing progress ends Run with the context's error and cancels the call.
func TestTrailingWaitHonoursContext(t *testing.T) {
	leakCheck(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := jsonModeFake(t, func(w http.ResponseWriter, tok string, answered <-chan struct{}) {
		<-answered
		writeSSE(w, "", progressTotal(tok, 1, 10))
	})
	sink := &recSink{onChunk: func(int, transport.Chunk) error { cancel(); return nil }}
	err := (Streamable{policy: fastPolicy}).Run(ctx, f.spec().build(), "", sink)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run error = %v, want context.Canceled", err)
	}
	if got := sink.events(); !slices.Equal(got, []string{"progress"}) {
		t.Fatalf("events = %v", got)
	}
	if !slices.ContainsFunc(f.log.all(), func(r string) bool { return strings.HasPrefix(r, "POST notifications/cancelled") }) {
		t.Fatalf("requests %v: no notifications/cancelled", f.log.all())
	}
}

// TestAcceptedCallAnswersOnStandaloneStream: after a 202, the progress and
// the result arrive on the standalone stream opened before the call; no
// further GET is made.
func TestAcceptedCallAnswersOnStandaloneStream(t *testing.T) {
	leakCheck(t)
	tokens := make(chan string, 1)
	f := newFakeServer(t, &fakeServer{
		call: func(w http.ResponseWriter, tok string) {
			tokens <- tok
			w.WriteHeader(http.StatusAccepted)
		},
		standalone: func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			w.(http.Flusher).Flush()
			tok := <-tokens
			writeSSE(w, "s1", progressMsg(tok, 1))
			writeSSE(w, "s2", progressMsg(tok, 2))
			writeSSE(w, "s3", resultMsg("via standalone", false))
			<-r.Context().Done()
		},
	})
	sink := &recSink{}
	if err := runFake(t, f, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.events(); !slices.Equal(got, wantEvents(2)) || !strings.Contains(string(sink.last().Data), "via standalone") {
		t.Fatalf("events %v, last %s", got, sink.last().Data)
	}
	if st, _ := decodeCursor(sink.chunks[1].ID, kindStreamable); st.Event != "s2" {
		t.Fatalf("cursor %+v: after a 202 the standalone stream is the call's stream", st)
	}
	f.mu.Lock()
	early := f.early
	f.mu.Unlock()
	if ids := f.getIDs(); len(ids) != 0 || early != 1 {
		t.Fatalf("GETs after the call %q, before %d; want one GET in all", ids, early)
	}
}
