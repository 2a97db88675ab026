package rtfs

import (
	"errors"
	"math"
	"sort"
	"strings"
	"testing"
)

// callBuiltin runs the core builtin name on args with th.
func callBuiltin(t *testing.T, th *Thread, name string, args ...Value) (Value, error) {
	t.Helper()
	b := lookupBuiltin(name)
	if b == nil {
		t.Fatalf("no builtin %q", name)
	}
	return b.call(th, args)
}

// TestBuiltinsNeverPanic calls every core builtin with every combination
// of up to three awkward arguments: each call returns a value or an error
// that names the builtin, and never panics.
func TestBuiltinsNeverPanic(t *testing.T) {
	samples := []Value{
		Nil, True, Int(0), Int(-1), Int(math.MaxInt64), Float(math.NaN()), Float(-0.5),
		String(""), String("héllo"), Keyword("k"), Symbol("s"),
		NewList(), NewList(Int(1), Int(2)), NewVector(), NewVector(Int(3), String("x")),
		MapOf(), MapOf(Keyword("k"), Int(1)), NewSet(Int(1)), lookupBuiltin("inc"),
	}
	names := make([]string, 0, len(coreBuiltins))
	for name := range coreBuiltins {
		names = append(names, name)
	}
	sort.Strings(names)
	th := NewThread(Limits{MaxCollectionSize: 1000})
	var args []Value
	var try func(name string, depth int)
	try = func(name string, depth int) {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("(%s %v) panicked: %v", name, args, r)
				}
			}()
			v, err := lookupBuiltin(name).call(th, args)
			if err == nil && v == nil {
				t.Fatalf("(%s %v) returned no value and no error", name, args)
			}
			// A bare builtin's errors name it themselves or are Java's
			// (Integer/parseInt: For input string: "x").
			if err != nil && !lookupBuiltin(name).bare && !strings.HasPrefix(err.Error(), name+": ") {
				t.Fatalf("(%s %v) error %q does not name the builtin", name, args, err)
			}
		}()
		if depth == 3 {
			return
		}
		choices := samples
		if depth == 2 { // the third argument: a smaller, still awkward set
			choices = []Value{Nil, Int(-1), Int(math.MaxInt64), Float(math.NaN()), String("héllo"),
				NewVector(Int(3), String("x")), MapOf(Keyword("k"), Int(1))}
		}
		for _, s := range choices {
			args = append(args, s)
			try(name, depth+1)
			args = args[:len(args)-1]
		}
	}
	for _, name := range names {
		try(name, 0)
	}
}

func TestBuiltinCollectionSizeLimit(t *testing.T) {
	th := NewThread(Limits{MaxCollectionSize: 10})
	big := vectorOfLen(10)
	cases := []struct {
		name string
		args []Value
	}{
		{"range", []Value{Int(11)}},
		{"range", []Value{Int(0), Int(math.MaxInt64)}},
		{"range", []Value{Float(0), Float(1), Float(1e-12)}},
		{"conj", []Value{big, Int(1)}},
		{"vector", []Value{Int(1), Int(2), Int(3), Int(4), Int(5), Int(6), Int(7), Int(8), Int(9), Int(10), Int(11)}},
		{"concat", []Value{big, big}},
		{"into", []Value{big, NewVector(Int(1))}},
		{"assoc", []Value{big, Int(10), Nil}},
		{"str", []Value{String("0123456789"), String("x")}},
		{"split", []Value{String("a,b,c,d,e,f,g,h,i,j,k"), String(",")}},
	}
	for _, c := range cases {
		_, err := callBuiltin(t, th, c.name, c.args...)
		var le *LimitError
		if !errors.As(err, &le) || le.Limit != LimitCollectionSize {
			t.Errorf("(%s ...) with a limit of 10: err = %v, want a collection size LimitError", c.name, err)
		}
	}
	if v, err := callBuiltin(t, th, "range", Int(10)); err != nil || v.(*List).Len() != 10 {
		t.Errorf("(range 10) at the limit = %v, %v", v, err)
	}
}

func TestBuiltinArity(t *testing.T) {
	cases := map[string]string{
		"count":        "count: expected 1 argument, got 0",
		"assoc":        "assoc: expected at least 3 arguments, got 0",
		"subs":         "subs: expected 2 to 3 arguments, got 0",
		"string-upper": "string-upper: expected 1 argument, got 0",
	}
	for name, want := range cases {
		_, err := callBuiltin(t, nil, name)
		if err == nil || err.Error() != want {
			t.Errorf("(%s) error = %v, want %q", name, err, want)
		}
	}
}

func TestNewBuiltin(t *testing.T) {
	cause := errors.New("boom")
	b := NewBuiltin("host/f", func(_ *Thread, args []Value) (Value, error) {
		if len(args) == 0 {
			return nil, cause
		}
		return args[0], nil
	})
	if b.Name() != "host/f" || b.Kind().String() != "fn" || b.String() != "#<builtin host/f>" {
		t.Fatalf("builtin describes itself as %s %s %s", b.Name(), b.Kind(), b)
	}
	if v, err := b.call(nil, []Value{Int(4)}); err != nil || v != Int(4) {
		t.Fatalf("call = %v, %v", v, err)
	}
	_, err := b.call(nil, nil)
	if !errors.Is(err, cause) || err.Error() != "host/f: boom" {
		t.Fatalf("error = %v, want host/f: boom wrapping the cause", err)
	}
	if lookupBuiltin("host/f") != nil || lookupBuiltin("no-such-fn") != nil {
		t.Fatal("lookupBuiltin found a name that is not in the core library")
	}
}

func TestBuiltinResults(t *testing.T) {
	m := MapOf(Keyword("a"), Int(1))
	cases := []struct {
		name string
		args []Value
		want Value
	}{
		{"+", []Value{Int(1), Float(0.5)}, Float(1.5)},
		{"/", []Value{Int(7), Int(2)}, Float(3.5)},
		{"/", []Value{Int(math.MinInt64), Int(2)}, Int(math.MinInt64 / 2)},
		{"mod", []Value{Int(-7), Int(3)}, Int(2)},
		{"mod", []Value{Float(-7), Int(3)}, Float(2)},
		{"rem", []Value{Int(-7), Int(3)}, Int(-1)},
		{"quot", []Value{Float(7.5), Int(2)}, Float(3)},
		{"quot", []Value{Int(math.MinInt64), Int(-1)}, nil},
		{"max", []Value{Int(1), Float(math.NaN()), Int(3)}, nil},
		{"str", []Value{Nil, String("a"), Keyword("b"), NewVector(String("c"))}, String(`a:b["c"]`)},
		{"get", []Value{m, Keyword("a")}, Int(1)},
		{"assoc", []Value{Nil, Keyword("a"), Int(1)}, m},
		{"conj", []Value{Nil, Int(1)}, NewList(Int(1))},
		{"count", []Value{Nil}, Int(0)},
		{"first", []Value{Nil}, Nil},
		{"get", []Value{Nil, Keyword("k")}, Nil},
		{"keyword", []Value{String("x")}, Keyword("x")},
		{"parse-int", []Value{String("12a")}, Nil},
		{"frequencies", []Value{NewVector(Int(1), Int(1), Int(2))}, MapOf(Int(1), Int(2), Int(2), Int(1))},
	}
	for _, c := range cases {
		got, err := callBuiltin(t, nil, c.name, c.args...)
		switch {
		case c.want == nil && c.name == "max":
			if err != nil || !math.IsNaN(float64(got.(Float))) {
				t.Errorf("(max 1 NaN 3) = %v, %v; want NaN", got, err)
			}
		case c.want == nil:
			if err == nil {
				t.Errorf("(%s %v) = %v, want an error", c.name, c.args, got)
			}
		case err != nil || !Equal(got, c.want) || got.Kind() != c.want.Kind():
			t.Errorf("(%s %v) = %v, %v; want %v", c.name, c.args, got, err, c.want)
		}
	}
}

func TestSeqResultsShareStructure(t *testing.T) {
	v := vectorOfLen(100_000)
	r, err := callBuiltin(t, nil, "rest", v)
	if err != nil {
		t.Fatal(err)
	}
	l := r.(*List)
	if l.vec != v || l.Len() != 99_999 || l.First() != Int(1) {
		t.Fatal("rest of a vector did not return an O(1) view")
	}
	d, _ := callBuiltin(t, nil, "drop", Int(50_000), l)
	if d.(*List).vec != v || d.(*List).First() != Int(50_001) {
		t.Fatal("drop of a view did not stay a view")
	}
	back, _ := callBuiltin(t, nil, "vec", listView(v, 0))
	if back != v {
		t.Fatal("vec of a full view copied the vector")
	}
}
