package rtfs

// The bit operations of clojure.core on ints: bit-and bit-or bit-xor
// bit-and-not bit-not bit-shift-left bit-shift-right unsigned-bit-shift-right
// bit-test bit-set bit-clear.

func addBitBuiltins(t builtinTable) {
	t.add("bit-and", 2, -1, bitFold(func(a, b int64) int64 { return a & b }))
	t.add("bit-or", 2, -1, bitFold(func(a, b int64) int64 { return a | b }))
	t.add("bit-xor", 2, -1, bitFold(func(a, b int64) int64 { return a ^ b }))
	t.add("bit-and-not", 2, -1, bitFold(func(a, b int64) int64 { return a &^ b }))
	t.add("bit-not", 1, 1, func(th *Thread, args []Value) (Value, error) {
		var x int64
		if err := unpackArgs(th, args, &x); err != nil {
			return nil, err
		}
		return Int(^x), nil
	})
	t.add("bit-shift-left", 2, 2, bitShift(func(x int64, n uint) int64 { return x << n }))
	t.add("bit-shift-right", 2, 2, bitShift(func(x int64, n uint) int64 { return x >> n }))
	t.add("unsigned-bit-shift-right", 2, 2, bitShift(func(x int64, n uint) int64 { return int64(uint64(x) >> n) }))
	t.add("bit-test", 2, 2, func(th *Thread, args []Value) (Value, error) {
		var x, n int64
		if err := unpackArgs(th, args, &x, &n); err != nil {
			return nil, err
		}
		return Bool(x>>(uint(n)&63)&1 == 1), nil
	})
	t.add("bit-set", 2, 2, bitShift(func(x int64, n uint) int64 { return x | 1<<n }))
	t.add("bit-clear", 2, 2, bitShift(func(x int64, n uint) int64 { return x &^ (1 << n) }))
}

func bitFold(f func(a, b int64) int64) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		var acc int64
		var more []Value
		if err := unpackArgs(th, args, &acc, rest(&more)); err != nil {
			return nil, err
		}
		for i, a := range more {
			x, err := toInt(i+2, a)
			if err != nil {
				return nil, err
			}
			acc = f(acc, x)
		}
		return Int(acc), nil
	}
}

// bitShift is (f x n); as the JVM does, only the low 6 bits of n count.
func bitShift(f func(x int64, n uint) int64) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		var x, n int64
		if err := unpackArgs(th, args, &x, &n); err != nil {
			return nil, err
		}
		return Int(f(x, uint(n)&63)), nil
	}
}
