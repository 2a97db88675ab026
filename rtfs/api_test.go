package rtfs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
	"github.com/rtfshost/rtfshost/rtfs/types"
	"go.uber.org/goleak"
)

func mustCompile(t testing.TB, src string) *Program {
	t.Helper()
	p, err := Compile("t.rtfs", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustRun(t testing.TB, th *Thread, p *Program) Outcome {
	t.Helper()
	out, err := th.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestProgramIdentity(t *testing.T) {
	a := mustCompile(t, "(+ 1 2)")
	b := mustCompile(t, "(+ 1 2)")
	c := mustCompile(t, "(+ 1 3)")
	if a.Hash() != b.Hash() || a.Hash() == c.Hash() || len(a.Hash()) != 64 {
		t.Errorf("hashes: %s %s %s", a.Hash(), b.Hash(), c.Hash())
	}
	if a.Name() != "t.rtfs" || string(a.Source()) != "(+ 1 2)" {
		t.Errorf("name %q source %q", a.Name(), a.Source())
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"(foo 1)", "t.rtfs:1:2: undefined symbol foo"},
		{"\n  (if)", "t.rtfs:2:3: if: wrong number of forms (0)"},
		{"(loop [i 0] (inc (recur i)))", "t.rtfs:1:18: recur not in tail position"},
		{"(let [x 1 y] x)", "t.rtfs:1:11: let: binding y has no value"},
		{"(defn f [x :[:bogus-type-form 1 2]] x)", "t.rtfs:1:"},
		{"(fn [x] :int)", ""},
		{"(+ 1", "t.rtfs:1:1"},
		{"(def 5 1)", "t.rtfs:1:6: def: expected a symbol name, got 5"},
	} {
		_, err := Compile("t.rtfs", []byte(tc.src))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: unexpected error %v", tc.src, err)
			}
			continue
		}
		var se *syntax.Error
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") || !errors.As(err, &se) {
			t.Errorf("%s: got %v, want a *syntax.Error with prefix %q on one line", tc.src, err, tc.want)
		}
	}
}

func TestReturnTypeChecked(t *testing.T) {
	p := mustCompile(t, `
(defn proc [s c m] :[ :map { :state :any :action :keyword } ] {:state s :action c})
(defn plain [x] x)`)
	out := mustRun(t, NewThread(Limits{}), p)
	proc, _ := out.Globals.Get("proc")
	cl := proc.(*Closure)
	if cl.Name() != "proc" || cl.ReturnType() == nil {
		t.Fatalf("name %q return type %v", cl.Name(), cl.ReturnType())
	}
	th := NewThread(Limits{})
	good, err := th.Call(context.Background(), out.Globals, proc, Int(1), Keyword("continue"), Nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.CheckResult(good.Value); err != nil {
		t.Errorf("valid result rejected: %v", err)
	}
	bad, _ := th.Call(context.Background(), out.Globals, proc, Int(1), String("continue"), Nil)
	var ce *types.CheckError
	if err := cl.CheckResult(bad.Value); !errors.As(err, &ce) || !strings.Contains(err.Error(), ":action") {
		t.Errorf("invalid result: got %v, want an error naming :action", err)
	}
	if got := cl.ReturnType().String(); !strings.Contains(got, ":action :keyword") {
		t.Errorf("return type %s", got)
	}
	ip := mustCompile(t, "(defn inc-int [x :int] :int (+ x 1))")
	f, _ := mustRun(t, th, ip).Globals.Get("inc-int")
	rt := f.(*Closure).ReturnType()
	if err := types.Check(rt, Int(3)); err != nil {
		t.Errorf("3 is not an :int: %v", err)
	}
	if err := types.Check(rt, String("3")); err == nil || !strings.Contains(err.Error(), "int") {
		t.Errorf("\"3\" is an :int: %v", err)
	}
	plain, _ := out.Globals.Get("plain")
	if plain.(*Closure).ReturnType() != nil || plain.(*Closure).CheckResult(Int(1)) != nil {
		t.Errorf("undeclared return type is %v", plain.(*Closure).ReturnType())
	}
}

func TestLimits(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx := context.Background()
	th := NewThread(Limits{MaxSteps: 10_000, MaxDepth: 200, MaxCollectionSize: 50})
	var le *LimitError
	_, err := th.Run(ctx, mustCompile(t, "(loop [] (recur))"))
	if !errors.As(err, &le) || le.Limit != LimitSteps || le.Max != 10_000 {
		t.Errorf("infinite loop: %v", err)
	}
	_, err = th.Run(ctx, mustCompile(t, "(defn f [n] (+ 1 (f n))) (f 1)"))
	if !errors.As(err, &le) || le.Limit != LimitDepth {
		t.Errorf("infinite recursion: %v", err)
	}
	_, err = th.Run(ctx, mustCompile(t, "(vec (range 100))"))
	if !errors.As(err, &le) || le.Limit != LimitCollectionSize {
		t.Errorf("big collection: %v", err)
	}
	_, err = th.Run(ctx, mustCompile(t, "(repeat 51 :x)"))
	if !errors.As(err, &le) || le.Limit != LimitCollectionSize || le.Max != 50 {
		t.Errorf("(repeat 51 :x) beyond a size limit of 50: %v", err)
	}
	if out, err := th.Run(ctx, mustCompile(t, "(count (repeat 50 :x))")); err != nil || out.Value != Int(50) {
		t.Errorf("(repeat 50 :x) within the limit: %v %v", out.Value, err)
	}
	_, err = th.Run(ctx, mustCompile(t, "(try (loop [] (recur)) (catch e :caught))"))
	if !errors.As(err, &le) {
		t.Errorf("a step limit must not be catchable: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = th.Run(cctx, mustCompile(t, "(loop [i 0] (if (< i 5000) (recur (inc i)) i))"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	tctx, cancel2 := context.WithTimeout(ctx, time.Millisecond)
	defer cancel2()
	<-tctx.Done()
	_, err = NewThread(Limits{}).Run(tctx, mustCompile(t, "(loop [] (recur))"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline: %v", err)
	}
	// The thread stays usable.
	out, err := th.Run(ctx, mustCompile(t, "(+ 1 2)"))
	if err != nil || out.Value != Int(3) {
		t.Errorf("after limits: %v %v", out.Value, err)
	}
}

type hostErr struct{ code int }

func (e *hostErr) Error() string { return "host failure" }

func TestEvalErrorChain(t *testing.T) {
	ctx := context.Background()
	p := mustCompile(t, "(defn g [] (call :x.y 1))\n(defn f [] (+ 1 (g)))\n(f)")
	th := NewThread(Limits{})
	out := mustRun(t, th, p)
	if out.Call == nil || out.Call.Capability != "x.y" || out.Call.Pos.Line != 1 || len(out.Call.Args) != 1 {
		t.Fatalf("call %+v", out.Call)
	}
	orig := &hostErr{code: 7}
	_, err := th.ResumeError(ctx, out.Continuation, orig)
	var ee *EvalError
	var he *hostErr
	if !errors.As(err, &ee) || !errors.As(err, &he) || he.code != 7 || !errors.Is(err, orig) {
		t.Fatalf("ResumeError: %v", err)
	}
	if len(ee.Stack) != 3 || ee.Stack[0].Name != "<toplevel>" || ee.Stack[2].Name != "g" || ee.Pos.Line != 1 {
		t.Errorf("stack %+v pos %v", ee.Stack, ee.Pos)
	}
	if !strings.Contains(ee.Backtrace(), "in f") || !strings.HasPrefix(err.Error(), "t.rtfs:1:") {
		t.Errorf("backtrace %q error %q", ee.Backtrace(), err)
	}
	_, err = th.Run(ctx, mustCompile(t, `(throw {:type :custom :message "m"})`))
	if !errors.As(err, &ee) || ee.Msg != "m" || !Equal(ee.Value, MapOf(Keyword("type"), Keyword("custom"), Keyword("message"), String("m"))) {
		t.Errorf("throw: %v", err)
	}
}

// A host error names its capability once: before a plain message, not again
// before one that names it already.
func TestHostErrorNamesCapabilityOnce(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ herr, want string }{
		{"host failure", "x.y: host failure"},
		{"capability :x.y: key :k: expected int", "capability :x.y: key :k: expected int"},
		{"capability :x.yz: gone", "x.y: capability :x.yz: gone"},
	} {
		th := NewThread(Limits{})
		out := mustRun(t, th, mustCompile(t, "(call :x.y 1)"))
		_, err := th.ResumeError(ctx, out.Continuation, errors.New(c.herr))
		var ee *EvalError
		if !errors.As(err, &ee) || ee.Msg != c.want {
			t.Errorf("host error %q: message %q, want %q", c.herr, ee.Msg, c.want)
		}
	}
}

func TestCallFromGo(t *testing.T) {
	ctx := context.Background()
	p := mustCompile(t, "(def k 3) (defn add [a b] (+ a b k)) (defn sum [& xs] (reduce + 0 xs))")
	th := NewThread(Limits{})
	g := mustRun(t, th, p).Globals
	add, _ := g.Get("add")
	out, err := th.Call(ctx, g, add, Int(1), Int(2))
	if err != nil || out.Value != Int(6) || out.Globals != g {
		t.Errorf("add: %v %v", out.Value, err)
	}
	sum, _ := g.Get("sum")
	if out, err := th.Call(ctx, g, sum, Int(1), Int(2), Int(3)); err != nil || out.Value != Int(6) {
		t.Errorf("sum: %v %v", out.Value, err)
	}
	if out, err := th.Call(ctx, g, Keyword("a"), MapOf(Keyword("a"), Int(1))); err != nil || out.Value != Int(1) {
		t.Errorf("keyword: %v %v", out.Value, err)
	}
	if out, err := th.Call(ctx, g, lookupBuiltin("count"), NewVector(Int(1))); err != nil || out.Value != Int(1) {
		t.Errorf("builtin: %v %v", out.Value, err)
	}
	if _, err := th.Call(ctx, g, add, Int(1)); err == nil || !strings.Contains(err.Error(), "add: expected 2 arguments, got 1") {
		t.Errorf("arity: %v", err)
	}
	if _, err := th.Call(ctx, g, Int(1)); err == nil || !strings.Contains(err.Error(), "not a function") {
		t.Errorf("not a function: %v", err)
	}
	other := mustRun(t, th, mustCompile(t, "(def z 1)")).Globals
	if _, err := th.Call(ctx, other, add, Int(1), Int(2)); err == nil || !strings.Contains(err.Error(), "belongs to program") {
		t.Errorf("foreign globals: %v", err)
	}
	if v, ok := g.Get("k"); !ok || v != Int(3) || g.Program() != p {
		t.Errorf("Get k: %v %v", v, ok)
	}
	if _, ok := g.Get("nope"); ok {
		t.Error("Get of an unknown global succeeded")
	}
}

func TestGlobalsSnapshots(t *testing.T) {
	ctx := context.Background()
	p := mustCompile(t, "(def a 1) (def b (call :wait)) (def a 2) (defn get-a [] a)")
	th := NewThread(Limits{})
	out := mustRun(t, th, p)
	g1 := out.Globals
	if v, _ := g1.Get("a"); v != Int(1) {
		t.Errorf("suspended globals: a = %v", v)
	}
	if _, ok := g1.Get("b"); ok {
		t.Error("b is defined before its call returned")
	}
	out, err := th.Resume(ctx, out.Continuation, Int(5))
	if err != nil {
		t.Fatal(err)
	}
	g2 := out.Globals
	if v, _ := g2.Get("a"); v != Int(2) {
		t.Errorf("final globals: a = %v", v)
	}
	if v, _ := g1.Get("a"); v != Int(1) {
		t.Errorf("the earlier snapshot changed: a = %v", v)
	}
	getA, _ := g2.Get("get-a")
	if r, _ := th.Call(ctx, g1, getA, []Value{}...); r.Value != Int(1) {
		t.Errorf("get-a with the first snapshot: %v", r.Value)
	}
}

func TestDeepRecursionLimits(t *testing.T) {
	p := mustCompile(t, "(defn d [n] (if (= n 0) 0 (+ 1 (d (- n 1))))) (d 10000)")
	if out := mustRun(t, NewThread(Limits{}), p); out.Value != Int(10000) {
		t.Errorf("d 10000 = %v", out.Value)
	}
	p = mustCompile(t, "(loop [i 0] (if (< i 100000) (recur (inc i)) i))")
	if out := mustRun(t, NewThread(Limits{}), p); out.Value != Int(100000) {
		t.Errorf("loop = %v", out.Value)
	}
}

// TestConcurrentThreads runs one Program and one Globals snapshot on several
// goroutines, each with its own Thread.
func TestConcurrentThreads(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := mustCompile(t, `
(def base 100)
(defn step [state chunk] (let [n (+ (:n state 0) chunk base)] (def last-n n) {:n n}))`)
	g := mustRun(t, NewThread(Limits{}), p).Globals
	step, _ := g.Get("step")
	done := make(chan Value)
	for w := 0; w < 4; w++ {
		go func(w int) {
			th := NewThread(Limits{})
			var state Value = MapOf()
			for i := 0; i < 200; i++ {
				out, err := th.Call(context.Background(), g, step, state, Int(w))
				if err != nil {
					done <- String(err.Error())
					return
				}
				state = out.Value
			}
			done <- state
		}(w)
	}
	for w := 0; w < 4; w++ {
		v := <-done
		n, _ := v.(*Map).GetKeyword("n")
		if n.(Int)%200 != 0 || n.(Int) < 20000 {
			t.Errorf("worker result %v", v)
		}
	}
	if _, ok := g.Get("last-n"); ok {
		t.Error("a call's def changed the shared snapshot")
	}
}

// TestSpecReturnType checks results of a streaming processor against its
// declared return type (an enum of actions and a nested config map).
func TestSpecReturnType(t *testing.T) {
	p := mustCompile(t, `
(defn my-stream-processor
  [state chunk metadata]
  :[ :map { :state :any
            :action :[ :enum :continue :pause :resume :cancel :complete ]
            :output :any
            :config :[ :map { :buffer_size :int :timeout_ms :int } ] } ]
  {:state (update-state state chunk)
   :action (:action chunk :continue)
   :output (transform-data chunk)
   :config {:buffer_size (:size chunk 100) :timeout_ms 5}})
(defn update-state [s c] s)
(defn transform-data [c] c)`)
	th := NewThread(Limits{})
	g := mustRun(t, th, p).Globals
	f, _ := g.Get("my-stream-processor")
	cl := f.(*Closure)
	for _, tc := range []struct {
		chunk Value
		want  string
	}{
		{MapOf(), ""},
		{MapOf(Keyword("action"), Keyword("pause")), ""},
		{MapOf(Keyword("action"), Keyword("explode")), ":action"},
		{MapOf(Keyword("size"), String("big")), ":config :buffer_size"},
	} {
		out, err := th.Call(context.Background(), g, f, Nil, tc.chunk, Nil)
		if err != nil {
			t.Fatal(err)
		}
		err = cl.CheckResult(out.Value)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("chunk %v: got %v, want an error naming %q", tc.chunk, err, tc.want)
		}
	}
}

func TestPrintlnIsAHostCall(t *testing.T) {
	p := mustCompile(t, "(defn f [x]\n  (println \"x is\" x)\n  (log :done)\n  x)\n(f 42)")
	th := NewThread(Limits{})
	out := mustRun(t, th, p)
	c := out.Call
	if c == nil || c.Capability != "ccos.io.log" || len(c.Args) != 2 || c.Args[0] != String("x is") || c.Args[1] != Int(42) || c.Pos.Line != 2 {
		t.Fatalf("println: %+v", c)
	}
	out, err := th.Resume(context.Background(), out.Continuation, nil)
	if err != nil || out.Call == nil || out.Call.Pos.Line != 3 || out.Call.Args[0] != Keyword("done") {
		t.Fatalf("log: %+v %v", out.Call, err)
	}
	out, err = th.Resume(context.Background(), out.Continuation, Nil)
	if err != nil || out.Value != Int(42) {
		t.Errorf("result %v %v", out.Value, err)
	}
	g := out.Globals
	f, _ := g.Get("f")
	if r, err := th.Call(context.Background(), g, Keyword("k"), nil); err != nil || r.Value != Nil {
		t.Errorf("(:k nil) from Go with a Go nil: %v %v", r.Value, err)
	}
	if r, _ := th.Call(context.Background(), g, f, nil); r.Call == nil || r.Call.Args[1] != Nil {
		t.Errorf("Go nil argument: %+v", r.Call)
	}
}

// TestPanicDoesNotEscape: a Go panic below the VM (here a faulty builtin)
// comes back as an error, and the Thread stays usable.
func TestPanicDoesNotEscape(t *testing.T) {
	boom := NewBuiltin("boom", func(*Thread, []Value) (Value, error) { panic("faulty builtin") })
	p, err := compileUnits("p.rtfs", []byte("(defn f [] (boom)) (f)"), &compileConfig{builtins: map[string]*Builtin{"boom": boom}})
	if err != nil {
		t.Fatal(err)
	}
	th := NewThread(Limits{})
	if _, err := th.Run(context.Background(), p); err == nil || !strings.Contains(err.Error(), "internal error: faulty builtin") {
		t.Errorf("got %v", err)
	}
	if out, err := th.Run(context.Background(), mustCompile(t, "(+ 1 1)")); err != nil || out.Value != Int(2) {
		t.Errorf("after a panic: %v %v", out.Value, err)
	}
}

// TestCallPanicDoesNotEscape: the same through Call, on its common path (a
// closure of fixed arity) and on the other (a variadic closure), and with
// the thread usable after each.
func TestCallPanicDoesNotEscape(t *testing.T) {
	boom := NewBuiltin("boom", func(*Thread, []Value) (Value, error) { panic("faulty builtin") })
	p, err := compileUnits("p.rtfs", []byte("(defn f [s c] (boom)) (defn v [& xs] (boom)) (defn ok [s c] s)"),
		&compileConfig{builtins: map[string]*Builtin{"boom": boom}})
	if err != nil {
		t.Fatal(err)
	}
	th := NewThread(Limits{})
	out, err := th.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	g := out.Globals
	for _, name := range []string{"f", "v"} {
		fn, _ := g.Get(name)
		if _, err := th.Call(context.Background(), g, fn, Int(1), Int(2)); err == nil || !strings.Contains(err.Error(), "internal error: faulty builtin") {
			t.Errorf("%s: got %v", name, err)
		}
		ok, _ := g.Get("ok")
		if out, err := th.Call(context.Background(), g, ok, Int(7), nil); err != nil || out.Value != Int(7) {
			t.Errorf("after a panic in %s: %v %v", name, out.Value, err)
		}
	}
	var nilClosure *Closure
	if _, err := th.Call(context.Background(), g, nilClosure, Int(1)); err == nil {
		t.Error("a nil *Closure: no error")
	}
}

// TestCallStopsAtOnce: a call of a function that runs two instructions
// stops at its first with a context cancelled before it, on Call's common
// path as on the other; a call with too few arguments is an arity error.
func TestCallStopsAtOnce(t *testing.T) {
	th := NewThread(Limits{})
	out, err := th.Run(context.Background(), mustCompile(t, "(defn f [s c m] s) (defn v [& xs] xs)"))
	if err != nil {
		t.Fatal(err)
	}
	g := out.Globals
	f, _ := g.Get("f")
	v, _ := g.Get("v")
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, fn := range []Value{f, v} {
		if _, err := th.Call(cctx, g, fn, Int(1), Int(2), Int(3)); !errors.Is(err, context.Canceled) {
			t.Errorf("%v with a cancelled context: %v", fn, err)
		}
		if out, err := th.Call(context.Background(), g, fn, Int(1), Int(2), Int(3)); err != nil || out.Value == nil {
			t.Errorf("%v after: %v %v", fn, out.Value, err)
		}
	}
	if _, err := th.Call(context.Background(), g, f, Int(1), Int(2)); err == nil || !strings.Contains(err.Error(), "argument") {
		t.Errorf("too few arguments: %v", err)
	}
}

// TestCallGlobalsOfEachCall: a call sees the globals it is given, whatever
// the thread's last call defined or was given (Call skips setting up
// globals it already has).
func TestCallGlobalsOfEachCall(t *testing.T) {
	th := NewThread(Limits{})
	out, err := th.Run(context.Background(), mustCompile(t, "(def n 1) (defn bump [x] (def n (+ n x)) n) (defn get-n [x] n)"))
	if err != nil {
		t.Fatal(err)
	}
	g1 := out.Globals
	bump, _ := g1.Get("bump")
	getN, _ := g1.Get("get-n")
	call := func(g *Globals, fn Value, want Value) *Globals {
		t.Helper()
		out, err := th.Call(context.Background(), g, fn, Int(1))
		if err != nil || out.Value != want {
			t.Fatalf("got %v %v, want %v", out.Value, err, want)
		}
		return out.Globals
	}
	g2 := call(g1, bump, Int(2))
	call(g1, getN, Int(1))
	call(g2, getN, Int(2))
	call(g2, getN, Int(2))
	call(g1, getN, Int(1))
	g3 := call(g2, bump, Int(3))
	call(g3, getN, Int(3))
	call(g2, getN, Int(2))
	if v, _ := g1.Get("n"); v != Int(1) {
		t.Errorf("g1's n changed to %v", v)
	}
}
