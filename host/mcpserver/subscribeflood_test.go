package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/provider"
)

// liveHeap is the heap in use after two collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// codeOf is the JSON-RPC error code of err (0 when it has none).
func codeOf(err error) int64 {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return rpc.Code
	}
	return 0
}

// TestSubscriptionFlood: what a client with read access can make the
// server hold is bounded. Subscriptions to 1 MiB URIs and to stream URIs
// with 1 MiB ids, resources/read of them and 100 KB URIs over several
// sessions are refused with -32602 before anything is stored; sessions
// beyond Options.MaxSessions get 429; subscriptions beyond
// Options.MaxSubscriptions are refused; the heap stays within 100 MiB of
// the idle server's; and a deleted session, and one closed for being idle,
// leave no subscription behind.
func TestSubscriptionFlood(t *testing.T) {
	f := newFixture(t, Options{MaxSessions: 4, MaxSubscriptions: 40})
	ctx := context.Background()
	base := liveHeap()
	big := strings.Repeat("a", 1<<20) // as refused as 3.9 MB, and faster under -race
	sessions := make([]*mcp.ClientSession, 4)
	for i := range sessions {
		sessions[i] = f.connectWith(ctx, "2025-11-25", nil)
	}
	flood := []struct{ what, uri string }{
		{"a 1 MiB URI", "test://" + big},
		{"a stream id of 1 MiB", streamURI(big)},
		{"a stream id just over the maximum", streamURI(strings.Repeat("s", provider.MaxStreamIDLength+1))},
	}
	for _, c := range flood {
		for i := range 2 { // each is refused alike: more would only take longer
			err := sessions[i%4].Subscribe(ctx, &mcp.SubscribeParams{URI: c.uri})
			if codeOf(err) != jsonrpc.CodeInvalidParams {
				t.Fatalf("subscribing to %s: %v, want -32602", c.what, err)
			}
		}
		if _, err := sessions[0].ReadResource(ctx, &mcp.ReadResourceParams{URI: c.uri}); codeOf(err) != jsonrpc.CodeInvalidParams {
			t.Errorf("reading %s: %v, want -32602", c.what, err)
		}
	}
	medium := strings.Repeat("m", 100*1000)
	for i := range 4 * 16 {
		err := sessions[i%4].Subscribe(ctx, &mcp.SubscribeParams{URI: fmt.Sprintf("test://%d/%s", i, medium)})
		if codeOf(err) != jsonrpc.CodeInvalidParams {
			t.Fatalf("subscribing to a 100 KB URI: %v, want -32602", err)
		}
	}
	if grown := int64(liveHeap()) - int64(base); grown > 100<<20 {
		t.Errorf("the heap grew by %d MiB under the flood, want under 100", grown>>20)
	}
	// A URI of the maximum length is accepted, up to the server-wide cap.
	at := func(i int) string {
		u := fmt.Sprintf("test://%d/", i)
		return u + strings.Repeat("u", maxResourceURI-len(u))
	}
	for i := range 40 {
		if err := sessions[i%4].Subscribe(ctx, &mcp.SubscribeParams{URI: at(i)}); err != nil {
			t.Fatalf("subscription %d of %d bytes: %v", i, len(at(i)), err)
		}
	}
	if err := sessions[0].Subscribe(ctx, &mcp.SubscribeParams{URI: "test://one-more"}); err == nil || !strings.Contains(err.Error(), "--max-subscriptions") {
		t.Errorf("subscription 41 of a server that allows 40: %v", err)
	}
	// A fifth session is refused with 429.
	req, _ := http.NewRequest(http.MethodPost, f.ts.URL+PathStreamable, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a fifth session: HTTP %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Deleted sessions free what they held.
	for _, cs := range sessions {
		closeWithin(t, cs)
	}
	rw := f.srv.resources
	waitFor(t, "the deleted sessions' subscriptions to be dropped", func() bool {
		rw.mu.Lock()
		defer rw.mu.Unlock()
		return rw.total == 0 && len(rw.sessions) == 0 && len(rw.streams) == 0
	})
	if cs := f.connectWith(ctx, "2025-11-25", nil); cs.Subscribe(ctx, &mcp.SubscribeParams{URI: at(0)}) != nil {
		t.Error("no subscription possible after the sessions were deleted")
	}
}

// TestIdleSessionFreesSubscriptions: a session that sends nothing for
// Options.SessionIdleTimeout is closed, and its subscriptions, and the
// streams watched for it, are dropped.
func TestIdleSessionFreesSubscriptions(t *testing.T) {
	f := newFixture(t, Options{SessionIdleTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	cs := f.connectWith(ctx, "2025-11-25", nil)
	for i := range 10 {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: streamURI(fmt.Sprint("idle-", i))}); err != nil {
			t.Fatal(err)
		}
	}
	rw := f.srv.resources
	rw.mu.Lock()
	held := rw.total
	rw.mu.Unlock()
	if held != 10 {
		t.Fatalf("%d subscriptions held, want 10", held)
	}
	waitFor(t, "the idle session's subscriptions to be dropped", func() bool {
		rw.mu.Lock()
		defer rw.mu.Unlock()
		return rw.total == 0 && len(rw.sessions) == 0 && len(rw.streams) == 0
	})
	if err := cs.Ping(ctx, nil); err == nil {
		t.Error("the idle session still answers")
	}
}
