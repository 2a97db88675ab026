package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
)

// A StartRequest describes a stream to start; it is the Go form of the
// :mcp.stream.start input map (DESIGN §3).
type StartRequest struct {
	// Endpoint is the stream's endpoint (required): a path under the server
	// URL, an absolute URL, or an MCP tool name.
	Endpoint string
	// Processor is the function called for each chunk: a function value, or a
	// Symbol or String naming a function defined in Globals.
	Processor rtfs.Value
	// Globals are the calling program's globals: the processor runs with
	// them, and names are resolved in them.
	Globals *rtfs.Globals
	// InitialState is the processor's first state (nil means {}).
	InitialState rtfs.Value
	// Config is the start call's :config: the query string of a raw SSE
	// request, the arguments of an MCP tool call.
	Config *rtfs.Map
	// QueueCapacity bounds the queue (0 means the provider's default).
	QueueCapacity int
	// Transport names the transport ("sse", "mcp", "mcp-sse", "mock"); empty
	// means: chosen from the URL.
	Transport string
	// ServerURL overrides the provider's server URL for this stream.
	ServerURL string
	// StreamID sets the stream's id; empty means a generated
	// "<endpoint>-<8 hex digits>".
	StreamID string
	// IdleTimeout overrides Options.IdleTimeout for this stream (the start
	// call's :idle-timeout-ms): zero keeps the provider's, negative disables
	// the idle timeout.
	IdleTimeout time.Duration

	goProc processor // tests: a Go processor instead of Processor
}

// definition is the immutable description of a started stream.
type definition struct {
	endpoint  string
	transport string
	serverURL string // resolved; may carry credentials, shown redacted
	procName  string
	initial   rtfs.Value
	capacity  int
	config    *rtfs.Map
	idle      time.Duration // the start call's idle timeout: 0 provider default, < 0 none
}

// Start starts a stream and returns its id. The stream begins at once: its
// worker goroutine and, with auto-connect, its transport goroutine run until
// the stream ends or the provider closes. Errors name the offending field.
func (p *Provider) Start(req StartRequest) (string, error) {
	s, err := p.newStream(req)
	if err != nil {
		return "", err
	}
	var batch *persistence.Batch
	if p.ps != nil {
		if batch, err = p.persistNew(s, req); err != nil {
			s.cancel()
			return "", err
		}
	}
	if err := p.register(s, batch, true); err != nil {
		s.cancel()
		return "", err
	}
	p.launch(s)
	return s.id, nil
}

func (p *Provider) newStream(req StartRequest) (*stream, error) {
	if strings.TrimSpace(req.Endpoint) == "" {
		return nil, &keyError{"endpoint", errors.New("must not be empty")}
	}
	proc, err := p.processorFor(req)
	if err != nil {
		return nil, err
	}
	capacity := req.QueueCapacity
	switch {
	case capacity < 0:
		return nil, &keyError{"queue-capacity", fmt.Errorf("must be positive, got %d", capacity)}
	case capacity == 0:
		capacity = p.opts.QueueCapacity
	}
	def := definition{
		endpoint: req.Endpoint, procName: proc.name(), capacity: capacity, config: req.Config,
		serverURL: p.cfg.serverURL, initial: req.InitialState,
	}
	if req.ServerURL != "" {
		def.serverURL = strings.TrimSpace(req.ServerURL)
	}
	if def.initial == nil || def.initial == rtfs.Nil {
		def.initial = rtfs.MapOf()
	}
	def.idle = req.IdleTimeout
	def.transport = chooseTransport(strings.TrimPrefix(req.Transport, ":"), def.endpoint, def.serverURL)
	if err := p.checkEgress(def); err != nil {
		return nil, err
	}
	if _, ok := p.opts.Transports[def.transport]; !ok && p.cfg.autoConnect {
		return nil, &keyError{"transport", fmt.Errorf("no transport for :%s (configured: %s)", def.transport, p.transportNames())}
	}
	id := req.StreamID
	if id == "" {
		id = p.NewStreamID(def.endpoint)
	} else if strings.ContainsRune(id, 0) {
		return nil, &keyError{"stream-id", errors.New("must not contain a NUL character")}
	}
	return newStream(p, id, def, proc), nil
}

// processorFor resolves the request's processor.
func (p *Provider) processorFor(req StartRequest) (processor, error) {
	if req.goProc != nil {
		return req.goProc, nil
	}
	fn, label, err := resolveProcessor(req.Processor, req.Globals)
	if err != nil {
		return nil, &keyError{"processor", err}
	}
	// Catch a processor of the wrong shape at start, not on the first chunk.
	// (state chunk) processors, as the spec's first examples write them, are
	// called without the metadata.
	if cl, ok := fn.(*rtfs.Closure); ok && !cl.Accepts(3) && !cl.Accepts(2) {
		return nil, &keyError{"processor", fmt.Errorf("%s cannot be called as (processor state chunk metadata) or (processor state chunk)", label)}
	}
	return newRTFSProcessor(label, fn, req.Globals, p.opts.Limits, p.opts.Capabilities), nil
}

// resolveProcessor accepts a function value, or a symbol or string naming a
// function among the globals, and returns the function and its name.
func resolveProcessor(v rtfs.Value, g *rtfs.Globals) (rtfs.Value, string, error) {
	var name string
	switch v := v.(type) {
	case nil, rtfs.NilType:
		return nil, "", fmt.Errorf("a processor function is required")
	case *rtfs.Closure:
		if n := v.Name(); n != "" {
			return v, n, nil
		}
		return v, "anonymous fn", nil
	case *rtfs.Builtin:
		return v, v.Name(), nil
	case rtfs.Symbol:
		name = string(v)
	case rtfs.String:
		name = string(v)
	default:
		return nil, "", fmt.Errorf("expected a function, a symbol or a string, got %s", kindOf(v))
	}
	if g == nil {
		return nil, "", fmt.Errorf("processor %q is given by name, but there is no program to look it up in", name)
	}
	fn, ok := g.Get(name)
	if !ok {
		return nil, "", fmt.Errorf("no function named %q is defined in %s", name, g.Program().Name())
	}
	if fn.Kind().String() != "fn" {
		return nil, "", fmt.Errorf("%q is %s, not a function", name, kindOf(fn))
	}
	return fn, name, nil
}

// launch starts the stream's goroutines, which register counted in p.wg.
func (p *Provider) launch(s *stream) {
	s.mu.Lock()
	connect := s.taskPresent
	s.mu.Unlock()
	go s.work()
	if connect {
		go s.runTransport(p.opts.Transports[s.def.transport], p.spec(s))
	}
	p.log.Debug("stream started", "stream", s.id, "endpoint", s.def.endpoint, "transport", s.def.transport)
}

// target is the URL a stream's transport connects to first: its endpoint
// when that is an absolute URL, else its server URL.
func (d *definition) target() string {
	if isAbsolute(d.endpoint) {
		return d.endpoint
	}
	return d.serverURL
}

// checkEgress refuses a stream whose target the egress policy does not
// allow, naming the key that chose it.
func (p *Provider) checkEgress(def definition) error {
	if def.transport == "mock" {
		return nil
	}
	if err := p.opts.Egress.CheckURL(def.target()); err != nil {
		key := "server-url"
		if isAbsolute(def.endpoint) {
			key = "endpoint"
		}
		return &keyError{key, err}
	}
	return nil
}

// idleTimeout is the stream's idle timeout, 0 for none.
func (p *Provider) idleTimeout(def *definition) time.Duration {
	d := def.idle
	if d == 0 {
		d = p.opts.IdleTimeout
	}
	return max(d, 0)
}

// spec builds the transport.Spec of s. It carries the auth header only when
// the stream's target has the header's origin (the configured server URL's),
// and an HTTP client that checks redirects against the egress policy, strips
// the header on a redirect that leaves that origin, and applies the idle
// timeout.
func (p *Provider) spec(s *stream) transport.Spec {
	sp := transport.Spec{
		StreamID:      s.id,
		ServerURL:     s.def.serverURL,
		Endpoint:      s.def.endpoint,
		RetryAttempts: p.opts.RetryAttempts,
		MaxEventBytes: transport.DefaultMaxEventBytes,
		Header:        p.cfg.cred.HeaderFor(s.def.target()),
		Logger:        p.opts.Logger,
		Client: egress.Client(egress.ClientOptions{
			Base:        p.base,
			Policy:      p.opts.Egress,
			Credential:  p.cfg.cred,
			IdleTimeout: p.idleTimeout(&s.def),
		}),
	}
	if s.def.config != nil {
		sp.Query = queryOf(s.def.config)
		if b, err := rtfs.ToJSON(s.def.config); err == nil {
			sp.Arguments = b
		}
	}
	return sp
}

// queryOf renders :config as query parameters: strings as they are, keywords
// and symbols by name, numbers and booleans printed, nil left out, and
// collections as JSON.
func queryOf(m *rtfs.Map) map[string]string {
	q := make(map[string]string, m.Len())
	m.Range(func(k, v rtfs.Value) bool {
		key := textOf(k)
		switch v := v.(type) {
		case rtfs.NilType:
			return true
		case rtfs.String, rtfs.Keyword, rtfs.Symbol:
			q[key] = textOf(v)
		case rtfs.Int:
			q[key] = strconv.FormatInt(int64(v), 10)
		case rtfs.Float, rtfs.Bool:
			q[key] = v.String()
		default:
			if b, err := rtfs.ToJSON(v); err == nil {
				q[key] = string(b)
			} else {
				q[key] = v.String()
			}
		}
		return true
	})
	return q
}

// textOf is the text of a string, keyword or symbol, else the printed form.
func textOf(v rtfs.Value) string {
	switch v := v.(type) {
	case rtfs.String:
		return string(v)
	case rtfs.Keyword:
		return string(v)
	case rtfs.Symbol:
		return string(v)
	}
	return v.String()
}

// Deliver hands chunk c to stream id as if its transport had read it. It
// blocks while the stream's queue is full, and fails once the stream ended.
// It is how chunks reach streams that run without a transport.
func (p *Provider) Deliver(ctx context.Context, id string, c transport.Chunk) error {
	s, err := p.lookup(id)
	if err != nil {
		return err
	}
	if c.ReceivedAt.IsZero() {
		c.ReceivedAt = time.Now()
	}
	return s.deliverAck(ctx, c)
}

// keyError is a start error about one key of the start request.
type keyError struct {
	key string
	err error
}

func (e *keyError) Error() string { return "start stream: :" + e.key + ": " + e.err.Error() }

func (e *keyError) Unwrap() error { return e.err }

// persistNew attaches the persistence state to a new stream and returns the
// batch of its first records. A stream whose transport cannot replay
// (transport.Replayable), or that has no transport, journals its chunks.
func (p *Provider) persistNew(s *stream, req StartRequest) (*persistence.Batch, error) {
	var fn rtfs.Value
	if rp, ok := s.proc.(*rtfsProcessor); ok {
		fn = rp.fn
	}
	prog := programOf(req.Globals, fn)
	t := p.opts.Transports[s.def.transport]
	s.ps = newStreamStore(p.ps, s, codec{prog}, !replayable(t))
	b, err := p.startRecords(s, req, req.Globals, prog)
	if err != nil {
		return nil, fmt.Errorf("start stream %q: %w", s.id, err)
	}
	return b, nil
}
