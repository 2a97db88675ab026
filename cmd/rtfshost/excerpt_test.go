package main

import (
	"strings"
	"testing"
)

func TestExcerpt(t *testing.T) {
	for _, tc := range []struct {
		line string
		col  int
		want string
	}{
		{"(+ 1 2)", 1, "(+ 1 2)"},
		{"(+\u00a01 2)", 2, `(+\u00a01 2)`},
		{"(+ 1 \x00)", 6, `(+ 1 \x00)`},
		{"(+ 1 \xff)", 6, `(+ 1 \xff)`},
		{"\tx", 2, " x"},
	} {
		if got := excerpt(tc.line, tc.col, 100); got != tc.want {
			t.Errorf("excerpt(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
	long := strings.Repeat("a ", 200) + "HERE" + strings.Repeat(" b", 200)
	got := excerpt(long, 401, 40)
	if !strings.Contains(got, "HERE") || !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "…") || len([]rune(got)) != 42 {
		t.Errorf("long line cut to %q", got)
	}
	if got := excerpt(long, 1, 40); !strings.HasPrefix(got, "a a") || !strings.HasSuffix(got, "…") {
		t.Errorf("cut at the start: %q", got)
	}
}
