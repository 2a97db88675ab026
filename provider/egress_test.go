package provider

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
	"github.com/rtfshost/rtfshost/transport/mcp"
	"github.com/rtfshost/rtfshost/transport/sse"
)

// The operator's credentials reach only the configured server's origin, the
// egress policy refuses every other URL (redirects included), and a source
// that stalls is an error, not a hang.

const (
	secretKey   = "sk-canary-0123456789"
	secretToken = "tok-canary-0123456789"
)

// canary is a server that records the credentials it was sent and answers
// every request with a short SSE stream that completes.
type canary struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	paths    []string // the request paths, as the server read them
	leaked   []string
}

func newCanary(t *testing.T) *canary {
	c := &canary{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.requests++
		c.paths = append(c.paths, r.URL.Path)
		for name, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, secretKey) || strings.Contains(v, secretToken) {
					c.leaked = append(c.leaked, r.Method+" "+r.URL.Path+" "+name)
				}
			}
		}
		c.mu.Unlock()
		completeSSE(w)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *canary) seen() (requests int, leaked []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests, append([]string(nil), c.leaked...)
}

// pathsSeen returns the paths of the requests the canary got.
func (c *canary) pathsSeen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.paths...)
}

func completeSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "id: 1\ndata: {\"n\": 1}\n\nevent: status\ndata: {\"status\":\"complete\"}\n\n")
}

// redirector answers every request with a 302 to target+path.
func redirector(t *testing.T, target string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.Path, http.StatusFound)
	}))
	t.Cleanup(s.Close)
	return s
}

func netFixture(t *testing.T, serverURL string, env map[string]string, policy *egress.Policy, idle time.Duration) *fixture {
	return newFixture(t, Options{
		Transports: catalogOf(map[string]transport.StreamTransport{
			"sse": &sse.Transport{}, "mcp": mcp.Streamable{}, "mcp-sse": mcp.LegacySSE{},
		}),
		LookupEnv:     envOf(env),
		ServerURL:     serverURL,
		RetryAttempts: 1,
		Egress:        policy,
		IdleTimeout:   idle,
	})
}

// startNet starts a stream on the transport the request or its URL chooses.
// startNet starts a network stream; a source that gives up ends it, as it
// did before failures held streams, unless req says otherwise.
func startNet(t *testing.T, f *fixture, req StartRequest) string {
	t.Helper()
	if req.OnError == nil {
		req.OnError = endOnError
	}
	id, err := f.p.Start(req)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return id
}

func TestCredentialsOnlyToTheirOrigin(t *testing.T) {
	for _, cred := range []struct {
		name string
		env  map[string]string
	}{
		{"auth header", map[string]string{EnvStreamAuthHeader: "X-Api-Key: " + secretKey}},
		{"bearer token", map[string]string{EnvStreamBearerToken: secretToken}},
	} {
		t.Run(cred.name, func(t *testing.T) {
			home := newCanary(t) // the configured server: it must get the credential
			foreign := newCanary(t)
			foreignByName := strings.Replace(foreign.URL, "127.0.0.1", "localhost", 1)
			toOtherHost := redirector(t, foreignByName)
			toOtherPort := redirector(t, foreign.URL)
			// In the redirect cases the configured server itself redirects:
			// it may have the credential, the server it sends to may not.
			cases := []struct {
				name       string
				configured string
				req        StartRequest
			}{
				{"server-url", home.URL, StartRequest{Endpoint: "x", ServerURL: foreign.URL + "/sse"}},
				{"absolute endpoint", home.URL, StartRequest{Endpoint: foreign.URL + "/sse/x"}},
				{"redirect to another host", toOtherHost.URL, StartRequest{Endpoint: "x"}},
				{"redirect to another port", toOtherPort.URL, StartRequest{Endpoint: "x"}},
				{"mcp transport", home.URL, StartRequest{Endpoint: "tool", ServerURL: foreign.URL + "/mcp", Transport: "mcp"}},
				{"legacy mcp", home.URL, StartRequest{Endpoint: "tool", ServerURL: foreign.URL + "/mcp-sse", Transport: "mcp-sse"}},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					f := netFixture(t, tc.configured+"/sse", cred.env, nil, 0)
					before, leakedBefore := foreign.seen()
					tc.req.goProc = counter()
					id := startNet(t, f, tc.req)
					f.Await(id)
					n, leaked := foreign.seen()
					if n == before {
						t.Fatalf("the foreign server got no request: the case proves nothing")
					}
					if len(leaked) > len(leakedBefore) {
						t.Errorf("the credential reached a foreign origin: %v", leaked[len(leakedBefore):])
					}
				})
			}
			// The control: the configured server does get it.
			f := netFixture(t, home.URL+"/sse", cred.env, nil, 0)
			id := startNet(t, f, StartRequest{Endpoint: "x", goProc: counter()})
			if st := f.Await(id); st.State != StateCompleted {
				t.Fatalf("home stream: %+v", st)
			}
			if _, got := home.seen(); len(got) == 0 {
				t.Error("the configured server did not get the credential")
			}
		})
	}
}

func TestEgressPolicyRefusesOtherServers(t *testing.T) {
	home := newCanary(t)
	foreign := newCanary(t)
	policy, err := egress.New(egress.Options{Servers: []string{home.URL}, ServerFlag: "--allow-server"})
	if err != nil {
		t.Fatal(err)
	}
	f := netFixture(t, home.URL+"/sse", nil, policy, 0)
	for _, req := range []StartRequest{
		{Endpoint: "x", ServerURL: foreign.URL + "/sse"},
		{Endpoint: foreign.URL + "/sse/x"},
		{Endpoint: "tool", ServerURL: foreign.URL + "/mcp", Transport: "mcp"},
		{Endpoint: "x", ServerURL: home.URL + "0/sse"}, // a longer port is another origin
	} {
		req.goProc = counter()
		_, err := f.p.Start(req)
		if !egress.Refused(err) {
			t.Fatalf("start %+v: error %v, want a refusal", req, err)
		}
		// A URL the host would not dial at all (the port out of range)
		// says why; one the policy refuses names the flag.
		if msg := err.Error(); !strings.Contains(msg, "127.0.0.1") || errors.Is(err, egress.ErrDenied) && !strings.Contains(msg, "--allow-server") {
			t.Errorf("refusal %q names neither the URL nor the flag", msg)
		}
	}
	// A redirect from an allowed server to a foreign one is refused too.
	allowedRedirector := redirector(t, foreign.URL)
	policy2, _ := egress.New(egress.Options{Servers: []string{home.URL, allowedRedirector.URL}, ServerFlag: "--allow-server"})
	f2 := netFixture(t, home.URL+"/sse", nil, policy2, 0)
	id := startNet(t, f2, StartRequest{Endpoint: allowedRedirector.URL + "/sse/x", goProc: counter()})
	st := f2.Await(id)
	if st.State != StateError || !strings.Contains(st.Message, "egress policy") {
		t.Errorf("redirect to a foreign server: %+v", st)
	}
	if n, _ := foreign.seen(); n != 0 {
		t.Errorf("the foreign server got %d requests", n)
	}
	// The configured server itself works.
	id = startNet(t, f, StartRequest{Endpoint: "x", goProc: counter()})
	if st := f.Await(id); st.State != StateCompleted {
		t.Errorf("allowed stream: %+v", st)
	}
}

// Every URL a stream dials is classified once, by egress.Parse, and the
// policy check, the credential and the dial all use that result: an
// :endpoint whose scheme is http in any case is a URL of its own (never a
// path on the default server that gets its credential), dot segments are
// resolved (encoded or not) before the prefix check and on the wire, and
// an MCP stream's credential follows the URL it dials (:server-url), not
// its :endpoint (the tool's name).
func TestURLSpellingsCannotEscape(t *testing.T) {
	home := newCanary(t)
	foreign := newCanary(t)
	fhost := strings.TrimPrefix(foreign.URL, "http://")
	env := map[string]string{EnvStreamBearerToken: secretToken}
	spellings := []string{"HTTP", "Http", "hTtP"}

	t.Run("run: the credential stays home", func(t *testing.T) {
		cases := []StartRequest{
			{Transport: "mcp", Endpoint: home.URL + "/mcp", ServerURL: foreign.URL + "/mcp"},
		}
		for _, sch := range spellings {
			cases = append(cases, StartRequest{Endpoint: sch + "://" + fhost + "/sse/x"})
		}
		for _, req := range cases {
			f := netFixture(t, home.URL+"/sse", env, nil, 0)
			before, leakedBefore := foreign.seen()
			req.goProc = counter()
			f.Await(startNet(t, f, req))
			n, leaked := foreign.seen()
			if n == before {
				t.Errorf("%+v: the foreign server got no request", req)
			}
			if len(leaked) > len(leakedBefore) {
				t.Errorf("%+v: the credential reached a foreign origin: %v", req, leaked[len(leakedBefore):])
			}
		}
	})

	t.Run("serve: other origins are refused", func(t *testing.T) {
		policy, err := egress.New(egress.Options{ServerFlag: "--allow-server"})
		if err != nil {
			t.Fatal(err)
		}
		f := netFixture(t, home.URL+"/sse", env, policy, 0)
		before, _ := foreign.seen()
		for _, sch := range spellings {
			_, err := f.p.Start(StartRequest{Endpoint: sch + "://" + fhost + "/sse/x", goProc: counter()})
			if !errors.Is(err, egress.ErrDenied) || !strings.Contains(err.Error(), "endpoint") || !strings.Contains(err.Error(), fhost) {
				t.Errorf("%s endpoint: error %v, want a refusal naming the endpoint", sch, err)
			}
		}
		if n, _ := foreign.seen(); n != before {
			t.Errorf("the foreign server got %d requests", n-before)
		}
	})

	t.Run("serve: a path prefix is not left", func(t *testing.T) {
		policy, err := egress.New(egress.Options{Servers: []string{foreign.URL + "/ok"}, ServerFlag: "--allow-server"})
		if err != nil {
			t.Fatal(err)
		}
		f := netFixture(t, home.URL+"/sse", env, policy, 0)
		seenBefore := len(foreign.pathsSeen())
		for _, req := range []StartRequest{
			{ServerURL: foreign.URL + "/ok", Endpoint: "../esc/x"},
			{ServerURL: foreign.URL + "/ok", Endpoint: "x/../../esc"},
			{ServerURL: foreign.URL + "/ok/%2e%2e/esc", Endpoint: "x"},
			{ServerURL: foreign.URL + "/ok/%2E%2e/esc", Endpoint: "x"},
			{ServerURL: foreign.URL + "/ok/.%2E/esc", Endpoint: "x"},
			{Endpoint: foreign.URL + "/ok/%2e%2e/esc/x"},
			{Endpoint: "hTTp://" + fhost + "/ok/sub/%2e%2e/../../esc"},
			{Endpoint: foreign.URL + "/ok/a%2F..%2F..%2Fesc"}, // a server that decodes %2F reads /ok/a/../../esc
		} {
			req.goProc = counter()
			if _, err := f.p.Start(req); !errors.Is(err, egress.ErrDenied) {
				t.Errorf("start %+v: error %v, want a refusal", req, err)
			}
		}
		// Dot segments inside the prefix are fine, and the server is sent
		// the resolved path: the one the policy checked.
		id := startNet(t, f, StartRequest{ServerURL: foreign.URL + "/ok/sub", Endpoint: "a/../b", goProc: counter()})
		if st := f.Await(id); st.State != StateCompleted {
			t.Errorf("allowed stream: %+v", st)
		}
		paths := foreign.pathsSeen()[seenBefore:]
		if len(paths) == 0 || paths[len(paths)-1] != "/ok/sub/b" {
			t.Errorf("the server was sent %q, want /ok/sub/b last", paths)
		}
		for _, p := range paths {
			if strings.Contains(p, "..") || !strings.HasPrefix(p, "/ok/") {
				t.Errorf("the server was sent %q", p)
			}
		}
	})
}

func TestIdleTimeoutEndsAStalledSource(t *testing.T) {
	stall := make(chan struct{})
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select { // headers, then nothing: not an event, not a comment
		case <-r.Context().Done():
		case <-stall:
		}
	}))
	t.Cleanup(func() { close(stall); stalled.Close() })
	for _, tc := range []struct{ transport, path string }{
		{"sse", "/sse"}, {"mcp", "/mcp"}, {"mcp-sse", "/mcp-sse"},
	} {
		t.Run(tc.transport, func(t *testing.T) {
			f := netFixture(t, stalled.URL+tc.path, nil, nil, 100*time.Millisecond)
			id := startNet(t, f, StartRequest{Endpoint: "x", Transport: tc.transport, goProc: counter()})
			st := f.Await(id)
			if st.State != StateError || !strings.Contains(st.Message, "idle timeout") {
				t.Errorf("stalled %s source: %+v", tc.transport, st)
			}
			// By default a source that gave up holds its stream as
			// failed, to be resumed once the source is back.
			id = startNet(t, f, StartRequest{Endpoint: "x", Transport: tc.transport, goProc: counter(), OnError: &ErrorPolicy{}})
			st = f.waitState(id, StateFailed)
			if st.Failure == nil || st.Failure.Kind != FailureSource || !strings.Contains(st.Failure.Error, "idle timeout") {
				t.Errorf("stalled %s source held: %+v", tc.transport, st)
			}
		})
	}
	// A start call's :idle-timeout-ms wins over the provider's default.
	f := netFixture(t, stalled.URL+"/sse", nil, nil, time.Hour)
	id := startNet(t, f, StartRequest{Endpoint: "x", IdleTimeout: 50 * time.Millisecond, goProc: counter()})
	if st := f.Await(id); !strings.Contains(st.Message, "idle timeout") {
		t.Errorf("per-stream idle timeout: %+v", st)
	}
}

func TestProcessorCallTimeLimit(t *testing.T) {
	// A processor that loops forever fails at the call's time limit
	// (--call-timeout), naming the limit: the stream is held as failed.
	g := compileGlobals(t, `(defn spin [state chunk meta] (loop [i 0] (recur (inc i))))`)
	f := newFixture(t, Options{Limits: rtfs.Limits{MaxSteps: 1 << 60, MaxDuration: 50 * time.Millisecond}})
	id := f.start(StartRequest{Processor: rtfs.Symbol("spin"), Globals: g})
	f.Send(id, `{"n": 1}`)
	st := f.waitState(id, StateFailed)
	if !strings.Contains(st.Message, "time limit of 50ms exceeded") || st.Failure.Seq != 1 {
		t.Errorf("status %+v", st)
	}
}

func TestMaxStreams(t *testing.T) {
	f := newFixture(t, Options{MaxStreams: 2})
	a := f.start(StartRequest{goProc: counter()})
	f.start(StartRequest{goProc: counter()})
	_, err := f.p.Start(StartRequest{Endpoint: "e", Transport: "mock", goProc: counter()})
	if !errors.Is(err, ErrTooManyStreams) || !strings.Contains(err.Error(), "2 streams") {
		t.Fatalf("third stream: %v", err)
	}
	// Once one ends there is room again.
	if _, err := f.p.Cancel(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	f.Await(a)
	f.start(StartRequest{goProc: counter()})
}

func TestDisplayCursorHidesTheSession(t *testing.T) {
	const session = "3f9c2a7e-SECRET-SESSION-ID-b81d"
	raw := "mcp1." + base64.RawURLEncoding.EncodeToString([]byte(`{"k":"http","s":"`+session+`","p":"2025-11-25","r":2,"t":"tok","e":"17"}`))
	shown := DisplayCursor(raw)
	for _, secret := range []string{session, "SECRET", raw[12:]} {
		if strings.Contains(shown, secret) {
			t.Errorf("DisplayCursor shows %q: %q", secret, shown)
		}
	}
	if b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(strings.SplitN(shown, "…", 2)[0], "mcp1.")); err == nil && strings.Contains(string(b), "SECRET") {
		t.Errorf("the shown prefix decodes to %q", b)
	}
	if DisplayCursor(raw) != shown || DisplayCursor(raw+"x") == shown {
		t.Error("DisplayCursor is not a stable digest of the cursor")
	}
	if DisplayCursor("12") != "12" {
		t.Error("a short cursor is not shown whole")
	}
}
