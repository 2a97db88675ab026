package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
	"github.com/rtfshost/rtfshost/transport/transporttest"
)

type specT = transport.Spec

type httpT = transport.HTTP

func runFake(t *testing.T, f *fakeServer, sink *recSink, mut ...func(*specT)) error {
	t.Helper()
	return (Streamable{policy: fastPolicy}).Run(context.Background(), f.spec().build(mut...), "", sink)
}

func TestBatchArrays(t *testing.T) {
	t.Run("JSON body", func(t *testing.T) {
		leakCheck(t)
		f := newFakeServer(t, &fakeServer{call: func(w http.ResponseWriter, tok string) {
			w.Header().Set("Content-Type", contentJSON)
			fmt.Fprintf(w, "[%s,%s,%s]", progressMsg(tok, 1), progressMsg(tok, 2), resultMsg("ok", false))
		}})
		sink := &recSink{}
		if err := runFake(t, f, sink); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := sink.progressValues(t); !slices.Equal(got, []float64{1, 2}) || sink.last().Event != "result" {
			t.Fatalf("progress %v, events %v", got, sink.events())
		}
	})
	t.Run("SSE event", func(t *testing.T) {
		leakCheck(t)
		f := newFakeServer(t, &fakeServer{call: func(w http.ResponseWriter, tok string) {
			sseHeaders(w)
			writeSSE(w, "e1", fmt.Sprintf("[%s,%s]", progressMsg(tok, 1), progressMsg(tok, 2)))
			writeSSE(w, "e2", fmt.Sprintf("[%s]", resultMsg("ok", false)))
		}})
		sink := &recSink{}
		if err := runFake(t, f, sink); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := sink.events(); !slices.Equal(got, wantEvents(2)) {
			t.Fatalf("events %v", got)
		}
		// Only the batch's last chunk moves the resume point past the event.
		var ids []string
		for _, c := range sink.chunks {
			st, err := decodeCursor(c.ID, kindStreamable)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, st.Event)
		}
		if !slices.Equal(ids, []string{"", "e1", "e2"}) {
			t.Fatalf("cursor event ids = %q", ids)
		}
	})
}

func TestPrimingAndOddEvents(t *testing.T) {
	leakCheck(t)
	f := newFakeServer(t, &fakeServer{version: version20251125, call: func(w http.ResponseWriter, tok string) {
		sseHeaders(w)
		fmt.Fprint(w, "retry: 5\nevent: prime\nid: p0\ndata:\n\n")
		fmt.Fprint(w, ": keep-alive comment\n\n")
		fmt.Fprint(w, "id: p1\n\n")
		fmt.Fprint(w, "event: other\nid: o1\ndata: {\"not\":\"json-rpc\"}\n\n")
		fmt.Fprintf(w, "id: e1\r\ndata: %s\r\n\r\n", progressMsg(tok, 1))
		writeSSE(w, "e2", resultMsg("done", false))
	}})
	sink := &recSink{}
	if err := runFake(t, f, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.events(); !slices.Equal(got, wantEvents(1)) {
		t.Fatalf("events %v: priming, id-only, comment and foreign events must not be chunks", got)
	}
	st, _ := decodeCursor(sink.chunks[0].ID, kindStreamable)
	if st.Event != "e1" || st.Proto != version20251125 || st.Session != "sess-1" {
		t.Fatalf("cursor = %+v", st)
	}
}

func TestProgressMonotonic(t *testing.T) {
	leakCheck(t)
	f := newFakeServer(t, &fakeServer{call: func(w http.ResponseWriter, tok string) {
		sseHeaders(w)
		for i, p := range []float64{1, 2, 2, 1.5, 2.5} {
			writeSSE(w, fmt.Sprintf("e%d", i), progressMsg(tok, p))
		}
		writeSSE(w, "f1", progressMsg("someone-else", 10))
		writeSSE(w, "f2", `{"jsonrpc":"2.0","id":"srv-1","method":"ping"}`)
		writeSSE(w, "f3", `{"jsonrpc":"2.0","id":99,"result":{}}`)
		writeSSE(w, "r", resultMsg("done", false))
	}})
	sink := &recSink{}
	if err := runFake(t, f, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.progressValues(t); !slices.Equal(got, []float64{1, 2, 2.5}) {
		t.Fatalf("progress = %v, want regressions, duplicates and other tokens dropped", got)
	}
}

func TestAcceptedCallAnswersOnGET(t *testing.T) {
	leakCheck(t)
	f := newFakeServer(t, &fakeServer{
		call: func(w http.ResponseWriter, tok string) { w.WriteHeader(http.StatusAccepted) },
		get: func(w http.ResponseWriter, r *http.Request, tok string) {
			sseHeaders(w)
			writeSSE(w, "g1", progressMsg(tok, 1))
			writeSSE(w, "g2", resultMsg("via GET", false))
		},
	})
	sink := &recSink{}
	if err := runFake(t, f, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.events(); !slices.Equal(got, wantEvents(1)) || !strings.Contains(string(sink.last().Data), "via GET") {
		t.Fatalf("events %v, last %s", got, sink.last().Data)
	}
	if ids := f.getIDs(); !slices.Equal(ids, []string{""}) {
		t.Fatalf("GETs with Last-Event-ID %q, want one plain GET", ids)
	}
}

// TestRetryResetsWhenDataFlows: every connection carries one new event and
// breaks; with one retry per streak the call still completes.
func TestRetryResetsWhenDataFlows(t *testing.T) {
	leakCheck(t)
	f := newFakeServer(t, &fakeServer{
		call: func(w http.ResponseWriter, tok string) {
			sseHeaders(w)
			writeSSE(w, "1", progressMsg(tok, 1))
		},
	})
	f.get = func(w http.ResponseWriter, r *http.Request, tok string) {
		var last int
		fmt.Sscan(r.Header.Get(headerLastEventID), &last)
		sseHeaders(w)
		if last == 5 {
			writeSSE(w, "6", resultMsg("done", false))
			return
		}
		writeSSE(w, fmt.Sprint(last+1), progressMsg(tok, float64(last+1)))
	}
	sink := &recSink{}
	if err := runFake(t, f, sink, func(s *specT) { s.RetryAttempts = 1 }); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.progressValues(t); !slices.Equal(got, wantProgress(5)) {
		t.Fatalf("progress = %v", got)
	}
	if ids := f.getIDs(); !slices.Equal(ids, []string{"1", "2", "3", "4", "5"}) {
		t.Fatalf("GET Last-Event-IDs = %q", ids)
	}
}

func TestHandshakeFailures(t *testing.T) {
	t.Run("401 is not retried", func(t *testing.T) {
		leakCheck(t)
		f := newFakeServer(t, &fakeServer{initFail: []int{401}})
		err := runFake(t, f, &recSink{}, func(s *specT) { s.HTTP.Header = http.Header{"Authorization": {"Bearer s3cret"}} })
		if !transport.IsPermanent(err) || statusOf(err) != 401 || f.log.count("POST initialize") != 1 {
			t.Fatalf("err = %v after %d initialize requests", err, f.log.count("POST initialize"))
		}
		if strings.Contains(err.Error(), "s3cret") || f.authSeen[0] != "Bearer s3cret" {
			t.Fatalf("auth header: sent %q, error %q", f.authSeen, err)
		}
	})
	t.Run("500 is retried with the backoff sequence", func(t *testing.T) {
		leakCheck(t)
		f := newFakeServer(t, &fakeServer{initFail: []int{500, 500, 500, 500, 500}})
		sink := &recSink{}
		err := runFake(t, f, sink)
		if err == nil || transport.IsPermanent(err) || !strings.Contains(err.Error(), "gave up after 3 retries") {
			t.Fatalf("err = %v", err)
		}
		want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}
		if !slices.Equal(sink.delays, want) || f.log.count("POST initialize") != 4 {
			t.Fatalf("delays %v over %d attempts, want %v over 4", sink.delays, f.log.count("POST initialize"), want)
		}
	})
	t.Run("500 then success", func(t *testing.T) {
		leakCheck(t)
		f := newFakeServer(t, &fakeServer{initFail: []int{503, 500}, call: func(w http.ResponseWriter, tok string) {
			w.Header().Set("Content-Type", contentJSON)
			fmt.Fprint(w, resultMsg("ok", false))
		}})
		sink := &recSink{}
		if err := runFake(t, f, sink); err != nil || sink.last().Event != "result" {
			t.Fatalf("err = %v, events %v", err, sink.events())
		}
	})
	t.Run("unsupported version", func(t *testing.T) {
		leakCheck(t)
		f := newFakeServer(t, &fakeServer{version: "2026-07-28"})
		err := runFake(t, f, &recSink{})
		if !transport.IsPermanent(err) || !strings.Contains(err.Error(), `"2026-07-28"`) {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestCancelDuringBackoff: cancel during an hour-long wait, before the
// session exists and while resuming a call, ends Run at once, with
// context.Canceled.
func TestCancelDuringBackoff(t *testing.T) {
	hour := retry.Policy{Initial: time.Hour, Max: time.Hour}
	t.Run("handshake", func(t *testing.T) {
		leakCheck(t)
		f := newFakeServer(t, &fakeServer{initFail: []int{500, 500}})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ready := make(chan struct{})
		sink := &recSink{onRetry: func(int) { close(ready) }}
		transporttest.CancelEnds(t, cancel, ready, startRun(func() error {
			return (Streamable{policy: hour}).Run(ctx, f.spec().build(), "", sink)
		}))
	})
	t.Run("resume", func(t *testing.T) {
		leakCheck(t)
		f := newFakeServer(t, &fakeServer{
			call: func(w http.ResponseWriter, tok string) {
				sseHeaders(w)
				writeSSE(w, "1", progressMsg(tok, 1))
			},
			get: func(w http.ResponseWriter, r *http.Request, tok string) {
				http.Error(w, "resume must not happen", http.StatusTeapot)
			}})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ready := make(chan struct{})
		sink := &recSink{onRetry: func(int) { close(ready) }}
		transporttest.CancelEnds(t, cancel, ready, startRun(func() error {
			return (Streamable{policy: hour}).Run(ctx, f.spec().build(), "", sink)
		}))
		if len(f.getIDs()) != 0 || !slices.Contains(f.log.all(), "DELETE") {
			t.Fatalf("requests %v: want no resume GET and the session ended", f.log.all())
		}
	})
}

func TestStreamFailures(t *testing.T) {
	cases := []struct {
		name  string
		call  func(w http.ResponseWriter, tok string)
		check func(err error) bool
	}{{
		name: "oversized event",
		call: func(w http.ResponseWriter, tok string) {
			sseHeaders(w)
			writeSSE(w, "1", `{"pad":"`+strings.Repeat("x", 4096)+`"}`)
		},
		check: func(err error) bool { return errors.Is(err, transport.ErrEventTooLarge) },
	}, {
		name: "malformed JSON",
		call: func(w http.ResponseWriter, tok string) {
			sseHeaders(w)
			writeSSE(w, "1", `{"jsonrpc":`)
		},
		check: func(err error) bool { return strings.Contains(err.Error(), "malformed JSON-RPC message") },
	}, {
		name: "JSON-RPC error",
		call: func(w http.ResponseWriter, tok string) {
			w.Header().Set("Content-Type", contentJSON)
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"unknown tool \"tool\""}}`)
		},
		check: func(err error) bool { return containsAll(err.Error(), "-32602", "unknown tool") },
	}, {
		name: "progress without a value",
		call: func(w http.ResponseWriter, tok string) {
			sseHeaders(w)
			writeSSE(w, "1", fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%q}}`, tok))
		},
		check: func(err error) bool { return strings.Contains(err.Error(), "without a numeric progress") },
	}, {
		name: "ended without event ids",
		call: func(w http.ResponseWriter, tok string) {
			sseHeaders(w)
			writeSSE(w, "", progressMsg(tok, 1))
		},
		check: func(err error) bool { return strings.Contains(err.Error(), "carried no SSE event id") },
	}, {
		name: "JSON body without the result",
		call: func(w http.ResponseWriter, tok string) {
			w.Header().Set("Content-Type", contentJSON)
			fmt.Fprint(w, progressMsg(tok, 1))
		},
		check: func(err error) bool { return strings.Contains(err.Error(), "carries no tools/call result") },
	}, {
		name: "server error on the call is not retried",
		call: func(w http.ResponseWriter, tok string) {
			http.Error(w, "internal", http.StatusInternalServerError)
		},
		check: func(err error) bool { return strings.Contains(err.Error(), "not sent twice") },
	}, {
		name: "unexpected content type",
		call: func(w http.ResponseWriter, tok string) {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "hello")
		},
		check: func(err error) bool { return strings.Contains(err.Error(), `"text/plain"`) },
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			f := newFakeServer(t, &fakeServer{call: tc.call, get: func(w http.ResponseWriter, r *http.Request, tok string) {
				http.Error(w, "unexpected GET", http.StatusTeapot)
			}})
			err := runFake(t, f, &recSink{}, func(s *specT) { s.MaxEventBytes = 1024 })
			if !transport.IsPermanent(err) || !tc.check(err) {
				t.Fatalf("err = %v", err)
			}
			if n := f.log.count("POST tools/call"); n != 1 {
				t.Fatalf("tools/call sent %d times", n)
			}
			if len(f.getIDs()) != 0 {
				t.Fatalf("a permanent failure was followed by GETs %q", f.getIDs())
			}
		})
	}
}

func TestSinkRefusalCancelsCall(t *testing.T) {
	leakCheck(t)
	f := newFakeServer(t, &fakeServer{call: func(w http.ResponseWriter, tok string) {
		sseHeaders(w)
		writeSSE(w, "1", progressMsg(tok, 1))
		writeSSE(w, "2", progressMsg(tok, 2))
		writeSSE(w, "3", resultMsg("done", false))
	}})
	stop := errors.New("stream completed by its processor")
	sink := &recSink{onChunk: func(int, transport.Chunk) error { return stop }}
	if err := runFake(t, f, sink); !errors.Is(err, stop) {
		t.Fatalf("err = %v", err)
	}
	reqs := f.log.all()
	if len(sink.chunks) != 1 || !slices.Contains(reqs, `POST notifications/cancelled {"reason":"cancelled by the host","requestId":2}`) || reqs[len(reqs)-1] != "DELETE" {
		t.Fatalf("chunks %d, requests %v", len(sink.chunks), reqs)
	}
}

func TestSpecAndCursorErrors(t *testing.T) {
	leakCheck(t)
	good := transport.Spec{StreamID: "v", Endpoint: "tool", HTTP: transport.HTTP{ServerURL: "http://127.0.0.1:1/mcp"}}
	legacyCursor := (&callState{Kind: kindLegacy, Req: 2, Token: "t"}).encode()
	cases := []struct {
		name   string
		mut    func(*transport.Spec)
		cursor string
		want   string
	}{
		{"relative URL", func(s *transport.Spec) { s.HTTP.ServerURL = "/mcp" }, "", "not an absolute URL"},
		{"ftp URL", func(s *transport.Spec) { s.HTTP.ServerURL = "ftp://x/mcp" }, "", "scheme \"ftp\" is not http or https"},
		{"no tool", func(s *transport.Spec) { s.Endpoint = "" }, "", "tool name) is empty"},
		{"array arguments", func(s *transport.Spec) { s.Arguments = []byte(`[1]`) }, "", "must be a JSON object"},
		{"broken arguments", func(s *transport.Spec) { s.Arguments = []byte(`{"a":`) }, "", "must be a JSON object"},
		{"foreign cursor", nil, "42", "not written by the MCP transport"},
		{"bad base64", nil, cursorPrefix + "!!", "not valid base64url"},
		{"bad payload", nil, cursorPrefix + "bm90IGpzb24", "payload is malformed"},
		{"legacy cursor", nil, legacyCursor, `kind "sse", not "http"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := good
			if tc.mut != nil {
				tc.mut(&spec)
			}
			err := (Streamable{}).Run(context.Background(), spec, tc.cursor, &recSink{})
			if !transport.IsPermanent(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a permanent error containing %q", err, tc.want)
			}
		})
	}
}

// TestServerRetryIsHonoured: a stream that breaks after "retry: 40" waits
// at least 40 ms, longer than the backoff, before resuming.
func TestServerRetryIsHonoured(t *testing.T) {
	leakCheck(t)
	f := newFakeServer(t, &fakeServer{version: version20251125,
		call: func(w http.ResponseWriter, tok string) {
			sseHeaders(w)
			fmt.Fprint(w, "retry: 40\nevent: prime\nid: p0\ndata:\n\n")
			writeSSE(w, "p1", progressMsg(tok, 1))
		},
		get: func(w http.ResponseWriter, r *http.Request, tok string) {
			sseHeaders(w)
			writeSSE(w, "p2", resultMsg("done", false))
		},
	})
	sink := &recSink{}
	if err := runFake(t, f, sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !slices.Equal(sink.delays, []time.Duration{40 * time.Millisecond}) || !slices.Equal(f.getIDs(), []string{"p1"}) {
		t.Fatalf("delays %v, GETs %q", sink.delays, f.getIDs())
	}
}

// TestCallRefusedWith429: tools/call answered 429 is sent again after a
// wait (the server did not take it), and the streak's limit still applies.
func TestCallRefusedWith429(t *testing.T) {
	leakCheck(t)
	f := newFakeServer(t, &fakeServer{call: func(w http.ResponseWriter, tok string) {
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}})
	sink := &recSink{}
	err := runFake(t, f, sink, func(s *specT) { s.RetryAttempts = 2 })
	if err == nil || transport.IsPermanent(err) || statusOf(err) != 429 || !strings.Contains(err.Error(), "gave up after 2 retries") {
		t.Fatalf("err = %v", err)
	}
	if n := f.log.count("POST tools/call"); n != 3 || len(f.getIDs()) != 0 || f.log.count("DELETE") != 1 {
		t.Fatalf("tools/call sent %d times, GETs %q, requests %v", n, f.getIDs(), f.log.all())
	}
}

// TestBackpressure: while the sink blocks, the client reads no more and the
// server's writes stall; once it unblocks, every chunk arrives.
func TestBackpressure(t *testing.T) {
	leakCheck(t)
	const events = 100 // 6.4 MB: more than the loopback socket buffers hold
	pad := strings.Repeat("x", 64<<10)
	wrote := make(chan struct{})
	f := newFakeServer(t, &fakeServer{call: func(w http.ResponseWriter, tok string) {
		defer close(wrote)
		sseHeaders(w)
		for i := 1; i <= events; i++ {
			data := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%q,"progress":%d,"message":%q}}`, tok, i, pad)
			writeSSE(w, fmt.Sprint(i), data)
		}
		writeSSE(w, "r", resultMsg("done", false))
	}})
	release := make(chan struct{})
	sink := &recSink{onChunk: func(n int, _ transport.Chunk) error {
		if n == 1 {
			<-release
		}
		return nil
	}}
	errc := make(chan error, 1)
	go func() { errc <- runFake(t, f, sink) }()
	select {
	case <-wrote:
		t.Fatalf("the server wrote all %d events while the sink was blocked", events)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sink.progressValues(t); !slices.Equal(got, wantProgress(events)) {
		t.Fatalf("%d progress chunks", len(got))
	}
}
