package rtfs

import (
	"context"
	"os"
	"strings"
	"testing"
)

// A continuation parked under rtfs-compile-2 (made by that release from
// testdata/legacy/compile2.rtfs: a host call inside map's callback, inside
// reduce, inside a try) decodes and resumes under this compiler, in the
// code it was parked in, to the value it would have had: 22.
func TestResumeCompile2Continuation(t *testing.T) {
	testResumeLegacy(t, "compile2", "rtfs-compile-2", 22)
}

// The same for rtfs-compile-3 (testdata/legacy/compile3.rtfs, which also
// destructures function parameters): 26.
func TestResumeCompile3Continuation(t *testing.T) {
	testResumeLegacy(t, "compile3", "rtfs-compile-3", 26)
}

func testResumeLegacy(t *testing.T, name, version string, want int) {
	src, err := os.ReadFile("testdata/legacy/" + name + ".rtfs")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/legacy/" + name + ".cont")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(name+".rtfs", src)
	if err != nil {
		t.Fatal(err)
	}
	if p.version == version {
		t.Fatalf("the current compiler is still %s: the fixture tests nothing", version)
	}
	k, err := UnmarshalContinuation(p, b)
	if err != nil {
		t.Fatal(err)
	}
	if k.Program() == p || k.Program().Hash() == p.Hash() {
		t.Fatal("the continuation was bound to the current program's code")
	}
	th := NewThread(Limits{})
	out, err := th.Resume(context.Background(), k, k.Call().Args[0])
	for err == nil && out.Call != nil {
		// Every continuation on the way round-trips too, in the legacy code.
		k2 := roundTrip(t, k.Program(), out.Continuation)
		out, err = th.Resume(context.Background(), k2, out.Call.Args[0])
	}
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(out.Value, Int(want)) {
		t.Fatalf("resumed to %s, want %d", out.Value, want)
	}

	// Its globals decode too, and the function they hold runs.
	gb, err := os.ReadFile("testdata/legacy/" + name + ".globals")
	if err != nil {
		t.Fatal(err)
	}
	g, err := UnmarshalGlobals(p, gb)
	if err != nil {
		t.Fatal(err)
	}
	total, _ := g.Get("total")
	if !Equal(total, Int(10)) {
		t.Fatalf("total = %v, want 10", total)
	}

	// A version this binary does not know is refused with both names.
	bad := []byte(strings.Replace(string(b), version, "rtfs-compile-0", 1))
	if _, err := UnmarshalContinuation(p, bad); err == nil || !strings.Contains(err.Error(), `compiled by "rtfs-compile-0"`) {
		t.Fatalf("unknown version: %v", err)
	}
	// So is a continuation of another program under the earlier version.
	other, err := Compile("other.rtfs", append([]byte(";; changed\n"), src...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalContinuation(other, b); err == nil || !strings.Contains(err.Error(), "continuation of program") {
		t.Fatalf("another program: %v", err)
	}
}
