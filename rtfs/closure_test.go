package rtfs

import "testing"

func TestClosureAccepts(t *testing.T) {
	p := mustCompile(t, `
(defn three [s c m] s)
(defn one [x] x)
(defn rest-after-two [a b & more] a)
(defn multi ([a] a) ([a b c] a))
(def anon (fn [& xs] xs))`)
	g := mustRun(t, NewThread(Limits{}), p).Globals
	tests := []struct {
		name string
		n    int
		want bool
	}{
		{"three", 3, true}, {"three", 2, false}, {"three", 4, false},
		{"one", 3, false}, {"one", 1, true},
		{"rest-after-two", 1, false}, {"rest-after-two", 2, true}, {"rest-after-two", 3, true},
		{"multi", 1, true}, {"multi", 2, false}, {"multi", 3, true},
		{"anon", 0, true}, {"anon", 3, true},
	}
	for _, tt := range tests {
		v, ok := g.Get(tt.name)
		if !ok {
			t.Fatalf("%s is not defined", tt.name)
		}
		if got := v.(*Closure).Accepts(tt.n); got != tt.want {
			t.Errorf("%s.Accepts(%d) = %v, want %v", tt.name, tt.n, got, tt.want)
		}
	}
}
