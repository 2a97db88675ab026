package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/host/dashboard"
	"github.com/rtfshost/rtfshost/host/mcpserver"
	"github.com/rtfshost/rtfshost/host/observe"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// obsFlags are the observability flags of run, resume and serve.
type obsFlags struct {
	perStream     bool
	otlpEndpoint  string
	sampleRatio   float64
	metricsListen string // run and resume: serve /metrics there for the run
}

// addObsFlags adds the observability flags; withListen adds
// --metrics-listen (run and resume: serve has /metrics on its own
// listener).
func addObsFlags(cmd *cobra.Command, o *obsFlags, withListen bool) {
	f := cmd.Flags()
	f.BoolVar(&o.perStream, "metrics-per-stream", false, "label the stream metrics with stream_id too (one series per stream: for few, long-lived streams)")
	f.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "send OpenTelemetry traces over OTLP/HTTP to this URL, e.g. http://127.0.0.1:4318 (default $OTEL_EXPORTER_OTLP_ENDPOINT; none: no traces)")
	f.Float64Var(&o.sampleRatio, "trace-sample-ratio", observe.DefaultSampleRatio, "share of processor calls traced as spans of their own, in [0, 1] (the first chunk of each stream always is)")
	if withListen {
		f.StringVar(&o.metricsListen, "metrics-listen", "", "serve Prometheus metrics at http://ADDR/metrics for the time of the run (a non-loopback address needs $"+tokenEnv+")")
	}
}

// observability is what the flags set up: the observer, the trace
// pipeline and, for run, the metrics listener.
type observability struct {
	obs     *observe.Observer
	tracing observe.Tracing
	srv     *http.Server
	done    chan error
}

// newObservability builds the observer and the trace pipeline. Metrics
// are always collected (they cost atomic adds); they are served by serve,
// and by run with --metrics-listen.
func (a *app) newObservability(ctx context.Context, o obsFlags) (*observability, error) {
	if o.sampleRatio < 0 || o.sampleRatio > 1 {
		return nil, withCode(exitProgramError, fmt.Errorf("--trace-sample-ratio: must be in [0, 1], got %v", o.sampleRatio))
	}
	tr, err := observe.SetupTracing(ctx, observe.TracingOptions{Endpoint: o.otlpEndpoint, Version: version})
	if err != nil {
		return nil, withCode(exitProgramError, fmt.Errorf("--otlp-endpoint: %w", err))
	}
	opts := observe.Options{PerStream: o.perStream, SampleRatio: o.sampleRatio}
	if o.sampleRatio == 0 {
		opts.SampleRatio = 1e-9 // "never" but the first chunk: 0 would mean the default
	}
	if tr.Provider != nil {
		opts.Tracer = tr.Provider
	}
	obs, err := observe.New(opts)
	if err != nil {
		_ = tr.Shutdown(ctx)
		return nil, withCode(exitProgramError, err)
	}
	return &observability{obs: obs, tracing: tr}, nil
}

// observer is the provider's observer (nil-safe).
func (ob *observability) observer() provider.Observer {
	if ob == nil {
		return nil
	}
	return ob.obs
}

// serveMetrics attaches the stream gauges of p and, with --metrics-listen,
// serves /metrics there behind the MCP server's Host, Origin and token
// checks (the token is $RTFSHOST_TOKEN), printing the URL on w.
func (ob *observability) serveMetrics(p *provider.Provider, addr, token string, w io.Writer) error {
	if err := ob.obs.Attach(p); err != nil {
		return err
	}
	if addr == "" {
		return nil
	}
	if err := checkListen(addr, token, false); err != nil {
		return withCode(exitProgramError, fmt.Errorf("--metrics-listen: %w", err))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return withCode(exitProgramError, fmt.Errorf("--metrics-listen %s: %w", addr, err))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", mcpserver.Guard(ob.obs.Handler(), token, nil))
	ob.srv = mcpserver.NewHTTPServer(mux, mcpserver.HTTPLimits{}) // serve's connection limits
	ob.done = make(chan error, 1)
	go func() { ob.done <- ob.srv.Serve(ln) }()
	fmt.Fprintf(w, "rtfshost: metrics at http://%s/metrics\n", ln.Addr())
	return nil
}

// close stops the metrics listener and flushes the traces.
func (ob *observability) close() {
	if ob == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ob.srv != nil {
		_ = ob.srv.Shutdown(ctx)
		<-ob.done // http.ErrServerClosed, or the listener's failure: nothing to report it to now
	}
	_ = ob.tracing.Shutdown(ctx)
}

// serveRoutes returns the routes serve adds to the MCP server: /metrics
// (behind the token) and, with ui, the dashboard (its page public, its API
// behind the token). The dashboard closes when ctx ends, so that its
// long-lived event responses end before the server shuts down, or at the
// latest when the returned function is called.
func (ob *observability) serveRoutes(ctx context.Context, p *provider.Provider, ui bool, delivery *provider.Delivery, limits rtfs.Limits, recordings string) ([]mcpserver.Route, func(), error) {
	if err := ob.obs.Attach(p); err != nil {
		return nil, nil, err
	}
	routes := []mcpserver.Route{{Pattern: "/metrics", Handler: ob.obs.Handler()}}
	if !ui {
		return routes, func() {}, nil
	}
	d, err := dashboard.New(dashboard.Options{Provider: p, Version: version, Delivery: delivery, Limits: limits, RecordingsDir: recordings})
	if err != nil {
		return nil, nil, err
	}
	routes = append(routes,
		mcpserver.Route{Pattern: "/ui", Handler: d.StaticHandler(), Public: true},
		mcpserver.Route{Pattern: dashboard.Prefix, Handler: d.StaticHandler(), Public: true},
		mcpserver.Route{Pattern: dashboard.PathAPI, Handler: d.APIHandler()},
	)
	stop := context.AfterFunc(ctx, func() { _ = d.Close() })
	return routes, func() { stop(); _ = d.Close() }, nil
}

// watchCluster adds the metrics of a host in a cluster to /metrics:
// rtfshost_cluster_owned (streams and parked programs this host owns),
// rtfshost_cluster_claims_total and rtfshost_cluster_fenced_total.
func (ob *observability) watchCluster(cl *cluster.Cluster) error {
	if ob == nil || cl == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rtfshost_cluster_owned",
			Help: "Streams and parked programs this host owns in its cluster."},
			func() float64 { return float64(cl.Stats().Owned) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "rtfshost_cluster_claims_total",
			Help: "Ownerships this host took: streams it started, took over or was handed."},
			func() float64 { return float64(cl.Stats().Claims) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "rtfshost_cluster_fenced_total",
			Help: "Commits refused because another host had taken the stream over."},
			func() float64 { return float64(cl.Stats().Fenced) }),
	} {
		if err := ob.obs.Registry().Register(c); err != nil {
			return fmt.Errorf("cluster metrics: %w", err)
		}
	}
	return nil
}
