package localserver

import (
	"strconv"
	"testing"
)

// TestEncoderDecimal: the seq digits the encoder keeps from one chunk to
// the next are strconv's, across carries and after a jump (a resumed
// stream starts anywhere).
func TestEncoderDecimal(t *testing.T) {
	e := &encoder{}
	check := func(seq int) {
		t.Helper()
		if got, want := string(e.decimal(seq)), strconv.Itoa(seq); got != want {
			t.Fatalf("decimal(%d) = %q, want %q", seq, got, want)
		}
	}
	for seq := 1; seq <= 100_000; seq++ {
		check(seq)
	}
	for _, seq := range []int{99_998, 99_999, 100_000, 100_000, 7, 8, 999_999, 1_000_000, 1_000_001, 42} {
		check(seq)
	}
}
