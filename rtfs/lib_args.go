package rtfs

import (
	"errors"
	"fmt"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// How a builtin reads its arguments. The table gives each builtin its
// arity ((*Builtin).call checks it before the builtin runs); the builtin
// then declares the type of each argument by the Go variable it unpacks it
// into, as starlark-go's UnpackPositionalArgs does:
//
//	var s string
//	start, end := 0, -1
//	if err := unpackArgs(th, args, &s, &start, &end); err != nil {
//		return nil, err
//	}
//
// Each check lives once, in the to* function of its destination type
// below, and every error names the argument by its position and says what
// was expected and what was given ("argument 2: expected an int, got
// string \"a\""); (*Builtin).call prefixes the builtin's name.
// unpackArgs allocates nothing: its destinations stay on the caller's
// stack.

// unpackArgs stores args[i] into the variable dst[i] points to, checked
// and converted by the variable's type:
//
//	*Value      any value
//	*int64      an Int ("an int")
//	*int        a count: an Int, a negative one as 0 ("an int")
//	*float64    a number, Int or Float, as a float ("a number")
//	number(p)   a number, Int or Float, kept as the Value it is ("a number")
//	fn(p)       a function, a closure or a builtin ("a function")
//	*string     a String's text ("a string")
//	*Keyword    a Keyword ("a keyword")
//	**Map       a map ("a map")
//	**Vector    a vector ("a vector")
//	**Set       a set ("a set")
//	**Regex     a regex ("a regex (#\"...\" or re-pattern)")
//	*[]Value    the elements of a collection, charged to th as seqSlice
//	            does ("a collection"; a lazy sequence asks for its
//	            elements to be computed first)
//	orNil(p)    nil leaves *p as it is, anything else unpacks as p
//	rest(p)     (last only) *p is the remaining arguments, unchecked
//
// A destination past the last argument keeps its value: optional
// parameters are declared by their defaults. dst must have one entry per
// parameter the builtin's arity allows (or end with rest): a missing one is
// a programming error reported as an internal error.
func unpackArgs(th *Thread, args []Value, dst ...any) error {
	for i, a := range args {
		if i >= len(dst) {
			return fmt.Errorf("internal error: %d arguments unpacked into %d variables", len(args), len(dst))
		}
		// The fast path: an argument of the type its destination takes
		// (a string into a *string, an int into an *int64 or an *int, a
		// number into a *float64, anything into a *Value) is stored here,
		// in a loop small enough to stay in registers; every other
		// argument, and every error, goes through unpackArg.
		switch p := dst[i].(type) {
		case *Value:
			*p = a
			continue
		case *string:
			if s, ok := a.(String); ok {
				*p = string(s)
				continue
			}
		case *int64:
			if x, ok := a.(Int); ok {
				*p = int64(x)
				continue
			}
		case *float64:
			switch x := a.(type) {
			case Float:
				*p = float64(x)
				continue
			case Int:
				*p = float64(x)
				continue
			}
		case *int:
			if x, ok := a.(Int); ok {
				*p = int(min(max(x, 0), Int(maxInt)))
				continue
			}
		}
		if rest, err := unpackArg(th, args, i, dst[i]); rest || err != nil {
			return err
		}
	}
	return nil
}

// unpackArg is unpackArgs for argument i into d, the conversions and the
// errors; rest is true when d took all the remaining arguments.
func unpackArg(th *Thread, args []Value, i int, d any) (rest bool, err error) {
	a := args[i]
	if n, ok := d.(nilOr); ok {
		if a == Nil {
			return false, nil
		}
		d = n.p
	}
	// One switch, the conversions inlined.
	switch p := d.(type) {
	case *Value:
		*p = a
	case *int64:
		*p, err = toInt(i+1, a)
	case *float64:
		*p, err = toFloat(i+1, a)
	case *string:
		*p, err = toText(i+1, a)
	case *int:
		*p, err = toCount(i+1, a)
	case numberDst:
		*p.p, err = toNumber(i+1, a)
	case fnDst:
		*p.p, err = toFn(i+1, a)
	case *[]Value:
		*p, err = toElems(th, i+1, a)
	case restArgs:
		*p.p = args[i:]
		return true, nil
	case *Keyword:
		*p, err = toKeyword(i+1, a)
	case **Map:
		*p, err = toMap(i+1, a)
	case **Vector:
		*p, err = toVector(i+1, a)
	case **Set:
		*p, err = toSet(i+1, a)
	case **Regex:
		*p, err = toRegex(i+1, a)
	default:
		return false, fmt.Errorf("internal error: argument %d has a destination unpackArgs does not know", i+1)
	}
	return false, err
}

// A nilOr is a destination that takes nil as an absent argument (orNil).
type nilOr struct{ p any }

// orNil is the destination p, but an argument nil leaves *p as it is.
func orNil(p any) any { return nilOr{p} }

// A restArgs is the destination of the remaining arguments (rest).
type restArgs struct{ p *[]Value }

// rest is the last destination of unpackArgs: *p is set to the arguments
// from its position on (it aliases the builtin's args: the builtin must not
// keep it).
func rest(p *[]Value) any { return restArgs{p} }

// A numberDst is the destination of a number kept as a Value (number).
type numberDst struct{ p *Value }

// number is the destination p of a number: an Int or a Float, kept as it is.
func number(p *Value) any { return numberDst{p} }

// A fnDst is the destination of a function (fn).
type fnDst struct{ p *Value }

// fn is the destination p of a function: a closure or a builtin.
func fn(p *Value) any { return fnDst{p} }

// The checks, one per type of argument. i is the argument's position
// (1-based) in the error.

// typeError reports an argument of the wrong type: "expected a number, got
// string \"a\"".
// Its kind is :nil when v is nil (Clojure raises a NullPointerException),
// else :type.
func typeError(want string, v Value) error {
	return withKind(typeKind(v), fmt.Errorf("expected %s, got %s", want, describe(v)))
}

// argTypeError is typeError for a numbered argument (1-based).
func argTypeError(i int, want string, v Value) error {
	return withKind(typeKind(v), fmt.Errorf("argument %d: expected %s, got %s", i, want, describe(v)))
}

func typeKind(v Value) string {
	if v == Nil {
		return compile.KindNil
	}
	return compile.KindType
}

var errIntOverflow error = withKind(compile.KindArithmetic, errors.New("integer overflow"))

// indexError is an index out of bounds (Clojure's IndexOutOfBoundsException).
func indexError(format string, args ...any) error {
	return withKind(compile.KindIndex, fmt.Errorf(format, args...))
}

// toInt returns v as an int64, or an error if v is not an Int.
func toInt(i int, v Value) (int64, error) {
	if x, ok := v.(Int); ok {
		return int64(x), nil
	}
	return 0, argTypeError(i, "an int", v)
}

// toCount returns an Int as a count (a size, an index): a negative one is
// 0, one past the largest int is the largest int.
func toCount(i int, v Value) (int, error) {
	n, err := toInt(i, v)
	if err != nil {
		return 0, err
	}
	return int(min(max(n, 0), int64(maxInt))), nil
}

const maxInt = int(^uint(0) >> 1)

// toText returns the contents of a String argument.
func toText(i int, v Value) (string, error) {
	if s, ok := v.(String); ok {
		return string(s), nil
	}
	return "", argTypeError(i, "a string", v)
}

// isNumber reports whether v is an Int or a Float.
func isNumber(v Value) bool {
	switch v.(type) {
	case Int, Float:
		return true
	}
	return false
}

// toFloat returns a number as a float64.
func toFloat(i int, v Value) (float64, error) {
	switch x := v.(type) {
	case Int:
		return float64(x), nil
	case Float:
		return float64(x), nil
	}
	return 0, argTypeError(i, "a number", v)
}

// toNumber returns v if it is a number (an Int or a Float).
func toNumber(i int, v Value) (Value, error) {
	if isNumber(v) {
		return v, nil
	}
	return nil, argTypeError(i, "a number", v)
}

// toFn returns v if it is a function (isFn).
func toFn(i int, v Value) (Value, error) {
	if isFn(v) {
		return v, nil
	}
	return nil, argTypeError(i, "a function", v)
}

// toKeyword returns v if it is a Keyword.
func toKeyword(i int, v Value) (Keyword, error) {
	if k, ok := v.(Keyword); ok {
		return k, nil
	}
	return "", argTypeError(i, "a keyword", v)
}

// toMap returns v if it is a map.
func toMap(i int, v Value) (*Map, error) {
	if m, ok := v.(*Map); ok {
		return m, nil
	}
	return nil, argTypeError(i, "a map", v)
}

// toVector returns v if it is a vector.
func toVector(i int, v Value) (*Vector, error) {
	if x, ok := v.(*Vector); ok {
		return x, nil
	}
	return nil, argTypeError(i, "a vector", v)
}

// toSet returns v if it is a set.
func toSet(i int, v Value) (*Set, error) {
	if s, ok := v.(*Set); ok {
		return s, nil
	}
	return nil, argTypeError(i, "a set", v)
}

// toRegex returns v if it is a regex.
func toRegex(i int, v Value) (*Regex, error) {
	if re, ok := v.(*Regex); ok {
		return re, nil
	}
	return nil, argTypeError(i, "a regex (#\"...\" or re-pattern)", v)
}

// toElems returns the elements of a collection (seqSlice): a fresh slice
// the caller owns, charged to th.
func toElems(th *Thread, i int, v Value) ([]Value, error) {
	elems, err := seqSlice(th, v)
	if err != nil {
		return nil, seqErr(err, argTypeError(i, "a collection", v))
	}
	return elems, nil
}
