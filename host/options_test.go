package host_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// TestOptionsOneWay: each thing is set one way; a field the host sets
// itself, or a second way of setting one thing, is refused by name rather
// than ignored.
func TestOptionsOneWay(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func() (*host.Host, error)
		want string
	}{
		{"Streams.Capabilities", func() (*host.Host, error) {
			return host.New(host.Options{Streams: provider.Options{Capabilities: capabilities.NewRegistry()}})
		}, "Options.Streams.Capabilities is the host's own registry"},
		{"Streams.Store", func() (*host.Host, error) {
			return host.New(host.Options{Streams: provider.Options{Store: persistence.NewMemStore()}})
		}, "give the store there"},
		{"DataDir and Store", func() (*host.Host, error) {
			return host.Open(host.OpenOptions{DataDir: t.TempDir(), Options: host.Options{Store: persistence.NewMemStore()}})
		}, "both DataDir"},
		{"Transports and AddTransports", func() (*host.Host, error) {
			return host.Open(host.OpenOptions{AddTransports: []transport.Kind{mock.Kind(&mock.Transport{})},
				Options: host.Options{Streams: provider.Options{Transports: host.DefaultTransports()}}})
		}, "both Streams.Transports and AddTransports"},
	} {
		h, err := tc.open()
		if err == nil {
			h.Close()
			t.Errorf("%s: opened; want an error", tc.name)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}

// TestOpenAddTransports: AddTransports adds to the defaults: a program
// runs a stream on the added mock, and the defaults are all there.
func TestOpenAddTransports(t *testing.T) {
	src := &mock.Transport{}
	h, err := host.Open(host.OpenOptions{AddTransports: []transport.Kind{mock.Kind(src)}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	names := map[string]bool{}
	for _, k := range h.Provider().Transports().Kinds() {
		names[k.Name] = true
	}
	for _, k := range host.DefaultTransports().Kinds() {
		if !names[k.Name] {
			t.Errorf("default transport %s missing", k.Name)
		}
	}
	prog, err := rtfs.Compile("add.rtfs", []byte(`
(defn sum [n chunk] {:state (+ n (:x chunk))})
(def s (call :mcp.stream.start {:transport :mock :endpoint "m" :stream-id "m" :processor sum :initial-state 0}))
(call :mcp.stream.await {:stream-id "m" :timeout-ms 10000})
(:current-state (call :mcp.stream.inspect {:stream-id "m"}))`))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		s := src.Source("m")
		for i := 1; i <= 3; i++ {
			_ = s.SendJSON(context.Background(), "chunk", map[string]int{"x": i})
		}
		s.Close()
	}()
	v, err := h.Run(context.Background(), prog)
	if err != nil || v != rtfs.Int(6) {
		t.Fatalf("Run = %v, %v; want 6", v, err)
	}
}
