package rtfs

import "math"

// Comparison and logic: = not= == < > <= >= compare not identity.

func addCmpBuiltins(t builtinTable) {
	t.add("=", 1, -1, func(th *Thread, args []Value) (Value, error) {
		if err := realizeLazyArgs(th, args, false); err != nil {
			return nil, err
		}
		eq, err := allEqual(th, args)
		return Bool(eq), err
	})
	t.add("not=", 1, -1, func(th *Thread, args []Value) (Value, error) {
		if err := realizeLazyArgs(th, args, false); err != nil {
			return nil, err
		}
		eq, err := allEqual(th, args)
		return Bool(!eq), err
	})
	t.add("==", 1, -1, numChain(func(c int) bool { return c == 0 }))
	t.add("<", 1, -1, numChain(func(c int) bool { return c < 0 }))
	t.add(">", 1, -1, numChain(func(c int) bool { return c > 0 }))
	t.add("<=", 1, -1, numChain(func(c int) bool { return c <= 0 }))
	t.add(">=", 1, -1, numChain(func(c int) bool { return c >= 0 }))
	t.add("not", 1, 1, func(_ *Thread, args []Value) (Value, error) { return Bool(!Truth(args[0])), nil })
	t.add("identity", 1, 1, func(_ *Thread, args []Value) (Value, error) { return args[0], nil })
	t.add("compare", 2, 2, func(th *Thread, args []Value) (Value, error) {
		c, err := th.compare(args[0], args[1])
		return Int(c), err
	})
}

// allEqual reports whether each argument equals the next, charging the
// comparisons.
func allEqual(th *Thread, args []Value) (bool, error) {
	m := meter{th: th}
	for i := 1; i < len(args); i++ {
		if !m.equal(args[i-1], args[i]) {
			return false, m.done()
		}
	}
	return true, m.done()
}

// numChain returns a numeric comparison that holds when ok(cmp(a, b)) holds
// for each consecutive pair. Every argument must be a number; any NaN makes
// the comparison false, as IEEE 754 says.
func numChain(ok func(c int) bool) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		result := true
		for i, a := range args {
			if _, err := toNumber(i+1, a); err != nil {
				return nil, err
			}
			if f, isF := a.(Float); isF && math.IsNaN(float64(f)) {
				result = false
			}
			if i > 0 && result {
				c, _ := Compare(args[i-1], a)
				result = ok(c)
			}
		}
		return Bool(result), nil
	}
}
