package provider

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/rtfs"
)

// T8's processor, in RTFS: it counts chunks and completes on :seq 3.
const weatherChunkSrc = `
(defn process-weather-chunk [state chunk metadata]
  (let [n (inc (:count state))]
    (if (= (:seq chunk) 3)
      {:state {:count n} :action :complete :output {:final-count (:count state)}}
      {:state {:count n}})))
(def as-value process-weather-chunk)
`

// T8 with every way of naming the processor (fixes D2): a string, a symbol,
// a function value, and an anonymous fn.
func TestRTFSProcessorForms(t *testing.T) {
	g := compileGlobals(t, weatherChunkSrc+`(def anon (fn [s c m] {:state {:count (inc (:count s))} :action (if (= (:seq c) 3) :complete :continue) :output {:final-count (:count s)}}))`)
	fnVal, _ := g.Get("as-value")
	anon, _ := g.Get("anon")
	for _, proc := range []rtfs.Value{rtfs.String("process-weather-chunk"), rtfs.Symbol("process-weather-chunk"), fnVal, anon} {
		f := newFixture(t, Options{})
		id := f.start(StartRequest{Processor: proc, Globals: g, InitialState: rtfs.MapOf(rtfs.Keyword("count"), rtfs.Int(0))})
		for seq := 0; seq <= 3; seq++ {
			f.Send(id, fmt.Sprintf(`{"seq":%d,"payload":"p%d"}`, seq, seq))
		}
		st := f.Await(id)
		if st.State != StateCompleted || !rtfs.Equal(st.Result, rtfs.MapOf(rtfs.Keyword("final-count"), rtfs.Int(3))) {
			t.Fatalf("processor %v: status %+v", proc, st)
		}
		if c := path(f.stateOf(id), "count"); c != rtfs.Int(4) {
			t.Errorf("processor %v: :count = %v, want 4", proc, c)
		}
	}
}

// A processor of two parameters, [stream-state chunk], is called without
// the metadata.
func TestTwoArgumentProcessor(t *testing.T) {
	g := compileGlobals(t, `(defn proc [stream-state chunk] {:state (conj stream-state (:n chunk)) :output (:n chunk)})`)
	f := newFixture(t, Options{})
	id := f.start(StartRequest{Processor: rtfs.Symbol("proc"), Globals: g, InitialState: rtfs.NewVector()})
	for n := 1; n <= 3; n++ {
		f.Send(id, fmt.Sprintf(`{"n":%d}`, n))
	}
	f.mock.Source(id).Close()
	st := f.Await(id)
	if st.State != StateCompleted || st.Result != rtfs.Int(3) {
		t.Fatalf("status %+v", st)
	}
	if got := f.stateOf(id); !rtfs.Equal(got, rtfs.NewVector(rtfs.Int(1), rtfs.Int(2), rtfs.Int(3))) {
		t.Errorf("state %v, want [1 2 3]", got)
	}
}

// Host calls inside a processor are served per chunk through the registry;
// an embedder's Go error is catchable in RTFS.
func TestProcessorHostCalls(t *testing.T) {
	reg := capabilities.NewRegistry()
	var mu sync.Mutex
	var logged []string
	must(t, reg.Register(capabilities.Capability{ID: "ccos.io.log", Handler: func(_ context.Context, c *capabilities.Call) (capabilities.Answer, error) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, c.Args[0].String())
		return capabilities.Now(nil), nil
	}}))
	must(t, reg.Register(capabilities.Capability{ID: "test.scale", Input: &capabilities.Schema{Type: "map", Keys: []capabilities.Key{{Name: "x", Type: "number", Required: true}}},
		Handler: func(_ context.Context, c *capabilities.Call) (capabilities.Answer, error) {
			x, _ := capabilities.Field(c.Args[0].(*rtfs.Map), "x")
			if x == rtfs.Int(13) {
				return capabilities.Answer{}, fmt.Errorf("unlucky reading")
			}
			return capabilities.Now(x.(rtfs.Int) * 10), nil
		}}))
	g := compileGlobals(t, `
(defn proc [state chunk meta]
  (call :ccos.io.log (str "chunk " (:seq meta)))
  (let [v (try (call :test.scale {:x (:x chunk)})
               (catch e (str "caught: " (:message e))))]
    {:state (conj state v) :output v}))`)
	f := newFixture(t, Options{Capabilities: reg})
	id := f.start(StartRequest{Processor: rtfs.Symbol("proc"), Globals: g, InitialState: rtfs.NewVector()})
	for _, x := range []int{1, 13, 2} {
		f.Send(id, fmt.Sprintf(`{"x":%d}`, x))
	}
	f.mock.Source(id).Close()
	if st := f.Await(id); st.State != StateCompleted {
		t.Fatalf("status = %+v", st)
	}
	state := f.stateOf(id).(*rtfs.Vector)
	if state.Len() != 3 || state.Index(0) != rtfs.Int(10) || state.Index(2) != rtfs.Int(20) {
		t.Fatalf("state = %v", state)
	}
	msg, _ := state.Index(1).(rtfs.String)
	if !strings.HasPrefix(string(msg), "caught: ") || !strings.Contains(string(msg), "unlucky reading") {
		t.Errorf("the embedder's error reached RTFS as %v", state.Index(1))
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(logged, ",") != `"chunk 1","chunk 2","chunk 3"` {
		t.Errorf("logged %v", logged)
	}
}

// An uncaught RTFS error, a step-budget overrun, a declared return type
// violation and a host call to an unknown capability hold the stream as
// failed with the message, keeping the last good state.
func TestRTFSProcessorFailures(t *testing.T) {
	g := compileGlobals(t, `
(defn typed [s c m] :[:map {:state :any :action :keyword}]
  (if (:bad c) {:state (inc s) :action "continue"} {:state (inc s) :action :continue}))
(defn boom [s c m] (if (:bad c) (+ 1 "a") {:state (inc s)}))
(defn spin [s c m] (if (:bad c) (loop [i 0] (recur (inc i))) {:state (inc s)}))
(defn unknown-cap [s c m] (if (:bad c) (call :no.such.cap 1) {:state (inc s)}))`)
	cases := []struct{ proc, want string }{
		{"typed", "result does not match the declared return type"},
		{"boom", "+"},
		{"spin", "steps"},
		{"unknown-cap", "no.such.cap"},
	}
	for _, tc := range cases {
		t.Run(tc.proc, func(t *testing.T) {
			f := newFixture(t, Options{Limits: rtfs.Limits{MaxSteps: 10_000}})
			id := f.start(StartRequest{Processor: rtfs.Symbol(tc.proc), Globals: g, InitialState: rtfs.Int(0)})
			f.Send(id, `{"bad":false}`)
			f.Send(id, `{"bad":true}`)
			st := f.waitState(id, StateFailed)
			if !strings.Contains(st.Message, "processor "+tc.proc+" failed on chunk 2: ") || !strings.Contains(st.Message, tc.want) {
				t.Fatalf("status = %+v, want an error mentioning %q", st, tc.want)
			}
			if s := f.stateOf(id); s != rtfs.Int(1) {
				t.Errorf("state = %v, want the last good state 1", s)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
