package observe

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// TracingOptions configure SetupTracing.
type TracingOptions struct {
	// Endpoint is the OTLP/HTTP endpoint (rtfshost --otlp-endpoint, e.g.
	// http://127.0.0.1:4318); empty means OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, and no tracing when neither is set.
	Endpoint string
	// ServiceName is the service.name resource attribute unless
	// OTEL_SERVICE_NAME sets it (default "rtfshost").
	ServiceName string
	// Version is the service.version resource attribute.
	Version string
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Tracing is a configured trace pipeline. Its zero value (tracing off) has
// a nil Provider and a Shutdown that does nothing.
type Tracing struct {
	// Provider makes the spans; nil when tracing is off.
	Provider *sdktrace.TracerProvider
}

// Shutdown flushes the spans not exported yet and stops the exporter.
func (t Tracing) Shutdown(ctx context.Context) error {
	if t.Provider == nil {
		return nil
	}
	if err := t.Provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("observe: shut the tracer down: %w", err)
	}
	return nil
}

// SetupTracing builds the OTLP/HTTP trace pipeline when an endpoint is
// configured, and returns a zero Tracing otherwise. The exporter and the
// SDK honour the standard variables (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
// _PROTOCOL's http/protobuf, OTEL_TRACES_SAMPLER and _ARG,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME...); an explicit endpoint
// overrides OTEL_EXPORTER_OTLP_ENDPOINT. It also installs the W3C trace
// context propagator as the global one. Nothing is sent until a span ends.
func SetupTracing(ctx context.Context, opts TracingOptions) (Tracing, error) {
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	endpoint := strings.TrimSpace(opts.Endpoint)
	_, general := lookup("OTEL_EXPORTER_OTLP_ENDPOINT")
	_, traces := lookup("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" && !general && !traces {
		return Tracing{}, nil
	}
	if v, ok := lookup("OTEL_SDK_DISABLED"); ok && strings.EqualFold(strings.TrimSpace(v), "true") {
		return Tracing{}, nil
	}
	var eopts []otlptracehttp.Option
	if endpoint != "" {
		eopts = append(eopts, otlptracehttp.WithEndpointURL(endpoint))
	}
	exp, err := otlptracehttp.New(ctx, eopts...)
	if err != nil {
		return Tracing{}, fmt.Errorf("observe: OTLP exporter for %q: %w", endpoint, err)
	}
	name := opts.ServiceName
	if name == "" {
		name = "rtfshost"
	}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName(name), semconv.ServiceVersion(opts.Version)),
		resource.Environment(), // OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME win
	)
	if err != nil {
		res = resource.Default()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return Tracing{Provider: tp}, nil
}
