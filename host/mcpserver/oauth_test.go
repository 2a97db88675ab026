package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testIssuer is an OAuth authorization server on 127.0.0.1: it publishes
// its RFC 8414 metadata (or, with openID, only OpenID discovery's) and a
// key set, and signs access tokens with the keys it publishes.
type testIssuer struct {
	t      *testing.T
	ts     *httptest.Server
	openID bool

	mu      sync.Mutex
	keys    map[string]*rsa.PrivateKey // published, by key id
	fetches int                        // of the key set
}

func newTestIssuer(t *testing.T, openID bool) *testIssuer {
	t.Helper()
	iss := &testIssuer{t: t, openID: openID, keys: map[string]*rsa.PrivateKey{"k1": newRSAKey(t)}}
	mux := http.NewServeMux()
	meta := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": iss.url(), "jwks_uri": iss.url() + "/jwks",
			"authorization_endpoint": iss.url() + "/authorize", "token_endpoint": iss.url() + "/token",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
		})
	}
	if openID {
		mux.HandleFunc("GET /.well-known/openid-configuration", meta)
	} else {
		mux.HandleFunc("GET /.well-known/oauth-authorization-server", meta)
	}
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		iss.mu.Lock()
		defer iss.mu.Unlock()
		iss.fetches++
		var keys []map[string]string
		for kid, k := range iss.keys {
			keys = append(keys, map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
				"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	})
	iss.ts = httptest.NewServer(mux)
	t.Cleanup(iss.ts.Close)
	return iss
}

func (iss *testIssuer) url() string { return iss.ts.URL }

// keyFetches is how many times the key set was fetched.
func (iss *testIssuer) keyFetches() int {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	return iss.fetches
}

// publish adds a key under kid to the key set.
func (iss *testIssuer) publish(kid string, k *rsa.PrivateKey) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.keys[kid] = k
}

func (iss *testIssuer) key(kid string) *rsa.PrivateKey {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	return iss.keys[kid]
}

func newRSAKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// sign signs claims with RS256 and key, under kid.
func sign(t *testing.T, claims jwt.MapClaims, kid string, key *rsa.PrivateKey) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// oauthFixture is a Server under OAuth of a testIssuer, on 127.0.0.1.
type oauthFixture struct {
	*fixture
	iss      *testIssuer
	srv      *Server
	url      string // of /mcp: the resource
	resource string
}

func newOAuthFixture(t *testing.T, iss *testIssuer, issuerURL string, routes ...Route) *oauthFixture {
	t.Helper()
	f := newFixture(t, Options{})
	ts := httptest.NewUnstartedServer(nil)
	resource := "http://" + ts.Listener.Addr().String() + PathStreamable
	srv, err := New(Options{Host: f.host, OAuth: &OAuth{Issuer: issuerURL, Resource: resource}, Routes: routes})
	if err != nil {
		ts.Close()
		t.Fatal(err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	return &oauthFixture{fixture: f, iss: iss, srv: srv, url: resource, resource: resource}
}

// claims are the claims of a good token of the fixture, with scope.
func (o *oauthFixture) claims(scope string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"iss": o.iss.url(), "aud": o.resource, "sub": "alice", "scope": scope,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

func (o *oauthFixture) token(scope string) string {
	return sign(o.t, o.claims(scope), "k1", o.iss.key("k1"))
}

// post sends body to /mcp with token (none when "") and session.
func (o *oauthFixture) post(token, session, body string) (*http.Response, string) {
	o.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, o.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set(headerProtocolVersion, "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		o.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const initializeOAuth = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// session initializes a session with token and returns its id.
func (o *oauthFixture) session(token string) string {
	o.t.Helper()
	resp, body := o.post(token, "", initializeOAuth)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		o.t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	o.post(token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sid
}

// TestOAuthTokens: a request without a token, or with one that is not
// good (wrong audience, expired, signed by another key, another issuer,
// no exp, not yet valid, alg none, HS256 "signed" with the public key,
// not an access token) gets 401 with a challenge that names the
// resource's metadata and error="invalid_token"; a good token, also one
// expired within the leeway, passes.
func TestOAuthTokens(t *testing.T) {
	iss := newTestIssuer(t, false)
	o := newOAuthFixture(t, iss, iss.url())
	metadataURL := strings.TrimSuffix(o.url, PathStreamable) + PathResourceMetadata + PathStreamable

	resp, body := o.post("", "", initializeOAuth)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %s %s", resp.Status, body)
	}
	want := fmt.Sprintf(`Bearer resource_metadata=%q, scope="rtfshost:read rtfshost:write"`, metadataURL)
	if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, want) || strings.Contains(got, "error=") {
		t.Errorf("no token: WWW-Authenticate %q, want it to start with %q and name no error", got, want)
	}

	k1 := iss.key("k1")
	pub, err := x509.MarshalPKIXPublicKey(&k1.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	with := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := o.claims(ScopeWrite)
		change(c)
		return c
	}
	now := time.Now()
	hs256 := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, o.claims(ScopeWrite))
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(pubPEM)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	none := func() string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodNone, o.claims(ScopeWrite)).SignedString(jwt.UnsafeAllowNoneSignatureType)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	idToken := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, o.claims(ScopeWrite))
		tok.Header["kid"], tok.Header["typ"] = "k1", "logout+jwt"
		s, _ := tok.SignedString(k1)
		return s
	}
	refused := []struct {
		name, token, desc string
	}{
		{"wrong audience", sign(t, with(func(c jwt.MapClaims) { c["aud"] = "https://other.example.com/mcp" }), "k1", k1), "another resource"},
		{"audience of the issuer", sign(t, with(func(c jwt.MapClaims) { c["aud"] = iss.url() }), "k1", k1), "another resource"},
		{"no audience", sign(t, with(func(c jwt.MapClaims) { delete(c, "aud") }), "k1", k1), "required claim"},
		{"expired", sign(t, with(func(c jwt.MapClaims) { c["exp"] = now.Add(-2 * time.Minute).Unix() }), "k1", k1), "expired"},
		{"wrong key", sign(t, o.claims(ScopeWrite), "k1", newRSAKey(t)), "signature"},
		{"wrong issuer", sign(t, with(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" }), "k1", k1), "another authorization server"},
		{"no exp", sign(t, with(func(c jwt.MapClaims) { delete(c, "exp") }), "k1", k1), "required claim"},
		{"not yet valid", sign(t, with(func(c jwt.MapClaims) { c["nbf"] = now.Add(5 * time.Minute).Unix() }), "k1", k1), "not valid yet"},
		{"alg none", none(), "signature"},
		{"HS256 with the public key", hs256(), "signature"},
		{"not an access token", idToken(), "not an access token"},
		{"not a JWT", "opaque-token-0123456789", "well-formed"},
	}
	for _, c := range refused {
		resp, body := o.post(c.token, "", initializeOAuth)
		h := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(h, `error="invalid_token"`) ||
			!strings.Contains(h, fmt.Sprintf("resource_metadata=%q", metadataURL)) || !strings.Contains(body, c.desc) {
			t.Errorf("%s: %s, WWW-Authenticate %q, body %q; want 401 invalid_token saying %q", c.name, resp.Status, h, body, c.desc)
		}
	}

	good := []struct{ name, token string }{
		{"good", o.token(ScopeWrite)},
		{"expired within the leeway", sign(t, with(func(c jwt.MapClaims) { c["exp"] = now.Add(-10 * time.Second).Unix() }), "k1", k1)},
		{"audience among others", sign(t, with(func(c jwt.MapClaims) { c["aud"] = []string{"https://other.example.com", o.resource} }), "k1", k1)},
	}
	for _, c := range good {
		if resp, body := o.post(c.token, "", initializeOAuth); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"protocolVersion"`) {
			t.Errorf("%s: %s %s", c.name, resp.Status, body)
		}
	}
}

// TestOAuthScopes: the scopes a request needs come from its tool's spec
// (or its method): a token that may only read calls mcp.stream.status
// but gets 403 with error="insufficient_scope" and scope="rtfshost:write"
// for rtfs.eval and tasks/cancel; a token with no scope gets
// scope="rtfshost:read" for status; a message that spells "Method" to hide
// its method is judged by the method go-sdk serves; a token that may
// write calls rtfs.eval.
func TestOAuthScopes(t *testing.T) {
	iss := newTestIssuer(t, false)
	o := newOAuthFixture(t, iss, iss.url())
	read, write, none := o.token(ScopeRead), o.token(ScopeWrite), o.token("profile")
	sid := o.session(read)

	call := func(id int, tool, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
	}
	cases := []struct {
		name, token, body string
		scope             string // "" when allowed
	}{
		{"read: status", read, call(2, ToolStatus, `{"stream-id":"nope"}`), ""},
		{"read: tools/list", read, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, ""},
		{"read: eval", read, call(4, ToolEval, `{"program":"(+ 1 2)"}`), ScopeWrite},
		{"read: start", read, call(5, ToolStart, `{"program":"(defn s [a b c] {})","processor":"s"}`), ScopeWrite},
		{"read: tasks/cancel", read, `{"jsonrpc":"2.0","id":6,"method":"tasks/cancel","params":{"taskId":"x"}}`, ScopeWrite},
		{"read: unknown tool", read, call(7, "no.such.tool", `{}`), ScopeWrite},
		{"read: Method spelled twice", read, `{"jsonrpc":"2.0","id":8,"method":"tools/call","Method":"ping","params":{"name":"rtfs.eval","arguments":{"program":"1"}}}`, ScopeWrite},
		{"read: Name spelled twice", read, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"rtfs.eval","Name":"mcp.stream.status","arguments":{"program":"1"}}}`, ScopeWrite},
		{"none: status", none, call(10, ToolStatus, `{"stream-id":"nope"}`), ScopeRead},
		{"none: resources/read", none, `{"jsonrpc":"2.0","id":15,"method":"resources/read","params":{"uri":"rtfs://streams"}}`, ScopeRead},
		{"read: resources/read", read, `{"jsonrpc":"2.0","id":16,"method":"resources/read","params":{"uri":"rtfs://streams"}}`, ""},
		{"none: tasks/get", none, `{"jsonrpc":"2.0","id":11,"method":"tasks/get","params":{"taskId":"x"}}`, ScopeRead},
		{"write: eval", write, call(12, ToolEval, `{"program":"(+ 40 2)"}`), ""},
		{"write: status", write, call(13, ToolStatus, `{"stream-id":"nope"}`), ""},
	}
	for _, c := range cases {
		resp, body := o.post(c.token, sid, c.body)
		h := resp.Header.Get("WWW-Authenticate")
		if c.scope == "" {
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: %s %s", c.name, resp.Status, body)
			}
			continue
		}
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(h, `error="insufficient_scope"`) ||
			!strings.Contains(h, fmt.Sprintf("scope=%q", c.scope)) || !strings.Contains(h, "resource_metadata=") {
			t.Errorf("%s: %s, WWW-Authenticate %q; want 403 insufficient_scope, scope %q", c.name, resp.Status, h, c.scope)
		}
	}
	if _, body := o.post(write, sid, call(14, ToolEval, `{"program":"(+ 40 2)"}`)); !strings.Contains(body, `"value":42`) {
		t.Errorf("eval with a writing token: %s", body)
	}
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestOAuthClient: go-sdk's client, with a good token, calls rtfs.eval in
// both eras; the key set was fetched once.
func TestOAuthClient(t *testing.T) {
	iss := newTestIssuer(t, true) // OpenID discovery only
	o := newOAuthFixture(t, iss, iss.url())
	hc := &http.Client{Transport: bearerTransport{o.token(ScopeWrite)}}
	ctx := context.Background()
	for _, version := range []string{"2025-11-25", ""} {
		cs := connectVersion(ctx, t, &mcp.StreamableClientTransport{Endpoint: o.url, HTTPClient: hc}, nil, version)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": "(* 6 7)"}})
		if err != nil || res.IsError {
			t.Fatalf("eval (%q): %v %+v", version, err, res)
		}
		if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), `"value":42`) {
			t.Errorf("eval (%q): %s", version, b)
		}
	}
	if n := iss.keyFetches(); n != 1 {
		t.Errorf("the key set was fetched %d times, want once", n)
	}
	// A token that may only read cannot evaluate, in the sessionless era
	// too (the scope is read from the body, whatever the headers say).
	ro := &http.Client{Transport: bearerTransport{o.token(ScopeRead)}}
	cs := connectVersion(ctx, t, &mcp.StreamableClientTransport{Endpoint: o.url, HTTPClient: ro}, nil, "")
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolStatus, Arguments: map[string]any{"stream-id": "nope"}}); err != nil {
		t.Errorf("status with a reading token: %v", err)
	}
	// (go-sdk's client ends its session on the 403.)
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": "1"}}); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("eval with a reading token: %+v %v", res, err)
	}
}

// TestOAuthOtherPaths: the legacy /sse endpoint and the further routes
// are behind the same tokens: no token gets 401; on a route, GET needs
// rtfshost:read and other methods rtfshost:write.
func TestOAuthOtherPaths(t *testing.T) {
	iss := newTestIssuer(t, false)
	page := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "page") })
	o := newOAuthFixture(t, iss, iss.url(), Route{Pattern: "/metrics", Handler: page})
	base := strings.TrimSuffix(o.url, PathStreamable)
	do := func(method, path, token string) *http.Response {
		req, _ := http.NewRequest(method, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	read := o.token(ScopeRead)
	for _, c := range []struct {
		method, path, token string
		status              int
	}{
		{http.MethodGet, PathSSE, "", http.StatusUnauthorized},
		{http.MethodGet, "/metrics", "", http.StatusUnauthorized},
		{http.MethodGet, "/metrics", o.token("profile"), http.StatusForbidden},
		{http.MethodGet, "/metrics", read, http.StatusOK},
		{http.MethodPost, "/metrics", read, http.StatusForbidden},
		{http.MethodPost, "/metrics", o.token(ScopeWrite), http.StatusOK},
	} {
		if resp := do(c.method, c.path, c.token); resp.StatusCode != c.status {
			t.Errorf("%s %s (token %v): %s, want %d", c.method, c.path, c.token != "", resp.Status, c.status)
		}
	}
}

// TestOAuthKeyRotation: a token signed with a key the issuer published
// after the server fetched its keys (a new kid) passes: the unknown kid
// makes the server fetch the key set again. A second unknown kid right
// after is refused without another fetch (the refresh is rate-limited).
func TestOAuthKeyRotation(t *testing.T) {
	iss := newTestIssuer(t, false)
	o := newOAuthFixture(t, iss, iss.url())
	if resp, body := o.post(o.token(ScopeWrite), "", initializeOAuth); resp.StatusCode != http.StatusOK {
		t.Fatalf("k1: %s %s", resp.Status, body)
	}
	k2 := newRSAKey(t)
	iss.publish("k2", k2)
	if resp, body := o.post(sign(t, o.claims(ScopeWrite), "k2", k2), "", initializeOAuth); resp.StatusCode != http.StatusOK {
		t.Fatalf("k2 after the rotation: %s %s", resp.Status, body)
	}
	if n := iss.keyFetches(); n != 2 {
		t.Errorf("key set fetched %d times, want 2 (the first use, the new kid)", n)
	}
	k3 := newRSAKey(t)
	iss.publish("k3", k3)
	start := time.Now()
	if resp, _ := o.post(sign(t, o.claims(ScopeWrite), "k3", k3), "", initializeOAuth); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a second new kid within a minute: %s, want 401", resp.Status)
	}
	if n := iss.keyFetches(); n != 2 {
		t.Errorf("key set fetched %d times after a second unknown kid, want still 2", n)
	}
	if d := time.Since(start); d > oauthFetchTimeout {
		t.Errorf("the refused kid waited %v", d)
	}
}

// TestOAuthMetadata: the protected-resource metadata is served at the
// path form and at the root, without a token and to any origin; its
// resource is the URL of /mcp byte for byte, and it names the issuer and
// the scopes.
func TestOAuthMetadata(t *testing.T) {
	iss := newTestIssuer(t, false)
	o := newOAuthFixture(t, iss, iss.url())
	base := strings.TrimSuffix(o.url, PathStreamable)
	for _, path := range []string{PathResourceMetadata + PathStreamable, PathResourceMetadata} {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Origin", "https://client.example.com")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct {
			Resource string   `json:"resource"`
			Servers  []string `json:"authorization_servers"`
			Scopes   []string `json:"scopes_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&meta)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s %v", path, resp.Status, err)
		}
		if meta.Resource != o.url || fmt.Sprint(meta.Servers) != "["+iss.url()+"]" || fmt.Sprint(meta.Scopes) != "[rtfshost:read rtfshost:write]" {
			t.Errorf("%s: %+v; want resource %s, the issuer %s", path, meta, o.url, iss.url())
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "*" {
			t.Errorf("%s: Access-Control-Allow-Origin %q", path, got)
		}
	}
}

// TestOAuthIssuerDown: when the issuer's keys cannot be had, a request
// gets 503 with Retry-After, not 401 (its token is not at fault), and no
// fetch error reaches the client.
func TestOAuthIssuerDown(t *testing.T) {
	iss := newTestIssuer(t, false)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	o := newOAuthFixture(t, iss, down.URL)
	resp, body := o.post(o.token(ScopeWrite), "", initializeOAuth)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("issuer down: %s %q", resp.Status, body)
	}
	if strings.Contains(body, "refused") || strings.Contains(body, "127.0.0.1") || resp.Header.Get("WWW-Authenticate") != "" {
		t.Errorf("issuer down: the answer tells too much: %q %q", body, resp.Header.Get("WWW-Authenticate"))
	}
}

// TestOAuthOptions: New refuses a static token beside OAuth, and issuer or
// resource URLs that are not https (http only on loopback), carry no
// path to the endpoint, or spell the host in capitals.
func TestOAuthOptions(t *testing.T) {
	f := newFixture(t, Options{})
	bad := []struct {
		name string
		opts Options
		want string
	}{
		{"token and OAuth", Options{Token: "0123456789abcdef0123", OAuth: &OAuth{Issuer: "https://as.example.com", Resource: "https://mcp.example.com/mcp"}}, "exclude each other"},
		{"http issuer", Options{OAuth: &OAuth{Issuer: "http://as.example.com", Resource: "https://mcp.example.com/mcp"}}, "in the clear"},
		{"http resource", Options{OAuth: &OAuth{Issuer: "https://as.example.com", Resource: "http://mcp.example.com/mcp"}}, "in the clear"},
		{"resource without path", Options{OAuth: &OAuth{Issuer: "https://as.example.com", Resource: "https://mcp.example.com"}}, "MCP endpoint"},
		{"capital host", Options{OAuth: &OAuth{Issuer: "https://as.example.com", Resource: "https://MCP.example.com/mcp"}}, "lower case"},
		{"leeway", Options{OAuth: &OAuth{Issuer: "https://as.example.com", Resource: "https://mcp.example.com/mcp", Leeway: time.Hour}}, "leeway"},
	}
	for _, c := range bad {
		c.opts.Host = f.host
		srv, err := New(c.opts)
		if err == nil {
			srv.Close()
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.want)
		}
	}
}
