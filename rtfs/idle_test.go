package rtfs

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/rtfs/types"
)

// A probe is a value whose collection the test sees (a cleanup closes
// gone): the VM only moves it around.
type probe struct {
	_    [64]byte
	gone chan struct{}
}

func (*probe) Kind() Kind     { return types.KindRegex }
func (*probe) String() string { return `#"probe"` }
func newProbe() (*probe, chan struct{}) {
	gone := make(chan struct{})
	p := &probe{gone: gone}
	runtime.AddCleanup(p, func(ch chan struct{}) { close(ch) }, gone)
	return p, gone
}

// kept reports whether the probe handed to use is still reachable once use
// has returned and its results are dropped: collections run until the
// probe's cleanup does, for at most about a second.
func kept(use func(v Value)) bool {
	gone := func() chan struct{} {
		p, gone := newProbe()
		use(p)
		return gone
	}()
	for range 100 {
		runtime.GC()
		select {
		case <-gone:
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

type ctxKey struct{}

// TestIdleThreadKeepsNoValue: once Call, Run or Resume has returned, the
// thread holds none of the values of the run (arguments, locals, values
// built, the result, an error's value, a context), whichever way the run
// ended: the stack, the frames and the context are cleared, so that a
// thread kept between a stream's chunks pins nothing of the last one.
func TestIdleThreadKeepsNoValue(t *testing.T) {
	boom := NewBuiltin("boom", func(*Thread, []Value) (Value, error) { panic("faulty builtin") })
	p, err := compileUnits("idle.rtfs", []byte(`
(defn ret [s c m] s)
(defn nested [s c m] (let [f (fn [] [s c m])] (count (f))))
(defn deep [s c m] (count [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 s]))
(defn thrown [s c m] (throw {:x s}))
(defn caught [s c m] (try (throw {:x s}) (catch :default e 1)))
(defn park [s c m] (call :test.park s))
(defn after-park [s c m] (let [x (call :test.park 1)] [s x]))
(defn crash [s c m] (boom s))
(defn variadic [& xs] (first xs))
(defn one [s] s)
(defn define [s c m] (def kept-s s) 1)
`), &compileConfig{builtins: map[string]*Builtin{"boom": boom}})
	if err != nil {
		t.Fatal(err)
	}
	th := NewThread(Limits{})
	g := mustRun(t, th, p).Globals
	call := func(name string, ctx context.Context, args ...Value) {
		fn, ok := g.Get(name)
		if !ok {
			t.Fatalf("%s is not defined", name)
		}
		th.Call(ctx, g, fn, args...) //nolint:errcheck // the outcome is dropped; some fail on purpose
	}
	bg := context.Background()
	for _, tc := range []struct {
		name string
		use  func(v Value)
	}{
		{"a returned argument", func(v Value) { call("ret", bg, v, Nil, Nil) }},
		{"a closure's captured value", func(v Value) { call("nested", bg, Nil, v, Nil) }},
		{"a deep operand stack", func(v Value) { call("deep", bg, v, Nil, Nil) }},
		{"a thrown value", func(v Value) { call("thrown", bg, v, Nil, Nil) }},
		{"a caught value", func(v Value) { call("caught", bg, v, Nil, Nil) }},
		{"a suspended call's argument", func(v Value) { call("park", bg, v, Nil, Nil) }},
		{"a resumed call's argument", func(v Value) {
			fn, _ := g.Get("after-park")
			out, err := th.Call(bg, g, fn, v, Nil, Nil)
			if err != nil || out.Continuation == nil {
				t.Errorf("after-park: %+v %v", out, err)
				return
			}
			th.Resume(bg, out.Continuation, Int(2)) //nolint:errcheck // dropped
		}},
		{"a resumed value", func(v Value) {
			fn, _ := g.Get("after-park")
			out, _ := th.Call(bg, g, fn, Nil, Nil, Nil)
			th.Resume(bg, out.Continuation, v) //nolint:errcheck // dropped
		}},
		{"a panic's argument", func(v Value) { call("crash", bg, v, Nil, Nil) }},
		{"a variadic call's argument", func(v Value) { call("variadic", bg, v, Nil) }},
		{"a one-argument call", func(v Value) { call("one", bg, v) }},
		{"a global defined", func(v Value) { call("define", bg, v, Nil, Nil) }},
		{"a keyword's map", func(v Value) { th.Call(bg, g, Keyword("a"), MapOf(Keyword("a"), v)) }}, //nolint:errcheck // dropped
		{"a cancellable context's value", func(v Value) {
			ctx, cancel := context.WithCancel(context.WithValue(bg, ctxKey{}, v))
			defer cancel()
			call("ret", ctx, Nil, Nil, Nil)
		}},
		{"a cancelled context's value", func(v Value) {
			ctx, cancel := context.WithCancel(context.WithValue(bg, ctxKey{}, v))
			cancel()
			call("ret", ctx, Nil, Nil, Nil)
		}},
	} {
		if kept(tc.use) {
			t.Errorf("%s: the idle thread keeps it alive", tc.name)
		}
	}
	// The thread still runs.
	fn, _ := g.Get("ret")
	if out, err := th.Call(bg, g, fn, Int(1), Nil, Nil); err != nil || out.Value != Int(1) {
		t.Errorf("after: %v %v", out.Value, err)
	}
	runtime.KeepAlive(th)
}

// TestIdleThreadKeepsNoCapturedText: the text a with-out-str captured is
// not kept by an idle thread, whether the form ended or the run failed or
// was suspended inside it.
func TestIdleThreadKeepsNoCapturedText(t *testing.T) {
	p, err := compileUnits("out.rtfs", []byte(`
(defn ended [s c m] (with-out-str (print s)))
(defn failed [s c m] (with-out-str (print s) (throw {:x 1})))
(defn parked [s c m] (with-out-str (print s) (call :test.park 1)))
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	th := NewThread(Limits{})
	g := mustRun(t, th, p).Globals
	for _, name := range []string{"ended", "failed", "parked"} {
		fn, _ := g.Get(name)
		th.Call(context.Background(), g, fn, String("secret"), Nil, Nil) //nolint:errcheck // some fail on purpose
		if len(th.out) != 0 {
			t.Errorf("%s: %d captures left open", name, len(th.out))
		}
		for i, b := range th.out[:cap(th.out)] {
			if b != nil {
				t.Errorf("%s: slot %d keeps the captured text %q", name, i, b.String())
			}
		}
	}
}
