package sse

import (
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"0":                             0,
		"-4":                            0,
		"86401":                         0, // over a day: ignored, the policy applies
		"soon":                          0,
		"Sat, 21 Nov 2026 12:00:30 GMT": 30 * time.Second,
		"Sat, 21 Nov 2026 11:59:00 GMT": 0, // in the past
		"Mon, 23 Nov 2026 12:00:00 GMT": 0, // over a day away
	}
	for in, want := range tests {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}
