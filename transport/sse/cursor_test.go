package sse

import "testing"

func TestCursorRoundTrip(t *testing.T) {
	tests := []struct {
		cursor string
		want   position
	}{
		{"", position{}},
		{"41", position{base: "41"}},
		{"41+3", position{base: "41", k: 3}},
		{"+2", position{k: 2}},
		{"a+b+12", position{base: "a+b", k: 12}},
		// Not canonical positive numbers after '+': plain server ids.
		{"a+0", position{base: "a+0"}},
		{"a+01", position{base: "a+01"}},
		{"a+", position{base: "a+"}},
		{"a+-1", position{base: "a+-1"}},
		{"a+x", position{base: "a+x"}},
		{"a+99999999999999999999", position{base: "a+99999999999999999999"}},
	}
	for _, tt := range tests {
		got := parseCursor(tt.cursor)
		if got != tt.want {
			t.Errorf("parseCursor(%q) = %+v, want %+v", tt.cursor, got, tt.want)
		}
		if got.cursor() != tt.cursor {
			t.Errorf("parseCursor(%q).cursor() = %q", tt.cursor, got.cursor())
		}
	}
}

func TestReplayFilter(t *testing.T) {
	f := newReplayFilter(position{base: "5", k: 2})
	steps := []struct {
		p    position
		seen bool
	}{
		{position{base: "5"}, true},       // an off-by-one resend of 5
		{position{base: "5", k: 1}, true}, // delivered before
		{position{base: "5", k: 2}, true},
		{position{base: "5", k: 3}, false}, // new
		{position{base: "5", k: 1}, false}, // the filter has ended for good
	}
	for i, s := range steps {
		if got := f.seen(s.p); got != s.seen {
			t.Fatalf("step %d: seen(%+v) = %v, want %v", i, s.p, got, s.seen)
		}
	}
	start := newReplayFilter(position{})
	if start.seen(position{}) {
		t.Fatal("a filter from the start of the stream dropped a chunk")
	}
}
