package localserver

import (
	"context"
	"errors"
	"fmt"
	"github.com/rtfshost/rtfshost/rtfs/suggest"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options configures a Server. The zero value is a well-behaved server.
type Options struct {
	// Faults is the misbehaviour applied to every stream request, unless the
	// request's own parameters override it. See Faults.
	Faults Faults
	// Logger receives the server's diagnostics; nil discards them.
	Logger *slog.Logger
	// Now returns the time stamped on chunks as generated_at; nil means
	// time.Now.
	Now func() time.Time
	// OnToolReturn, if set, is called each time an MCP tool handler returns,
	// with the tool's name and its error (ctx.Err() when the call was
	// cancelled, nil when it completed). It runs on the handler's goroutine
	// and must not block.
	OnToolReturn func(tool string, err error)
}

// ErrNotLoopback is wrapped by the error Start returns for an address that
// is not a loopback address.
var ErrNotLoopback = errors.New("not a loopback address")

// ErrAddrInUse is wrapped by the error Start returns when the address is
// already taken, typically by another server already running there.
var ErrAddrInUse = errors.New("address already in use")

// ErrClosed is returned by Start on a closed Server.
var ErrClosed = errors.New("localserver: server closed")

// A Server is the reference streaming server: it serves the datasets over raw
// SSE and as MCP tools (see the package documentation for the routes).
//
// Its methods are safe for concurrent use. Close stops every goroutine the
// server started, including the MCP sessions.
type Server struct {
	opts    Options
	now     func() time.Time
	logger  *slog.Logger
	catalog map[string]*dataset
	budget  faultBudget
	stats   serverStats
	handler http.Handler
	mcp     *mcpParts

	ctx    context.Context // cancelled by Close; every request derives from it
	cancel context.CancelFunc

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup // requests being served
	httpSrv  *http.Server
	url      string
	served   chan struct{} // closed when Serve returns
}

// New returns a Server configured by opts. It does not listen: call Start,
// or mount Handler on a server of your own.
func New(opts Options) *Server {
	s := &Server{opts: opts, now: opts.Now, logger: opts.Logger, catalog: newCatalog()}
	if s.now == nil {
		s.now = time.Now
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mcp = newMCPParts(s)
	s.handler = s.guard(s.routes())
	return s
}

// Handler returns the server's HTTP handler, with the Origin check applied to
// every route. Requests served through it end when Close is called.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on addr, which must be a loopback address such as
// "127.0.0.1:2025" or "127.0.0.1:0" (any free port), and serves in the
// background until Close. An address in use yields an error wrapping
// ErrAddrInUse; a non-loopback one, ErrNotLoopback. Start may be called at
// most once.
func (s *Server) Start(addr string) error {
	if err := checkLoopback(addr); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.httpSrv != nil:
		return fmt.Errorf("localserver: already started on %s", s.url)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("localserver: listen on %s: %w (%w)", addr, ErrAddrInUse, err)
		}
		return fmt.Errorf("localserver: listen on %s: %w", addr, err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		ln.Close()
		return fmt.Errorf("localserver: %s resolved to %s: %w", addr, ln.Addr(), ErrNotLoopback)
	}
	s.httpSrv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelDebug),
	}
	s.url = "http://" + ln.Addr().String()
	s.served = make(chan struct{})
	go func() {
		defer close(s.served)
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("localserver: serve", "addr", s.url, "err", err)
		}
	}()
	return nil
}

// checkLoopback refuses an address whose host is not a loopback IP or
// "localhost"; an empty host would listen on every interface.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("localserver: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("localserver: refusing to listen on %q: %w (use 127.0.0.1, [::1] or localhost)", addr, ErrNotLoopback)
}

// URL returns the base URL the server listens on, such as
// "http://127.0.0.1:2025", or "" before a successful Start.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Close stops the server: it closes the listener and every connection, ends
// every request and MCP session, and returns once all of the server's
// goroutines have exited. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()

	// Closing the connections first makes live streams end abruptly, as a
	// dying server's would, rather than with a clean end of response.
	var err error
	if s.httpSrv != nil {
		err = s.httpSrv.Close()
		<-s.served
	}
	s.cancel()
	s.mcp.close()
	s.inflight.Wait()
	if err != nil {
		return fmt.Errorf("localserver: close: %w", err)
	}
	return nil
}

// guard wraps every route: it refuses requests after Close, tracks requests
// so Close can wait for them, ties them to the server's lifetime and
// rejects cross-origin requests.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.enter() {
			httpError(w, http.StatusServiceUnavailable, "server is closing")
			return
		}
		defer s.inflight.Done()
		if origin := r.Header.Get("Origin"); origin != "" && !loopbackOrigin(origin) {
			s.stats.forbidden.Add(1)
			httpError(w, http.StatusForbidden, "origin %q is not a loopback origin", origin)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		stop := context.AfterFunc(s.ctx, cancel)
		defer stop()
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// enter registers a request unless the server is closed.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.inflight.Add(1)
	return true
}

// routes returns the server's request multiplexer.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/sse/", s.serveSSE)
	mux.HandleFunc("GET /datasets", s.serveDatasets)
	mux.HandleFunc("GET /datasets/{endpoint}", s.serveDataset)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.Handle("/mcp", s.mcp.streamable)
	mux.Handle("/mcp-sse", s.mcp.legacy)
	mux.HandleFunc("/", s.serveNotFound)
	return mux
}

// lookup finds a dataset or answers 404 naming the known ones.
func (s *Server) lookup(w http.ResponseWriter, name string) (*dataset, bool) {
	d, ok := s.catalog[name]
	if !ok {
		hint := ""
		if near, ok := suggest.Closest(name, catalogNames(s.catalog)); ok {
			hint = fmt.Sprintf(" (did you mean %q?)", near)
		}
		httpError(w, http.StatusNotFound, "unknown endpoint %q%s; known endpoints: %v", name, hint, catalogNames(s.catalog))
	}
	return d, ok
}

func (s *Server) serveNotFound(w http.ResponseWriter, r *http.Request) {
	httpError(w, http.StatusNotFound,
		"no route %s; routes: /sse/<endpoint>, /mcp, /mcp-sse, /datasets, /datasets/<endpoint>, /healthz", r.URL.Path)
}

// Stats is a snapshot of the server's counters, for tests and diagnostics.
type Stats struct {
	SSEStreams       int64 // raw SSE responses started
	SSEChunks        int64 // chunk events written on raw SSE
	Drops            int64 // connections dropped by the Drop fault
	InjectedFailures int64 // requests or tool calls failed by the Fail fault
	Forbidden        int64 // requests refused for their Origin
	ToolCalls        int64 // MCP tool calls started
	ToolsCompleted   int64 // MCP tool calls that returned a result
	ToolsCancelled   int64 // MCP tool calls that ended because their context ended
}

type serverStats struct {
	sseStreams, sseChunks, drops, injectedFailures, forbidden atomic.Int64
	toolCalls, toolsCompleted, toolsCancelled                 atomic.Int64
}

// Stats returns a snapshot of the server's counters. It is cheap and safe
// for concurrent use.
func (s *Server) Stats() Stats {
	st := &s.stats
	return Stats{
		SSEStreams: st.sseStreams.Load(), SSEChunks: st.sseChunks.Load(), Drops: st.drops.Load(),
		InjectedFailures: st.injectedFailures.Load(), Forbidden: st.forbidden.Load(),
		ToolCalls: st.toolCalls.Load(), ToolsCompleted: st.toolsCompleted.Load(),
		ToolsCancelled: st.toolsCancelled.Load(),
	}
}
