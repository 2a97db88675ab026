package rtfs

import (
	"errors"
	"testing"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// TestUnpackArgs checks each destination type of unpackArgs: what it
// accepts, how it converts, and the error that names the argument.
func TestUnpackArgs(t *testing.T) {
	var (
		v     Value
		i64   int64
		n     int
		f     float64
		num   Value
		s     string
		k     Keyword
		m     *Map
		vec   *Vector
		elems []Value
		more  []Value
	)
	args := []Value{Keyword("any"), Int(-3), Int(-5), Int(2), Float(1.5), String("txt"), Keyword("k"),
		MapOf(Keyword("a"), Int(1)), NewVector(Int(1)), NewList(Int(7), Int(8)), Nil, Int(9), Int(10)}
	err := unpackArgs(nil, args, &v, &i64, &n, &f, number(&num), &s, &k, &m, &vec, &elems, orNil(&s), rest(&more))
	if err != nil {
		t.Fatal(err)
	}
	if v != Keyword("any") || i64 != -3 || n != 0 || f != 2 || num != Float(1.5) || s != "txt" || k != "k" ||
		m.Len() != 1 || vec.Len() != 1 || len(elems) != 2 || elems[1] != Int(8) || len(more) != 2 || more[1] != Int(10) {
		t.Errorf("unpacked %v %v %v %v %v %q %v %v %v %v %v", v, i64, n, f, num, s, k, m, vec, elems, more)
	}

	var g Value
	inc := lookupBuiltin("inc")
	if err := unpackArgs(nil, []Value{inc}, fn(&g)); err != nil || g != inc {
		t.Errorf("fn: %v %v", g, err)
	}

	// Optional parameters keep their defaults.
	end := int64(-1)
	if err := unpackArgs(nil, []Value{String("a")}, &s, &end); err != nil || s != "a" || end != -1 {
		t.Errorf("optional: %q %d %v", s, end, err)
	}

	for _, c := range []struct {
		args []Value
		dst  []any
		want string
		kind string
	}{
		{[]Value{String("a"), String("b")}, []any{&s, &i64}, `argument 2: expected an int, got string "b"`, compile.KindType},
		{[]Value{Nil}, []any{&f}, "argument 1: expected a number, got nil", compile.KindNil},
		{[]Value{Int(1), Keyword("x")}, []any{&v, number(&num)}, "argument 2: expected a number, got keyword :x", compile.KindType},
		{[]Value{Int(1)}, []any{&s}, "argument 1: expected a string, got int 1", compile.KindType},
		{[]Value{Int(1)}, []any{orNil(&s)}, "argument 1: expected a string, got int 1", compile.KindType},
		{[]Value{String("a")}, []any{&k}, `argument 1: expected a keyword, got string "a"`, compile.KindType},
		{[]Value{NewVector()}, []any{&m}, "argument 1: expected a map, got vector []", compile.KindType},
		{[]Value{Int(1), MapOf()}, []any{&v, &vec}, "argument 2: expected a vector, got map {}", compile.KindType},
		{[]Value{Int(5)}, []any{&elems}, "argument 1: expected a collection, got int 5", compile.KindType},
		{[]Value{Int(1), Keyword("f")}, []any{&v, fn(&num)}, "argument 2: expected a function, got keyword :f", compile.KindType},
		{[]Value{NewVector()}, []any{new(*Set)}, "argument 1: expected a set, got vector []", compile.KindType},
		{[]Value{Int(1), Int(2)}, []any{&v}, "internal error: 2 arguments unpacked into 1 variables", ""},
		{[]Value{Int(1)}, []any{new(bool)}, "internal error: argument 1 has a destination unpackArgs does not know", ""},
	} {
		err := unpackArgs(nil, c.args, c.dst...)
		if err == nil || err.Error() != c.want {
			t.Errorf("unpack %v: error %v, want %q", c.args, err, c.want)
			continue
		}
		var ke *kindError
		if c.kind != "" && (!errors.As(err, &ke) || ke.kind != c.kind) {
			t.Errorf("unpack %v: error %v has not the kind %s", c.args, err, c.kind)
		}
	}
}
