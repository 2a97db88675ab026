package mcpserver

// What the resource server of oauth.go reads from the authorization
// server it trusts: the claims of an access token, the issuer's
// metadata (RFC 8414, else OpenID discovery) and its key set, each
// fetched with a time limit and a size cap, once, and again only after a
// failure has aged.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/time/rate"

	"github.com/rtfshost/rtfshost/transport/egress"
)

// accessClaims are the claims read from an access token.
type accessClaims struct {
	jwt.RegisteredClaims
	Scope    string     `json:"scope"`     // RFC 9068: space-separated
	Scp      scopeClaim `json:"scp"`       // some issuers: a list or a string
	ClientID string     `json:"client_id"` // RFC 9068
}

// errClaims is wrapped by the error of claims read strictly
// (accessClaims.UnmarshalJSON).
var errClaims = errors.New("claims not as RFC 7519 writes them")

// UnmarshalJSON reads the claims strictly, where encoding/json alone would
// not: exp, nbf and iat must be JSON numbers (RFC 7519 NumericDate; a
// quoted number would pass into a jwt.NumericDate), and no claim may be
// spelled as a claim this server reads in another case ("EXP" would fill
// ExpiresAt, as encoding/json matches names without case).
func (c *accessClaims) UnmarshalJSON(b []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return err
	}
	for name, v := range members {
		lower := strings.ToLower(name)
		switch lower {
		case "iss", "sub", "aud", "exp", "nbf", "iat", "jti", "scope", "scp", "client_id":
		default:
			continue
		}
		if name != lower {
			return fmt.Errorf("%w: the claim %q must be spelled %q", errClaims, name, lower)
		}
		if lower == "exp" || lower == "nbf" || lower == "iat" {
			if v = bytes.TrimSpace(v); len(v) == 0 || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
				return fmt.Errorf("%w: %s must be a number (a NumericDate), not %.20s", errClaims, lower, v)
			}
		}
	}
	type plain accessClaims // without this method
	return json.Unmarshal(b, (*plain)(c))
}

// errCrit is the keyfunc's refusal of a token with a crit header.
var errCrit = errors.New("the token's header has crit")

// refuseCrit wraps a keyfunc so that a token whose header has crit is
// refused before its signature is checked: RFC 7515 §4.1.11 makes a
// recipient reject a crit extension it does not understand, and this
// server understands none (golang-jwt does not look at crit).
func refuseCrit(next jwt.Keyfunc) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		if _, ok := t.Header["crit"]; ok {
			return nil, errCrit
		}
		return next(t)
	}
}

// checkIssuerRedirect is the CheckRedirect of the client that fetches the
// issuer's metadata and keys: a redirect is followed only to the origin of
// the request that started the chain (scheme, host and port), never to
// cleartext http off a loopback host, and at most five times. The
// Transport's address check sees every hop as well.
func checkIssuerRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	from, to := via[0].URL, req.URL
	if origin(to) != origin(from) {
		return fmt.Errorf("a redirect from %s to another origin (%s) is not followed", origin(from), origin(to))
	}
	if to.Scheme != "https" && !isLoopback(to.Host) {
		return fmt.Errorf("a redirect to cleartext %s is not followed", origin(to))
	}
	return nil
}

// origin is scheme://host:port of u, the default port written out.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// issuerTransport is the default transport of the issuer's fetches: it
// dials only addresses egress.CheckAddress allows (private and loopback
// ones when private).
func issuerTransport(private bool) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // the address checked must be the issuer's, not a proxy's
	tr.DialContext = (&net.Dialer{Timeout: oauthFetchTimeout, KeepAlive: 30 * time.Second, Control: egress.DialControl(private)}).DialContext
	return tr
}

// privateHost reports whether host is localhost, or a loopback or private
// address.
func privateHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && (ip.Unmap().IsLoopback() || ip.Unmap().IsPrivate())
}

// scopeClaim is a scope claim given as a list or a space-separated string.
type scopeClaim []string

func (s *scopeClaim) UnmarshalJSON(b []byte) error {
	var list []string
	if json.Unmarshal(b, &list) == nil {
		*s = list
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err != nil {
		return fmt.Errorf("scp: neither a string nor a list of strings")
	}
	*s = strings.Fields(one)
	return nil
}

// keySet returns the issuer's keys, finding them on first use: the
// issuer's metadata, then its key set. After a failure it tries again
// only once oauthRetry has passed.
func (o *oauthServer) keySet() (keyfunc.Keyfunc, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.keys != nil {
		return o.keys, nil
	}
	if !o.tried.IsZero() && time.Since(o.tried) < oauthRetry {
		return nil, o.keyErr
	}
	kf, err := o.findKeys()
	if err != nil {
		o.tried, o.keyErr = time.Now(), err
		o.log.Error("oauth: the authorization server's keys cannot be had", "issuer", o.cfg.Issuer, "err", err)
		return nil, err
	}
	o.keys = kf
	return kf, nil
}

// findKeys reads the issuer's metadata and loads its key set, which is
// then refreshed every keyRefresh, and on a token whose key id it lacks,
// at most every unknownKeyRefresh, until the Server closes.
func (o *oauthServer) findKeys() (_ keyfunc.Keyfunc, err error) {
	meta, err := o.issuerMetadata()
	if err != nil {
		return nil, err
	}
	if _, err := oauthURL("jwks_uri", meta.JWKSURI); err != nil {
		return nil, fmt.Errorf("the issuer's metadata: %w", err)
	}
	// The refreshes run until the Server closes; a failed attempt's at once.
	ctx, cancel := context.WithCancel(o.ctx)
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	store, err := jwkset.NewStorageFromHTTP(meta.JWKSURI, jwkset.HTTPClientStorageOptions{
		Client:          o.client,
		Ctx:             ctx,
		HTTPTimeout:     oauthFetchTimeout,
		RefreshInterval: keyRefresh,
		RefreshErrorHandler: func(_ context.Context, err error) {
			o.log.Warn("oauth: refreshing the authorization server's keys", "jwks_uri", meta.JWKSURI, "err", err)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("the key set %s: %w", meta.JWKSURI, err)
	}
	client, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{meta.JWKSURI: store},
		RefreshUnknownKID: rate.NewLimiter(rate.Every(unknownKeyRefresh), 1),
		// A token with an unknown key id waits for a refresh at most this
		// long, and is refused at once when the next refresh is further.
		RateLimitWaitMax: oauthFetchTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("the key set %s: %w", meta.JWKSURI, err)
	}
	kf, err := keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: client})
	if err != nil {
		return nil, fmt.Errorf("the key set %s: %w", meta.JWKSURI, err)
	}
	return kf, nil
}

// issuerMetadata reads the issuer's metadata from the first of its
// well-known URIs that has it: RFC 8414's, then OpenID discovery's with
// the path inserted and appended, as MCP clients look for them. Its
// issuer must be the configured one, byte for byte (RFC 8414 §3.3).
func (o *oauthServer) issuerMetadata() (*oauthex.AuthServerMeta, error) {
	u, err := url.Parse(o.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	origin, path := u.Scheme+"://"+u.Host, strings.TrimRight(u.EscapedPath(), "/")
	candidates := []string{origin + "/.well-known/oauth-authorization-server" + path}
	if path != "" {
		candidates = append(candidates, origin+"/.well-known/openid-configuration"+path)
	}
	candidates = append(candidates, origin+path+"/.well-known/openid-configuration")
	var failures []string
	for _, c := range candidates {
		var meta oauthex.AuthServerMeta
		err := o.getJSON(c, &meta)
		if err == nil && meta.Issuer != o.cfg.Issuer {
			err = fmt.Errorf("it names the issuer %q", meta.Issuer)
		}
		if err == nil && meta.JWKSURI == "" {
			err = errors.New("it has no jwks_uri")
		}
		if err == nil {
			return &meta, nil
		}
		failures = append(failures, fmt.Sprintf("%s: %v", c, err))
	}
	return nil, fmt.Errorf("no metadata for the issuer %s (%s)", o.cfg.Issuer, strings.Join(failures, "; "))
}

// getJSON fetches url and decodes its JSON body into v.
func (o *oauthServer) getJSON(u string, v any) error {
	ctx, cancel := context.WithTimeout(o.ctx, oauthFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := o.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %s", resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// cappedBodies is a RoundTripper whose response bodies fail past
// maxOAuthDocument bytes.
type cappedBodies struct{ next http.RoundTripper }

func (c cappedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	next := c.next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(r)
	if err == nil {
		resp.Body = &cappedBody{ReadCloser: resp.Body, left: maxOAuthDocument, url: r.URL.String()}
	}
	return resp, err
}

type cappedBody struct {
	io.ReadCloser
	left int64
	url  string
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("%s: the document exceeds %d bytes", b.url, maxOAuthDocument)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
