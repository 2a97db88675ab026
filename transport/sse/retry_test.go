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

func TestParseRetryField(t *testing.T) {
	tests := []struct {
		in   string
		ms   int64
		okay bool
	}{
		{"1500", 1500, true},
		{"0", 0, true},
		{"", 0, false},
		{"1.5", 0, false},
		{" 15", 0, false},
		{"9223372036855", 0, false}, // would overflow time.Duration
		{"9223372036854", 9223372036854, true},
	}
	for _, tt := range tests {
		ms, ok := parseRetry([]byte(tt.in))
		if ms != tt.ms || ok != tt.okay {
			t.Errorf("parseRetry(%q) = %d, %v; want %d, %v", tt.in, ms, ok, tt.ms, tt.okay)
		}
	}
}

func TestPolicySequence(t *testing.T) {
	p := newPolicy(8)
	var got []time.Duration
	for d := p.NextBackOff(); d >= 0; d = p.NextBackOff() {
		got = append(got, d)
	}
	ms := time.Millisecond
	want := []time.Duration{250 * ms, 500 * ms, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("delays = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays = %v, want %v", got, want)
		}
	}
	p.Reset()
	if d := p.NextBackOff(); d != 250*ms {
		t.Fatalf("after Reset the first delay is %v, want 250ms", d)
	}
}
