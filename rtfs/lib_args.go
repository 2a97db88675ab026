package rtfs

import (
	"errors"
	"fmt"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// Argument helpers shared by the core library. Their errors do not name
// the function: (*Builtin).call prefixes the name.

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

// toCount returns v as a non-negative int that fits an int (counts and
// indexes); a negative count is clamped to 0 when clamp is set.
func toCount(i int, v Value, clamp bool) (int, error) {
	n, err := toInt(i, v)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		if clamp {
			return 0, nil
		}
		return 0, fmt.Errorf("argument %d: expected a non-negative int, got %d", i, n)
	}
	if n > int64(maxInt) {
		n = int64(maxInt)
	}
	return int(n), nil
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
