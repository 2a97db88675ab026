package rtfs

import (
	"errors"
	"fmt"
	"math"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// clojure.math (also math/), the unchecked arithmetic and the functions
// whose names end in ' (+' inc' ...). clojure.math's functions are
// java.lang.Math's: they take numbers as doubles and return doubles, but
// for round (a long, half up, NaN 0, clamped as Java's Math.round), the
// floor-div and floor-mod of longs and the *-exact functions (longs whose
// overflow is an error). clojure.math/random is left out: it would give
// another value on a replay. PI and E are constants (compile.Constant).

func addMathBuiltins(t builtinTable) {
	unary := map[string]func(float64) float64{
		"sin": math.Sin, "cos": math.Cos, "tan": math.Tan, "asin": math.Asin, "acos": math.Acos,
		"atan": math.Atan, "sinh": math.Sinh, "cosh": math.Cosh, "tanh": math.Tanh,
		"expm1": math.Expm1, "log1p": math.Log1p, "cbrt": math.Cbrt, "rint": math.RoundToEven,
		"to-radians": func(x float64) float64 { return x / 180 * math.Pi },
		"to-degrees": func(x float64) float64 { return x * 180 / math.Pi },
		"signum":     signum,
		"ulp":        ulp,
		"next-up":    func(x float64) float64 { return math.Nextafter(x, math.Inf(1)) },
		"next-down":  func(x float64) float64 { return math.Nextafter(x, math.Inf(-1)) },
	}
	for name, f := range unary {
		t.add("clojure.math/"+name, 1, 1, floatFn(f))
	}
	binary := map[string]func(float64, float64) float64{
		"atan2": math.Atan2, "hypot": math.Hypot, "IEEE-remainder": math.Remainder,
		"copy-sign": math.Copysign, "next-after": math.Nextafter,
	}
	for name, f := range binary {
		t.add("clojure.math/"+name, 2, 2, floatFn2(f))
	}
	t.add("clojure.math/round", 1, 1, builtinJavaRound)
	t.add("clojure.math/get-exponent", 1, 1, func(th *Thread, args []Value) (Value, error) {
		var x float64
		if err := unpackArgs(th, args, &x); err != nil {
			return nil, err
		}
		return Int(getExponent(x)), nil
	})
	t.add("clojure.math/scalb", 2, 2, func(th *Thread, args []Value) (Value, error) {
		var x float64
		var n int64
		if err := unpackArgs(th, args, &x, &n); err != nil {
			return nil, err
		}
		return Float(math.Ldexp(x, int(max(min(n, 2100), -2100)))), nil
	})
	t.add("clojure.math/floor-div", 2, 2, longFn2(floorDiv))
	t.add("clojure.math/floor-mod", 2, 2, longFn2(floorMod))
	t.add("clojure.math/add-exact", 2, 2, longFn2(func(a, b int64) (Value, error) { return intArith(opAdd, a, b) }))
	t.add("clojure.math/subtract-exact", 2, 2, longFn2(func(a, b int64) (Value, error) { return intArith(opSub, a, b) }))
	t.add("clojure.math/multiply-exact", 2, 2, longFn2(func(a, b int64) (Value, error) { return intArith(opMul, a, b) }))
	t.add("clojure.math/increment-exact", 1, 1, longFn1(func(a int64) (Value, error) { return intArith(opAdd, a, 1) }))
	t.add("clojure.math/decrement-exact", 1, 1, longFn1(func(a int64) (Value, error) { return intArith(opSub, a, 1) }))
	t.add("clojure.math/negate-exact", 1, 1, longFn1(func(a int64) (Value, error) { return intArith(opSub, 0, a) }))
	// The ones that exist under a short core name too (floor, sqrt...)
	// are aliases of it; math/ is the short alias of every one.
	for _, name := range []string{"floor", "ceil", "sqrt", "pow", "exp", "log10"} {
		t.alias("clojure.math/"+name, name)
	}
	for name, b := range t {
		if rest, ok := cutPrefix(name, "clojure.math/"); ok && t["math/"+rest] == nil {
			root := name
			if b.aliasOf != "" {
				root = b.aliasOf
			}
			t.alias("math/"+rest, root)
		}
	}

	// Unchecked arithmetic wraps around on overflow, as Java's long
	// arithmetic; on floats it is the plain operation.
	t.add("unchecked-add", 2, 2, uncheckedFn2(func(a, b int64) int64 { return a + b }, opAdd))
	t.add("unchecked-subtract", 2, 2, uncheckedFn2(func(a, b int64) int64 { return a - b }, opSub))
	t.add("unchecked-multiply", 2, 2, uncheckedFn2(func(a, b int64) int64 { return a * b }, opMul))
	t.add("unchecked-inc", 1, 1, uncheckedFn1(func(a int64) int64 { return a + 1 }, 1))
	t.add("unchecked-dec", 1, 1, uncheckedFn1(func(a int64) int64 { return a - 1 }, -1))
	t.add("unchecked-negate", 1, 1, func(th *Thread, args []Value) (Value, error) {
		var x Value
		if err := unpackArgs(th, args, number(&x)); err != nil {
			return nil, err
		}
		if n, ok := x.(Int); ok {
			return -n, nil
		}
		return -x.(Float), nil
	})
	// The -int forms take ints (32 bits; a long out of that range is an
	// error, as Clojure's int cast) and wrap around at 32 bits.
	int2 := map[string]func(a, b int32) int32{
		"add":      func(a, b int32) int32 { return a + b },
		"subtract": func(a, b int32) int32 { return a - b },
		"multiply": func(a, b int32) int32 { return a * b },
	}
	for name, f := range int2 {
		t.add("unchecked-"+name+"-int", 2, 2, int32Fn(func(xs []int32) int32 { return f(xs[0], xs[1]) }))
	}
	int1 := map[string]func(a int32) int32{
		"inc":    func(a int32) int32 { return a + 1 },
		"dec":    func(a int32) int32 { return a - 1 },
		"negate": func(a int32) int32 { return -a },
	}
	for name, f := range int1 {
		t.add("unchecked-"+name+"-int", 1, 1, int32Fn(func(xs []int32) int32 { return f(xs[0]) }))
	}
	t.add("unchecked-int", 1, 1, func(_ *Thread, args []Value) (Value, error) {
		n, err := truncLong(args[0])
		if err != nil {
			return nil, err
		}
		return Int(int32(n)), nil
	})
	t.add("unchecked-long", 1, 1, func(_ *Thread, args []Value) (Value, error) {
		n, err := truncLong(args[0])
		return Int(n), err
	})
	t.add("unchecked-divide-int", 2, 2, longFn2(func(a, b int64) (Value, error) {
		if b == 0 {
			return nil, errDivByZero
		}
		if b == -1 {
			return Int(-a), nil // wraps for the smallest long, as Java
		}
		return Int(a / b), nil
	}))
	t.add("unchecked-remainder-int", 2, 2, longFn2(func(a, b int64) (Value, error) {
		if b == 0 {
			return nil, errDivByZero
		}
		if b == -1 {
			return Int(0), nil
		}
		return Int(a % b), nil
	}))

	// +' -' *' inc' dec' promote to a BigInt in Clojure when a long
	// overflows. RTFS has no big integers: they compute as + - * inc dec
	// and an overflow is an error that says so, never another value.
	for name, op := range map[string]arithOp{"+'": opAdd, "-'": opSub, "*'": opMul} {
		inner := t[name[:1]].impl
		t.add(name, t[name[:1]].minArgs, -1, promoting(inner, op))
	}
	t.add("inc'", 1, 1, promoting(t["inc"].impl, opAdd))
	t.add("dec'", 1, 1, promoting(t["dec"].impl, opSub))
}

var errNoBigInt = withKind(compile.KindArithmetic, errors.New("integer overflow: Clojure would promote to a BigInt, which RTFS does not have"))

func promoting(fn builtinFn, _ arithOp) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		v, err := fn(th, args)
		if errors.Is(err, errIntOverflow) {
			return nil, errNoBigInt
		}
		return v, err
	}
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return "", false
}

func floatFn2(f func(float64, float64) float64) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		var x, y float64
		if err := unpackArgs(th, args, &x, &y); err != nil {
			return nil, err
		}
		return Float(f(x, y)), nil
	}
}

func longFn1(f func(int64) (Value, error)) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		var a int64
		if err := unpackArgs(th, args, &a); err != nil {
			return nil, err
		}
		return f(a)
	}
}

func longFn2(f func(int64, int64) (Value, error)) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		var a, b int64
		if err := unpackArgs(th, args, &a, &b); err != nil {
			return nil, err
		}
		return f(a, b)
	}
}

func uncheckedFn2(f func(int64, int64) int64, op arithOp) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		if a, ok := args[0].(Int); ok {
			if b, ok := args[1].(Int); ok {
				return Int(f(int64(a), int64(b))), nil
			}
		}
		return arith(op, 2, args[0], args[1])
	}
}

func uncheckedFn1(f func(int64) int64, d int64) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		if a, ok := args[0].(Int); ok {
			return Int(f(int64(a))), nil
		}
		return arith(opAdd, 1, args[0], Int(d))
	}
}

// truncLong is a number as Java's (long) cast: a float truncated toward
// zero, NaN 0, clamped to the long range.
func truncLong(v Value) (int64, error) {
	switch x := v.(type) {
	case Int:
		return int64(x), nil
	case Float:
		return javaLong(math.Trunc(float64(x))), nil
	}
	return 0, typeError("a number", v)
}

// javaLong is Java's (long) of an integral double: NaN is 0, and values
// beyond the long range are its ends.
func javaLong(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// builtinJavaRound is Java's Math.round of a double: the closest long,
// ties toward positive infinity ((round -2.5) is -2), NaN 0, clamped to
// the long range. A long is itself.
func builtinJavaRound(th *Thread, args []Value) (Value, error) {
	var x Value
	if err := unpackArgs(th, args, number(&x)); err != nil {
		return nil, err
	}
	if n, ok := x.(Int); ok {
		return n, nil
	}
	f := float64(x.(Float))
	fl := math.Floor(f)
	if f-fl >= 0.5 {
		fl++
	}
	return Int(javaLong(fl)), nil
}

func signum(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return x // 0.0, -0.0 and NaN are themselves
}

func ulp(x float64) float64 {
	x = math.Abs(x)
	switch {
	case math.IsNaN(x):
		return x
	case math.IsInf(x, 0):
		return math.Inf(1)
	case x == math.MaxFloat64:
		return x - math.Nextafter(x, 0)
	}
	return math.Nextafter(x, math.Inf(1)) - x
}

// getExponent is Java's Math.getExponent: the unbiased exponent of x's
// binary form (1024 for NaN and the infinities, -1023 for zero and
// subnormals).
func getExponent(x float64) int64 {
	return int64((math.Float64bits(x)>>52)&0x7ff) - 1023
}

func floorDiv(a, b int64) (Value, error) {
	if b == 0 {
		return nil, errDivByZero
	}
	if a == math.MinInt64 && b == -1 {
		return Int(a), nil // Java's floorDiv wraps here
	}
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return Int(q), nil
}

func floorMod(a, b int64) (Value, error) {
	if b == 0 {
		return nil, errDivByZero
	}
	if b == -1 {
		return Int(0), nil
	}
	m := a % b
	if m != 0 && ((m < 0) != (b < 0)) {
		m += b
	}
	return Int(m), nil
}

// int32Fn takes ints that fit 32 bits (Clojure's int cast) and returns a
// 32-bit result.
func int32Fn(f func([]int32) int32) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		xs := make([]int32, len(args))
		for i, a := range args {
			n, err := toInt(i+1, a)
			if err != nil {
				return nil, err
			}
			if n != int64(int32(n)) {
				return nil, withKind(compile.KindArgument, fmt.Errorf("argument %d: value out of range for int: %d", i+1, n))
			}
			xs[i] = int32(n)
		}
		return Int(f(xs)), nil
	}
}
