// Package observe makes an rtfshost host observable: Prometheus metrics
// (github.com/prometheus/client_golang) and OpenTelemetry traces of its
// streams and of the MCP server's tool calls.
//
// The main type is Observer. It implements provider.Observer, so a provider
// built with Options.Observer set to it reports every chunk, processor call,
// directive, reconnect and store commit; Attach adds the gauges read from
// the provider's snapshot at scrape time (stream states, queue depth and
// capacity); Handler serves the metrics in the Prometheus exposition format;
// StartCall wraps an MCP tool call in a span and counts it. SetupTracing
// builds the OTLP trace pipeline from the standard OTEL_* variables.
// docs/observability.md lists every metric and span.
//
// Labels are bounded: transport, endpoint (the first MaxEndpoints distinct
// endpoints, then "other"; URLs lose their credentials and query), state,
// tool and outcome. A stream_id label is added only with
// Options.PerStream, since every stream would then make new series.
package observe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// Options configure an Observer. The zero value is valid: metrics in a
// registry of the Observer's own with the Go and process collectors, no
// traces.
type Options struct {
	// Registry receives the metrics; nil means a new one, with the Go
	// runtime and process collectors registered.
	Registry *prometheus.Registry
	// PerStream adds a stream_id label to the stream metrics (rtfshost
	// --metrics-per-stream). Each stream then makes series of its own, kept
	// until the process ends: use it with few, long-lived streams.
	PerStream bool
	// MaxEndpoints bounds the distinct values of the endpoint label
	// (default 50); later endpoints are labelled "other".
	MaxEndpoints int
	// Tracer makes the spans; nil means no traces.
	Tracer trace.TracerProvider
	// SampleRatio is the share of processor calls that get a span of their
	// own, in [0, 1] (default 0.01); the first chunk of every stream always
	// does. The stream, transport and MCP call spans are always made (the
	// TracerProvider's sampler still applies to all of them).
	SampleRatio float64
}

// DefaultSampleRatio is Options.SampleRatio when zero.
const DefaultSampleRatio = 0.01

// An Observer collects metrics and traces of a host. It is safe for
// concurrent use; its per-chunk methods cost a few atomic operations (and
// a span for sampled processor calls).
type Observer struct {
	opts   Options
	reg    *prometheus.Registry
	tracer trace.Tracer
	traced bool
	every  float64 // 1/SampleRatio: processor calls between two sampled ones

	streamLabels []string
	received     *prometheus.CounterVec
	bytes        *prometheus.CounterVec
	processed    *prometheus.CounterVec
	dropped      *prometheus.CounterVec
	outDropped   *prometheus.CounterVec
	procErrors   *prometheus.CounterVec
	deadLetters  *prometheus.CounterVec
	held         *prometheus.CounterVec
	procLatency  *prometheus.HistogramVec
	directives   *prometheus.CounterVec
	started      *prometheus.CounterVec
	ended        *prometheus.CounterVec
	reconnects   *prometheus.CounterVec
	tErrors      *prometheus.CounterVec
	commitDur    prometheus.Histogram
	commitSize   prometheus.Histogram
	commitOps    prometheus.Histogram
	commitBatch  *prometheus.CounterVec
	mcpCalls     *prometheus.CounterVec
	mcpDuration  *prometheus.HistogramVec
	limits       *prometheus.CounterVec

	endpoints endpointSet

	attachMu sync.Mutex
	attached bool
}

// New returns an Observer whose metrics are registered in opts.Registry
// (or a registry of its own). It fails when a metric of the same name is
// registered there already.
func New(opts Options) (*Observer, error) {
	if opts.MaxEndpoints <= 0 {
		opts.MaxEndpoints = 50
	}
	if opts.SampleRatio == 0 {
		opts.SampleRatio = DefaultSampleRatio
	}
	if opts.SampleRatio < 0 || opts.SampleRatio > 1 || math.IsNaN(opts.SampleRatio) {
		return nil, fmt.Errorf("observe: sample ratio %v is not in [0, 1]", opts.SampleRatio)
	}
	o := &Observer{opts: opts, reg: opts.Registry, every: 1 / opts.SampleRatio}
	o.endpoints.max = opts.MaxEndpoints
	if o.reg == nil {
		o.reg = prometheus.NewRegistry()
		o.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	tp := opts.Tracer
	if tp == nil {
		tp = noop.NewTracerProvider()
	} else {
		o.traced = true
	}
	o.tracer = tp.Tracer("github.com/rtfshost/rtfshost/host/observe")
	o.streamLabels = []string{"transport", "endpoint"}
	if opts.PerStream {
		o.streamLabels = append(o.streamLabels, "stream_id")
	}
	if err := o.register(); err != nil {
		return nil, err
	}
	return o, nil
}

// Registry returns the registry the Observer's metrics are in.
func (o *Observer) Registry() *prometheus.Registry { return o.reg }

// Handler serves the registry's metrics in the Prometheus text (or
// OpenMetrics, when asked) exposition format. It does no access control:
// mount it behind the server's checks.
func (o *Observer) Handler() http.Handler {
	return promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{EnableOpenMetrics: true, Registry: o.reg})
}

const ns = "rtfshost"

func (o *Observer) register() error {
	sl := o.streamLabels
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
	}
	o.received = counter("chunks_received_total", "Chunks a stream's transport delivered into its queue.", sl...)
	o.bytes = counter("chunk_bytes_received_total", "Bytes of the chunks delivered into the streams' queues.", sl...)
	o.processed = counter("chunks_processed_total", "Chunks whose processor result was applied.", sl...)
	o.dropped = counter("chunks_dropped_total", "Queued chunks dropped unprocessed by a cancel or an error.", sl...)
	o.outDropped = counter("outputs_dropped_total", "Outputs a subscriber's delivery dropped, by priority: low ones when it fell behind on them, immediate and normal ones only when it was cut off.", "priority")
	o.procErrors = counter("processor_errors_total", "Processor calls that failed (retried, held, set aside or ending the stream, as its :on-error says).", sl...)
	o.deadLetters = counter("dead_letters_total", "Chunks a stream set aside as dead letters (resume --skip, :on-error {:then :skip}).", sl...)
	o.held = counter("streams_held_total", "Times a failure held a stream as failed, by kind (processor, source, store).", "transport", "kind")
	o.procLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: ns, Name: "processor_call_duration_seconds",
		Help:    "How long one processor call took (state chunk metadata -> result), host calls included.",
		Buckets: []float64{.00001, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"transport", "endpoint"})
	o.directives = counter("directives_total", "Directives applied, by action and by who gave them (processor, control-chunk, request).", "action", "source")
	o.started = counter("streams_started_total", "Streams that started running (recovered ones included).", "transport")
	o.ended = counter("streams_ended_total", "Streams that ended, by final state and end reason (interrupted: the host closed first).", "transport", "state", "end_reason")
	o.reconnects = counter("transport_reconnects_total", "Reconnects of stream transports after a failure.", "transport")
	o.tErrors = counter("transport_errors_total", "Transport failures: each cause of a reconnect and each failure for good.", "transport")
	o.commitDur = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: ns, Name: "store_commit_duration_seconds", Help: "How long one store commit of the group committer took.",
		Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	})
	o.commitSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: ns, Name: "store_commit_batches", Help: "Caller batches (stream progress records, journal entries) grouped into one store commit.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})
	o.commitOps = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: ns, Name: "store_commit_operations", Help: "Key writes and deletes sent to the store in one commit, after merging.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 14),
	})
	o.commitBatch = counter("store_batches_total", "Caller batches the group committer finished, by outcome (committed, failed).", "outcome")
	o.mcpCalls = counter("mcp_calls_total", "MCP tool calls, by tool and outcome (ok, error: an isError result, invalid: bad arguments, cancelled, rejected: a limit).", "tool", "outcome")
	o.mcpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: ns, Name: "mcp_call_duration_seconds", Help: "How long an MCP tool call took, to its result.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"tool"})
	o.limits = counter("limit_hits_total", "Work refused or stopped by a limit, by kind (max-streams, session-calls, buffered-outputs, pending-notifications, event-size, rtfs-steps, rtfs-depth, rtfs-memory, rtfs-time, rtfs-collection-size).", "kind")
	for _, c := range []prometheus.Collector{
		o.received, o.bytes, o.processed, o.dropped, o.outDropped, o.procErrors, o.deadLetters, o.held, o.procLatency, o.directives,
		o.started, o.ended, o.reconnects, o.tErrors, o.commitDur, o.commitSize, o.commitOps,
		o.commitBatch, o.mcpCalls, o.mcpDuration, o.limits,
	} {
		if err := o.reg.Register(c); err != nil {
			return fmt.Errorf("observe: register metrics: %w", err)
		}
	}
	// The outcomes exist from the start, so that rate() sees their first
	// increment.
	o.commitBatch.WithLabelValues("committed")
	o.commitBatch.WithLabelValues("failed")
	return nil
}

// Attach registers the gauges read from p's snapshot at each scrape:
// rtfshost_streams{state}, rtfshost_queue_depth and rtfshost_queue_capacity.
// Call it once, after the provider exists (the provider takes the
// Observer in its Options, so it cannot be given to New).
func (o *Observer) Attach(p *provider.Provider) error {
	o.attachMu.Lock()
	defer o.attachMu.Unlock()
	if o.attached {
		return errors.New("observe: Attach called twice")
	}
	if err := o.reg.Register(newSnapshotCollector(o, p)); err != nil {
		return fmt.Errorf("observe: register the stream gauges: %w", err)
	}
	o.attached = true
	return nil
}

// LimitHit implements provider.Observer and counts a limit hit of any kind.
func (o *Observer) LimitHit(kind string) { o.limits.WithLabelValues(kind).Inc() }

// StoreCommitted implements provider.Observer.
func (o *Observer) StoreCommitted(c persistence.CommitInfo) {
	o.commitDur.Observe(c.Duration.Seconds())
	o.commitSize.Observe(float64(c.Batches))
	o.commitOps.Observe(float64(c.Ops))
	outcome := "committed"
	if c.Err != nil {
		outcome = "failed"
	}
	o.commitBatch.WithLabelValues(outcome).Add(float64(c.Batches))
}

// StreamStarted implements provider.Observer: it resolves the stream's
// series once, so that each chunk costs atomic adds only, and starts the
// stream's span as a child of ctx's.
func (o *Observer) StreamStarted(ctx context.Context, d provider.StreamDesc) provider.StreamObserver {
	ep := o.endpoints.label(d.Endpoint)
	lv := []string{d.Transport, ep}
	if o.opts.PerStream {
		lv = append(lv, d.ID)
	}
	so := &streamObs{
		o: o, desc: d,
		received:   o.received.WithLabelValues(lv...),
		bytes:      o.bytes.WithLabelValues(lv...),
		processed:  o.processed.WithLabelValues(lv...),
		dropped:    o.dropped.WithLabelValues(lv...),
		procErrors: o.procErrors.WithLabelValues(lv...),
		dead:       o.deadLetters.WithLabelValues(lv...),
		latency:    o.procLatency.WithLabelValues(d.Transport, ep),
		reconnects: o.reconnects.WithLabelValues(d.Transport),
		tErrors:    o.tErrors.WithLabelValues(d.Transport),
	}
	o.started.WithLabelValues(d.Transport).Inc()
	if o.traced {
		so.ctx, so.span = o.tracer.Start(ctx, "rtfshost.stream "+spanEndpoint(d.Endpoint),
			trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(
				attribute.String("rtfshost.stream.id", d.ID),
				attribute.String("rtfshost.stream.endpoint", redact(d.Endpoint)),
				attribute.String("rtfshost.stream.transport", d.Transport),
				attribute.String("rtfshost.stream.processor", d.Processor),
				attribute.Bool("rtfshost.stream.recovered", d.Recovered),
			))
		so.span.AddEvent("start")
	}
	return so
}

// streamObs observes one stream.
type streamObs struct {
	o    *Observer
	desc provider.StreamDesc

	received, bytes, processed, dropped, procErrors, dead prometheus.Counter
	latency                                               prometheus.Observer
	reconnects, tErrors                                   prometheus.Counter

	ctx     context.Context // carries span; nil without traces
	span    trace.Span
	calls   atomic.Int64 // processor calls seen, for sampling
	tspan   trace.Span   // the transport's span, while it runs (its goroutine only)
	sampled float64      // next call count to sample at
	mu      sync.Mutex   // guards tspan for Reconnecting, which runs on the transport's goroutine too
}

func (s *streamObs) ChunkReceived(n int) {
	s.received.Inc()
	s.bytes.Add(float64(n))
}

func (s *streamObs) ProcessorCalled(seq int64, start time.Time, d time.Duration, err error) {
	s.processed.Inc()
	s.latency.Observe(d.Seconds())
	if err != nil {
		s.procErrors.Inc()
		var le *rtfs.LimitError
		if errors.As(err, &le) {
			s.o.LimitHit("rtfs-" + strings.ReplaceAll(le.Limit, " ", "-"))
		}
	}
	if s.span == nil || !s.sample() {
		return
	}
	_, sp := s.o.tracer.Start(s.ctx, "rtfshost.processor "+s.desc.Processor,
		trace.WithTimestamp(start),
		trace.WithAttributes(
			attribute.String("rtfshost.stream.id", s.desc.ID),
			attribute.String("rtfshost.stream.processor", s.desc.Processor),
			attribute.Int64("rtfshost.chunk.seq", seq),
		))
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End(trace.WithTimestamp(start.Add(d)))
}

// sample decides whether this processor call gets a span: the first one,
// then one every 1/SampleRatio calls. The worker calls ProcessorCalled from
// one goroutine, so the counter needs no lock.
func (s *streamObs) sample() bool {
	n := float64(s.calls.Add(1) - 1)
	if n < s.sampled {
		return false
	}
	s.sampled = n + s.o.every
	return true
}

func (s *streamObs) Directive(action, source string) {
	s.o.directives.WithLabelValues(action, source).Inc()
	if s.span != nil && action != "continue" {
		s.span.AddEvent("directive", trace.WithAttributes(
			attribute.String("rtfshost.directive.action", action),
			attribute.String("rtfshost.directive.source", source)))
	}
}

func (s *streamObs) ChunksDropped(n int) { s.dropped.Add(float64(n)) }

func (s *streamObs) Held(kind string) {
	s.o.held.WithLabelValues(s.desc.Transport, kind).Inc()
	if s.span != nil {
		s.span.AddEvent("failed", trace.WithAttributes(attribute.String("rtfshost.failure.kind", kind)))
	}
}

func (s *streamObs) DeadLettered(seq int64) {
	s.dead.Inc()
	if s.span != nil {
		s.span.AddEvent("dead-letter", trace.WithAttributes(attribute.Int64("rtfshost.chunk.seq", seq)))
	}
}

func (s *streamObs) OutputsDropped(priority string, n int) {
	s.o.outDropped.WithLabelValues(priority).Add(float64(n))
}

func (s *streamObs) TransportStarted(ctx context.Context) context.Context {
	if s.span == nil {
		return ctx
	}
	ctx = trace.ContextWithSpan(ctx, s.span)
	ctx, sp := s.o.tracer.Start(ctx, "rtfshost.transport "+s.desc.Transport,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("rtfshost.stream.id", s.desc.ID),
			attribute.String("rtfshost.stream.transport", s.desc.Transport),
			attribute.String("rtfshost.stream.endpoint", redact(s.desc.Endpoint)),
		))
	s.mu.Lock()
	s.tspan = sp
	s.mu.Unlock()
	return ctx
}

func (s *streamObs) Reconnecting(attempt int, cause error) {
	s.reconnects.Inc()
	if cause != nil {
		s.tErrors.Inc()
		if errors.Is(cause, transport.ErrEventTooLarge) {
			s.o.LimitHit("event-size")
		}
	}
	s.mu.Lock()
	sp := s.tspan
	s.mu.Unlock()
	if sp != nil {
		attrs := []attribute.KeyValue{attribute.Int("rtfshost.reconnect.attempt", attempt)}
		if cause != nil {
			attrs = append(attrs, attribute.String("error.message", cause.Error()))
		}
		sp.AddEvent("reconnect", trace.WithAttributes(attrs...))
	}
}

func (s *streamObs) TransportEnded(err error) {
	if err != nil {
		s.tErrors.Inc()
		if errors.Is(err, transport.ErrEventTooLarge) {
			s.o.LimitHit("event-size")
		}
	}
	s.mu.Lock()
	sp := s.tspan
	s.tspan = nil
	s.mu.Unlock()
	if sp == nil {
		return
	}
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

func (s *streamObs) Ended(st provider.Status) {
	state, reason := string(st.State), st.EndReason
	if !st.State.Terminal() {
		reason = "interrupted"
	}
	if reason == "" {
		reason = "none"
	}
	s.o.ended.WithLabelValues(s.desc.Transport, state, reason).Inc()
	if s.span == nil {
		return
	}
	s.span.SetAttributes(
		attribute.String("rtfshost.stream.state", state),
		attribute.String("rtfshost.stream.end_reason", reason),
	)
	if st.State == provider.StateError {
		s.span.SetStatus(codes.Error, st.Message)
	}
	s.span.AddEvent("end")
	s.span.End()
}

// endpointSet bounds the endpoint label.
type endpointSet struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

// label returns the endpoint's label value: the endpoint without
// credentials or query, or "other" once max endpoints have labels.
func (e *endpointSet) label(ep string) string {
	ep = redact(ep)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.seen == nil {
		e.seen = make(map[string]bool)
	}
	if e.seen[ep] {
		return ep
	}
	if len(e.seen) >= e.max {
		return "other"
	}
	e.seen[ep] = true
	return ep
}

// redact removes credentials, query and fragment from an absolute URL
// endpoint; other endpoints (paths, tool names) are kept as they are.
func redact(ep string) string {
	u, err := url.Parse(ep)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ep
	}
	u.User, u.RawQuery, u.Fragment, u.ForceQuery = nil, "", "", false
	return u.String()
}

// spanEndpoint is the endpoint in a span name: the path or tool name of a
// redacted endpoint, so that span names stay few.
func spanEndpoint(ep string) string {
	u, err := url.Parse(ep)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ep
	}
	return u.Path
}
