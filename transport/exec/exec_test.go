package exec

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
	"github.com/rtfshost/rtfshost/transport/transporttest"
)

// helperSpec is the Spec of a stream that runs the test binary in the
// given helper mode, built through the Kind's Configure as the provider
// does. extra adds start keys (JSON).
func helperSpec(t testing.TB, marker string, extra map[string]string, mode string, args ...string) transport.Spec {
	t.Helper()
	env := map[string]string{helperEnv: mode}
	if k, v, ok := strings.Cut(marker, "="); ok {
		env[k] = v
	}
	keys := map[string]json.RawMessage{}
	keys["command"], _ = json.Marshal(os.Args[0])
	keys["args"], _ = json.Marshal(args)
	keys["env"], _ = json.Marshal(env)
	for k, v := range extra {
		keys[k] = json.RawMessage(v)
	}
	cfg, err := Kind().Configure(keys)
	if err != nil {
		t.Fatalf("configure: %v", err)
	}
	return transport.Spec{StreamID: "exec-" + mode, Config: cfg}
}

func newMarker() string { return "RTFSHOST_SUITE_MARK=" + strconv.FormatInt(time.Now().UnixNano(), 36) }

func lineIndex(c transport.Chunk) (int, bool) {
	var v struct {
		Line string `json:"line"`
	}
	if json.Unmarshal(c.Data, &v) != nil {
		return 0, false
	}
	i, err := strconv.Atoi(v.Line)
	return i, err == nil
}

// TestTransportSuite runs the transport suite with the test binary as the
// program: finite lines, endless lines, and a program that exits 3.
func TestTransportSuite(t *testing.T) { transporttest.Run(t, suiteHarness()) }

// BenchmarkCancel: how long Run takes to return after a cancel, its
// program still writing (it is stopped, and waited for).
func BenchmarkCancel(b *testing.B) { transporttest.BenchmarkCancel(b, suiteHarness()) }

func suiteHarness() transporttest.Harness {
	return transporttest.Harness{
		Finite: func(t testing.TB, n int) transporttest.Source {
			m := newMarker()
			return transporttest.Source{Transport: new(Transport), Spec: helperSpec(t, m, nil, "lines", strconv.Itoa(n)), Marker: m}
		},
		Endless: func(t testing.TB) transporttest.Source {
			m := newMarker()
			count := transporttest.NewCountFile(t)
			return transporttest.Source{Transport: new(Transport), Spec: helperSpec(t, m, nil, "endless", count.Path), Marker: m,
				Produced: count.Produced}
		},
		Failing: func(t testing.TB) transporttest.Source {
			m := newMarker()
			return transporttest.Source{Transport: new(Transport), Spec: helperSpec(t, m, nil, "fail"), Marker: m}
		},
		Index: lineIndex,
	}
}

// sink records chunks.
type sink struct {
	mu     sync.Mutex
	chunks []transport.Chunk
}

func (s *sink) Deliver(_ context.Context, c transport.Chunk) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Data = append([]byte(nil), c.Data...)
	s.chunks = append(s.chunks, c)
	return nil
}

func run(t *testing.T, tr *Transport, spec transport.Spec) (*sink, error) {
	t.Helper()
	s := &sink{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return s, tr.Run(ctx, spec, "", s)
}

// TestExitStatusEndsTheStream: a non-zero exit is an error naming the
// command, the status and the stderr tail.
func TestExitStatusEndsTheStream(t *testing.T) {
	_, err := run(t, new(Transport), helperSpec(t, "", nil, "fail"))
	var te *transport.Error
	if !errors.As(err, &te) || te.Op != "exit" {
		t.Fatalf("err = %v, want an exit *transport.Error", err)
	}
	for _, want := range []string{filepath.Base(os.Args[0]), "exited with status 3", "boom: the disk is on fire"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestLongLineIsAnError: a line over the chunk limit ends the stream with
// an error naming the limit; nothing unbounded is buffered.
func TestLongLineIsAnError(t *testing.T) {
	spec := helperSpec(t, "", nil, "long", "5000")
	spec.MaxEventBytes = 1000
	_, err := run(t, new(Transport), spec)
	if !errors.Is(err, transport.ErrEventTooLarge) || !strings.Contains(err.Error(), "1000 bytes") {
		t.Fatalf("err = %v, want ErrEventTooLarge naming 1000 bytes", err)
	}
}

// TestStderrChunks: with :stderr :chunks, stderr lines are chunks with FD
// "stderr"; stdout's have FD "stdout"; IDs are distinct.
func TestStderrChunks(t *testing.T) {
	s, err := run(t, new(Transport), helperSpec(t, "", map[string]string{"stderr": `"chunks"`}, "stderr", "5"))
	if err != nil {
		t.Fatal(err)
	}
	var outs, errs []string
	ids := map[string]bool{}
	for _, c := range s.chunks {
		ids[c.ID] = true
		var v struct{ Line string }
		if err := json.Unmarshal(c.Data, &v); err != nil {
			t.Fatalf("chunk %q: %v", c.Data, err)
		}
		switch c.FD {
		case "stdout":
			outs = append(outs, v.Line)
		case "stderr":
			errs = append(errs, v.Line)
		default:
			t.Fatalf("chunk with FD %q", c.FD)
		}
	}
	if len(outs) != 5 || len(errs) != 5 || outs[4] != "out 4" || errs[4] != "err 4" || len(ids) != 10 {
		t.Fatalf("stdout %q, stderr %q, %d ids", outs, errs, len(ids))
	}
}

// TestFramingNDJSON: each non-blank line is one chunk, its JSON as is; the
// last line needs no newline.
func TestFramingNDJSON(t *testing.T) {
	s, err := run(t, new(Transport), helperSpec(t, "", map[string]string{"framing": `"ndjson"`}, "ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.chunks {
		got = append(got, string(c.Data))
	}
	want := []string{`{"type":"text","text":"hi"}`, `[1,2]`, `{"type":"done"}`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("chunks %q, want %q", got, want)
	}
}

// TestFramingNDJSONInvalid: a line that is not JSON fails the source by
// default, naming its number; :on-invalid :skip leaves it out and :string
// delivers it as it is (a string chunk for the processor).
func TestFramingNDJSONInvalid(t *testing.T) {
	chunks := func(s *sink) string {
		var got []string
		for _, c := range s.chunks {
			got = append(got, string(c.Data))
		}
		return strings.Join(got, "|")
	}
	s, err := run(t, new(Transport), helperSpec(t, "", map[string]string{"framing": `"ndjson"`}, "ndjson-bad"))
	if err == nil || !transport.IsPermanent(err) || !strings.Contains(err.Error(), `stdout line 3 is not JSON`) || !strings.Contains(err.Error(), `"starting up..."`) {
		t.Errorf("default: err = %v, want a permanent error naming line 3", err)
	}
	if got := chunks(s); got != `{"n":1}` {
		t.Errorf("default: chunks %s, want the line before only", got)
	}
	s, err = run(t, new(Transport), helperSpec(t, "", map[string]string{"framing": `"ndjson"`, "on-invalid": `"skip"`}, "ndjson-bad"))
	if err != nil || chunks(s) != `{"n":1}|{"n":2}` {
		t.Errorf(":skip: chunks %s, err %v", chunks(s), err)
	}
	s, err = run(t, new(Transport), helperSpec(t, "", map[string]string{"framing": `"ndjson"`, "on-invalid": `":string"`}, "ndjson-bad"))
	if err != nil || chunks(s) != `{"n":1}|starting up...|{"n":2}` {
		t.Errorf(":string: chunks %s, err %v", chunks(s), err)
	}
}

// TestFramingRaw: :raw chunks carry what reads return, {"data": ...}.
func TestFramingRaw(t *testing.T) {
	s, err := run(t, new(Transport), helperSpec(t, "", map[string]string{"framing": `"raw"`}, "lines", "3"))
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, c := range s.chunks {
		var v struct{ Data string }
		if err := json.Unmarshal(c.Data, &v); err != nil {
			t.Fatal(err)
		}
		all.WriteString(v.Data)
	}
	if all.String() != "0\n1\n2\n" {
		t.Fatalf("raw data %q", all.String())
	}
}

// TestResumedWithoutRestartIsSourceLost: a stream resumed after a host
// restart does not start the program again unless :restart :on-failure.
func TestResumedWithoutRestartIsSourceLost(t *testing.T) {
	spec := helperSpec(t, "", nil, "lines", "3")
	spec.Resumed = true
	s, err := run(t, new(Transport), spec)
	if !errors.Is(err, transport.ErrSourceLost) || len(s.chunks) != 0 {
		t.Fatalf("err = %v with %d chunks, want ErrSourceLost and none", err, len(s.chunks))
	}
	spec = helperSpec(t, "", map[string]string{"restart": `"on-failure"`}, "lines", "3")
	spec.Resumed = true
	s = &sink{}
	if err := new(Transport).Run(context.Background(), spec, "1:7", s); err != nil || len(s.chunks) != 3 || s.chunks[0].ID != "2:1" {
		t.Fatalf("restartable resume: err %v, chunks %+v", err, s.chunks)
	}
}

// TestRestartOnFailure: a failing program is started again under the
// retry policy until the attempts run out.
func TestRestartOnFailure(t *testing.T) {
	tr := &Transport{policy: retry.Policy{Initial: time.Millisecond, Max: time.Millisecond, Attempts: 2}}
	_, err := run(t, tr, helperSpec(t, "", map[string]string{"restart": `"on-failure"`}, "fail"))
	if err == nil || !strings.Contains(err.Error(), "gave up after 2 retries") || !strings.Contains(err.Error(), "status 3") {
		t.Fatalf("err = %v, want the exit error after 2 retries", err)
	}
}

// TestConfigureErrors: bad start keys name the key.
func TestConfigureErrors(t *testing.T) {
	for keys, want := range map[string]string{
		`{"args":["x"]}`:                                           ":command: required",
		`{"command":"x","args":"x"}`:                               ":args: want a vector of strings",
		`{"command":"x","env":{"A=B":"c"}}`:                        ":env:",
		`{"command":"x","framing":"xml"}`:                          ":framing: want :lines, :ndjson or :raw",
		`{"command":"x","stderr":"tty"}`:                           ":stderr: want :log or :chunks",
		`{"command":"x","restart":"sometimes"}`:                    ":restart: want :never or :on-failure",
		`{"command":"x","framing":"ndjson","on-invalid":"ignore"}`: ":on-invalid: want :error, :skip or :string",
		`{"command":"x","on-invalid":"skip"}`:                      ":on-invalid applies to :framing :ndjson only",
	} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(keys), &m); err != nil {
			t.Fatal(err)
		}
		if _, err := Kind().Configure(m); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", keys, err, want)
		}
	}
}

// countSink counts chunks and nothing else: the benchmark's processor.
type countSink struct{ n int }

func (s *countSink) Deliver(context.Context, transport.Chunk) error { s.n++; return nil }

// BenchmarkExecLines: a child writes 1M short lines; the transport frames
// and delivers them. Reports lines/s.
func BenchmarkExecLines(b *testing.B) {
	const lines = 1_000_000
	spec := helperSpec(b, "", nil, "lines", strconv.Itoa(lines))
	b.ResetTimer()
	for range b.N {
		s := &countSink{}
		if err := new(Transport).Run(context.Background(), spec, "", s); err != nil || s.n != lines {
			b.Fatalf("err %v, %d lines", err, s.n)
		}
	}
	b.ReportMetric(float64(lines*b.N)/b.Elapsed().Seconds(), "lines/s")
}
