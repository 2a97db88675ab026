package mcpserver

import (
	"crypto/rsa"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestOAuthStrictTokens: a token whose header has crit is refused (RFC
// 7515 §4.1.11), and so is one whose exp, nbf or iat is not a number (RFC
// 7519 NumericDate) or whose time claim is spelled in capitals; the same
// token with numbers passes.
func TestOAuthStrictTokens(t *testing.T) {
	iss := newTestIssuer(t, false)
	o := newOAuthFixture(t, iss, iss.url())
	k1 := iss.key("k1")
	future := time.Now().Add(time.Hour).Unix()
	with := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := o.claims(ScopeWrite)
		change(c)
		return c
	}
	crit := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, o.claims(ScopeWrite))
		tok.Header["kid"], tok.Header["crit"] = "k1", []string{"x-unknown"}
		tok.Header["x-unknown"] = true
		s, err := tok.SignedString(k1)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	refused := []struct{ name, token, desc string }{
		{"crit", crit(), "crit"},
		{"exp a string", sign(t, with(func(c jwt.MapClaims) { c["exp"] = jsonNumberString(future) }), "k1", k1), "must be numbers"},
		{"exp a fractional string", sign(t, with(func(c jwt.MapClaims) { c["exp"] = jsonNumberString(future) + ".5" }), "k1", k1), "must be numbers"},
		{"nbf a string", sign(t, with(func(c jwt.MapClaims) { c["nbf"] = "0" }), "k1", k1), "must be numbers"},
		{"iat a string", sign(t, with(func(c jwt.MapClaims) { c["iat"] = jsonNumberString(time.Now().Unix()) }), "k1", k1), "must be numbers"},
		{"exp null", sign(t, with(func(c jwt.MapClaims) { c["exp"] = nil }), "k1", k1), "must be numbers"},
		{"EXP in capitals", sign(t, with(func(c jwt.MapClaims) { delete(c, "exp"); c["EXP"] = future }), "k1", k1), "lower case"},
	}
	for _, c := range refused {
		resp, body := o.post(c.token, "", initializeOAuth)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) || !strings.Contains(body, c.desc) {
			t.Errorf("%s: %s %q; want 401 invalid_token saying %q", c.name, resp.Status, body, c.desc)
		}
	}
	if resp, body := o.post(sign(t, with(func(c jwt.MapClaims) { c["exp"] = float64(future) + 0.5; c["nbf"] = 0 }), "k1", k1), "", initializeOAuth); resp.StatusCode != http.StatusOK {
		t.Errorf("numeric time claims: %s %s", resp.Status, body)
	}
}

func jsonNumberString(n int64) string { return big.NewInt(n).String() }

// redirectingIssuer is an issuer whose routes answer as given: a route
// with a location redirects there (302); the metadata and key set are
// served at /meta and /keys.
type redirectingIssuer struct {
	ts        *httptest.Server
	key       *rsa.PrivateKey
	redirects map[string]string // path -> Location
	jwksURI   string            // "" means ts.URL+"/keys"
}

func newRedirectingIssuer(t *testing.T, redirects map[string]string) *redirectingIssuer {
	t.Helper()
	ri := &redirectingIssuer{key: newRSAKey(t), redirects: redirects}
	ri.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loc, ok := ri.redirects[r.URL.Path]; ok {
			http.Redirect(w, r, strings.ReplaceAll(loc, "SELF", ri.ts.URL), http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/meta", "/.well-known/oauth-authorization-server":
			jwks := ri.jwksURI
			if jwks == "" {
				jwks = ri.ts.URL + "/keys"
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": ri.ts.URL, "jwks_uri": jwks,
				"authorization_endpoint": ri.ts.URL + "/authorize", "token_endpoint": ri.ts.URL + "/token",
				"response_types_supported": []string{"code"}})
		case "/keys":
			_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
				"n": b64(ri.key.N.Bytes()), "e": b64(big.NewInt(int64(ri.key.E)).Bytes())}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ri.ts.Close)
	return ri
}

// fixture serves an OAuth Server of ri and returns it with a good token.
func (ri *redirectingIssuer) fixture(t *testing.T) (*oauthFixture, string) {
	t.Helper()
	o := newOAuthFixture(t, &testIssuer{ts: ri.ts}, ri.ts.URL)
	now := time.Now()
	tok := sign(t, jwt.MapClaims{"iss": ri.ts.URL, "aud": o.resource, "sub": "alice", "scope": ScopeWrite,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}, "k1", ri.key)
	return o, tok
}

// keyError is why the Server could not have the issuer's keys.
func keyError(o *oauthFixture) string {
	o.srv.oauth.mu.Lock()
	defer o.srv.oauth.mu.Unlock()
	if o.srv.oauth.keyErr == nil {
		return ""
	}
	return o.srv.oauth.keyErr.Error()
}

// TestOAuthIssuerRedirects: the issuer's metadata and keys are fetched
// following redirects within the origin of the request only: a redirect
// to another origin (a canary, which is never hit) or to a link-local
// metadata address is refused before it is requested, a redirect within
// the origin is followed, and a jwks_uri on a link-local address is
// refused at dial time, before any packet is sent.
func TestOAuthIssuerRedirects(t *testing.T) {
	var canaryHits atomic.Int64
	canary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		canaryHits.Add(1)
		http.NotFound(w, r)
	}))
	defer canary.Close()

	t.Run("within the origin", func(t *testing.T) {
		ri := newRedirectingIssuer(t, map[string]string{"/.well-known/oauth-authorization-server": "/meta", "/jwks": "SELF/keys"})
		ri.jwksURI = ri.ts.URL + "/jwks"
		o, tok := ri.fixture(t)
		if resp, body := o.post(tok, "", initializeOAuth); resp.StatusCode != http.StatusOK {
			t.Errorf("redirects within the issuer's origin: %s %s (%s)", resp.Status, body, keyError(o))
		}
	})
	for _, c := range []struct{ name, location, why string }{
		{"to another origin", canary.URL + "/meta", "another origin"},
		{"to a link-local address", "http://169.254.169.254/latest/meta-data/", "another origin"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ri := newRedirectingIssuer(t, map[string]string{"/.well-known/oauth-authorization-server": c.location})
			o, tok := ri.fixture(t)
			if resp, body := o.post(tok, "", initializeOAuth); resp.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("metadata redirected %s: %s %s", c.name, resp.Status, body)
			}
			if err := keyError(o); !strings.Contains(err, c.why) {
				t.Errorf("metadata redirected %s: the keys' error %q does not say %q", c.name, err, c.why)
			}
		})
	}
	t.Run("key set redirected to another origin", func(t *testing.T) {
		ri := newRedirectingIssuer(t, map[string]string{"/jwks": canary.URL + "/keys"})
		ri.jwksURI = ri.ts.URL + "/jwks"
		o, tok := ri.fixture(t)
		if resp, body := o.post(tok, "", initializeOAuth); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("key set redirected: %s %s", resp.Status, body)
		}
	})
	t.Run("key set on a link-local address", func(t *testing.T) {
		ri := newRedirectingIssuer(t, nil)
		ri.jwksURI = "https://169.254.169.254/keys"
		o, tok := ri.fixture(t)
		if resp, body := o.post(tok, "", initializeOAuth); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("a link-local key set: %s %s", resp.Status, body)
		}
		if err := keyError(o); !strings.Contains(err, "link-local") {
			t.Errorf("a link-local key set: the keys' error %q does not name the link-local address", err)
		}
	})
	if n := canaryHits.Load(); n != 0 {
		t.Errorf("the other origin was requested %d times", n)
	}
}
