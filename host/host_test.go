package host_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
	"github.com/rtfshost/rtfshost/transport/sse"
)

// env is an environment for the tests: nothing set but what is given.
func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

// rig is a host whose :sse and :mock transports are one mock transport, so
// that programs without a :transport (the default server URL) run on the
// mock.
type rig struct {
	t    *testing.T
	h    *host.Host
	mock *mock.Transport
	out  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{t: t, mock: &mock.Transport{}, out: &syncBuffer{}}
	h, err := host.New(host.Options{
		Streams: provider.Options{LookupEnv: env(nil), Transports: transport.NewCatalog(sse.Kind().With(r.mock), mock.Kind(r.mock))},
		Stdout:  r.out,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	t.Cleanup(func() { h.Close() })
	return r
}

func (r *rig) compile(src string) *rtfs.Program {
	r.t.Helper()
	p, err := rtfs.Compile("test.rtfs", []byte(src))
	if err != nil {
		r.t.Fatalf("compile: %v", err)
	}
	return p
}

// run runs src to its end.
func (r *rig) run(src string) (rtfs.Value, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return r.h.Run(ctx, r.compile(src))
}

// runAsync runs src on a goroutine; the returned function waits for it.
func (r *rig) runAsync(src string) func() (rtfs.Value, error) {
	prog := r.compile(src)
	type res struct {
		v   rtfs.Value
		err error
	}
	done := make(chan res, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		v, err := r.h.Run(ctx, prog)
		done <- res{v, err}
	}()
	return func() (rtfs.Value, error) { x := <-done; return x.v, x.err }
}

// feed sends JSON chunks to stream id once it exists, then ends the source.
// It may run on any goroutine.
func (r *rig) feed(id string, chunks ...string) {
	r.t.Helper()
	src := r.mock.Source(id)
	defer src.Close()
	for _, c := range chunks {
		if err := src.Send(context.Background(), transport.Chunk{Data: []byte(c)}); err != nil {
			r.t.Errorf("feed %s: %v", id, err)
			return
		}
	}
}

func get(v rtfs.Value, keys ...string) rtfs.Value {
	for _, k := range keys {
		m, ok := v.(*rtfs.Map)
		if !ok {
			return nil
		}
		v, _ = m.GetKeyword(k)
	}
	return v
}

func num(v rtfs.Value) float64 {
	switch v := v.(type) {
	case rtfs.Int:
		return float64(v)
	case rtfs.Float:
		return float64(v)
	}
	return -1
}

// The weather aggregator of the streaming examples, verbatim, with the helpers it uses
// defined in RTFS; the start call has no :transport, so the default server
// URL picks :sse, which this rig serves with the mock.
func TestSpecWeatherAggregator(t *testing.T) {
	r := newRig(t)
	wait := r.runAsync(`
(defn calculate-stats [readings]
  (let [temps (map :temperature_c readings)]
    {:count (count temps) :min (apply min temps) :max (apply max temps)
     :avg (/ (reduce + temps) (count temps))}))
(defn current-time [] "2025-09-23T00:00:00Z")

(defn weather-aggregator
  [state chunk metadata]
  (let [readings (conj (:readings state) chunk)
        stats (calculate-stats readings)]
    (cond
      ;; Continue collecting data
      (< (count readings) (:target_samples state))
      {:state (assoc state :readings readings :stats stats)
       :action :continue
       :output {:sample_count (count readings) :current_stats stats}}
      ;; Complete collection
      :else
      {:state (assoc state :readings readings :final_stats stats :completed_at (current-time))
       :action :complete
       :output {:readings readings :statistics stats :duration (:duration metadata)}})))

(def weather-stream
  (call :mcp.stream.start
    {:endpoint "weather.monitoring.v1"
     :config {:location "Paris" :sampling_interval 60}
     :processor weather-aggregator
     :stream-id "weather"
     :initial-state {:readings [] :target_samples 4}}))
(call :mcp.stream.await {:stream-id (:stream-id weather-stream)})`)
	r.feed("weather", `{"city":"Paris","temperature_c":10}`, `{"city":"Paris","temperature_c":20}`,
		`{"city":"Paris","temperature_c":30}`, `{"city":"Paris","temperature_c":40}`)
	res, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	stats := get(res, "statistics")
	if num(get(stats, "count")) != 4 || num(get(stats, "min")) != 10 || num(get(stats, "max")) != 40 || num(get(stats, "avg")) != 25 {
		t.Errorf("statistics = %v", stats)
	}
	if rs, ok := get(res, "readings").(*rtfs.Vector); !ok || rs.Len() != 4 || get(res, "duration") != rtfs.Nil {
		t.Errorf("result = %v", res)
	}
	st, _ := r.h.Provider().Inspect("weather", provider.InspectOptions{})
	if get(st, "status", "state") != rtfs.Keyword("completed") || get(st, "current-state", "completed_at") != rtfs.String("2025-09-23T00:00:00Z") {
		t.Errorf("inspect = %v", st)
	}
}

// The backpressure processor of the streaming examples: under 100 queued items it
// processes and continues; over 1,000 it pauses the stream.
func TestSpecBackpressureProcessor(t *testing.T) {
	const proc = `
(defn process-and-dequeue [state chunk]
  (assoc state :queue [] :processed (inc (:processed state 0))))
(defn process-chunk [chunk] {:value (:n chunk)})

(defn backpressure-processor
  [state chunk metadata]
  (let [queue-size (count (:queue state))]
    (cond
      ;; Queue getting full - pause stream
      (> queue-size 1000)
      {:state (update state :queue conj chunk)
       :action :pause
       :output {:status "buffering" :queue_size queue-size}}
      ;; Normal processing
      (< queue-size 100)
      {:state (process-and-dequeue state chunk)
       :action :continue
       :output (process-chunk chunk)}
      ;; Resume when queue drained
      (and (= (:status state) :paused)
           (< queue-size 100))
      {:state (assoc state :status :active)
       :action :resume
       :output {:status "resuming"}})))
`
	r := newRig(t)
	wait := r.runAsync(proc + `
(call :mcp.stream.start {:endpoint "events" :stream-id "normal" :processor backpressure-processor :initial-state {:queue []}})
(call :mcp.stream.start {:endpoint "events" :stream-id "full" :processor backpressure-processor
                         :initial-state {:queue (vec (range 1001)) :status :active}})
(call :mcp.stream.await {:stream-id "normal"})`)
	r.feed("normal", `{"n":1}`, `{"n":2}`, `{"n":3}`)
	res, err := wait()
	if err != nil || !rtfs.Equal(res, rtfs.MapOf(rtfs.Keyword("value"), rtfs.Int(3))) {
		t.Fatalf("normal stream result = %v, %v", res, err)
	}
	p := r.h.Provider()
	normal, _ := p.Inspect("normal", provider.InspectOptions{})
	if num(get(normal, "current-state", "processed")) != 3 {
		t.Errorf("normal state = %v", get(normal, "current-state"))
	}
	src := r.mock.Source("full")
	if err := src.Send(context.Background(), transport.Chunk{Data: []byte(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	full := waitState(t, p, "full", provider.StatePaused)
	if !rtfs.Equal(get(full, "last-output"), rtfs.MapOf(rtfs.Keyword("status"), rtfs.String("buffering"), rtfs.Keyword("queue_size"), rtfs.Int(1001))) {
		t.Errorf("full stream last output = %v", get(full, "last-output"))
	}
	if q, ok := get(full, "current-state", "queue").(*rtfs.Vector); !ok || q.Len() != 1002 {
		t.Errorf("the chunk was not buffered in the state")
	}
	if _, err := p.Cancel(t.Context(), "full"); err != nil {
		t.Fatal(err)
	}
}

func waitState(t *testing.T, p *provider.Provider, id string, want provider.State) rtfs.Value {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := p.Status(t.Context(), id)
		if err == nil && st.State == want {
			v, _ := p.Inspect(id, provider.InspectOptions{})
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s: status %+v, %v; want %s", id, st, err, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// The resilient processor of the streaming examples, with try/catch:
// transient errors are counted and the stream continues; the third cancels
// it. (Where it is usually written (update state :error_count error-count),
// which calls an int, assoc is what it means.)
func TestSpecResilientProcessor(t *testing.T) {
	r := newRig(t)
	wait := r.runAsync(`
(defn process-chunk [chunk]
  (if (:fail chunk)
    (throw {:type :transient :message (str "bad chunk " (:n chunk))})
    {:value (:n chunk)}))
(defn update-metrics [state outcome] (update state :successes inc))
(defn transient-error? [e] (= (:type e) :transient))

(defn resilient-processor
  [state chunk metadata]
  (try
    (let [result (process-chunk chunk)]
      {:state (update-metrics state :success)
       :action :continue
       :output result})
    (catch Exception e
      (let [error-count (inc (:error_count state))]
        (cond
          ;; Retry on transient errors
          (and (transient-error? e) (< error-count 3))
          {:state (assoc state :error_count error-count)
           :action :continue
           :output {:error "transient" :retry_count error-count}}
          ;; Fail stream on persistent errors
          :else
          {:state (assoc state :final_error e)
           :action :cancel
           :output {:error "persistent" :error_count error-count}})))))

(call :mcp.stream.start {:endpoint "jobs" :stream-id "jobs" :processor resilient-processor
                         :initial-state {:error_count 0 :successes 0}})
(try (call :mcp.stream.await {:stream-id "jobs"})
     (catch e (str "await failed: " (:message e))))`)
	r.feed("jobs", `{"n":1}`, `{"n":2,"fail":true}`, `{"n":3}`, `{"n":4,"fail":true}`, `{"n":5,"fail":true}`)
	res, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := res.(rtfs.String); !strings.HasPrefix(string(s), "await failed: ") || !strings.Contains(string(s), `stream "jobs" was cancelled`) {
		t.Errorf("program result = %v", res)
	}
	v, _ := r.h.Provider().Inspect("jobs", provider.InspectOptions{})
	if get(v, "status", "state") != rtfs.Keyword("cancelled") {
		t.Fatalf("status = %v", get(v, "status"))
	}
	if !rtfs.Equal(get(v, "last-output"), rtfs.MapOf(rtfs.Keyword("error"), rtfs.String("persistent"), rtfs.Keyword("error_count"), rtfs.Int(3))) {
		t.Errorf("last output = %v", get(v, "last-output"))
	}
	state := get(v, "current-state")
	if num(get(state, "successes")) != 2 || num(get(state, "error_count")) != 2 || get(state, "final_error", "message") != rtfs.String("bad chunk 5") {
		t.Errorf("state = %v", state)
	}
}

// T1 and the sugar: (mcp-stream endpoint processor initial-state) and the
// 4-argument form with a config; the program goes on at once.
func TestMcpStreamSugar(t *testing.T) {
	r := newRig(t)
	v, err := r.run(`
(defn counter [state chunk meta] {:state (update state :count inc) :output (:count state)})
[(mcp-stream "weather.monitor.v1" counter {:count 0})
 (mcp-stream "weather.monitor.v1" {:city "Paris"} counter {:count 10})]`)
	if err != nil {
		t.Fatal(err)
	}
	vec, ok := v.(*rtfs.Vector)
	if !ok || vec.Len() != 2 {
		t.Fatalf("handles = %v", v)
	}
	for i, base := range []int64{0, 10} {
		id := string(get(vec.Index(i), "stream-id").(rtfs.String))
		r.feed(id, `{}`, `{}`)
		res, err := r.h.Provider().Await(context.Background(), id)
		if err != nil || res != rtfs.Int(base+1) {
			t.Errorf("stream %d: result %v, %v", i, res, err)
		}
		ins, _ := r.h.Provider().Inspect(id, provider.InspectOptions{})
		if get(ins, "processor") != rtfs.String("counter") || get(ins, "transport", "kind") != rtfs.Keyword("sse") {
			t.Errorf("inspect = %v", ins)
		}
	}
}

// Embedders' Go errors are catchable in RTFS; uncaught ones end Run with the
// capability's name; println goes to Stdout.
func TestEmbedderCapabilityErrors(t *testing.T) {
	r := newRig(t)
	cause := errors.New("quota exceeded")
	if err := r.h.Register(capabilities.Capability{ID: "billing.charge", Handler: func(context.Context, *capabilities.Call) (capabilities.Answer, error) {
		return capabilities.Answer{}, cause
	}}); err != nil {
		t.Fatal(err)
	}
	v, err := r.run(`(println "charging" 3 :eur)
(try (call :billing.charge 3) (catch e (:message e)))`)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := v.(rtfs.String); !strings.Contains(string(s), "billing.charge") || !strings.Contains(string(s), "quota exceeded") {
		t.Errorf("caught message = %v", v)
	}
	if got := r.out.String(); got != "charging 3 :eur\n" {
		t.Errorf("stdout = %q", got)
	}
	_, err = r.run(`(call :billing.charge 3)`)
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "billing.charge") {
		t.Errorf("uncaught error = %v", err)
	}
	_, err = r.run(`(call :mcp.stream.start {:processor "x"})`)
	if err == nil || !strings.Contains(err.Error(), "capability :mcp.stream.start: key :endpoint: must not be empty") {
		t.Errorf("bad start = %v", err)
	}
	_, err = r.run(`(call :no.such.capability)`)
	if !errors.Is(err, capabilities.ErrUnknown) {
		t.Errorf("unknown capability = %v", err)
	}
}

// A program parked on :mcp.stream.await honours its context.
func TestAwaitHonoursContext(t *testing.T) {
	r := newRig(t)
	prog := r.compile(`
(defn p [s c m] {:state s})
(call :mcp.stream.start {:endpoint "e" :stream-id "never" :processor p})
(call :mcp.stream.await {:stream-id "never"})`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := r.h.Run(ctx, prog)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "mcp.stream.await") {
		t.Fatalf("Run = %v", err)
	}
	st, _ := r.h.Provider().Status(t.Context(), "never")
	if st.State != provider.StateActive {
		t.Errorf("the stream was affected by the caller's context: %+v", st)
	}
}

// Wait waits for every stream a program started and reports failures.
func TestWaitForProgramStreams(t *testing.T) {
	r := newRig(t)
	_, err := r.run(`
(defn ok [s c m] {:state s :output :ok})
(defn bad [s c m] 42)
(call :mcp.stream.start {:endpoint "e" :stream-id "a" :processor ok})
(call :mcp.stream.start {:endpoint "e" :stream-id "b" :processor bad :on-error {:then :end}})`)
	if err != nil {
		t.Fatal(err)
	}
	go r.feed("a", `{}`)
	go r.feed("b", `{}`)
	err = r.h.Wait(context.Background())
	var se *provider.StreamError
	if !errors.As(err, &se) || se.StreamID != "b" || !strings.Contains(err.Error(), "invalid shape") {
		t.Fatalf("Wait = %v", err)
	}
	if st, _ := r.h.Provider().Status(t.Context(), "a"); st.State != provider.StateCompleted {
		t.Errorf("a = %+v", st)
	}
}

// :mcp.stream.start accepts the processor as a fn value (a symbol evaluated),
// a quoted symbol, a string name and an anonymous (fn ...).
func TestProcessorForms(t *testing.T) {
	r := newRig(t)
	_, err := r.run(`
(defn inc-count [s c m] {:state (inc s) :output (inc s)})
(call :mcp.stream.start {:endpoint "e" :stream-id "value" :processor inc-count :initial-state 0})
(call :mcp.stream.start {:endpoint "e" :stream-id "quoted" :processor 'inc-count :initial-state 10})
(call :mcp.stream.start {:endpoint "e" :stream-id "string" :processor "inc-count" :initial-state 20})
(call :mcp.stream.start {:endpoint "e" :stream-id "anon" :initial-state 30
                         :processor (fn [s c m] {:state (+ s (:by c)) :output (+ s (:by c))})})`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"value": 1, "quoted": 11, "string": 21, "anon": 35}
	for id, w := range want {
		r.feed(id, `{"by":5}`)
		v, err := r.h.Provider().Await(context.Background(), id)
		if err != nil || v != rtfs.Int(w) {
			t.Errorf("%s: result %v, %v; want %d", id, v, err, w)
		}
	}
	ins, _ := r.h.Provider().Inspect("anon", provider.InspectOptions{})
	if get(ins, "processor") == rtfs.String("inc-count") {
		t.Errorf("the anonymous processor is named %v", get(ins, "processor"))
	}
}

// The host's limits bound program runs; a nil program is an error.
func TestRunLimitsAndNilProgram(t *testing.T) {
	h, err := host.New(host.Options{Limits: rtfs.Limits{MaxSteps: 1000}, Streams: provider.Options{LookupEnv: env(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	prog, err := rtfs.Compile("spin.rtfs", []byte(`(loop [i 0] (recur (inc i)))`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Run(context.Background(), prog)
	var le *rtfs.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("Run of an endless loop = %v, want a *rtfs.LimitError", err)
	}
	if _, err := h.Run(context.Background(), nil); err == nil {
		t.Fatal("Run(nil) succeeded")
	}
}

// A processor may call the stream capabilities too: here stream b's
// processor parks on :mcp.stream.await of stream a, and inspects it.
func TestProcessorAwaitsAnotherStream(t *testing.T) {
	r := newRig(t)
	_, err := r.run(`
(defn sum [s c m] {:state (+ s (:v c)) :output (+ s (:v c))})
(defn join [s c m]
  (let [total (call :mcp.stream.await {:stream-id "a" :timeout-ms 10000})
        info (call :mcp.stream.inspect {:stream-id "a" :include-queue false})]
    {:state {:total total :a-processed (get-in info [:stats :processed-chunks])} :action :complete :output total}))
(call :mcp.stream.start {:endpoint "e" :stream-id "a" :processor sum :initial-state 0})
(call :mcp.stream.start {:endpoint "e" :stream-id "b" :processor join :initial-state {}})`)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); r.feed("b", `{}`) }()
	r.feed("a", `{"v":1}`, `{"v":2}`, `{"v":3}`)
	<-done
	res, err := r.h.Provider().Await(context.Background(), "b")
	if err != nil || res != rtfs.Int(6) {
		t.Fatalf("b = %v, %v", res, err)
	}
	v, _ := r.h.Provider().Inspect("b", provider.InspectOptions{})
	if num(get(v, "current-state", "a-processed")) != 3 {
		t.Errorf("b's state = %v", get(v, "current-state"))
	}
}

// A program awaiting a stream stays parked while the stream is failed (it
// can still be repaired), and gets the stream's result once it is: here
// the held chunk is retried after a transient failure of a host call.
func TestAwaitStaysParkedWhileFailed(t *testing.T) {
	r := newRig(t)
	var broken atomic.Bool
	broken.Store(true)
	if err := r.h.Register(capabilities.Capability{ID: "test.lookup", Handler: func(_ context.Context, c *capabilities.Call) (capabilities.Answer, error) {
		if broken.Load() {
			return capabilities.Answer{}, errors.New("lookup service unavailable")
		}
		return capabilities.Now(rtfs.Int(10)), nil
	}}); err != nil {
		t.Fatal(err)
	}
	wait := r.runAsync(`
(defn proc [s c m]
  (let [x (if (:lookup c) (call :test.lookup {}) (:n c))]
    {:state (+ s x) :output (+ s x)}))
(call :mcp.stream.start {:endpoint "e" :stream-id "parked" :processor proc :initial-state 0})
(call :mcp.stream.await {:stream-id "parked"})`)
	r.feed("parked", `{"n":1}`, `{"lookup":true}`, `{"n":2}`)
	p := r.h.Provider()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := p.Status(t.Context(), "parked")
		if st.State == provider.StateFailed {
			if st.Failure.Seq != 2 || !strings.Contains(st.Failure.Error, "lookup service unavailable") {
				t.Fatalf("failure %+v", st.Failure)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream did not fail: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	// The program may reach its await after the stream failed: it parks
	// then, and stays parked while the stream is held.
	for r.h.Parked() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d programs parked, want the awaiting one", r.h.Parked())
		}
		time.Sleep(time.Millisecond)
	}
	if st, _ := p.Status(t.Context(), "parked"); st.State != provider.StateFailed {
		t.Fatalf("the stream is %s while its awaiting program is parked, want failed", st.State)
	}
	if on, off := r.h.ParkedOn([]string{"other", "parked"}), r.h.ParkedOn([]string{"other"}); on != 1 || off != 0 {
		t.Fatalf("ParkedOn counts %d programs awaiting parked and %d awaiting other; want 1 and 0", on, off)
	}
	broken.Store(false)
	if _, err := p.Resume(t.Context(), "parked"); err != nil {
		t.Fatal(err)
	}
	res, err := wait()
	if err != nil || res != rtfs.Int(13) {
		t.Fatalf("program result %v, %v; want 13 (1 + 10 + 2)", res, err)
	}
	if n := r.h.ParkedOn([]string{"parked"}); n != 0 {
		t.Fatalf("ParkedOn counts %d programs awaiting parked after the program ended", n)
	}
}

// A program's control call on a stream that has ended fails with an error
// a Go caller can branch on (provider.ErrEnded), naming the capability
// once; one on a stream nobody has matches provider.ErrNoStream.
func TestControlCallErrorsTyped(t *testing.T) {
	r := newRig(t)
	if _, err := r.run(`(call :mcp.stream.start {:endpoint "e" :transport :mock :stream-id "s" :processor (fn [s c m] {:state s})})`); err != nil {
		t.Fatal(err)
	}
	if _, err := r.h.Provider().Cancel(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	_, err := r.run(`(call :mcp.stream.resume {:stream-id "s"})`)
	if !errors.Is(err, provider.ErrEnded) || strings.Count(err.Error(), "mcp.stream.resume") != 1 ||
		!strings.HasSuffix(err.Error(), `capability :mcp.stream.resume: key :stream-id: cannot resume stream "s": it is cancelled`) {
		t.Fatalf("resume of a cancelled stream = %v, want provider.ErrEnded, the capability named once", err)
	}
	_, err = r.run(`(call :mcp.stream.pause {:stream-id "nobody"})`)
	if !errors.Is(err, provider.ErrNoStream) || errors.Is(err, provider.ErrNoStoredStream) {
		t.Fatalf("pause of a stream nobody has = %v, want provider.ErrNoStream", err)
	}
}
