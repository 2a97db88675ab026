package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/capabilities"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
)

// A StartRequest describes a stream to start; it is the Go form of the
// :mcp.stream.start input map (docs/streams.md, *Starting a stream*).
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
	// Transport names the transport (one of Options.Transports); empty
	// means: chosen from the URL.
	Transport string
	// TransportKeys are the start call's keys that only its transport
	// reads (for :stdio and :exec :command, :args, :env, ...), as JSON
	// with keywords as their names. A key the chosen transport does not
	// read is an error naming the transports that do.
	TransportKeys map[string]json.RawMessage
	// ServerURL overrides the provider's server URL for this stream.
	ServerURL string
	// StreamID sets the stream's id; empty means a generated
	// "<endpoint>-<8 hex digits>".
	StreamID string
	// IdleTimeout overrides Options.IdleTimeout for this stream (the start
	// call's :idle-timeout-ms): zero keeps the provider's, negative disables
	// the idle timeout.
	IdleTimeout time.Duration

	// Delivery is the start call's :delivery (ParseDelivery): how the
	// stream's normal and low outputs reach each subscriber, its unset
	// fields the subscriber's own; nil: the subscribers' policies.
	Delivery *Delivery
	// Milestones are the start call's :milestones (ParseMilestones): the
	// steps a result may name with :milestone, whose weights make the
	// stream's :progress.
	Milestones []Milestone

	// OnError is the start call's :on-error (ParseErrorPolicy): what a
	// failure of the processor on a chunk does. Nil: the stream is held
	// as StateFailed at once.
	OnError *ErrorPolicy

	// Local keeps the stream on this host even when the cluster places
	// streams by load (Options.Cluster): the caller follows its outputs
	// here (an MCP call reporting progress). Without a cluster it changes
	// nothing.
	Local bool

	// Journal is the journal of the program run that starts the stream:
	// up to its :mcp.stream.start call (the call being served), or the
	// whole run when the processor is looked up in the run's final
	// globals. The stream's origin record refers to it as it stands
	// (Journal.Head), and its entries not stored yet are stored with the
	// stream (PutRunJournal), so that a later compiler can come back to
	// the processor by replaying the program (docs/upgrading.md); nil
	// means none is kept. Start reads and marks it on the caller's
	// goroutine, which must be the run's.
	Journal *capabilities.Journal

	// Context carries the starting caller's trace context to the
	// Observer (the stream's span is its child); nil means none. It does
	// not bound the stream.
	Context context.Context

	// Record, when set, is a file the stream writes every chunk it
	// receives to (the start call's :record; record.go).
	Record string

	goProc stream.Processor // tests: a Go processor instead of Processor
}

// Start starts a stream and returns its id. The stream begins at once: its
// worker goroutine and, with auto-connect, its transport goroutine run until
// the stream ends or the provider closes. Errors name the offending field.
func (p *Provider) Start(req StartRequest) (string, error) {
	def, proc, err := p.define(req)
	if err != nil {
		return "", err
	}
	id := req.StreamID
	if id == "" {
		id = p.NewStreamID(def.Name())
	} else if err := CheckStreamID(id); err != nil {
		return "", &stream.KeyError{Key: "stream-id", Err: err}
	}
	s := stream.NewStream(&p.env, id, def, proc)
	if prog := stream.ProgramOf(req.Globals, proc.Function()); prog != nil {
		s.History = []ProgramVersion{stream.VersionOf(prog, def.ProcName, s.Started)}
	}
	s.StartCtx = req.Context
	if path, err := p.recordPath(req, s.ID); err != nil || path != "" {
		if err == nil {
			s.Rec, err = stream.OpenRecorder(path)
		}
		if err != nil {
			s.Cancel()
			if _, ok := err.(*stream.KeyError); !ok {
				err = &stream.KeyError{Key: "record", Err: err}
			}
			return "", err
		}
	}
	launched := false
	defer func() {
		if !launched && s.Rec != nil {
			s.Rec.Close() // the stream never ran
		}
	}()
	if p.cfg.autoConnect && s.Def.Kind.Transport != nil {
		// An origin whose circuit is open is not tried at all.
		if err := p.breakers.Allow(s.Def.Origin); err != nil {
			s.Cancel()
			return "", fmt.Errorf("start stream: %w", err)
		}
	}
	var batch *persistence.Batch
	journalStored := func() {}
	if p.ps != nil {
		if batch, journalStored, err = p.ps.PersistNew(s, stream.StartSource{Globals: req.Globals, Processor: req.Processor, GoProc: req.goProc != nil, Journal: req.Journal}); err != nil {
			s.Cancel()
			return "", err
		}
	}
	claimed := false
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if p.opts.Cluster != nil && p.ps != nil && !p.has(s.ID) {
		if err := p.claim(ctx, s.ID); err != nil {
			s.Cancel()
			return "", &stream.KeyError{Key: "stream-id", Err: err}
		}
		claimed = true
	}
	var commit func() error
	if batch != nil {
		commit = func() error { return p.ps.CommitStart(s, batch) }
	}
	if err := p.register(s, commit, true); err != nil {
		s.Cancel()
		if claimed {
			// The id is taken (a stored stream): give up the claim.
			_ = p.opts.Cluster.Release(ctx, s.ID, true)
		}
		return "", err
	}
	journalStored()
	launched = true
	s.Launch()
	if claimed && !req.Local && p.enter() {
		go p.fwd.place(s)
	}
	return s.ID, nil
}

// enter counts a goroutine in r.wg (a placement, a stream's transport run
// again) and reports true, unless the registry is closed.
func (r *registry) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	return true
}

// define resolves the definition and the processor of the stream req
// starts.
func (set *settings) define(req StartRequest) (stream.Definition, stream.Processor, error) {
	if strings.TrimSpace(req.Endpoint) == "" {
		// Only a transport that takes no endpoint (:exec) does without.
		if k, ok := set.opts.Transports.Lookup(strings.TrimSpace(req.Transport)); !ok || k.Endpoint != "" {
			what := "an endpoint"
			if ok {
				what = k.Endpoint
			}
			return stream.Definition{}, nil, &stream.KeyError{Key: "endpoint", Err: fmt.Errorf("must not be empty: give %s", what)}
		}
	}
	proc, err := set.processorFor(req)
	if err != nil {
		return stream.Definition{}, nil, err
	}
	capacity := req.QueueCapacity
	switch {
	case capacity < 0:
		return stream.Definition{}, nil, &stream.KeyError{Key: "queue-capacity", Err: fmt.Errorf("must be positive, got %d", capacity)}
	case capacity == 0:
		capacity = set.opts.QueueCapacity
	}
	def := stream.Definition{
		Endpoint: req.Endpoint, ProcName: proc.Name(), Capacity: capacity, Config: req.Config,
		ServerURL: set.cfg.serverURL, Initial: req.InitialState,
	}
	if req.ServerURL != "" {
		def.ServerURL = strings.TrimSpace(req.ServerURL)
	}
	if def.Initial == nil || def.Initial == rtfs.Nil {
		def.Initial = rtfs.MapOf()
	}
	def.Idle = req.IdleTimeout
	def.Keys = req.TransportKeys
	def.Milestones = req.Milestones
	if req.OnError != nil {
		def.OnError = *req.OnError
	}
	if req.Delivery != nil {
		d := *req.Delivery
		def.Delivery = &d
	}
	if err := set.chooseKind(&def, req.Transport); err != nil {
		return stream.Definition{}, nil, err
	}
	if err := set.checkEgress(def); err != nil {
		return stream.Definition{}, nil, err
	}
	return def, proc, nil
}

// processorFor resolves the request's processor.
func (c *settings) processorFor(req StartRequest) (stream.Processor, error) {
	if req.goProc != nil {
		return req.goProc, nil
	}
	fn, label, err := stream.ResolveProcessor(req.Processor, req.Globals)
	if err != nil {
		return nil, &stream.KeyError{Key: "processor", Err: err}
	}
	if err := stream.CheckShape(fn, label); err != nil {
		return nil, &stream.KeyError{Key: "processor", Err: err}
	}
	return stream.NewRTFSProcessor(label, fn, req.Globals, c.opts.Limits, c.opts.Capabilities), nil
}

// chooseKind sets def's transport from the catalog: the one explicit
// names, else the one its target URL selects; then checks its transport
// keys and configures it. Without a catalog entry a stream can still run
// under manual connect, fed by Deliver.
func (c *settings) chooseKind(def *stream.Definition, explicit string) error {
	target := def.Target()
	if egress.IsURL(target) {
		// Detection reads the URL in the form the rest of the stream's life
		// uses.
		if u, err := egress.Parse(target); err == nil {
			target = u.String()
		}
	}
	kind, err := c.opts.Transports.Choose(explicit, target)
	if err != nil {
		if c.cfg.autoConnect {
			return &stream.KeyError{Key: "transport", Err: err}
		}
		def.Transport = strings.TrimPrefix(strings.TrimSpace(explicit), ":")
		return nil
	}
	def.Kind, def.Transport = kind, kind.Name
	for key := range def.Keys {
		if !slices.ContainsFunc(kind.Keys, func(k transport.Key) bool { return k.Name == key }) {
			return &stream.KeyError{Key: key, Err: fmt.Errorf("is not read by :%s%s", kind.Name, c.readersOf(key))}
		}
	}
	if kind.Configure != nil {
		cfg, err := kind.Configure(def.Keys)
		if err != nil {
			return &stream.KeyError{Key: "transport", Err: fmt.Errorf(":%s: %w", kind.Name, err)}
		}
		def.Tconf = cfg
	}
	switch kind.Target {
	case transport.TargetURL:
		if def.Dial, err = def.DialURL(); err != nil {
			return err
		}
		def.Origin = def.Dial.Origin()
	case transport.TargetCommand:
		if sp, ok := def.Tconf.(transport.Spawner); ok {
			def.Origin = sp.Executable()
		}
	}
	return nil
}

// readersOf names the transports that read start key key, for an error.
func (c *settings) readersOf(key string) string {
	for _, u := range c.opts.Transports.Keys() {
		if u.Name == key {
			return " (it is for :" + strings.Join(u.Transports, ", :") + ")"
		}
	}
	return ""
}

// checkEgress refuses a stream whose target the egress policy does not
// allow, naming the key that chose it: a URL for network transports, the
// executable for process transports.
func (c *settings) checkEgress(def stream.Definition) error {
	switch def.Kind.Target {
	case transport.TargetURL:
		if err := c.opts.Egress.Check(def.Dial); err != nil {
			// The endpoint is to blame when it is a URL of its own, or a
			// path that leaves an allowed server URL.
			key := "server-url"
			if def.Kind.URLEndpoint && (egress.IsURL(def.Endpoint) || c.opts.Egress.CheckURL(def.ServerURL) == nil) {
				key = "endpoint"
			}
			return &stream.KeyError{Key: key, Err: err}
		}
	case transport.TargetCommand:
		sp, ok := def.Tconf.(transport.Spawner)
		if !ok {
			return &stream.KeyError{Key: "command", Err: fmt.Errorf(":%s names no program to run", def.Transport)}
		}
		if err := c.opts.Egress.CheckCommand(sp.Executable(), sp.EnvNames()); err != nil {
			return &stream.KeyError{Key: "command", Err: err}
		}
	case transport.TargetFile:
		fu, ok := def.Tconf.(transport.FileUser)
		if !ok {
			return &stream.KeyError{Key: "file", Err: fmt.Errorf(":%s names no file to read", def.Transport)}
		}
		if err := c.opts.Egress.CheckFile(fu.Path()); err != nil {
			return &stream.KeyError{Key: "file", Err: err}
		}
	}
	return nil
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
	return s.DeliverAck(ctx, c)
}
