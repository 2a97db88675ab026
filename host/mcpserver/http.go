package mcpserver

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/host"
)

// The paths the handler serves.
const (
	PathStreamable = "/mcp"     // MCP Streamable HTTP: POST, GET (resume) and DELETE
	PathSSE        = "/sse"     // legacy HTTP+SSE: GET opens the stream, POST ?sessionid= sends
	PathHealth     = "/healthz" // liveness: 200 while the process serves HTTP
	PathReady      = "/readyz"  // readiness: 200 while the host can take work (Host.Ready), else 503
)

// newHandler builds the HTTP handler: /mcp behind its layers (mcpLayers),
// the legacy HTTP+SSE transport on /sse behind the token, envelope and
// scope layers, the further Routes, and the Origin check in front of them
// all; under OAuth, the protected-resource metadata beside them, public
// and open to every origin.
func (s *Server) newHandler() http.Handler {
	getServer := func(*http.Request) *mcp.Server { return s.mcp }
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		EventStore:     s.events, // in the data directory: resumable across a restart (resume.go)
		Logger:         s.log,
		SessionTimeout: s.opts.SessionIdleTimeout,
	})
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless: true,
		Logger:    s.log,
		// The POST is the request's whole life: a client that closes it
		// cancels the call (and the streams it started).
		PropagateRequestCancellation: true,
	})
	eras := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if envelopeOf(r).era == eraSessionless {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle(PathStreamable, stack(s.mcpLayers(), eras))
	mux.Handle(PathSSE, stack([]layer{
		{name: "token", wrap: s.authenticate},
		{name: "envelope", wrap: readEnvelope},
		{name: "scopes", wrap: s.authorize},
		{name: "sessions", wrap: s.limitSessions},
	}, mcp.NewSSEHandler(getServer, nil)))
	for _, r := range s.opts.Routes {
		h := r.Handler
		if !r.Public {
			h = s.guardRoute(h)
		}
		mux.Handle(r.Pattern, checkHost(h))
	}
	guarded := s.checkOrigin(mux)
	top := http.NewServeMux()
	// Probes for a service manager: no token, no Origin or Host check,
	// nothing in the answer but whether (and which part is not) ready.
	top.HandleFunc("GET "+PathHealth, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	top.HandleFunc("GET "+PathReady, s.serveReady)
	top.Handle("/", guarded)
	if s.oauth == nil {
		return top
	}
	for _, p := range s.oauth.paths {
		top.Handle(p, s.oauth.metadataHandler())
	}
	return top
}

// serveReady answers the readiness probe: 200 "ready" when the host is
// (Host.Ready), else 503 naming the part that is not; the reason itself
// goes to the server's log, not to an unauthenticated caller.
func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	err := s.host.Ready(ctx)
	if err == nil {
		fmt.Fprintln(w, "ready")
		return
	}
	part := "host"
	var nr *host.NotReadyError
	if errors.As(err, &nr) {
		part = nr.Part
	}
	s.log.Info("readiness probe: not ready", "err", err)
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintln(w, "not ready:", part)
}

// readyTimeout bounds the store read of a readiness probe.
const readyTimeout = 2 * time.Second

// A layer is one step of the request path of /mcp: it answers the request
// itself, or passes it on (perhaps changed) to the next layer, and the last
// to go-sdk's handler of the request's era.
type layer struct {
	name string
	// only, when set, is the era whose requests the layer sees; those of
	// the other era go past it.
	only era
	wrap func(next http.Handler) http.Handler
}

// mcpLayers are the layers of /mcp, in the order a request meets them,
// after the Origin check (checkOrigin, in front of every path) and before
// go-sdk. Every layer behind readEnvelope reads the request's envelope
// (wire.go), never its body.
func (s *Server) mcpLayers() []layer {
	return []layer{
		// Who may ask: before anything reads the body. The static token,
		// or under OAuth a valid access token (oauth.go).
		{name: "token", wrap: s.authenticate},
		// The body, read once: method, id, tool, progress token, task,
		// era, batch. It bounds the body's size.
		{name: "envelope", wrap: readEnvelope},
		// Under OAuth, what the token may do: the scopes of the request's
		// methods and tools (the tool specs say theirs), else 403. Before
		// any layer that acts on a request.
		{name: "scopes", wrap: s.authorize},
		// An initialize beyond Options.MaxSessions: 429.
		{name: "sessions", only: eraSessions, wrap: s.limitSessions},
		// The JSON-RPC id of a tools/call, for its span (go-sdk does not
		// tell the tool handler); only with an Observer.
		{name: "request-id", wrap: s.tagRequestID},
		// MCP Tasks, which go-sdk does not have, in both eras: the tasks/*
		// methods and a tools/call asking for a task are answered here.
		{name: "tasks", wrap: s.serveTasks},
		// The status notifications of tasks (2025-11-25), which go-sdk
		// cannot send: each goes out as a carrier that this layer turns
		// into notifications/tasks/status on the response streams.
		{name: "task-status", only: eraSessions, wrap: taskStatusWire},
		// A GET that resumes a response stream of a session from before a
		// restart, which go-sdk no longer has, is served from the event
		// store.
		{name: "resume", only: eraSessions, wrap: s.resumeAfterRestart},
		// A request other than initialize without a session: a JSON-RPC
		// -32600 refusal with HTTP 400 (go-sdk answers 200 and code 0).
		{name: "presession", only: eraSessions, wrap: requireSession},
		// The request id of a progress-reporting tools/call, stored, so
		// that its result can still be sent after a restart.
		{name: "remember-call", only: eraSessions, wrap: s.rememberCall},
		// The tasks capability and the tools' execution.taskSupport, added
		// to go-sdk's initialize and tools/list answers.
		{name: "announce-tasks", only: eraSessions, wrap: s.announceTasks},
		// A client that accepts application/json only gets the one
		// response of the SSE answer go-sdk gives, and no notifications.
		{name: "json-only", wrap: jsonOnly},
		// The priming event's retry field (SEP-1699), coalesced flushes,
		// and no event to the client before it is stored.
		{name: "prime", only: eraSessions, wrap: s.primeWithRetry},
	}
}

// stack puts h behind layers, the first outermost.
func stack(layers []layer, h http.Handler) http.Handler {
	for i := len(layers) - 1; i >= 0; i-- {
		l := layers[i]
		next, wrapped := h, l.wrap(h)
		if l.only == eraAny {
			h = wrapped
			continue
		}
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if envelopeOf(r).era == l.only {
				wrapped.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	return h
}

// Guard puts h behind the checks the Server applies to /mcp, for a handler
// served on a listener of its own (rtfshost run --metrics-listen): the
// Origin check (allowedOrigins besides the request's own host), the Host
// check against DNS rebinding on loopback, and, when token is set, the
// bearer token.
func Guard(h http.Handler, token string, allowedOrigins []string) http.Handler {
	s := &Server{opts: Options{Token: token, AllowedOrigins: allowedOrigins}}
	return s.checkOrigin(checkHost(s.checkToken(h)))
}

// checkHost answers 403 to a request that reached a loopback listener with
// a Host header that does not name a loopback host: a page of another site
// whose name was rebound to 127.0.0.1 (DNS rebinding). go-sdk checks the
// same for /mcp and /sse.
func checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil {
			if isLoopback(la.String()) && !isLoopback(r.Host) {
				http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopback reports whether addr ("host" or "host:port") names a loopback
// host: localhost or a loopback IP.
func isLoopback(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authenticate is the token layer: under OAuth the access token's checks
// (oauth.go), else the static token's.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.oauth != nil {
		return s.oauth.authenticate(next)
	}
	return s.checkToken(next)
}

// checkToken requires "Authorization: Bearer <token>" when a token is set.
// The scheme is case-insensitive (RFC 7235 §2.1); the token is compared in
// constant time.
func (s *Server) checkToken(next http.Handler) http.Handler {
	if s.opts.Token == "" {
		return next
	}
	want := []byte(s.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		got := []byte(strings.TrimLeft(tok, " "))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rtfshost"`)
			http.Error(w, "Unauthorized: this server requires Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkOrigin answers 403 to a request whose Origin header is present and
// names neither the server itself (the request's Host) nor an allowed origin.
// Requests without Origin (not from a browser) pass. An allowed origin also
// gets the CORS headers a browser client needs, and its preflight OPTIONS
// requests are answered here (before the token check: browsers send no
// credentials in a preflight).
func (s *Server) checkOrigin(next http.Handler) http.Handler {
	allowed := make(map[string]bool, len(s.opts.AllowedOrigins))
	for _, o := range s.opts.AllowedOrigins {
		allowed[strings.TrimRight(strings.ToLower(o), "/")] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		if !allowed[strings.ToLower(origin)] {
			if !sameHost(origin, r.Host) {
				http.Error(w, fmt.Sprintf("Forbidden: Origin %q is not allowed", origin), http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, WWW-Authenticate")
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
			h.Set("Access-Control-Allow-Headers", "Content-Type, Accept, Authorization, Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameHost reports whether origin's host:port is host.
func sameHost(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// Serve serves the Server's handler on ln, with the connection limits of
// Options.HTTP (NewHTTPServer), until ctx ends, then closes the Server and
// shuts the HTTP server down. It refuses a listener that is not on
// a loopback address unless a token or OAuth is set, and returns ln's
// first failure otherwise. It closes ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.oauth == nil {
		if err := CheckExposure(ln.Addr().String(), s.opts.Token); err != nil {
			ln.Close()
			return err
		}
	}
	hs := NewHTTPServer(s.handler, s.opts.HTTP)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.Close()
		return fmt.Errorf("mcpserver: serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	s.Close() // ends the sessions, so long-lived SSE responses finish
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = hs.Close()
	}
	<-errc
	if err != nil {
		return fmt.Errorf("mcpserver: shut down %s: %w", ln.Addr(), err)
	}
	return nil
}

// MinTokenBytes is the length of the shortest bearer token a server on a
// non-loopback address accepts.
const MinTokenBytes = 16

// CheckExposure refuses to serve on addr ("host:port") when addr is not a
// loopback address (or "localhost") and token is missing, shorter than
// MinTokenBytes or only white space. It is what Serve checks on the bound
// address, exported so that a command line can refuse before it starts
// anything.
func CheckExposure(addr, token string) error {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	switch {
	case token == "":
		return fmt.Errorf("refusing to serve on %s without a token: bind to a loopback address (127.0.0.1) or set a bearer token", addr)
	case strings.TrimSpace(token) == "":
		return fmt.Errorf("refusing to serve on %s with a token made of white space: set a random token of at least %d bytes (e.g. openssl rand -hex 16)", addr, MinTokenBytes)
	case len(token) < MinTokenBytes:
		return fmt.Errorf("refusing to serve on %s with a %d-byte token: a token on a non-loopback address needs at least %d bytes (e.g. openssl rand -hex 16)", addr, len(token), MinTokenBytes)
	}
	return nil
}

// limitSessions is the layer that bounds the sessions open at once
// (Options.MaxSessions): a request that would open one (an initialize
// without Mcp-Session-Id, or a GET of /sse) when as many are open, or
// being opened, gets 429 with Retry-After. Every other request goes on.
func (s *Server) limitSessions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env := envelopeOf(r)
		sse := r.Method == http.MethodGet && r.URL.Path == PathSSE
		m, ok := env.single()
		initialize := ok && env.post && env.session == "" && m.Method == "initialize"
		if !sse && !initialize {
			next.ServeHTTP(w, r)
			return
		}
		open := 0
		for ss := range s.mcp.Sessions() {
			if ss.ID() != "" { // stateless requests' sessions have none
				open++
			}
		}
		// An initialize's session is counted from the request (opening)
		// until its POST ends; an SSE GET lasts as long as its session.
		s.mu.Lock()
		full := open+s.opening >= s.opts.MaxSessions
		if !full && initialize {
			s.opening++
		}
		s.mu.Unlock()
		if full {
			s.opts.Observer.CountLimit("sessions")
			w.Header().Set("Retry-After", "60")
			http.Error(w, fmt.Sprintf("the server has %d MCP sessions open, the most it allows (rtfshost serve --max-sessions); close one or try again later", open), http.StatusTooManyRequests)
			return
		}
		if initialize {
			defer func() {
				s.mu.Lock()
				s.opening--
				s.mu.Unlock()
			}()
		}
		next.ServeHTTP(w, r)
	})
}
