package rtfs

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// echoHost answers host calls: :echo returns its argument, :fail fails.
func echoHost(call *HostCall) (Value, error) {
	switch call.Capability {
	case "echo":
		if len(call.Args) == 0 {
			return Nil, nil
		}
		return call.Args[0], nil
	case "fail":
		return nil, errors.New("failed on purpose")
	}
	return nil, fmt.Errorf("unknown capability %s", call.Capability)
}

// drive runs p to completion, answering host calls with echoHost. With
// serialize, every continuation is marshalled and resumed from the decoded
// copy on a fresh Thread.
func drive(t *testing.T, p *Program, serialize bool) (Value, int, error) {
	t.Helper()
	ctx := context.Background()
	th := NewThread(Limits{MaxSteps: 1_000_000})
	out, err := th.Run(ctx, p)
	calls := 0
	for err == nil && out.Call != nil {
		calls++
		k := out.Continuation
		if serialize {
			b, merr := k.MarshalBinary()
			if merr != nil {
				t.Fatalf("marshal: %v", merr)
			}
			if k, merr = UnmarshalContinuation(p, b); merr != nil {
				t.Fatalf("unmarshal: %v", merr)
			}
			th = NewThread(Limits{MaxSteps: 1_000_000})
		}
		v, herr := echoHost(out.Call)
		if herr != nil {
			out, err = th.ResumeError(ctx, k, herr)
		} else {
			out, err = th.Resume(ctx, k, v)
		}
	}
	return out.Value, calls, err
}

// sameValue is Equal, except that closures compare by function and captured
// values (a round trip cannot preserve their identity).
func sameValue(a, b Value) bool {
	ca, ok1 := a.(*Closure)
	cb, ok2 := b.(*Closure)
	if ok1 || ok2 {
		if !ok1 || !ok2 || ca.fn != cb.fn || len(ca.free) != len(cb.free) {
			return false
		}
		for i := range ca.free {
			if !sameValue(ca.free[i], cb.free[i]) {
				return false
			}
		}
		return true
	}
	if va, ok := a.(*Vector); ok {
		vb, ok := b.(*Vector)
		if !ok || va.Len() != vb.Len() {
			return false
		}
		for i := 0; i < va.Len(); i++ {
			if !sameValue(va.Index(i), vb.Index(i)) {
				return false
			}
		}
		return true
	}
	return Equal(a, b)
}

var continuationSuite = []string{
	`(+ 1 (call :echo 2))`,
	`(map (fn [x] (call :echo (* x x))) [1 2 3])`,
	`(defn l3 [x] (call :echo [x x])) (defn l2 [x] (conj (l3 x) :l2)) (defn l1 [x] (l2 (inc x))) (l1 1)`,
	`(try (call :fail) (catch e [:caught (:message e)]))`,
	`(try (+ 1 (call :echo 1)) (finally (call :echo :cleanup)))`,
	`(let [f (fn [a] (fn [b] (+ a b (call :echo 1))))] ((f 10) 20))`,
	`(def g 5) (def h (call :echo (* g 2))) [g h]`,
	`(reduce (fn [acc x] (assoc acc x (call :echo (str x)))) {} [:a :b :c])`,
	`(loop [i 0 acc '()] (if (< i 4) (recur (inc i) (cons (call :echo i) acc)) acc))`,
	`(sort-by (fn [m] (call :echo (:k m))) [{:k 3} {:k 1} {:k 2}])`,
	`(match (call :echo [1 2 3]) [a & r] [a r] _ :none)`,
	`(group-by (fn [x] (call :echo (odd? x))) [1 2 3 4 5])`,
	`(defn fact [n] (if (<= n 1) (call :echo 1) (* n (fact (dec n))))) (fact 8)`,
	`(let [c (call :echo (fn [x] (* x 3)))] (c 5))`,
	`(call :echo #{1 2 3})`,
	`(call :echo {"s" 1.5 :k 'sym 3 [nil true false]})`,
	`(try (try (call :fail) (catch :other e 1)) (catch e (call :echo :outer)))`,
	`(some (fn [x] (when (= (call :echo x) 3) :found)) [1 2 3 4])`,
	`(update-in {:a {:b 1}} [:a :b] (fn [v] (+ v (call :echo 10))))`,
	`((comp (fn [x] (call :echo (inc x))) (fn [x] (* 2 x))) 5)`,
	`(apply (fn [& xs] (call :echo (count xs))) 1 2 [3 4])`,
}

func TestContinuationRoundTripSuite(t *testing.T) {
	for i, src := range continuationSuite {
		p, err := Compile(fmt.Sprintf("suite%d.rtfs", i), []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		want, n1, err1 := drive(t, p, false)
		got, n2, err2 := drive(t, p, true)
		if n1 == 0 {
			t.Errorf("%s: made no host call", src)
		}
		if (err1 == nil) != (err2 == nil) || n1 != n2 || !sameValue(want, got) {
			t.Errorf("%s: uninterrupted %v (%d calls, %v), serialized %v (%d calls, %v)", src, want, n1, err1, got, n2, err2)
		}
	}
}

// genExpr generates a random integer expression; any subexpression may be a
// host call, inside callbacks, lets, ifs, trys and nested function calls.
func genExpr(r *rand.Rand, depth int) string {
	if depth <= 0 {
		return fmt.Sprint(r.Intn(10))
	}
	sub := func() string { return genExpr(r, depth-1) }
	switch r.Intn(9) {
	case 0:
		return "(call :echo " + sub() + ")"
	case 1:
		return "(+ " + sub() + " " + sub() + ")"
	case 2:
		return "(let [x " + sub() + "] (* x " + sub() + "))"
	case 3:
		return "(if (odd? " + sub() + ") " + sub() + " " + sub() + ")"
	case 4:
		return "(reduce + 0 (map (fn [y] (+ y " + sub() + ")) [1 2]))"
	case 5:
		return "(try (if (= 0 (mod " + sub() + " 3)) (call :fail) " + sub() + ") (catch e 7))"
	case 6:
		return "(helper " + sub() + ")"
	case 7:
		return "(loop [i 0 acc 0] (if (< i 2) (recur (inc i) (+ acc " + sub() + ")) acc))"
	}
	return "(- " + sub() + " (call :echo 1))"
}

// TestContinuationProperty: for generated programs, suspending at every host
// call, encoding, decoding into a fresh Thread and resuming gives the same
// result as an uninterrupted run.
func TestContinuationProperty(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	calls := 0
	for i := 0; i < 150; i++ {
		src := "(defn helper [z] (+ z (call :echo 2)))\n" + genExpr(r, 4)
		p, err := Compile("prop.rtfs", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		want, n1, err1 := drive(t, p, false)
		got, n2, err2 := drive(t, p, true)
		calls += n1
		if err1 != nil || err2 != nil || n1 != n2 || !Equal(want, got) {
			t.Fatalf("%s:\nuninterrupted %v (%d calls, %v)\nserialized %v (%d calls, %v)", src, want, n1, err1, got, n2, err2)
		}
	}
	if calls < 300 {
		t.Errorf("the generated programs made only %d host calls", calls)
	}
}

func TestContinuationWrongProgram(t *testing.T) {
	p1, _ := Compile("a.rtfs", []byte(`(call :echo 1)`))
	p2, _ := Compile("b.rtfs", []byte(`(call :echo 2)`))
	out, err := NewThread(Limits{}).Run(context.Background(), p1)
	if err != nil || out.Continuation == nil {
		t.Fatal(out, err)
	}
	b, err := out.Continuation.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalContinuation(p2, b); err == nil || !strings.Contains(err.Error(), "not of") {
		t.Errorf("decoding against another program: got %v", err)
	}
	bad := append([]byte(nil), b...)
	copy(bad[6:], "x") // corrupt the compiler version
	if _, err := UnmarshalContinuation(p1, bad); err == nil || !strings.Contains(err.Error(), "compiled by") {
		t.Errorf("decoding another compiler version: got %v", err)
	}
	bad[4] = 99
	if _, err := UnmarshalContinuation(p1, bad); err == nil || !strings.Contains(err.Error(), "format version 99") {
		t.Errorf("decoding another format version: got %v", err)
	}
	for n := 0; n < len(b); n++ {
		if _, err := UnmarshalContinuation(p1, b[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", n)
		}
	}
	if _, err := UnmarshalContinuation(p1, append(b, 0)); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Errorf("trailing bytes: got %v", err)
	}
}

func TestContinuationResumeTwice(t *testing.T) {
	p, _ := Compile("twice.rtfs", []byte(`(def base 10) (+ base (call :echo 0))`))
	th := NewThread(Limits{})
	out, err := th.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	k := out.Continuation
	if v, ok := k.Globals().Get("base"); !ok || v != Int(10) {
		t.Errorf("continuation globals: base = %v, %v", v, ok)
	}
	for _, x := range []Int{1, 5} {
		r, err := th.Resume(context.Background(), k, x)
		if err != nil || r.Value != 10+x {
			t.Errorf("resume with %d: %v, %v", x, r.Value, err)
		}
	}
}

func FuzzUnmarshalContinuation(f *testing.F) {
	p, err := Compile("fuzz.rtfs", []byte(`
(defn inner [x] (try (call :echo {:x x :l '(1 "a" :k) :s #{1.5}}) (catch e e)))
(defn outer [y] (let [f (fn [z] (+ y z))] (f (count (inner y)))))
(outer 2)`))
	if err != nil {
		f.Fatal(err)
	}
	out, err := NewThread(Limits{}).Run(context.Background(), p)
	if err != nil {
		f.Fatal(err)
	}
	b, err := out.Continuation.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte("RTFK"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := UnmarshalContinuation(p, data)
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("decoder panicked: %v", err)
			}
			return
		}
		// A continuation that decodes must resume without a Go panic.
		_, rerr := NewThread(Limits{MaxSteps: 10000}).Resume(context.Background(), k, Int(1))
		if rerr != nil && strings.Contains(rerr.Error(), "internal error") {
			t.Fatalf("resume panicked: %v", rerr)
		}
	})
}

func TestProgramValueCodec(t *testing.T) {
	p := mustCompile(t, `(defn adder [n] (fn [x] (+ x n))) (def state {:f (adder 5) :g adder :xs [1 2.5 "s" :k 'sym nil true]})`)
	out := mustRun(t, NewThread(Limits{}), p)
	state, _ := out.Globals.Get("state")
	b, err := p.MarshalValue(state)
	if err != nil {
		t.Fatal(err)
	}
	v, err := p.UnmarshalValue(b)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := v.(*Map).GetKeyword("f")
	r, err := NewThread(Limits{}).Call(context.Background(), out.Globals, f, Int(1))
	if err != nil || r.Value != Int(6) {
		t.Errorf("decoded closure: %v %v", r.Value, err)
	}
	xs, _ := v.(*Map).GetKeyword("xs")
	want, _ := state.(*Map).GetKeyword("xs")
	if !Equal(xs, want) {
		t.Errorf("decoded %v, want %v", xs, want)
	}
	other := mustCompile(t, `(def x 1)`)
	if _, err := other.MarshalValue(f); err == nil || !strings.Contains(err.Error(), "belongs to program") {
		t.Errorf("foreign closure: %v", err)
	}
	for n := 0; n < len(b); n++ {
		if _, err := p.UnmarshalValue(b[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", n)
		}
	}
	if _, err := other.UnmarshalValue(b); err == nil {
		t.Error("decoding closures against another program succeeded")
	}
}

func TestGlobalsMarshal(t *testing.T) {
	p := mustCompile(t, `(def n 5) (def f (let [k 2] (fn [x] (* x k)))) (def later (call :echo 1))`)
	out := mustRun(t, NewThread(Limits{}), p)
	b, err := out.Globals.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	g, err := UnmarshalGlobals(p, b)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := g.Get("n"); v != Int(5) {
		t.Errorf("n = %v", v)
	}
	if _, ok := g.Get("later"); ok {
		t.Error("later is defined")
	}
	f, _ := g.Get("f")
	r, err := NewThread(Limits{}).Call(context.Background(), g, f, Int(21))
	if err != nil || r.Value != Int(42) {
		t.Errorf("f 21 = %v, %v", r.Value, err)
	}
	if _, err := UnmarshalGlobals(mustCompile(t, "(def n 6)"), b); err == nil || !strings.Contains(err.Error(), "not of") {
		t.Errorf("another program: %v", err)
	}
	if _, err := UnmarshalContinuation(p, b); err == nil || !strings.Contains(err.Error(), "bad magic") {
		t.Errorf("globals decoded as a continuation: %v", err)
	}
	for n := 0; n < len(b); n++ {
		if _, err := UnmarshalGlobals(p, b[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", n)
		}
	}
}

// TestContinuationValidation: well-formed bytes whose frames do not match
// the code are rejected before they can be resumed.
func TestContinuationValidation(t *testing.T) {
	p := mustCompile(t, "(defn f [x] (+ 1 (call :echo x))) (try (f 2) (catch e 0))")
	out := mustRun(t, NewThread(Limits{}), p)
	k := out.Continuation
	for name, mutate := range map[string]func(c *Continuation){
		"pc":        func(c *Continuation) { c.frames[len(c.frames)-1].pc-- },
		"base":      func(c *Continuation) { c.frames[len(c.frames)-1].base++ },
		"stack":     func(c *Continuation) { c.stack = append(c.stack, Nil) },
		"handler":   func(c *Continuation) { c.handlers[0].sp++ },
		"closure":   func(c *Continuation) { c.frames[1].cl = c.frames[0].cl },
		"no frames": func(c *Continuation) { c.frames = nil },
	} {
		c := *k
		c.frames = append([]frame(nil), k.frames...)
		c.handlers = append([]handler(nil), k.handlers...)
		mutate(&c)
		b, err := c.MarshalBinary()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := UnmarshalContinuation(p, b); err == nil {
			t.Errorf("%s: a corrupt continuation decoded", name)
		}
	}
	b, _ := k.MarshalBinary()
	if _, err := UnmarshalContinuation(p, b); err != nil {
		t.Errorf("the original: %v", err)
	}
}

// TestDecodedGlobalsAreShared: two continuations decoded from the same
// globals share one Globals, and a program resumed from one that defines a
// global changes neither the other nor the shared Globals (copy on write);
// a continuation whose globals differ decodes its own.
func TestDecodedGlobalsAreShared(t *testing.T) {
	p, err := Compile("shared.rtfs", []byte(`
(def base {:n 10 :tags ["a" "b"]})
(def total (+ (:n base) (call :echo 0)))
(def base {:n 99})
[total (:n base) (call :echo 1)]`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out, err := NewThread(Limits{}).Run(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := out.Continuation.MarshalBinary()
	k1, err1 := UnmarshalContinuation(p, b)
	k2, err2 := UnmarshalContinuation(p, b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if k1.Globals() != k2.Globals() {
		t.Fatal("the same globals section decoded twice gave two Globals")
	}
	r1, err := NewThread(Limits{}).Resume(ctx, k1, Int(5))
	if err != nil || r1.Continuation == nil {
		t.Fatalf("resume k1: %v %v", r1, err)
	}
	if v, _ := k2.Globals().Get("base"); v.String() != `{:n 10 :tags ["a" "b"]}` {
		t.Fatalf("the shared globals changed under a resumed program: base = %v", v)
	}
	if v, _ := r1.Continuation.Globals().Get("base"); v.String() != "{:n 99}" {
		t.Fatalf("the resumed program's own globals: base = %v", v)
	}
	b2, _ := r1.Continuation.MarshalBinary()
	k3, err := UnmarshalContinuation(p, b2)
	if err != nil || k3.Globals() == k1.Globals() {
		t.Fatalf("different globals decoded as the shared ones: %v", err)
	}
	r3, err := NewThread(Limits{}).Resume(ctx, k3, Int(7))
	if err != nil || r3.Value.String() != "[15 99 7]" {
		t.Fatalf("resume k3: %v, %v", r3.Value, err)
	}
	r2, err := NewThread(Limits{}).Resume(ctx, k2, Int(1))
	if err != nil || r2.Continuation == nil {
		t.Fatalf("resume k2: %v %v", r2, err)
	}
	if r, err := NewThread(Limits{}).Resume(ctx, r2.Continuation, Int(2)); err != nil || r.Value.String() != "[11 99 2]" {
		t.Fatalf("resume k2 to the end: %v, %v", r.Value, err)
	}
}

// The continuation codec writes shared structure once: a host call whose
// argument and stack hold 2^60 elements in 60 vectors encodes in a few
// hundred bytes and decodes to the same sharing. Its bound stops a value
// whose texts repeat.
func TestContinuationWritesSharedStructureOnce(t *testing.T) {
	p := mustCompile(t, `(defn tower [n] (loop [i 0 a [1]] (if (< i n) (recur (inc i) [a a]) a)))
(let [t (tower 60)] (count (call :x t t)))`)
	out := mustRun(t, NewThread(Limits{}), p)
	b, err := out.Continuation.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 4096 {
		t.Fatalf("a continuation holding a 60-level tower of pairs takes %d bytes", len(b))
	}
	k, err := UnmarshalContinuation(p, b)
	if err != nil {
		t.Fatal(err)
	}
	args := k.Call().Args
	if args[0] != args[1] || args[0].(*Vector).Index(0) != args[0].(*Vector).Index(1) {
		t.Fatal("decoded arguments do not share their structure")
	}
	q := mustCompile(t, `(let [s (apply str (repeat 10000 "a"))] (call :x (vec (repeat 1000 s))))`)
	out = mustRun(t, NewThread(Limits{}), q)
	_, err = out.Continuation.MarshalBinaryOpts(EncodeOptions{MaxBytes: 1 << 20})
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != LimitOutput {
		t.Fatalf("a 10 MB continuation under a 1 MiB bound: %v", err)
	}
}
