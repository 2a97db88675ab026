package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/cluster/clustertest"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
)

// BenchmarkStartProgress measures one mcp.stream.start call, POSTed over
// loopback HTTP, whose stream gets b.N chunks, each with an output: per op, a
// chunk goes through the mock transport, the processor, the call's
// subscription, its Outbox and the reporter, and is written to the call's
// SSE response as a notifications/progress event (kept in the event store
// for resumption), or shares one with others, or is coalesced. The client
// reads the raw SSE and counts events, so the cost of a client's JSON
// decoding is left out. The final result, which holds every output, is
// checked.
//
//   - every: one notification per output, at once;
//   - throttled: outputs of one :kind held for an hour: all coalesced into
//     the first notification and the last;
//   - batched: the default policy (a notification per 200 ms or per 10
//     outputs);
//   - every-badger: every, with the event store in Badger (serve's default:
//     a data directory).
func BenchmarkStartProgress(b *testing.B) {
	hour := provider.Delivery{Normal: provider.Throttle{Interval: time.Hour, MaxBatch: 10}, Low: provider.Throttle{Interval: -1}}
	for _, bc := range []struct {
		name     string
		delivery *provider.Delivery
		kind     bool
		store    bool
	}{
		{"every", &everyOutput, false, false},
		{"throttled", &hour, true, false},
		{"batched", nil, false, false},
		{"every-badger", &everyOutput, false, true},
	} {
		b.Run(bc.name, func(b *testing.B) { benchStart(b, bc.delivery, bc.kind, bc.store) })
	}
}

// kindProgram is counterProgram whose outputs all have the :kind :tick.
var kindProgram = strings.Replace(counterProgram, ":output {:n n :value (:value chunk)}", ":output {:n n :value (:value chunk)} :kind :tick", 1)

func benchStart(b *testing.B, delivery *provider.Delivery, kind, withStore bool) {
	var store persistence.Store
	if withStore {
		bs, err := persistence.OpenBadger(b.TempDir(), persistence.Options{GCInterval: -1, MinFreeBytes: -1})
		if err != nil {
			b.Fatal(err)
		}
		defer bs.Close()
		store = bs
	}
	if delivery == nil {
		d := provider.DefaultDelivery()
		delivery = &d
	}
	// Without the schema check of the tests' fixtures: the benchmark
	// measures the server, not the check. No bound on pending outputs: a
	// client this far behind would be cut off, but the benchmark measures
	// the cost of the notifications.
	f := buildFixture(&testing.T{}, Options{Delivery: delivery, MaxPendingOutputs: -1}, func(ho host.Options) (*host.Host, error) {
		ho.Store = store
		return host.New(ho)
	}, func(h http.Handler) http.Handler { return h })
	defer func() {
		f.srv.Close()
		f.ts.Close()
		f.host.Close()
	}()
	url := f.ts.URL + PathStreamable
	sid := benchInitialize(b, url)
	sa := startArgs("bench")
	if kind {
		sa["program"] = kindProgram
	}
	args, _ := json.Marshal(sa)
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp.stream.start","arguments":%s,"_meta":{"progressToken":"b"}}}`, args)
	ctx := context.Background()
	chunk := map[string]any{"value": 1}
	b.ReportAllocs()
	b.ResetTimer()
	type counted struct {
		notes  int
		result string
		err    error
	}
	done := make(chan counted, 1)
	go func() {
		n, res, err := benchPost(url, sid, call)
		done <- counted{n, res, err}
	}()
	src := f.mock.Source("bench")
	for i := 0; i < b.N; i++ {
		if err := src.SendJSON(ctx, "", chunk); err != nil {
			b.Fatal(err)
		}
	}
	if err := src.SendJSON(ctx, "", end); err != nil {
		b.Fatal(err)
	}
	r := <-done
	b.StopTimer()
	want := fmt.Sprintf(`\"output-count\":%d`, b.N+1)
	if r.err != nil || !strings.Contains(r.result, want) {
		b.Fatalf("call: %v, result %.300s", r.err, r.result)
	}
	b.ReportMetric(float64(r.notes)/float64(b.N), "notes/op")
}

// benchPost posts a tools/call and counts the progress events of its SSE
// response; it returns the count and the last event's data.
func benchPost(url, sid, body string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	setBenchHeaders(req, sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	notes, last := 0, ""
	for sc.Scan() {
		line := sc.Bytes()
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			if bytes.Contains(data, []byte(`"notifications/progress"`)) {
				notes++
			} else {
				last = string(data)
			}
		}
	}
	return notes, last, sc.Err()
}

// benchInitialize runs the initialize handshake and returns the session id.
func benchInitialize(b *testing.B, url string) string {
	sid := ""
	for _, body := range []string{initializeBody, `{"jsonrpc":"2.0","method":"notifications/initialized"}`} {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		setBenchHeaders(req, sid)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if sid == "" {
			sid = resp.Header.Get("Mcp-Session-Id")
		}
	}
	if sid == "" {
		b.Fatal("initialize returned no session id")
	}
	return sid
}

func setBenchHeaders(req *http.Request, sid string) {
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
}

// BenchmarkListCluster measures a page of the cluster-wide list
// (Provider.List, what mcp.stream.inspect without a stream-id serves) on
// host b of two sharing an embedded nats-server, of streams that host a
// runs: remote, each snapshot is asked of a (ownership record, then a's
// control inbox), eight at a time; local, the same streams listed on a,
// from memory (plus the store's key listing).
func BenchmarkListCluster(b *testing.B) {
	const streams = 100
	ns := clustertest.Server(b, clustertest.Options{})
	open := func(node string) *fixture {
		f := buildFixture(&testing.T{}, Options{}, func(ho host.Options) (*host.Host, error) {
			return host.Open(host.OpenOptions{Options: ho,
				Cluster: &cluster.Options{URLs: []string{ns.ClientURL()}, Node: node, LeaseTTL: 2 * time.Second}})
		}, func(h http.Handler) http.Handler { return h })
		b.Cleanup(func() {
			f.srv.Close()
			f.ts.Close()
			f.host.Close()
		})
		return f
	}
	a, other := open("a"), open("b")
	url := a.ts.URL + PathStreamable
	sid := benchInitialize(b, url)
	for i := range streams {
		sa := startArgs(fmt.Sprintf("list-%03d", i))
		sa["detach"] = true
		args, _ := json.Marshal(sa)
		if _, last, err := benchPost(url, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp.stream.start","arguments":%s}}`, args)); err != nil || !strings.Contains(last, "list-") {
			b.Fatalf("start: %s %v", last, err)
		}
	}
	light := provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true}
	for _, bc := range []struct {
		name string
		f    *fixture
	}{{"remote", other}, {"local", a}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				page, err := bc.f.host.Provider().List(context.Background(), provider.ListOptions{Limit: streams, Inspect: light})
				if err != nil || len(page.Streams) != streams {
					b.Fatalf("List = %d streams, %v", len(page.Streams), err)
				}
			}
		})
	}
}
