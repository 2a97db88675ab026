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

func TestClosureReadsParam(t *testing.T) {
	p := mustCompile(t, `
(defn ignores [s c m] (assoc s :n (:n c)))
(defn reads [s c m] (:seq m))
(defn captures [s c m] ((fn [] m)))
(defn destructures [s c {:keys [seq]}] seq)
(defn loops [s c m] (if (> s 3) s (recur (inc s) c m)))
(defn loops-reading [s c m] (if (> s 3) m (recur (inc s) c m)))
(defn shadowed [s c m] (let [m 1] m))
(defn multi ([s c] s) ([s c m] s))
(defn rest [s c & m] s)`)
	g := mustRun(t, NewThread(Limits{}), p).Globals
	tests := []struct {
		name string
		i    int
		want bool
	}{
		{"ignores", 0, true}, {"ignores", 1, true}, {"ignores", 2, false},
		{"reads", 2, true}, {"reads", 0, false},
		{"captures", 2, true},
		{"destructures", 2, true},
		{"loops", 2, true}, // recur passes m on: it is read
		{"loops-reading", 2, true},
		{"shadowed", 2, false},
		{"multi", 2, true}, {"rest", 2, true}, {"ignores", 3, true},
	}
	for _, tt := range tests {
		v, _ := g.Get(tt.name)
		if got := v.(*Closure).ReadsParam(tt.i); got != tt.want {
			t.Errorf("%s.ReadsParam(%d) = %v, want %v", tt.name, tt.i, got, tt.want)
		}
	}
}
