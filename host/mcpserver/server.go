package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/host/observe"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// Options configure a Server. Only Host is required.
type Options struct {
	// Host runs the programs of rtfs.eval and mcp.stream.start (their host
	// calls are served from its registry) and its provider runs the streams
	// they start. The Server does not close it.
	Host *host.Host
	// Limits bound every program run by a tool (steps, depth, collection
	// size); the zero value means rtfs's defaults. Processors run with the
	// host's provider limits.
	Limits rtfs.Limits
	// Delivery is how the outputs of a call's streams become its progress
	// notifications (docs/streams.md, "Delivery"): one notification per
	// batch; a stream's :delivery overrides it. Nil: provider.DefaultDelivery
	// (normal outputs at most every 200 ms, 10 per notification; low ones
	// every second, 20).
	Delivery *provider.Delivery
	// ProgressInterval, when Delivery is nil and it is positive, is
	// Delivery.Normal.Interval.
	//
	// Deprecated: set Delivery.
	ProgressInterval time.Duration
	// MaxPendingOutputs bounds the immediate and normal outputs a call
	// holds for a client that reads its notifications more slowly than
	// its streams make them (default 10000; negative: no bound); beyond
	// it the call's notifications stop, with a warning to the client (its
	// result still lists every output).
	MaxPendingOutputs int
	// MaxBufferedOutputs bounds the outputs one call keeps for its final
	// result (default 10000); the result counts those left out.
	MaxBufferedOutputs int
	// Token, when set, is the bearer token every request must carry in
	// "Authorization: Bearer <token>". It and OAuth exclude each other.
	Token string
	// OAuth, when set, makes the server an OAuth 2.1 resource server:
	// every request carries an access token of OAuth.Issuer, whose scopes
	// say which tools it may call (docs/security.md).
	OAuth *OAuth
	// AllowedOrigins lists the browser origins (e.g. "http://localhost:6274")
	// accepted besides the server's own; any other Origin gets 403.
	AllowedOrigins []string
	// Name and Version are the serverInfo of the initialize result
	// (default "rtfshost" and "dev").
	Name, Version string
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// MaxCallsPerSession bounds the tool calls one MCP session has in flight
	// at once (default 16); a call beyond it gets an isError result saying
	// so. Calls of clients without a session (the stateless and JSON-only
	// paths) share one count.
	MaxCallsPerSession int
	// MaxSessions bounds the MCP sessions open at once over Streamable
	// HTTP and /sse (default DefaultMaxSessions); an initialize or a GET of
	// /sse beyond it gets HTTP 429 with Retry-After.
	MaxSessions int
	// MaxSubscriptions bounds the resource subscriptions of all sessions
	// together (default DefaultMaxSubscriptions); a resources/subscribe
	// beyond it gets -32600. Each session also has at most 256, and a
	// subscribed URI at most 1 KiB (docs/security.md).
	MaxSubscriptions int
	// SessionIdleTimeout closes a Streamable HTTP session that has sent no
	// request for this long, and with it what it held (default
	// DefaultSessionIdleTimeout; negative: never).
	SessionIdleTimeout time.Duration
	// Observer, when set, counts the tool calls (by tool and outcome) and
	// limit hits, and traces each call as a span whose parent is the
	// traceparent of the request's _meta. Nil observes nothing.
	Observer *observe.Observer
	// Routes are further handlers served beside /mcp and /sse, behind the
	// same checks (see Route).
	Routes []Route
	// HTTP bounds the time and size of what a client sends to Serve (the
	// zero value: the defaults of HTTPLimits). Handler alone sets none;
	// serve it with NewHTTPServer.
	HTTP HTTPLimits
	// ResourceInterval is the least time between two
	// notifications/resources/updated of one stream's resource
	// (rtfs://streams/{id}); the changes in between become one. Zero means
	// DefaultResourceInterval (one second).
	ResourceInterval time.Duration
}

// A Route is a handler the Server serves beside /mcp and /sse: the metrics
// endpoint, the dashboard. It is behind the same checks as /mcp: the Origin
// check, the Host check against DNS rebinding when the server listens on
// loopback, and the bearer token unless Public.
type Route struct {
	// Pattern is a net/http ServeMux pattern, e.g. "/metrics" or "/ui/".
	Pattern string
	Handler http.Handler
	// Public skips the token check, for pages that hold no data (the
	// dashboard's page and script, which then ask for the token).
	Public bool
}

// A Server is an MCP server that exposes a host's streams and programs as
// tools. It is safe for concurrent use. Close it when done; the Host
// stays open.
type Server struct {
	opts   Options
	host   *host.Host
	prov   *provider.Provider
	caps   *capabilities.Registry
	log    *slog.Logger
	mcp    *mcp.Server
	tasks  *tasks
	tools  []toolSpec     // the tools, made once by addTools
	oauth  *oauthServer   // nil without Options.OAuth
	events *durableEvents // the stateful era's event store (eventstore.go)
	// delivery is the policy of the calls' Outboxes (Options.Delivery);
	// nil: the default.
	delivery *provider.Delivery
	// resources holds the subscriptions to the streams' resources
	// (resources.go).
	resources *resourceWatch
	// resumeOnce starts the followers of the streams of an earlier process.
	resumeOnce sync.Once
	handler    http.Handler

	ctx    context.Context // cancelled by Close: ends every call
	cancel context.CancelFunc
	calls  sync.WaitGroup // tool calls in flight

	mu       sync.Mutex
	closed   bool
	inFlight map[any]int // tool calls in flight per session (nil key: no session)
	opening  int         // initialize requests in flight (limitSessions)
}

// New returns a Server for opts. Each call subscribes to the streams it
// starts or follows (watch.go); none of the Host's other streams publishes
// to the Server.
func New(opts Options) (*Server, error) {
	if opts.Host == nil {
		return nil, errors.New("mcpserver: Options.Host is nil")
	}
	if opts.MaxBufferedOutputs <= 0 {
		opts.MaxBufferedOutputs = 10000
	}
	if opts.MaxCallsPerSession <= 0 {
		opts.MaxCallsPerSession = DefaultMaxCallsPerSession
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.MaxSubscriptions <= 0 {
		opts.MaxSubscriptions = DefaultMaxSubscriptions
	}
	switch {
	case opts.SessionIdleTimeout == 0:
		opts.SessionIdleTimeout = DefaultSessionIdleTimeout
	case opts.SessionIdleTimeout < 0:
		opts.SessionIdleTimeout = 0 // never
	}
	if opts.ProgressInterval < 0 {
		return nil, fmt.Errorf("mcpserver: negative progress interval %v", opts.ProgressInterval)
	}
	switch {
	case opts.MaxPendingOutputs == 0:
		opts.MaxPendingOutputs = 10000
	case opts.MaxPendingOutputs < 0:
		opts.MaxPendingOutputs = 0 // no bound
	}
	if opts.ResourceInterval < 0 {
		return nil, fmt.Errorf("mcpserver: negative resource update interval %v", opts.ResourceInterval)
	}
	if opts.ResourceInterval == 0 {
		opts.ResourceInterval = DefaultResourceInterval
	}
	if opts.Name == "" {
		opts.Name = "rtfshost"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{opts: opts, host: opts.Host, prov: opts.Host.Provider(), caps: opts.Host.Capabilities(), log: opts.Logger}
	s.delivery = opts.Delivery
	if s.delivery == nil && opts.ProgressInterval > 0 {
		d := provider.DefaultDelivery()
		d.Normal.Interval = opts.ProgressInterval
		s.delivery = &d
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if opts.OAuth != nil {
		if opts.Token != "" {
			s.cancel()
			return nil, errors.New("mcpserver: a static Token and OAuth exclude each other: give one")
		}
		o, err := newOAuthServer(s.ctx, *opts.OAuth, s.log)
		if err != nil {
			s.cancel()
			return nil, err
		}
		s.oauth = o
	}
	// The resources are the streams (resources.go): subscribable, and the
	// list never changes.
	// Logging, for what programs print (docs/mcp-server.md), is deprecated
	// from 2026-07-28 but part of the revisions before it, which we serve.
	//lint:ignore SA1019 logging is deprecated from MCP 2026-07-28; we serve the revisions before it
	// Prompts: go-sdk answers prompts/list (with none) whatever is
	// declared, so the capability is declared, in both eras, for what is
	// served.
	caps := &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Resources: &mcp.ResourceCapabilities{Subscribe: true}, Prompts: &mcp.PromptCapabilities{}}
	caps.AddExtension(extensionTasks, nil) // the 2026-07-28 tasks extension (taskwire.go)
	s.resources = newResourceWatch(s, opts.ResourceInterval, opts.MaxSubscriptions)
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, &mcp.ServerOptions{
		Logger:             s.log,
		Instructions:       instructions,
		Capabilities:       caps,
		SubscribeHandler:   s.resources.subscribe,
		UnsubscribeHandler: s.resources.unsubscribe,
	})
	s.mcp.AddReceivingMiddleware(s.resources.keepHandler) // innermost: go-sdk's own handler
	s.mcp.AddReceivingMiddleware(explicitSuccess, resourceNotFound)
	s.tasks = newTasks(s, opts.Host.Store())
	s.events = newDurableEvents(opts.Host.Store(), func(msg string, args ...any) { s.log.Error(msg, args...) })
	s.addTools()
	s.addResources()
	s.handler = s.newHandler()
	return s, nil
}

const instructions = `rtfshost runs RTFS stream processors. mcp.stream.start takes an RTFS program, ` +
	`the name of its processor function and a stream endpoint, and reports every :output ` +
	`of the processor as a progress notification; rtfs.eval evaluates a program. ` +
	`mcp.stream.inspect, status, pause, resume and cancel manage running streams.`

// Handler returns the server's HTTP handler: MCP Streamable HTTP at /mcp
// (POST, GET and DELETE) and the legacy HTTP+SSE transport at /sse, behind
// the Origin and token checks. It bounds no connection: serve it with an
// *http.Server from NewHTTPServer (as Serve does).
func (s *Server) Handler() http.Handler { return s.handler }

// Close ends every MCP session and every tool call in flight (the streams
// they are watching are cancelled), stops the Server's goroutines and waits
// for them. It is idempotent. The Host stays open.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.tasks.stop()
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
	s.calls.Wait()
	s.resources.close()
	s.events.close()
	s.tasks.close()
	return nil
}

// hold counts work of the server's own (not a tool call's) in calls, which
// Close waits for, and reports false once the Server is closed; call
// calls.Done when the work is done.
func (s *Server) hold() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.calls.Add(1)
	return true
}

// DefaultMaxSessions is Options.MaxSessions when zero.
const DefaultMaxSessions = 256

// DefaultSessionIdleTimeout is Options.SessionIdleTimeout when zero.
const DefaultSessionIdleTimeout = time.Hour

// DefaultMaxCallsPerSession is Options.MaxCallsPerSession when zero.
const DefaultMaxCallsPerSession = 16

// enter registers a tool call of session (nil: no session); it fails once
// the Server is closed or the session has MaxCallsPerSession calls in
// flight. The returned context ends with ctx or with Close; call the
// returned function when the call is done.
func (s *Server) enter(ctx context.Context, session any) (context.Context, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, errors.New("the MCP server is shutting down")
	}
	if s.inFlight[session] >= s.opts.MaxCallsPerSession {
		s.opts.Observer.CountLimit("session-calls")
		return nil, nil, fmt.Errorf("this session already has %d tool calls in flight, the most this server allows (rtfshost serve --max-session-calls); wait for one to end or cancel it", s.opts.MaxCallsPerSession)
	}
	if s.inFlight == nil {
		s.inFlight = make(map[any]int)
	}
	s.inFlight[session]++
	s.calls.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
		s.mu.Lock()
		if s.inFlight[session]--; s.inFlight[session] <= 0 {
			delete(s.inFlight, session)
		}
		s.mu.Unlock()
		s.calls.Done()
	}, nil
}
