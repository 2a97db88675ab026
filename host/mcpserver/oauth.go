package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// OAuth 2.1 access tokens, as the MCP authorization spec asks of a
// server (docs/security.md, "Who may call"). The server is a resource
// server: it publishes its protected-resource metadata (RFC 9728) naming
// the one authorization server it trusts, answers a request without a
// valid token with 401 and a challenge that points at that metadata, and
// checks each JWT access token against the issuer's keys: the signature
// (asymmetric algorithms only), iss, aud (RFC 8707), exp (required), nbf
// and iat, with a small leeway. The scopes a request needs come from the
// tool specs (toolSpec.scope) and methodScope; a token without them gets
// 403 with error="insufficient_scope".
//
// go-sdk's auth package serves the metadata (ProtectedResourceMetadataHandler)
// and carries the token's TokenInfo to go-sdk (RequireBearerToken), which
// ties each session to the token's subject. The challenges, the status of
// each failure and its text are this file's: RequireBearerToken's own
// answer lacks error= and the scopes a request needs, and it would send
// a verifier's error text (a key fetch's failure) to the client.
// golang-jwt parses and checks the tokens; keyfunc and jwkset keep the
// issuer's keys, refreshed hourly and on an unknown key id (rate-limited).

// The OAuth scopes of the server. A tool's scope is in its spec
// (toolSpec.scope); methodScope has those of the other methods.
const (
	// ScopeRead lets a token call the tools that only read
	// (mcp.stream.inspect, mcp.stream.status), read tasks and resources,
	// and read /metrics and the dashboard.
	ScopeRead = "rtfshost:read"
	// ScopeWrite lets a token call every tool, cancel tasks and use the
	// dashboard's controls. It includes ScopeRead.
	ScopeWrite = "rtfshost:write"
)

// DefaultOAuthLeeway is OAuth.Leeway when zero: the clock skew allowed
// on a token's exp, nbf and iat.
const DefaultOAuthLeeway = 30 * time.Second

// PathResourceMetadata is the root of the protected-resource metadata's
// well-known URIs (RFC 9728 §3): the server serves it there and under the
// path of its resource (/.well-known/oauth-protected-resource/mcp).
const PathResourceMetadata = "/.well-known/oauth-protected-resource"

const (
	maxOAuthLeeway = time.Minute
	// oauthFetchTimeout bounds each fetch of the issuer's metadata or keys.
	oauthFetchTimeout = 10 * time.Second
	// oauthRetry is the least time between two attempts to find the
	// issuer's keys after one failed; requests in between get 503.
	oauthRetry = 10 * time.Second
	// keyRefresh is how often the issuer's keys are fetched again, and
	// unknownKeyRefresh the least time between two fetches caused by a
	// token whose key id is not among them.
	keyRefresh        = time.Hour
	unknownKeyRefresh = time.Minute
	// maxOAuthDocument bounds the issuer's metadata and key set.
	maxOAuthDocument = 1 << 20
)

// oauthAlgorithms are the signature algorithms an access token may use.
// Only asymmetric ones: the server has no secret shared with the issuer,
// so an HS256 token "signed" with a public key is refused, as is "none".
var oauthAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// OAuth configures the server to accept OAuth 2.1 access tokens (JWTs)
// of one authorization server instead of a static token.
type OAuth struct {
	// Issuer is the authorization server's issuer identifier (RFC 8414),
	// e.g. https://auth.example.com/realms/ops. Tokens must carry it as
	// iss; its keys are found through its metadata
	// (/.well-known/oauth-authorization-server or OpenID discovery). It is
	// https, or http on a loopback host.
	Issuer string
	// Resource is the URL of /mcp as clients are given it, e.g.
	// https://mcp.example.com/mcp: the resource of the protected-resource
	// metadata, byte for byte. It is https, or http on a loopback host.
	Resource string
	// Audience is the aud a token must name (RFC 8707); default Resource.
	Audience string
	// Leeway is the clock skew allowed on exp, nbf and iat: default
	// DefaultOAuthLeeway, at most a minute.
	Leeway time.Duration
	// Client fetches the issuer's metadata and keys; default a client with
	// a 10 s timeout that reaches no link-local, unspecified or multicast
	// address, nor a loopback or private one unless the issuer's own host
	// is one or PrivateIssuer is set (egress.CheckAddress, at dial time).
	// Whatever it is, a document larger than 1 MiB is refused, and a
	// redirect is followed only within the origin of the request that
	// started it and never to cleartext http off loopback (its own
	// CheckRedirect is replaced).
	Client *http.Client
	// PrivateIssuer lets the default Client reach the issuer's metadata
	// and keys on loopback and private addresses, for an issuer named by
	// a host name that resolves to one (an issuer given as such an
	// address, or as localhost, needs no flag).
	PrivateIssuer bool
}

// MetadataURL is the URL of the protected-resource metadata of o's
// Resource, its path form: where the challenges point
// (https://mcp.example.com/.well-known/oauth-protected-resource/mcp for
// https://mcp.example.com/mcp); "" when Resource is not a URL.
func (o *OAuth) MetadataURL() string {
	u, err := url.Parse(o.Resource)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host + PathResourceMetadata + u.EscapedPath()
}

// oauthServer is the resource server of an OAuth configuration: its
// metadata, challenges and token checks. It is safe for concurrent use.
type oauthServer struct {
	cfg         OAuth
	metadataURL string // the URL of the resource's metadata, for the challenges
	metadata    *oauthex.ProtectedResourceMetadata
	paths       []string // where the metadata is served
	parser      *jwt.Parser
	client      *http.Client
	log         *slog.Logger
	ctx         context.Context // the Server's: ends the key refreshes

	mu     sync.Mutex
	keys   keyfunc.Keyfunc // nil until the issuer's keys were found
	tried  time.Time       // the last failed attempt to find them
	keyErr error
}

// newOAuthServer checks cfg and returns its resource server; nothing is
// fetched until a token comes.
func newOAuthServer(ctx context.Context, cfg OAuth, log *slog.Logger) (*oauthServer, error) {
	iss, err := oauthURL("issuer", cfg.Issuer)
	if err != nil {
		return nil, err
	}
	res, err := oauthURL("resource", cfg.Resource)
	if err != nil {
		return nil, err
	}
	if res.Path == "" || res.Path == "/" {
		return nil, fmt.Errorf("mcpserver: OAuth resource %q: give the URL of the MCP endpoint, e.g. %s", cfg.Resource, strings.TrimRight(cfg.Resource, "/")+PathStreamable)
	}
	if iss.RawQuery != "" || res.RawQuery != "" {
		return nil, errors.New("mcpserver: OAuth issuer and resource take no query")
	}
	if cfg.Audience == "" {
		cfg.Audience = cfg.Resource
	}
	switch {
	case cfg.Leeway == 0:
		cfg.Leeway = DefaultOAuthLeeway
	case cfg.Leeway < 0 || cfg.Leeway > maxOAuthLeeway:
		return nil, fmt.Errorf("mcpserver: OAuth leeway %v: give 0 to %v", cfg.Leeway, maxOAuthLeeway)
	}
	client := &http.Client{Timeout: oauthFetchTimeout, Transport: issuerTransport(cfg.PrivateIssuer || privateHost(iss.Hostname()))}
	if cfg.Client != nil {
		c := *cfg.Client
		client = &c
	}
	client.CheckRedirect = checkIssuerRedirect
	client.Transport = cappedBodies{next: client.Transport}
	o := &oauthServer{
		cfg:         cfg,
		metadataURL: cfg.MetadataURL(),
		metadata: &oauthex.ProtectedResourceMetadata{
			Resource:               cfg.Resource,
			AuthorizationServers:   []string{cfg.Issuer},
			ScopesSupported:        []string{ScopeRead, ScopeWrite},
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "rtfshost",
		},
		// The path form under the resource's path, and under /mcp for a
		// resource a proxy serves under a prefix; the root form last, for
		// clients that look only there.
		paths: dedupe([]string{PathResourceMetadata + res.EscapedPath(), PathResourceMetadata + PathStreamable, PathResourceMetadata}),
		parser: jwt.NewParser(
			jwt.WithValidMethods(oauthAlgorithms),
			jwt.WithIssuer(cfg.Issuer),
			jwt.WithAudience(cfg.Audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(cfg.Leeway),
		),
		client: client,
		log:    log,
		ctx:    ctx,
	}
	return o, nil
}

// oauthURL checks an absolute http(s) URL without user info or fragment;
// http only on a loopback host, as OAuth 2.1 asks; scheme and host in
// lower case, as clients compare them byte for byte.
func oauthURL(what, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("mcpserver: OAuth %s %q: %w", what, raw, err)
	case u.Scheme != "https" && u.Scheme != "http" || u.Host == "":
		return nil, fmt.Errorf("mcpserver: OAuth %s %q: give an absolute https URL", what, raw)
	case u.User != nil || u.Fragment != "":
		return nil, fmt.Errorf("mcpserver: OAuth %s %q: no user info or fragment", what, raw)
	case u.Scheme == "http" && !isLoopback(u.Host):
		return nil, fmt.Errorf("mcpserver: OAuth %s %q: tokens would travel in the clear; give an https URL (http is for loopback hosts only)", what, raw)
	case u.Host != strings.ToLower(u.Host):
		return nil, fmt.Errorf("mcpserver: OAuth %s %q: write the host in lower case (clients compare the URL byte for byte)", what, raw)
	}
	return u, nil
}

func dedupe(list []string) []string {
	var out []string
	for _, s := range list {
		if !contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// metadataHandler serves the protected-resource metadata: public, with
// CORS for any origin (go-sdk's handler).
func (o *oauthServer) metadataHandler() http.Handler {
	return auth.ProtectedResourceMetadataHandler(o.metadata)
}

// verifiedKey carries a verified token's TokenInfo from authenticate to
// go-sdk's RequireBearerToken.
type verifiedKey struct{}

// authenticate is the token layer under OAuth: a request without a valid
// access token gets 401 and a challenge (503 when the issuer's keys
// cannot be had); one with a valid token goes on with its TokenInfo in
// the context, where go-sdk and authorize read it.
func (o *oauthServer) authenticate(next http.Handler) http.Handler {
	// RequireBearerToken only puts the TokenInfo where go-sdk reads it
	// (auth.TokenInfoFromContext: the session's user, req.Extra); its
	// verifier hands over what this layer verified.
	carry := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		if info, ok := ctx.Value(verifiedKey{}).(*auth.TokenInfo); ok {
			return info, nil
		}
		return nil, auth.ErrInvalidToken
	}, &auth.RequireBearerTokenOptions{ResourceMetadataURL: o.metadataURL, ClockSkew: o.cfg.Leeway + time.Second})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, ok := bearerToken(r)
		if !ok {
			o.challenge(w, http.StatusUnauthorized, "", ScopeRead+" "+ScopeWrite,
				"this server requires an OAuth access token: Authorization: Bearer <token>")
			return
		}
		info, err := o.verify(r.Context(), raw)
		if err != nil {
			var f *tokenFailure
			if errors.As(err, &f) && f.unavailable {
				w.Header().Set("Retry-After", fmt.Sprint(int(oauthRetry.Seconds())))
				http.Error(w, f.desc, http.StatusServiceUnavailable)
				return
			}
			desc := "the token is not valid"
			if f != nil {
				desc = f.desc
			}
			o.challenge(w, http.StatusUnauthorized, "invalid_token", "", desc)
			return
		}
		carry.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey{}, info)))
	})
}

// bearerToken returns the token of "Authorization: Bearer <token>" (the
// scheme in any case).
func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	tok = strings.TrimSpace(tok)
	return tok, ok && strings.EqualFold(scheme, "Bearer") && tok != ""
}

// challenge answers status with a Bearer challenge (RFC 6750 §3) that
// names the resource's metadata, and desc as the body.
func (o *oauthServer) challenge(w http.ResponseWriter, status int, code, scope, desc string) {
	params := []string{"resource_metadata=" + quote(o.metadataURL)}
	if code != "" {
		params = append(params, "error="+quote(code))
	}
	if scope != "" {
		params = append(params, "scope="+quote(scope))
	}
	if desc != "" {
		params = append(params, "error_description="+quote(desc))
	}
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	http.Error(w, desc, status)
}

// quote is s as an HTTP quoted-string.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// A tokenFailure is why a token was refused, in words fit for the client:
// never a library's or a fetch's error text, which go to the log.
type tokenFailure struct {
	desc        string
	unavailable bool // the issuer's keys could not be had: 503, not the token's fault
}

func (f *tokenFailure) Error() string { return f.desc }

// verify checks an access token and returns what it grants.
func (o *oauthServer) verify(ctx context.Context, raw string) (*auth.TokenInfo, error) {
	kf, err := o.keySet()
	if err != nil {
		return nil, &tokenFailure{desc: "the authorization server's keys cannot be fetched now; try again later", unavailable: true}
	}
	var c accessClaims
	tok, err := o.parser.ParseWithClaims(raw, &c, refuseCrit(kf.KeyfuncCtx(ctx)))
	if err != nil {
		o.log.Info("oauth: access token refused", "err", err)
		return nil, &tokenFailure{desc: describeTokenError(err)}
	}
	// RFC 9068 access tokens say typ at+jwt; tokens of other kinds that
	// say what they are (an ID token is "JWT" or none, and is refused by
	// its audience) are refused.
	if typ, _ := tok.Header["typ"].(string); typ != "" && !strings.EqualFold(typ, "JWT") &&
		!strings.EqualFold(typ, "at+jwt") && !strings.EqualFold(typ, "application/at+jwt") {
		return nil, &tokenFailure{desc: fmt.Sprintf("the token is not an access token (typ %q)", typ)}
	}
	if c.ExpiresAt == nil { // the parser requires exp; never trust a token without
		return nil, &tokenFailure{desc: describeTokenError(jwt.ErrTokenRequiredClaimMissing)}
	}
	scopes := strings.Fields(c.Scope)
	scopes = append(scopes, c.Scp...)
	user := c.Subject
	if user == "" && c.ClientID != "" {
		user = "client " + c.ClientID
	}
	return &auth.TokenInfo{Scopes: scopes, Expiration: c.ExpiresAt.Time, UserID: user}, nil
}

// describeTokenError says why golang-jwt refused a token.
func describeTokenError(err error) string {
	switch {
	case errors.Is(err, errCrit):
		return "the token's header has crit: this server understands no JWS extension, and RFC 7515 makes it refuse one it does not"
	case errors.Is(err, errClaims):
		return "the token's claims are not as RFC 7519 writes them: exp, nbf and iat must be numbers, and claim names lower case"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "the token is not a well-formed JWT"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "the token's signature does not verify with the authorization server's keys (or its algorithm is not allowed)"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return "the token lacks a required claim: exp, iss and aud are required"
	case errors.Is(err, jwt.ErrTokenExpired):
		return "the token has expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "the token is not valid yet"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "the token was issued for another resource (its aud does not name this server)"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "the token was issued by another authorization server (iss)"
	}
	return "the token is not valid"
}

// methodScope is the scope a JSON-RPC request needs, besides a valid
// token: a tool's from its spec; the task methods, the resources and
// their subscriptions reading or writing; others (initialize, tools/list,
// ping, notifications) none.
// A tools/call whose tool is not known, or whose params could not be
// read, needs ScopeWrite: what cannot be read is not let through.
func (s *Server) methodScope(m *message) (scope, what string) {
	switch {
	case m.invalid:
		return ScopeWrite, "a message that is not JSON-RPC"
	case m.Method == "tools/call":
		if t, ok := s.toolSpec(m.Params.Name); ok && m.full {
			return t.scope.name(), t.name
		}
		return ScopeWrite, "a tools/call of an unknown tool"
	case m.Method == methodTasksCancel, m.Method == methodTasksUpdate:
		return ScopeWrite, m.Method
	case strings.HasPrefix(m.Method, "tasks/"), strings.HasPrefix(m.Method, "resources/"), m.Method == "subscriptions/listen":
		return ScopeRead, m.Method
	}
	return "", ""
}

// authorize is the layer behind the envelope that checks the scopes a
// request's messages need against its token's (403 with
// error="insufficient_scope" and every scope missing). A POST whose
// messages could not be read needs ScopeWrite.
func (s *Server) authorize(next http.Handler) http.Handler {
	if s.oauth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env := envelopeOf(r)
		need, what := "", ""
		if env.post && env.msgs == nil {
			need, what = ScopeWrite, "a request whose body is not JSON-RPC"
		}
		for i := range env.msgs {
			if sc, about := s.methodScope(&env.msgs[i]); sc != "" && need != ScopeWrite {
				need, what = sc, about
			}
		}
		if need != "" && !granted(auth.TokenInfoFromContext(r.Context()), need) {
			s.oauth.challenge(w, http.StatusForbidden, "insufficient_scope", need, fmt.Sprintf("%s needs the scope %s", what, need))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// granted reports whether a token grants scope; ScopeWrite includes
// ScopeRead.
func granted(info *auth.TokenInfo, scope string) bool {
	if info == nil {
		return false
	}
	return contains(info.Scopes, scope) || scope == ScopeRead && contains(info.Scopes, ScopeWrite)
}

// guardRoute is the check of a further Route that is not public: the
// static token, or under OAuth a valid token with ScopeRead for GET and
// HEAD and ScopeWrite for other methods (the dashboard's controls).
func (s *Server) guardRoute(h http.Handler) http.Handler {
	if s.oauth == nil {
		return s.checkToken(h)
	}
	return s.oauth.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need := ScopeWrite
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			need = ScopeRead
		}
		if !granted(auth.TokenInfoFromContext(r.Context()), need) {
			s.oauth.challenge(w, http.StatusForbidden, "insufficient_scope", need, fmt.Sprintf("%s %s needs the scope %s", r.Method, r.URL.Path, need))
			return
		}
		h.ServeHTTP(w, r)
	}))
}
