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

func TestClosureMayKeepParam(t *testing.T) {
	p := mustCompile(t, `
(defn reads [s c m] (let [rs (conj (get s :readings) (get c :temp))] {:state (assoc s :readings rs) :output (count rs)}))
(defn kw [s c] (+ (:a c) (:b c 0)))
(defn defaults [s c] (get c :a 5))
(defn has [s c] (if (contains? c :a) (get-in s [:x]) 0))
(defn counts [s c] (count c))
(defn destructures [s {:keys [a b]}] (+ a b))
(defn aliased [s c] (let [x c y x] (get y :a)))
(defn ignores [s c] s)
(defn returns [s c] c)
(defn stores [s c] (assoc s :last c))
(defn conjs [s c] (conj s c))
(defn in-output [s c] {:state s :output c})
(defn passes [s c] (identity c))
(defn get-in-empty [s c] (get-in c []))
(defn captures [s c] (fn [] c))
(defn as-key [s c] (get s c))
(defn as-default [s c] (get s :a c))
(defn or-default [s c] (or c s))
(defn aliased-kept [s c] (let [x c] {:state x}))
(defn callee [s c] (c :a))
(defn branch-callee [s c f] ((if s f :a) c))
(defn thrown [s c] (throw c))
(defn recurs [s c] (if (> s 3) (get c :a) (recur (inc s) c)))
(defn swaps [s c] (if (map? s) s (recur c s)))
(defn multi ([s c] (get c :a)) ([s c m] (get c :a)))
(defn rest [s c & m] (get c :a))`)
	g := mustRun(t, NewThread(Limits{}), p).Globals
	tests := []struct {
		name string
		i    int
		want bool
	}{
		{"reads", 1, false}, {"reads", 0, true}, {"reads", 2, false},
		{"kw", 1, false}, {"defaults", 1, false}, {"has", 1, false}, {"counts", 1, false},
		{"destructures", 1, false}, {"aliased", 1, false}, {"ignores", 1, false},
		{"returns", 1, true}, {"stores", 1, true}, {"conjs", 1, true}, {"in-output", 1, true},
		{"passes", 1, true}, {"get-in-empty", 1, true}, {"captures", 1, true},
		{"as-key", 1, true}, {"as-default", 1, true}, {"or-default", 1, true},
		{"aliased-kept", 1, true}, {"callee", 1, true}, {"branch-callee", 1, true},
		{"thrown", 1, true}, {"recurs", 1, false}, {"swaps", 1, true},
		{"multi", 1, true}, {"rest", 1, true}, {"reads", 3, true}, {"reads", -1, true},
	}
	for _, tt := range tests {
		v, _ := g.Get(tt.name)
		if got := v.(*Closure).MayKeepParam(tt.i); got != tt.want {
			t.Errorf("%s.MayKeepParam(%d) = %v, want %v", tt.name, tt.i, got, tt.want)
		}
	}
}
