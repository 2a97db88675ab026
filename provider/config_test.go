package provider

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
)

func envOf(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

// The configuration chain of docs/streams.md, *Configuration*: the server
// URL chain, the auth header, auto-connect.
func TestResolveConfig(t *testing.T) {
	cases := []struct {
		name     string
		env      map[string]string
		explicit string
		url      string
		header   http.Header
		auto     bool
	}{
		{"defaults", nil, "", DefaultServerURL, nil, true},
		{"explicit wins", map[string]string{EnvStreamEndpoint: "http://env"}, " http://explicit ", "http://explicit", nil, true},
		{"endpoint env", map[string]string{EnvStreamEndpoint: "http://a", EnvLocalSSEURL: "http://b"}, "", "http://a", nil, true},
		{"blank counts as unset", map[string]string{EnvStreamEndpoint: "  ", EnvLocalSSEURL: "http://b", EnvCloudflareDocsURL: "http://c"}, "", "http://b", nil, true},
		{"cloudflare last", map[string]string{EnvCloudflareDocsURL: "http://c"}, "", "http://c", nil, true},
		{"auth header", map[string]string{EnvStreamAuthHeader: "X-Api-Key: k1:k2", EnvStreamBearerToken: "tok"}, "", DefaultServerURL, http.Header{"X-Api-Key": {"k1:k2"}}, true},
		{"bare header value", map[string]string{EnvStreamAuthHeader: "Token abc"}, "", DefaultServerURL, http.Header{"Authorization": {"Token abc"}}, true},
		{"bearer", map[string]string{EnvStreamBearerToken: " tok "}, "", DefaultServerURL, http.Header{"Authorization": {"Bearer tok"}}, true},
		{"auto off", map[string]string{EnvStreamAutoConnect: "no"}, "", DefaultServerURL, nil, false},
		{"auto on", map[string]string{EnvStreamAutoConnect: " YES "}, "", DefaultServerURL, nil, true},
	}
	for _, tc := range cases {
		cfg := resolveConfig(envOf(tc.env), tc.explicit, true)
		target, err := egress.Parse(cfg.serverURL)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if cfg.serverURL != tc.url || cfg.autoConnect != tc.auto || !equalHeader(cfg.cred.HeaderFor(target), tc.header) {
			t.Errorf("%s: got %+v", tc.name, cfg)
		}
	}
	if cfg := resolveConfig(envOf(map[string]string{EnvStreamAutoConnect: "on"}), "", false); !cfg.autoConnect {
		t.Error("CCOS_MCP_STREAM_AUTO_CONNECT=on did not override the manual default")
	}
}

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if strings.Join(a[k], ",") != strings.Join(v, ",") {
			return false
		}
	}
	return true
}

// TestChooseTransport: the catalog picks the transport from the URL
// unless the start call names one.
func TestChooseTransport(t *testing.T) {
	cases := []struct{ explicit, endpoint, server, want string }{
		{"", "weather.monitor.v1", "http://127.0.0.1:2025/sse", "sse"},
		{"", "weather.monitor.v1", "http://127.0.0.1:2025/mcp", "mcp"},
		{"", "weather.monitor.v1", "http://127.0.0.1:2025/mcp-sse/", "mcp-sse"},
		{"", "http://h/mcp", "http://127.0.0.1:2025/sse", "mcp"},
		{"", "mock://x", "http://127.0.0.1:2025/sse", "mock"},
		{"mock", "weather.monitor.v1", "http://127.0.0.1:2025/mcp", "mock"},
	}
	cat := catalogOf(map[string]transport.StreamTransport{"sse": nil, "mcp": nil, "mcp-sse": nil, "mock": nil})
	for _, c := range cases {
		def := stream.Definition{Endpoint: c.endpoint, ServerURL: c.server}
		k, err := cat.Choose(c.explicit, def.Target())
		if err != nil || k.Name != c.want {
			t.Errorf("Choose(%q) for endpoint %q on %q = %q, %v; want %q", c.explicit, c.endpoint, c.server, k.Name, err, c.want)
		}
	}
	if _, err := cat.Choose("", "ftp://x/y"); err == nil || !strings.Contains(err.Error(), "name one with :transport") {
		t.Errorf("an ftp URL: %v", err)
	}
}

// recordingTransport records the Spec it is run with and waits for its
// context.
type recordingTransport struct {
	mu    sync.Mutex
	specs []transport.Spec
}

func (r *recordingTransport) Run(ctx context.Context, spec transport.Spec, _ string, _ transport.Sink) error {
	r.mu.Lock()
	r.specs = append(r.specs, spec)
	r.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

// The transport gets the resolved URL, the auth header, the :config as query
// and JSON arguments; the secret never shows in inspect output, and a URL's
// credentials are redacted there.
func TestSpecAndSecrets(t *testing.T) {
	rec := &recordingTransport{}
	env := map[string]string{EnvStreamBearerToken: "s3cret-token", EnvStreamEndpoint: "http://user:pw@127.0.0.1:9/sse?key=s3cret-key"}
	f := newFixture(t, Options{LookupEnv: envOf(env), Transports: catalogOf(map[string]transport.StreamTransport{"sse": rec})})
	id, err := f.p.Start(StartRequest{Endpoint: "weather.monitor.v1", goProc: counter(),
		Config: rtfs.MapOf(kw("city"), rtfs.String("Paris"), kw("limit"), rtfs.Int(3), kw("units"), kw("metric"), kw("skip"), rtfs.Nil)})
	if err != nil {
		t.Fatal(err)
	}
	f.waitFor("the transport", func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.specs) == 1 })
	sp := rec.specs[0]
	if sp.StreamID != id || sp.Endpoint != "weather.monitor.v1" || sp.HTTP.ServerURL != env[EnvStreamEndpoint] || sp.RetryAttempts != 3 {
		t.Errorf("spec = %+v", sp)
	}
	if sp.HTTP.Header.Get("Authorization") != "Bearer s3cret-token" {
		t.Errorf("auth header = %q", sp.HTTP.Header.Get("Authorization"))
	}
	if len(sp.HTTP.Query) != 3 || sp.HTTP.Query["city"] != "Paris" || sp.HTTP.Query["limit"] != "3" || sp.HTTP.Query["units"] != "metric" {
		t.Errorf("query = %v", sp.HTTP.Query)
	}
	if string(sp.Arguments) == "" || !strings.Contains(string(sp.Arguments), `"city":"Paris"`) {
		t.Errorf("arguments = %s", sp.Arguments)
	}
	all := f.p.Summary(InspectOptions{}).String()
	for _, secret := range []string{"s3cret", "pw@"} {
		if strings.Contains(all, secret) {
			t.Errorf("inspect output leaks %q: %s", secret, all)
		}
	}
	if got := path(f.Inspect(id), "transport", "server-url"); got != rtfs.String("http://127.0.0.1:9/sse?redacted") {
		t.Errorf("server-url = %v", got)
	}
}

// TestIdleTimeoutInSpec: the Spec carries the stream's idle timeout (the
// start call's, else the provider's; a start call's negative value means
// none) for every transport, since a process transport (:stdio) applies it
// itself.
func TestIdleTimeoutInSpec(t *testing.T) {
	rec := &recordingTransport{}
	f := newFixture(t, Options{IdleTimeout: time.Minute, Transports: catalogOf(map[string]transport.StreamTransport{"stdio": rec})})
	for i, tc := range []struct{ start, want time.Duration }{{0, time.Minute}, {50 * time.Millisecond, 50 * time.Millisecond}, {-1, 0}} {
		if _, err := f.p.Start(StartRequest{Endpoint: "tool", Transport: "stdio", IdleTimeout: tc.start, goProc: counter()}); err != nil {
			t.Fatal(err)
		}
		f.waitFor("the transport", func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.specs) == i+1 })
		rec.mu.Lock()
		got := rec.specs[i].IdleTimeout
		rec.mu.Unlock()
		if got != tc.want {
			t.Errorf(":idle-timeout-ms %v: Spec.IdleTimeout = %v, want %v", tc.start, got, tc.want)
		}
	}
}
