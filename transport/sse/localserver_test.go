package sse

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
)

// startLocalServer starts the reference server on 127.0.0.1:0 for one test.
func startLocalServer(tb testing.TB) *localserver.Server {
	tb.Helper()
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		tb.Fatalf("start reference server: %v", err)
	}
	tb.Cleanup(func() { srv.Close() })
	return srv
}

// TestReferenceServer runs the transport against the reference server and its
// deliberate faults.
func TestReferenceServer(t *testing.T) {
	cases := []struct {
		name    string
		query   map[string]string
		limit   int // chunk events expected, ids 1..limit
		waits   []time.Duration
		maxSize int
		check   func(t *testing.T, err error)
	}{
		{name: "clean", query: map[string]string{"limit": "40"}, limit: 40},
		{name: "drop once", query: map[string]string{"limit": "40", "drop": "true", "drop_after": "15", "drop_times": "1"},
			limit: 40, waits: []time.Duration{retry.DefaultInitial}},
		{name: "500 twice", query: map[string]string{"limit": "5", "fail": "500", "fail_times": "2"},
			limit: 5, waits: []time.Duration{retry.DefaultInitial, 2 * retry.DefaultInitial}},
		{name: "retry field", query: map[string]string{"limit": "5", "retry_ms": "700", "drop": "true", "drop_after": "2", "drop_times": "1"},
			limit: 5, waits: []time.Duration{700 * time.Millisecond}},
		{name: "401", query: map[string]string{"fail": "401"}, check: func(t *testing.T, err error) {
			var te *transport.Error
			if !errors.As(err, &te) || te.Status != 401 || !te.Permanent {
				t.Fatalf("err = %v, want a permanent 401", err)
			}
		}},
		{name: "oversized", query: map[string]string{"limit": "3", "oversized": "200000"}, maxSize: 100000,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, transport.ErrEventTooLarge) || !transport.IsPermanent(err) {
					t.Fatalf("err = %v, want a permanent ErrEventTooLarge", err)
				}
			}},
		{name: "over 64 KiB", query: map[string]string{"limit": "3", "oversized": "200000"}, limit: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("case", func(t *testing.T) {
				srv := startLocalServer(t)
				spec := transport.Spec{StreamID: tc.name, Endpoint: "counter.v1", MaxEventBytes: tc.maxSize, HTTP: transport.HTTP{ServerURL: srv.URL() + "/sse", Query: tc.query}}
				spec.HTTP.Query["interval_ms"] = "0"
				clk := &fakeClock{}
				sink := &recSink{}
				err := (&Transport{policy: retry.Policy{Clock: clk}}).Run(context.Background(), spec, "", sink)
				if tc.check != nil {
					tc.check(t, err)
					return
				}
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if got := sink.ids(); !reflect.DeepEqual(got, seqIDs(1, tc.limit)) {
					t.Fatalf("ids = %v, want 1..%d once each", got, tc.limit)
				}
				if got := clk.Waits(); !reflect.DeepEqual(got, tc.waits) {
					t.Fatalf("waits = %v, want %v", got, tc.waits)
				}
			})
			goleak.VerifyNone(t, goleak.IgnoreCurrent())
		})
	}
}

// TestUnknownEndpointSaysWhy: a 404's body reaches the error: the reference server lists its endpoints and suggests the nearest.
func TestUnknownEndpointSaysWhy(t *testing.T) {
	srv := startLocalServer(t)
	spec := transport.Spec{StreamID: "typo", Endpoint: "wether.monitor.v1", HTTP: transport.HTTP{ServerURL: srv.URL() + "/sse"}}
	err := (&Transport{policy: retry.Policy{Clock: &fakeClock{}}}).Run(context.Background(), spec, "", &recSink{})
	var te *transport.Error
	if !errors.As(err, &te) || te.Status != 404 || !te.Permanent {
		t.Fatalf("err = %v, want a permanent 404", err)
	}
	for _, want := range []string{`unknown endpoint "wether.monitor.v1"`, `did you mean "weather.monitor.v1"?`, "known endpoints: ["} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
