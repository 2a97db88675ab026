// Package provider is the stream manager of rtfshost: it runs the streams that
// RTFS programs start with (call :mcp.stream.start {...}).
//
// The main types are Provider, StartRequest, Status, Subscription and Event.
// A Provider owns its streams. Each stream has a bounded FIFO queue, a worker
// goroutine that calls the stream's processor (state chunk metadata) for each
// chunk and applies the directive of its result exactly as
// docs/streams.md describes, and, when auto-connect is on, a goroutine that
// runs the stream's transport.StreamTransport with the stream as its
// transport.Sink. A full queue blocks the transport's Deliver, so the source
// feels backpressure; no chunk is dropped except by cancel, which counts them.
//
// Outputs of processors are kept as the stream's :last-output and published
// to subscribers (Provider.Subscribe). Provider.Inspect, Status, Pause,
// Resume, Cancel and Await serve Go callers, and Provider.Capabilities the
// same operations as RTFS capabilities (:mcp.stream.start, :mcp.stream.inspect
// ...). Close stops every stream and returns when all goroutines are gone.
//
// With Options.Store the streams are durable (docs/durability.md): each
// processed chunk's state and cursor are committed together through a group
// committer, chunks of sources that cannot replay (transport.Replayable) are
// journaled on arrival, and Recover (or RecoverStream) reloads the streams a
// store holds after a restart: finished ones for inspection, unfinished ones
// running again from their cursor.
//
// A stream itself (its goroutines, the chunk's path, its subscribers and
// the records it stores) is package provider/internal/stream; a Provider
// holds many of them (start, recover, list, the cluster), and the stream
// types its API carries (Status, Event, Subscription, StreamInfo...) are
// aliases of that package's.
package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/breaker"
	"github.com/rtfshost/rtfshost/transport/egress"
)

// Options configure a Provider. The zero value is valid: no transports
// (streams then only receive chunks through Provider.Deliver), no
// capabilities for processors, the process environment.
type Options struct {
	// Transports is the catalog of transports streams may use
	// (host.DefaultTransports is the usual set). A start call names one
	// with :transport, or the catalog picks it from the URL (see
	// docs/transports.md). Nil means none.
	Transports *transport.Catalog
	// Capabilities serves the host calls that processors make; nil means a
	// processor's (call ...) fails with a catchable error.
	Capabilities *capabilities.Registry
	// ServerURL is the default server URL, used when a start call has no
	// :server-url; empty means the environment chain of
	// docs/streams.md, *Configuration*.
	ServerURL string
	// LookupEnv reads environment variables; nil means os.LookupEnv. It is
	// called during New only.
	LookupEnv func(string) (string, bool)
	// ManualConnect starts streams without running their transport, unless
	// CCOS_MCP_STREAM_AUTO_CONNECT says otherwise; chunks then arrive through
	// Deliver. By default streams connect at once.
	ManualConnect bool
	// Limits bound each processor call (steps, depth, collection size,
	// memory, time) and, by Limits.OutputLimit, the encoding of what it
	// returns: a processor's :output that would pass it ends the stream in
	// :error (its state stays the last one), and so does a state the store
	// cannot encode within it; inspect shows a value past it as a note.
	Limits rtfs.Limits
	// RecordDir, when set, makes every stream started here record the
	// chunks it receives to RecordDir/<stream id>.ndjson (`rtfshost run
	// --record DIR`), unless its start call names its own :record file.
	RecordDir string
	// QueueCapacity is the default queue capacity (default 32).
	QueueCapacity int
	// RetryAttempts is passed to transports (default 3).
	RetryAttempts int
	// HTTPClient carries network transports' requests (its Transport is
	// used; its CheckRedirect and Timeout are not, since each stream gets a
	// client of its own built by egress.Client); nil means a transport the
	// provider owns and closes.
	HTTPClient *http.Client
	// Egress says which server URLs a stream may reach, checked when it
	// starts, when it is recovered and on every redirect; the origin of the
	// provider's own server URL is always allowed. Nil allows every URL (a
	// trusted local program). `rtfshost serve` passes a restrictive policy
	// (docs/security.md).
	Egress *egress.Policy
	// IdleTimeout ends a network source's connection after this long without
	// a byte (an event or a comment) and reconnects it with the retry
	// policy; after the retries the stream ends in :error naming the idle
	// timeout. Zero means $RTFSHOST_IDLE_TIMEOUT_MS, else 60 s; negative
	// disables it. A start call's :idle-timeout-ms overrides it.
	IdleTimeout time.Duration
	// Breaker configures the host's circuit breakers, one per origin (a
	// server URL's origin, or the program of an :exec or :stdio stream):
	// after Breaker.Failures consecutive failed attempts (default 5) the
	// origin's circuit opens for Breaker.Cooldown (default 30 s), during
	// which starts and reconnects to it fail at once (docs/transports.md).
	Breaker breaker.Options
	// MaxStreams bounds the streams running at once (0: no bound); Start
	// refuses one more with an error wrapping ErrTooManyStreams. Recovered
	// streams are not refused.
	MaxStreams int
	// Logger receives the provider's logs; nil discards them. Secrets are
	// never logged.
	Logger *slog.Logger
	// Store makes streams durable (docs/durability.md); nil means no
	// persistence. The provider commits through a Committer of its own,
	// which Close closes; the caller owns the Store and closes it after the
	// provider. Recover reloads the streams a store holds.
	Store persistence.Store
	// Observer, when set, is told what the streams do, for metrics and
	// traces (see Observer); nil observes nothing.
	Observer Observer
	// Cluster, when set, says that Store is shared with other hosts
	// (cluster.go, docs/cluster.md): the provider runs a stream only while
	// it owns it, and forwards requests on streams other hosts run. Nil:
	// this provider is alone with its store.
	Cluster Cluster
}

// A Provider manages streams. It is safe for concurrent use. Its zero value is
// not usable; call New.
type Provider struct {
	settings // Options and the environment, resolved once by New
	log      *slog.Logger
	ctx      context.Context
	cancel   context.CancelFunc

	registry // the streams, by id, their goroutines and subscribers
	// runs records the transport runs in progress, by stream id (runs.go).
	runs *stream.RunTable

	ps *stream.Persister // nil without a store

	breakers *breaker.Set // one circuit per origin, shared by the streams

	base    http.RoundTripper // carries every stream's requests
	ownBase *http.Transport   // base, when the provider made it (closed by Close)

	// env is what the provider's streams reach of it (env.go).
	env stream.StreamEnv
	// load makes streams from their stored records (recover.go).
	load loader
	// fwd serves the streams of other hosts (cluster.go).
	fwd forwarder
}

// settings are a provider's Options and what New resolved of them and of
// the environment; they do not change after New. Its methods read nothing
// else: they turn a start request into a stream's definition and processor.
type settings struct {
	opts Options
	cfg  envConfig
}

// A registry holds a provider's streams, by id and in start order, counts
// their goroutines, and holds the subscriptions that wait for a stream or
// follow every stream. Its methods reach nothing else of the provider.
type registry struct {
	wg sync.WaitGroup // the streams' goroutines, and the provider's own

	mu      sync.Mutex
	closed  bool
	streams map[string]*stream.Stream
	order   []*stream.Stream
	// restoring holds the ids being restored (recover.go), so that two
	// recoveries of one stream (a takeover and a request, in a cluster)
	// do not both rebuild it.
	restoring map[string]bool
	// loadWatches are told of the streams loaded from the store
	// (WatchLoads, recover.go).
	loadWatches []*loadWatch
	// pending holds the Pending subscriptions to stream ids no stream has
	// yet (subscribe.go).
	pending map[string][]*Subscription

	allSubs atomic.Pointer[[]*Subscription] // subscribers to every stream
	// ChangeSubs counts the open subscriptions that asked for EventChange
	// (SubscribeOptions.Changes): while it is zero, no stream looks for
	// them.
	changeSubs atomic.Int64

	// maxStreams bounds the streams running at once (Options.MaxStreams;
	// 0: no bound), and onLimit tells the observer it refused one.
	maxStreams int
	onLimit    func(kind string)
}

// Transports returns the provider's transport catalog (Options.Transports),
// from which the start schemas are derived.
func (p *Provider) Transports() *transport.Catalog { return p.opts.Transports }

// ErrClosed is wrapped by the error of every operation on a closed
// Provider: starts, control (Pause, Resume, Cancel, Skip, Status), Info and
// Inspect, subscriptions. errors.Is matches it.
var ErrClosed = errors.New("stream provider is closed")

// New returns a Provider. It resolves the server URL, the auth header and
// auto-connect from opts and the environment once (docs/streams.md,
// *Configuration*).
func New(opts Options) *Provider {
	if opts.QueueCapacity <= 0 {
		opts.QueueCapacity = defaultQueueCapacity
	}
	if opts.RetryAttempts <= 0 {
		opts.RetryAttempts = defaultRetryAttempts
	}
	p := &Provider{
		settings: settings{opts: opts, cfg: resolveConfig(opts.LookupEnv, opts.ServerURL, !opts.ManualConnect)},
		log:      opts.Logger,
		breakers: breaker.New(opts.Breaker),
		runs:     stream.NewRunTable(),
	}
	p.streams = make(map[string]*stream.Stream)
	p.maxStreams, p.onLimit = opts.MaxStreams, p.limitHit
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case opts.HTTPClient != nil && opts.HTTPClient.Transport != nil:
		p.base = opts.HTTPClient.Transport
	case opts.HTTPClient != nil:
		p.base = http.DefaultTransport
	default:
		p.ownBase = egress.NewTransport()
		p.base = p.ownBase
	}
	// The configured server's origin is always allowed.
	p.opts.Egress = p.opts.Egress.WithOrigin(p.cfg.serverURL)
	if p.opts.IdleTimeout == 0 {
		p.opts.IdleTimeout = p.cfg.idleTimeout
	}
	if opts.Store != nil {
		var onCommit func(persistence.CommitInfo)
		if opts.Observer != nil {
			onCommit = opts.Observer.StoreCommitted
		}
		p.ps = stream.NewPersister(opts.Store, onCommit, p.log)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.env = newStreamEnv(p)
	p.load = loader{set: &p.settings, reg: &p.registry, ps: p.ps, env: &p.env}
	p.fwd = forwarder{p}
	return p
}

// newStreamEnv returns the env of p's streams, once New has set p up.
func newStreamEnv(p *Provider) stream.StreamEnv {
	env := stream.StreamEnv{
		Ctx: p.ctx, Wg: &p.wg, Log: p.log,
		Breakers: p.breakers, Runs: p.runs,
		OutputLimit: p.opts.Limits.OutputLimit(), AutoConnect: p.cfg.autoConnect,
		RetryAttempts: p.opts.RetryAttempts, IdleTimeout: p.opts.IdleTimeout,
		TransportLog: p.opts.Logger, Egress: p.opts.Egress, Cred: p.cfg.cred, Base: p.base,
		Persistent: p.ps != nil, Cluster: p.opts.Cluster, Observer: p.opts.Observer,
		AllSubs: &p.allSubs, ChangeSubs: &p.changeSubs,
		Enter: p.enter, Forget: p.forget,
	}
	if p.ps != nil {
		env.Space, _ = p.ps.Store.(persistence.SpaceChecker)
	}
	return env
}

// AutoConnect reports whether new streams run their transport at once.
func (p *Provider) AutoConnect() bool { return p.cfg.autoConnect }

// Close stops every stream (their state stays as it was, they are not
// cancelled), closes every subscription and returns when all the provider's
// goroutines have exited. A processor call in flight is interrupted through
// its context and its result is not applied (the stream's cursor stays
// before that chunk). Events published before Close stay readable on the
// subscriptions' channels. With a store, Close commits every progress
// record submitted before it and closes the provider's Committer (not the
// Store). It is idempotent.
func (p *Provider) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	if p.ownBase != nil {
		p.ownBase.CloseIdleConnections()
	}
	var err error
	if p.ps != nil {
		if err = p.ps.Com.Close(); err != nil {
			err = fmt.Errorf("provider: close committer: %w", err)
		}
	}
	p.mu.Lock()
	subs := p.allSubs.Swap(nil)
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()
	if subs != nil {
		for _, s := range *subs {
			s.Close()
		}
	}
	for _, list := range pending {
		for _, s := range list {
			s.Close()
		}
	}
	return err
}

// MaxStreamIDLength is the longest stream id, in bytes, the provider
// accepts anywhere an id is given (a start's :stream-id, a subscription, a
// lookup): a client must not make the host hold, or echo in an error, an
// id of any size.
const MaxStreamIDLength = 256

// ErrStreamIDTooLong is wrapped by the error of a request naming a stream
// id longer than MaxStreamIDLength.
var ErrStreamIDTooLong = errors.New("stream id too long")

// CheckStreamID returns an error when id cannot be a stream's id: longer
// than MaxStreamIDLength bytes (the error wraps ErrStreamIDTooLong and
// quotes only the id's first bytes) or holding a NUL character. It costs a
// scan of id.
func CheckStreamID(id string) error {
	if len(id) > MaxStreamIDLength {
		return fmt.Errorf("%w: a stream id of %d bytes (%q...) is longer than the maximum of %d", ErrStreamIDTooLong, len(id), id[:16], MaxStreamIDLength)
	}
	if strings.ContainsRune(id, 0) {
		return errors.New("a stream id must not contain a NUL character")
	}
	return nil
}

// lookup returns the stream with the given id, unless it is leaving for
// another host of the cluster (cluster.go).
func (r *registry) lookup(id string) (*stream.Stream, error) {
	if len(id) > MaxStreamIDLength {
		return nil, CheckStreamID(id)
	}
	r.mu.Lock()
	s, ok := r.streams[id]
	r.mu.Unlock()
	if !ok || s.Moved.Load() || s.HandingOver.Load() {
		return nil, &noStreamError{id: id}
	}
	return s, nil
}

// lookupOpen is lookup for the operations that act on a stream or report
// its live state (control, Status, Info): on a closed provider they fail
// with ErrClosed, since nothing they did would be stored. Await, Done and
// Timeline still answer after Close, with the stream as Close left it.
func (r *registry) lookupOpen(id string) (*stream.Stream, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("stream %q: %w", id, ErrClosed)
	}
	return r.lookup(id)
}

// ErrNoStream is wrapped by the error of a request naming a stream id that
// no stream has (on this host, or, in a cluster, in the shared store).
var ErrNoStream = errors.New("no such stream")

// noStreamError is the error of a request on an unknown stream id: it says
// "no stream with id ..." and wraps ErrNoStream (and err, when set).
type noStreamError struct {
	id  string
	err error
}

func (e *noStreamError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("no stream with id %q: %v", e.id, e.err)
	}
	return fmt.Sprintf("no stream with id %q", e.id)
}

func (e *noStreamError) Is(target error) bool { return target == ErrNoStream }

func (e *noStreamError) Unwrap() error { return e.err }

// StreamIDs returns the ids of every stream, in start order.
func (p *Provider) StreamIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, len(p.order))
	for i, s := range p.order {
		ids[i] = s.ID
	}
	return ids
}

// register adds s under its id, or reports a duplicate id, a closed
// registry or, for a fresh stream, one stream more than maxStreams. It
// counts the stream's goroutines in r.wg before Close can wait for them:
// the worker, and the transport's when the stream connects. A non-nil
// commit is called first, under r.mu, and its error refuses the stream (a
// new persisted stream's start records). The Pending subscriptions to s's
// id are s's from then on.
func (r *registry) register(s *stream.Stream, commit func() error, fresh bool) error {
	early, err := r.add(s, commit, fresh)
	for _, sub := range early {
		s.Subscribe(sub)
		if stream.WantsChanges(sub) { // the stream it waited for is here
			stream.Send(s.Env.Ctx, sub, Event{Kind: EventChange, StreamID: s.ID, Seq: -1})
		}
	}
	return err
}

// add is register but for the Pending subscriptions, which it returns.
func (r *registry) add(s *stream.Stream, commit func() error, fresh bool) ([]*Subscription, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if _, dup := r.streams[s.ID]; dup {
		return nil, &stream.KeyError{Key: "stream-id", Err: fmt.Errorf("a stream with id %q already exists", s.ID)}
	}
	if fresh && r.maxStreams > 0 && len(r.liveLocked()) >= r.maxStreams {
		r.onLimit("max-streams")
		return nil, fmt.Errorf("%w: %d streams are running, the most this host allows", ErrTooManyStreams, r.maxStreams)
	}
	if commit != nil {
		if err := commit(); err != nil {
			return nil, err
		}
	}
	r.streams[s.ID] = s
	r.order = append(r.order, s)
	s.Admit()
	return r.attachPendingLocked(s), nil
}

// ErrTooManyStreams is wrapped by Start's error when Options.MaxStreams
// streams are running.
var ErrTooManyStreams = errors.New("too many streams")

// liveLocked returns the ids of the streams that have not ended, in start
// order. r.mu is held.
func (r *registry) liveLocked() []string {
	var ids []string
	for _, s := range r.order {
		select {
		case <-s.Done:
		default:
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// NewStreamID returns a fresh stream id for endpoint, of the shape the
// provider generates when a start names none: "<endpoint>-<8 random hex
// digits>" (for an absolute URL, its last path segment), not in use by p.
// Hosts that must know a stream's id before starting it (to subscribe to its
// first output) call it and pass the id as StartRequest.StreamID. It is safe
// for concurrent use.
func (p *Provider) NewStreamID(endpoint string) string {
	base := endpoint
	if stream.IsAbsolute(base) {
		base = strings.TrimRight(base, "/")
		base = base[strings.LastIndexAny(base, "/:")+1:]
	}
	base = strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '-'
	}, base)
	if base == "" {
		base = "stream"
	}
	if len(base) > MaxStreamIDLength-9 {
		base = base[:MaxStreamIDLength-9] // room for "-" and 8 hex digits
	}
	var b [4]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		id := base + "-" + hex.EncodeToString(b[:])
		p.mu.Lock()
		_, taken := p.streams[id]
		p.mu.Unlock()
		if !taken {
			return id
		}
	}
}

// WaitAll blocks until every stream started so far, and every stream they
// start meanwhile, has ended, or ctx ends. A failed stream (StateFailed)
// has not ended: it is waited for until it is repaired or cancelled
// (Stuck lists it). It returns nil when none ended in
// :error, else the *StreamError of each failed stream, joined. Streams
// interrupted by Close count as failed.
func (p *Provider) WaitAll(ctx context.Context) error {
	waited := 0
	for {
		p.mu.Lock()
		list := append([]*stream.Stream(nil), p.order...)
		p.mu.Unlock()
		if len(list) == waited {
			break
		}
		for _, s := range list[waited:] {
			select {
			case <-s.Done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		waited = len(list)
	}
	p.mu.Lock()
	list := append([]*stream.Stream(nil), p.order...)
	p.mu.Unlock()
	var errs []error
	for _, s := range list {
		if st := s.Status(); st.State == StateError || !st.State.Terminal() {
			errs = append(errs, s.EndErr(st))
		}
	}
	return errors.Join(errs...)
}

// Breakers returns the circuits of the origins that failed lately (the
// others are closed), by origin.
func (p *Provider) Breakers() []breaker.State { return p.breakers.States() }

// BreakerCounts returns how many times a circuit opened, and how many
// starts and reconnects an open circuit refused, since New.
func (p *Provider) BreakerCounts() (opened, rejected int64) {
	return p.breakers.Opened(), p.breakers.Rejected()
}

// Summary returns the summary inspect map: :total, :streams (each stream's
// inspect map, in start order), :auto-connect, :server-url,
// :persistence-enabled, :breakers (Breakers) and :observed-at-epoch-ms.
func (p *Provider) Summary(opts InspectOptions) rtfs.Value {
	p.mu.Lock()
	list := append([]*stream.Stream(nil), p.order...)
	p.mu.Unlock()
	now := time.Now()
	items := make([]rtfs.Value, len(list))
	for i, s := range list {
		items[i] = s.Inspect(opts, now)
	}
	return p.summaryOf(items, len(list), now, p.ps != nil, p.Breakers())
}
