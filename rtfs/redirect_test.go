package rtfs

import (
	"context"
	"testing"
)

// A builtin that the host calls directly (Thread.Call) may hand its work to
// the prelude too: the call then runs the prelude function to its end.
func TestCallBuiltinRedirects(t *testing.T) {
	p, err := Compile("r.rtfs", []byte(`(def nums (iterate inc 1)) (defn echo-nums [n] (lazy-seq (cons (call :test.echo n) (echo-nums (inc n)))))`))
	if err != nil {
		t.Fatal(err)
	}
	th := NewThread(Limits{})
	ctx := context.Background()
	out, err := th.Run(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	nums, _ := out.Globals.Get("nums")
	got, err := th.Call(ctx, out.Globals, lookupBuiltin("take"), Int(3), nums)
	if err != nil || !Equal(got.Value, NewList(Int(1), Int(2), Int(3))) {
		t.Fatalf("(take 3 nums) = %v, %v", got.Value, err)
	}
	// A host call inside the thunks suspends the direct call like any other.
	echo, _ := out.Globals.Get("echo-nums")
	o, err := th.Call(ctx, out.Globals, echo, Int(7))
	if err != nil {
		t.Fatal(err)
	}
	o, err = th.Call(ctx, out.Globals, lookupBuiltin("take"), Int(2), o.Value)
	for err == nil && o.Call != nil {
		k := roundTrip(t, p, o.Continuation)
		o, err = th.Resume(ctx, k, o.Call.Args[0])
	}
	if err != nil || !Equal(o.Value, NewList(Int(7), Int(8))) {
		t.Fatalf("(take 2 (echo-nums 7)) = %v, %v", o.Value, err)
	}
}
