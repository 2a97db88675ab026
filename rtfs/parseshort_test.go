package rtfs

import (
	"math/rand"
	"strconv"
	"testing"
)

// TestParseShortDecimalMatchesStrconv: the short-decimal fast path of the
// JSON decoder gives exactly strconv.ParseFloat's float, and declines what
// it does not handle.
func TestParseShortDecimalMatchesStrconv(t *testing.T) {
	check := func(s string) {
		t.Helper()
		f, ok := parseShortDecimal([]byte(s))
		want, err := strconv.ParseFloat(s, 64)
		if ok && (err != nil || f != want || (f == 0 && (1/f > 0) != (1/want > 0))) {
			t.Fatalf("parseShortDecimal(%q) = %v, strconv gives %v (%v)", s, f, want, err)
		}
	}
	for _, s := range []string{"21.5", "-0.25", "0.1", "-0.0", "0.0", "999999999999999.9", "1.000000000000001",
		"9007199254740993.5", "123456789012345.6", "0.123456789012345", "12.", "1.2.3", "1e5", "-", "5"} {
		check(s)
	}
	if _, ok := parseShortDecimal([]byte("21.5")); !ok {
		t.Fatal("21.5 is not taken by the fast path")
	}
	if _, ok := parseShortDecimal([]byte("1234567890.1234567")); ok {
		t.Fatal("17 digits taken by the fast path")
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 200000; i++ {
		digits := 2 + r.Intn(14)
		b := make([]byte, 0, 20)
		if r.Intn(2) == 0 {
			b = append(b, '-')
		}
		point := 1 + r.Intn(digits-1)
		for d := 0; d < digits; d++ {
			if d == point {
				b = append(b, '.')
			}
			b = append(b, byte('0'+r.Intn(10)))
		}
		check(string(b))
	}
}
