package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rtfshost/rtfshost/provider"
)

// infoLight asks the provider for a snapshot without states and queue.
var infoLight = provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true}

// updateLog records the notifications/resources/updated a client gets.
type updateLog struct {
	mu   sync.Mutex
	uris []string
	wake chan struct{}
}

func newUpdateLog() *updateLog { return &updateLog{wake: make(chan struct{}, 1)} }

func (u *updateLog) handler(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	u.mu.Lock()
	u.uris = append(u.uris, req.Params.URI)
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// count returns how many updates of uri arrived.
func (u *updateLog) count(uri string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, x := range u.uris {
		if x == uri {
			n++
		}
	}
	return n
}

// waitFor waits until n updates of uri have arrived.
func (u *updateLog) waitFor(t *testing.T, uri string, n int) {
	t.Helper()
	deadline := time.After(hangGuard)
	for u.count(uri) < n {
		select {
		case <-u.wake:
		case <-deadline:
			t.Fatalf("%d updates of %s, want %d", u.count(uri), uri, n)
		}
	}
}

// connectResources connects a client of revision version ("": 2026-07-28)
// that records resource updates.
func connectResources(ctx context.Context, t *testing.T, f *fixture, version string, log *updateLog) *mcp.ClientSession {
	t.Helper()
	return f.connectWith(ctx, version, &mcp.ClientOptions{ResourceUpdatedHandler: log.handler})
}

var resourceEras = []struct{ name, version, notFound string }{
	{"2025-11-25", "2025-11-25", "-32002"},
	{"2026-07-28", "", "-32602"},
}

// TestStreamResources: the streams are resources in both eras:
// rtfs://streams in resources/list, rtfs://streams/{id} and the pages
// rtfs://streams{?cursor} in the templates;
// reading a stream's URI gives what mcp.stream.inspect gives for it, and
// the list what it gives without a stream-id; an unknown stream is the
// revision's not-found error with the URI in its data, never empty
// contents. The capability says subscribe.
func TestStreamResources(t *testing.T) {
	for _, era := range resourceEras {
		t.Run(era.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			ctx := context.Background()
			cs := connectResources(ctx, t, f, era.version, newUpdateLog())
			if caps := cs.InitializeResult().Capabilities.Resources; caps == nil || !caps.Subscribe || caps.ListChanged {
				t.Errorf("resources capability = %+v, want subscribe and no listChanged", caps)
			}
			list, err := cs.ListResources(ctx, nil)
			if err != nil || len(list.Resources) != 1 || list.Resources[0].URI != streamsURI || list.Resources[0].MIMEType != "application/json" {
				t.Fatalf("resources/list = %+v, %v", list, err)
			}
			tmpl, err := cs.ListResourceTemplates(ctx, nil)
			var uriTemplates []string
			if err == nil {
				for _, rt := range tmpl.ResourceTemplates {
					uriTemplates = append(uriTemplates, rt.URITemplate)
				}
			}
			if slices.Sort(uriTemplates); err != nil || !slices.Equal(uriTemplates, []string{streamTemplate, streamsPageTemplate}) {
				t.Fatalf("resources/templates/list = %+v, %v", tmpl, err)
			}

			args := startArgs("res 1") // a space, escaped in the URI
			args["detach"] = true
			if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolStart, Arguments: args}); err != nil || res.IsError {
				t.Fatalf("start: %v %+v", err, res)
			}
			f.feed(ctx, "res 1", values(2)...)
			waitFor(t, "two chunks", func() bool {
				in, err := f.host.Provider().Info("res 1", infoLight)
				return err == nil && in.Stats.Outputs == 2
			})
			read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: streamURI("res 1")})
			if err != nil || len(read.Contents) != 1 {
				t.Fatalf("resources/read %s = %+v, %v", streamURI("res 1"), read, err)
			}
			c := read.Contents[0]
			inspected, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolInspect, Arguments: map[string]any{"stream-id": "res 1"}})
			if err != nil {
				t.Fatal(err)
			}
			if c.URI != "rtfs://streams/res%201" || c.MIMEType != "application/json" || !sameKeys(t, c.Text, text(t, inspected)) {
				t.Errorf("the stream's resource:\n%s %s %s\ninspect:\n%s", c.URI, c.MIMEType, c.Text, text(t, inspected))
			}
			var snap map[string]any
			if json.Unmarshal([]byte(c.Text), &snap) != nil || snap["stream-id"] != "res 1" || fmt.Sprint(snap["stats"].(map[string]any)["outputs"]) != "2" {
				t.Errorf("the stream's resource = %s", c.Text)
			}

			all, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: streamsURI})
			if err != nil || len(all.Contents) != 1 {
				t.Fatalf("resources/read %s = %+v, %v", streamsURI, all, err)
			}
			var sum map[string]any
			if json.Unmarshal([]byte(all.Contents[0].Text), &sum) != nil || sum["total"] != float64(1) {
				t.Errorf("the list's resource = %s", all.Contents[0].Text)
			}

			for _, uri := range []string{streamURI("none"), "rtfs://streams/a/b", "file:///etc/passwd"} {
				res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				var rpcErr *jsonrpc.Error
				if !errors.As(err, &rpcErr) || fmt.Sprint(rpcErr.Code) != era.notFound || string(rpcErr.Data) != fmt.Sprintf(`{"uri":%q}`, uri) {
					t.Errorf("resources/read %s = %+v, %v; want error %s naming the URI", uri, res, err, era.notFound)
				}
			}
			_, _ = f.host.Provider().Cancel(ctx, "res 1")
		})
	}
}

// sameKeys reports whether the JSON objects a and b have the same keys.
func sameKeys(t *testing.T, a, b string) bool {
	t.Helper()
	var ma, mb map[string]any
	if json.Unmarshal([]byte(a), &ma) != nil || json.Unmarshal([]byte(b), &mb) != nil {
		return false
	}
	var ka, kb []string
	for k := range ma {
		ka = append(ka, k)
	}
	for k := range mb {
		kb = append(kb, k)
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// TestResourceSubscription: in both eras (resources/subscribe, and
// subscriptions/listen under 2026-07-28), a client subscribed to a
// stream's URI before the stream starts gets notifications/resources/updated
// when it starts and as its chunks are processed, none after it
// unsubscribed; the provider's subscription ends with the last subscriber.
func TestResourceSubscription(t *testing.T) {
	for _, era := range resourceEras {
		t.Run(era.name, func(t *testing.T) {
			f := newFixture(t, Options{ResourceInterval: time.Millisecond})
			ctx := context.Background()
			log := newUpdateLog()
			cs := connectResources(ctx, t, f, era.version, log)
			uri := streamURI("sub1")
			unsubscribe := subscribe(ctx, t, cs, f, uri)

			args := startArgs("sub1")
			args["detach"] = true
			if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolStart, Arguments: args}); err != nil || res.IsError {
				t.Fatalf("start: %v %+v", err, res)
			}
			log.waitFor(t, uri, 1) // it started
			f.feed(ctx, "sub1", values(3)...)
			log.waitFor(t, uri, 2)
			unsubscribe()
			waitFor(t, "the watch to end", func() bool {
				f.srv.resources.mu.Lock()
				defer f.srv.resources.mu.Unlock()
				return len(f.srv.resources.streams) == 0 && len(f.srv.resources.sessions) == 0
			})
			// The notifier may have sent an update of uri just before the
			// unsubscribe took the session out of go-sdk's table: it travels
			// on the session's standalone stream, which the unsubscribe's
			// answer does not wait for. A second stream's update, sent by the
			// same notifier after it, is a barrier: once it has arrived, so
			// has every update sent before the unsubscribe.
			barrier := streamURI("sub2")
			unsubscribe2 := subscribe(ctx, t, cs, f, barrier)
			defer unsubscribe2()
			args = startArgs("sub2")
			args["detach"] = true
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolStart, Arguments: args}); err != nil {
				t.Fatal(err)
			}
			log.waitFor(t, barrier, 1)
			before := log.count(uri)
			// sub1 changes again; sub2's next update is sent after any of
			// those would be.
			processed := func() int64 {
				in, err := f.host.Provider().Info("sub1", provider.InspectOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return in.Stats.ProcessedChunks
			}
			n := processed()
			f.feed(ctx, "sub1", values(2)...)
			waitFor(t, "sub1 to process two more chunks", func() bool { return processed() >= n+2 })
			barriers := log.count(barrier)
			f.feed(ctx, "sub2", values(1)...)
			log.waitFor(t, barrier, barriers+1)
			if got := log.count(uri); got != before {
				t.Errorf("%d updates of %s after unsubscribing", got-before, uri)
			}
			for _, id := range []string{"sub1", "sub2"} {
				_, _ = f.host.Provider().Cancel(ctx, id)
			}
		})
	}
}

// subscribe subscribes cs to uri and returns the unsubscribe. Under
// 2026-07-28 go-sdk's Subscribe holds a subscriptions/listen open until
// Unsubscribe, so it runs on a goroutine, and the subscription is in place
// once the server holds it.
func subscribe(ctx context.Context, t *testing.T, cs *mcp.ClientSession, f *fixture, uri string) func() {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}) }()
	waitFor(t, "the subscription to "+uri, func() bool {
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("subscribe %s: %v", uri, err)
			}
			errc <- nil
		default:
		}
		f.srv.resources.mu.Lock()
		defer f.srv.resources.mu.Unlock()
		for _, subs := range f.srv.resources.sessions {
			if subs[uri] {
				return true
			}
		}
		return false
	})
	return func() {
		if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
			t.Errorf("unsubscribe %s: %v", uri, err)
		}
		select {
		case <-errc:
		case <-time.After(hangGuard):
			t.Errorf("the subscription to %s did not end", uri)
		}
	}
}

// TestResourceUpdatesThrottled: a URI changed after a quiet interval is
// notified at once; the changes within the interval after it become one
// notification when the interval has passed; each URI has its own
// interval.
func TestResourceUpdatesThrottled(t *testing.T) {
	rw := newResourceWatch(nil, time.Second, DefaultMaxSubscriptions)
	t0 := time.Unix(1000, 0)
	rw.changed("a")
	if due, next := rw.due(t0); fmt.Sprint(due) != "[a]" || next != 0 {
		t.Fatalf("first change: due %v, next %v; want a at once", due, next)
	}
	rw.changed("a")
	rw.changed("a")
	rw.changed("b")
	due, next := rw.due(t0.Add(300 * time.Millisecond))
	if fmt.Sprint(due) != "[b]" || next != 700*time.Millisecond {
		t.Fatalf("within a's interval: due %v, next %v; want b, and a in 700ms", due, next)
	}
	if due, _ := rw.due(t0.Add(999 * time.Millisecond)); len(due) != 0 {
		t.Fatalf("before a's interval ends: due %v", due)
	}
	if due, next := rw.due(t0.Add(time.Second)); fmt.Sprint(due) != "[a]" || next != 0 {
		t.Fatalf("a's interval over: due %v, next %v; want a once", due, next)
	}
	if due, _ := rw.due(t0.Add(5 * time.Second)); len(due) != 0 {
		t.Fatalf("no change since: due %v", due)
	}
}

// TestResourceSubscriptionsBounded: a session whose subscriptions reach
// the bound gets an error for the next; a URI that is not absolute is
// refused; a subscription of a session that ended without unsubscribing
// is dropped at the next subscribe, with its stream's watch.
func TestResourceSubscriptionsBounded(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	cs := connectResources(ctx, t, f, "2025-11-25", newUpdateLog())
	for i := range maxSessionSubscriptions {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: streamURI(fmt.Sprint("b", i))}); err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: streamURI("one-too-many")}); err == nil {
		t.Errorf("subscription %d accepted", maxSessionSubscriptions+1)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "relative/uri"}); err == nil {
		t.Error("a relative URI accepted")
	}
	cs.Close()
	other := connectResources(ctx, t, f, "2025-11-25", newUpdateLog())
	waitFor(t, "the first session's end", func() bool {
		n := 0
		for range f.srv.mcp.Sessions() {
			n++
		}
		return n == 1
	})
	if err := other.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first session's release", func() bool {
		f.srv.resources.mu.Lock()
		defer f.srv.resources.mu.Unlock()
		return len(f.srv.resources.sessions) == 1
	})
	f.srv.resources.mu.Lock()
	defer f.srv.resources.mu.Unlock()
	if len(f.srv.resources.sessions) != 1 || len(f.srv.resources.streams) != 0 {
		t.Errorf("after the first session ended: %d sessions, %d streams watched; want 1 and 0", len(f.srv.resources.sessions), len(f.srv.resources.streams))
	}
}
