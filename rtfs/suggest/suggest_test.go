package suggest

import "testing"

func TestClosest(t *testing.T) {
	names := []string{"weather.monitor.v1", "counter.v1", "news.digest.v1", "initial-state", "endpoint"}
	for _, tc := range []struct {
		word, want string
		ok         bool
	}{
		{"wether.monitor.v1", "weather.monitor.v1", true},
		{"initial_state", "initial-state", true},
		{"endpiont", "endpoint", true},
		{"Counter.V1", "counter.v1", true},
		{"stream", "", false},
		{"zzzzzzzzzzzzz", "", false},
		{"endpoint", "", false}, // the word itself is no suggestion
	} {
		got, ok := Closest(tc.word, names)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Closest(%q) = %q %v, want %q %v", tc.word, got, ok, tc.want, tc.ok)
		}
	}
	// Short words get a suggestion only for a missing, extra or swapped
	// letter: one substitution away is most other short names.
	core := []string{"*", "num", "not", "assoc", "map", "first", "count", "get", "nth"}
	for _, tc := range []struct {
		word, want string
		ok         bool
	}{
		{"y", "", false},
		{"sum", "", false},
		{"now", "", false},
		{"asoc", "assoc", true},
		{"mpa", "map", true},
		{"frist", "first", true},
		{"cont", "count", true},
		{"gett", "get", true},
		{"nht", "nth", true},
		{"nt", "", false},
	} {
		got, ok := Closest(tc.word, core)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Closest(%q) = %q %v, want %q %v", tc.word, got, ok, tc.want, tc.ok)
		}
	}
}
