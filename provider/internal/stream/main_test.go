package stream

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/rtfshost/rtfshost/rtfs"
)

// The stream's own tests: the parts of a stream that run without a
// provider (a dry run, the metadata). The stream's behaviour in a provider
// (delivery, backpressure, directives, failures, durability) is tested by
// package provider, which makes streams as its users do.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// compileGlobals compiles and runs src, and returns its globals.
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
