package rtfs

import (
	"errors"
	"strings"
	"testing"
)

// sharedValue is the result of an rtfs.eval that shares structure: 300,000
// elements in memory (a vector of 100 shared 300 times, that vector
// shared 1,000 times) and 175 MB as JSON.
func sharedValue(t *testing.T) Value {
	t.Helper()
	return mustRun(t, NewThread(Limits{}), mustCompile(t,
		`(let [a (vec (range 100)) b (vec (repeat 300 a))] (vec (repeat 1000 b)))`)).Value
}

func TestOutputEncodersStopAtTheirBound(t *testing.T) {
	v := sharedValue(t)
	const max = 1 << 20
	wantOutputLimit := func(what string, err error) {
		t.Helper()
		var le *LimitError
		if !errors.As(err, &le) || le.Limit != LimitOutput || le.Max != max {
			t.Fatalf("%s: error %v, want the output limit of %d", what, err, max)
		}
		if !strings.Contains(err.Error(), "output limit of 1048576 bytes exceeded") {
			t.Fatalf("%s: message %q", what, err)
		}
	}
	_, err := OutputJSON(v, max)
	wantOutputLimit("OutputJSON", err)
	_, err = AppendJSON(nil, v, EncodeOptions{MaxBytes: max})
	wantOutputLimit("AppendJSON", err)
	wantOutputLimit("CheckOutputSize", CheckOutputSize(v, max))
	if s := Excerpt(v, 60); len(s) != 63 || !strings.HasPrefix(s, "[[[0 1 2") || !strings.HasSuffix(s, "...") {
		t.Fatalf("Excerpt = %q", s)
	}
	// The store's codec writes it as it is in memory: small, no bound hit.
	b, err := MarshalValueOpts(v, EncodeOptions{MaxBytes: max})
	if err != nil || len(b) > 4096 {
		t.Fatalf("MarshalValueOpts: %d bytes, %v", len(b), err)
	}
	// Within the bound, the bounded encoders write what the unbounded do.
	small := NewVector(Int(1), String("x"), MapOf(Keyword("k"), Float(1)))
	got, err := OutputJSON(small, 100)
	if err != nil || string(got) != string(ToOutputJSON(small)) || string(got) != `[1,"x",{"k":1.0}]` {
		t.Fatalf("OutputJSON = %s, %v", got, err)
	}
	if err := CheckOutputSize(small, int64(len(got))); err != nil {
		t.Fatalf("CheckOutputSize under the JSON's own size: %v", err)
	}
}

func TestLimitsOutputLimit(t *testing.T) {
	for _, c := range []struct {
		l    Limits
		want int64
	}{
		{Limits{}, DefaultMaxMemory},
		{Limits{MaxMemory: 1 << 20}, 1 << 20},
		{Limits{MaxMemory: 1 << 20, MaxOutput: 4096}, 4096},
		{Limits{MaxMemory: 1 << 20, MaxOutput: 16 << 20}, 1 << 20},
		{Limits{MaxOutput: 16 << 20}, 16 << 20},
		{Limits{MaxMemory: -1}, 0},
		{Limits{MaxMemory: -1, MaxOutput: 4096}, 4096},
		{Limits{MaxOutput: -1}, DefaultMaxMemory},
	} {
		if got := c.l.OutputLimit(); got != c.want {
			t.Errorf("%+v.OutputLimit() = %d, want %d", c.l, got, c.want)
		}
	}
}
