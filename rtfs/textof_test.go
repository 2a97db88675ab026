package rtfs

import "testing"

// TextOf gives the text of strings, keywords and symbols without quotes or
// colon, the printed form of anything else, and "" for a Go nil.
func TestTextOf(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		want string
	}{
		{String("a b"), "a b"},
		{Keyword("my.ns/k"), "my.ns/k"},
		{Symbol("step"), "step"},
		{Int(3), "3"},
		{Nil, "nil"},
		{NewVector(String("x")), `["x"]`},
		{nil, ""},
	} {
		if got := TextOf(tc.v); got != tc.want {
			t.Errorf("TextOf(%#v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
