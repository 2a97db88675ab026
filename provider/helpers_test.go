package provider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	tmcp "github.com/rtfshost/rtfshost/transport/mcp"
	"github.com/rtfshost/rtfshost/transport/mock"
	"github.com/rtfshost/rtfshost/transport/sse"
)

// TestMain runs the tests, or, in a child process of the crash tests, the
// child's role, or the producer program of a process transport's stream;
// or it writes the stored-format fixtures (fixture_test.go).
func TestMain(m *testing.M) {
	if role := os.Getenv(crashRoleEnv); role != "" {
		os.Exit(runCrashChild(role))
	}
	if kind := os.Getenv(producerEnv); kind != "" {
		os.Exit(producerMain(kind))
	}
	if dir := os.Getenv(fixtureEnv); dir != "" {
		if err := writeFixtures(dir); err != nil {
			fmt.Fprintln(os.Stderr, "write fixtures:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// endOnError is the :on-error policy {:then :end}: a processor failure
// ends the stream in :error, as it did before failures held streams.
var endOnError = &ErrorPolicy{Then: ThenEnd}

// noEnv is an empty environment.
func noEnv(string) (string, bool) { return "", false }

// fixture is a provider on a mock transport.
type fixture struct {
	t    *testing.T
	p    *Provider
	mock *mock.Transport
	caps *capabilities.Registry
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	f := &fixture{t: t, mock: &mock.Transport{}}
	if opts.Transports == nil {
		opts.Transports = catalogOf(map[string]transport.StreamTransport{"mock": f.mock})
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = noEnv
	}
	if opts.Capabilities == nil {
		opts.Capabilities = capabilities.NewRegistry()
	}
	f.caps = opts.Capabilities
	f.p = New(opts)
	for _, c := range f.p.Capabilities() {
		if err := f.caps.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { f.p.Close() })
	return f
}

// start starts a mock stream with the given request fields filled in.
func (f *fixture) start(req StartRequest) string {
	f.t.Helper()
	if req.Endpoint == "" {
		req.Endpoint = "weather.monitor.v1"
	}
	if req.Transport == "" {
		req.Transport = "mock"
	}
	id, err := f.p.Start(req)
	if err != nil {
		f.t.Fatalf("Start: %v", err)
	}
	return id
}

// send sends a chunk (JSON when data starts with { or [) to stream id.
func (f *fixture) Send(id, data string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.mock.Source(id).Send(ctx, transport.Chunk{Data: []byte(data)}); err != nil {
		f.t.Fatalf("send %s to %s: %v", data, id, err)
	}
}

// await waits for the stream's end and returns its status.
func (f *fixture) Await(id string) Status {
	f.t.Helper()
	done, err := f.p.Done(id)
	if err != nil {
		f.t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		st, _ := f.p.Status(context.Background(), id)
		f.t.Fatalf("stream %s did not end; status %+v", id, st)
	}
	st, _ := f.p.Status(context.Background(), id)
	return st
}

// waitFor polls cond (every millisecond, up to 10 s): for states that have no
// event of their own, such as "the worker has taken the queue's front".
func (f *fixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// inspect returns the stream's inspect map.
func (f *fixture) Inspect(id string) *rtfs.Map {
	f.t.Helper()
	v, err := f.p.Inspect(id, InspectOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return v.(*rtfs.Map)
}

// path reads nested keyword keys of a map value.
func path(v rtfs.Value, keys ...string) rtfs.Value {
	for _, k := range keys {
		m, ok := v.(*rtfs.Map)
		if !ok {
			return nil
		}
		if v, ok = m.GetKeyword(k); !ok {
			return nil
		}
	}
	return v
}

// stateOf returns the stream's current state.
func (f *fixture) stateOf(id string) rtfs.Value {
	f.t.Helper()
	return path(f.Inspect(id), "current-state")
}

// goProc makes a Go processor.
func goProc(fn func(state, chunk, meta rtfs.Value) (rtfs.Value, error)) stream.Processor {
	return &stream.GoProcessor{Label: "go-proc", Fn: fn}
}

// counter is a Go processor that counts chunks in {:count n}, records the
// chunks' :n values in :seen, and takes its action from the chunk's
// "reply" field (so tests can script directives).
func counter() stream.Processor {
	return goProc(func(state, chunk, meta rtfs.Value) (rtfs.Value, error) {
		st := state.(*rtfs.Map)
		n, _ := path(st, "count").(rtfs.Int)
		seen, _ := path(st, "seen").(*rtfs.Vector)
		if seen == nil {
			seen = rtfs.NewVector()
		}
		if x := path(chunk, "n"); x != nil {
			seen = seen.Conj(x)
		}
		res := rtfs.MapOf(
			rtfs.Keyword("state"), st.Assoc(rtfs.Keyword("count"), n+1).Assoc(rtfs.Keyword("seen"), seen),
			rtfs.Keyword("output"), rtfs.MapOf(rtfs.Keyword("count"), n+1),
		)
		if a := path(chunk, "reply"); a != nil {
			res = res.Assoc(rtfs.Keyword("action"), rtfs.Keyword(a.(rtfs.String)))
		}
		return res, nil
	})
}

// compileGlobals runs src and returns the globals it defined.
func compileGlobals(t testing.TB, src string) *rtfs.Globals {
	t.Helper()
	prog, err := rtfs.Compile("test.rtfs", []byte(src))
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	out, err := rtfs.NewThread(rtfs.Limits{}).Run(context.Background(), prog)
	if err != nil || out.Call != nil {
		t.Fatalf("run: %v (call %v)", err, out.Call)
	}
	return out.Globals
}

// seen returns the :seen vector of a counter state as ints.
func seenInts(v rtfs.Value) []int64 {
	vec, _ := path(v, "seen").(*rtfs.Vector)
	if vec == nil {
		return nil
	}
	out := make([]int64, vec.Len())
	for i := range out {
		out[i] = int64(vec.Index(i).(rtfs.Int))
	}
	return out
}

func wantErrContains(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want one containing %q", err, want)
	}
}

func isEnded(err error) bool {
	return errors.Is(err, mock.ErrEnded) || errors.Is(err, stream.ErrDeliverEnded)
}

// rtfsChunk is the mock chunk {"n":n}.
func rtfsChunk(n int) transport.Chunk {
	return transport.Chunk{Data: []byte(`{"n":` + stream.Itoa(int64(n)) + `}`)}
}

// catalogOf makes a catalog of test transports: a name of a real transport
// gets that transport's kind (detection, keys) with impl as its
// implementation; any other name a bare kind chosen by name only.
func catalogOf(m map[string]transport.StreamTransport) *transport.Catalog {
	var kinds []transport.Kind
	for _, name := range slices.Sorted(maps.Keys(m)) {
		k := transport.Kind{Name: name}
		switch name {
		case "sse":
			k = sse.Kind()
		case "mcp":
			k = tmcp.StreamableKind()
		case "mcp-sse":
			k = tmcp.LegacyKind()
		case "mock":
			k = mock.Kind(nil)
		}
		kinds = append(kinds, k.With(m[name]))
	}
	return transport.NewCatalog(kinds...)
}
