package rtfs

import (
	"errors"
	"math"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// Arithmetic: + - * / mod rem quot inc dec max min abs avg. Ints stay ints
// (overflow is an error), any float operand makes the result a float, and
// (/ 7 2) is 3.5: int division yields an int only when it is exact.

func addNumBuiltins(t builtinTable) {
	t.add("+", 0, -1, func(_ *Thread, args []Value) (Value, error) { return foldArith(opAdd, Int(0), args) })
	t.add("*", 0, -1, func(_ *Thread, args []Value) (Value, error) { return foldArith(opMul, Int(1), args) })
	t.add("-", 1, -1, func(_ *Thread, args []Value) (Value, error) {
		if len(args) == 1 {
			if f, ok := args[0].(Float); ok {
				return -f, nil // (- 0.0) is -0.0, as in Clojure
			}
			return arith(opSub, 1, Int(0), args[0])
		}
		return foldArith(opSub, args[0], args[1:])
	})
	t.add("/", 1, -1, func(_ *Thread, args []Value) (Value, error) {
		if len(args) == 1 {
			return arith(opDiv, 1, Int(1), args[0])
		}
		return foldArith(opDiv, args[0], args[1:])
	})
	t.add("quot", 2, 2, intDivBuiltin(opQuot))
	t.add("rem", 2, 2, intDivBuiltin(opRem))
	t.add("mod", 2, 2, intDivBuiltin(opMod))
	t.add("inc", 1, 1, func(_ *Thread, args []Value) (Value, error) { return arith(opAdd, 1, args[0], Int(1)) })
	t.add("dec", 1, 1, func(_ *Thread, args []Value) (Value, error) { return arith(opSub, 1, args[0], Int(1)) })
	t.add("abs", 1, 1, builtinAbs)
	t.add("max", 1, -1, func(th *Thread, args []Value) (Value, error) { return extremum(th, args, 1) })
	t.add("min", 1, -1, func(th *Thread, args []Value) (Value, error) { return extremum(th, args, -1) })
	t.add("avg", 1, -1, builtinAvg)
}

type arithOp uint8

const (
	opAdd arithOp = iota
	opSub
	opMul
	opDiv
	opQuot
	opRem
	opMod
)

var errDivByZero error = withKind(compile.KindArithmetic, errors.New("divide by zero"))

// foldArith applies op left to right: acc op args[0] op args[1] ...
func foldArith(op arithOp, acc Value, args []Value) (Value, error) {
	var err error
	for i, a := range args {
		argNo := i + 1
		if op == opSub || op == opDiv {
			argNo = i + 2
		}
		if acc, err = arith(op, argNo, acc, a); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

// arith computes x op y; argNo numbers y in error messages (x is known
// to be a number unless argNo is 1).
func arith(op arithOp, argNo int, x, y Value) (Value, error) {
	if a, ok := x.(Int); ok {
		if b, ok := y.(Int); ok {
			return intArith(op, int64(a), int64(b))
		}
	}
	fx, err := toFloat(max(argNo-1, 1), x)
	if err != nil {
		return nil, err
	}
	fy, err := toFloat(argNo, y)
	if err != nil {
		return nil, err
	}
	return floatArith(op, fx, fy)
}

func intArith(op arithOp, a, b int64) (Value, error) {
	switch op {
	case opAdd:
		c := a + b
		if (c > a) != (b > 0) {
			return nil, errIntOverflow
		}
		return Int(c), nil
	case opSub:
		c := a - b
		if (c < a) != (b > 0) {
			return nil, errIntOverflow
		}
		return Int(c), nil
	case opMul:
		return mulInt(a, b)
	case opDiv:
		if b == 0 {
			return nil, errDivByZero
		}
		if a%b == 0 {
			if a == math.MinInt64 && b == -1 {
				return nil, errIntOverflow
			}
			return Int(a / b), nil
		}
		return Float(float64(a) / float64(b)), nil
	}
	return intDiv(op, a, b)
}

func mulInt(a, b int64) (Value, error) {
	if a == 0 || b == 0 {
		return Int(0), nil
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return nil, errIntOverflow
	}
	return Int(c), nil
}

// intDiv computes quot, rem and mod of ints. mod takes the sign of the
// divisor (Clojure), rem the sign of the dividend.
func intDiv(op arithOp, a, b int64) (Value, error) {
	if b == 0 {
		return nil, errDivByZero
	}
	if b == -1 {
		if op == opQuot {
			if a == math.MinInt64 {
				return nil, errIntOverflow
			}
			return Int(-a), nil
		}
		return Int(0), nil
	}
	switch op {
	case opQuot:
		return Int(a / b), nil
	case opRem:
		return Int(a % b), nil
	}
	m := a % b
	if m != 0 && (m < 0) != (b < 0) {
		m += b
	}
	return Int(m), nil
}

func floatArith(op arithOp, a, b float64) (Value, error) {
	switch op {
	case opAdd:
		return Float(a + b), nil
	case opSub:
		return Float(a - b), nil
	case opMul:
		return Float(a * b), nil
	case opDiv:
		return Float(a / b), nil
	}
	if b == 0 {
		return nil, errDivByZero
	}
	switch op {
	case opQuot:
		return Float(math.Trunc(a / b)), nil
	case opRem:
		return Float(math.Mod(a, b)), nil
	}
	m := math.Mod(a, b)
	if m != 0 && (m < 0) != (b < 0) {
		m += b
	}
	return Float(m), nil
}

func intDivBuiltin(op arithOp) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		if _, err := toNumber(1, args[0]); err != nil {
			return nil, err
		}
		return arith(op, 2, args[0], args[1])
	}
}

func builtinAbs(th *Thread, args []Value) (Value, error) {
	var x Value
	if err := unpackArgs(th, args, number(&x)); err != nil {
		return nil, err
	}
	n, ok := x.(Int)
	switch {
	case !ok:
		return Float(math.Abs(float64(x.(Float)))), nil
	case n == math.MinInt64:
		return nil, errIntOverflow
	case n < 0:
		return -n, nil
	}
	return n, nil
}

// numbersOf returns the numbers to aggregate: the arguments, or the
// elements of a single collection argument (nil counts as empty).
func numbersOf(th *Thread, args []Value) ([]Value, error) {
	if len(args) == 1 && !isNumber(args[0]) {
		elems, err := seqSlice(th, args[0])
		if err != nil {
			return nil, seqErr(err, typeError("numbers or a collection of numbers", args[0]))
		}
		args = elems
	}
	for i, a := range args {
		if _, err := toNumber(i+1, a); err != nil {
			return nil, err
		}
	}
	return args, nil
}

// extremum returns the largest (sign 1) or smallest (sign -1) number, the
// value itself (an int stays an int). NaN wins, as in math.Max. Of an
// empty collection it is nil.
func extremum(th *Thread, args []Value, sign int) (Value, error) {
	nums, err := numbersOf(th, args)
	if err != nil || len(nums) == 0 {
		return Nil, err
	}
	best := nums[0]
	for _, x := range nums[1:] {
		if f, ok := best.(Float); ok && math.IsNaN(float64(f)) {
			break
		}
		if f, ok := x.(Float); ok && math.IsNaN(float64(f)) {
			best = x
			continue
		}
		c, _ := Compare(x, best)
		if c*sign >= 0 { // on a tie the later argument wins, as in Clojure
			best = x
		}
	}
	return best, nil
}

// builtinAvg is the arithmetic mean, always a float, of the arguments or
// of one collection; nil for an empty collection.
func builtinAvg(th *Thread, args []Value) (Value, error) {
	nums, err := numbersOf(th, args)
	if err != nil || len(nums) == 0 {
		return Nil, err
	}
	var sum float64
	for _, x := range nums {
		f, _ := toFloat(0, x)
		sum += f
	}
	return Float(sum / float64(len(nums))), nil
}
