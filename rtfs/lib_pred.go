package rtfs

import (
	"math"

	"github.com/rtfshost/rtfshost/rtfs/types"
)

// Type and value predicates. Each takes one argument and returns a Bool.

func addPredBuiltins(t builtinTable) {
	kindPred := func(name string, kinds ...Kind) {
		t.add(name, 1, 1, func(_ *Thread, args []Value) (Value, error) {
			k := args[0].Kind()
			for _, want := range kinds {
				if k == want {
					return True, nil
				}
			}
			return False, nil
		})
	}
	kindPred("nil?", types.KindNil)
	kindPred("int?", types.KindInt)
	kindPred("integer?", types.KindInt)
	kindPred("float?", types.KindFloat)
	kindPred("double?", types.KindFloat)
	kindPred("number?", types.KindInt, types.KindFloat)
	kindPred("string?", types.KindString)
	kindPred("keyword?", types.KindKeyword)
	kindPred("symbol?", types.KindSymbol)
	kindPred("map?", types.KindMap)
	kindPred("vector?", types.KindVector)
	kindPred("list?", types.KindList)
	kindPred("seq?", types.KindList, types.KindSeq)
	kindPred("set?", types.KindSet)
	kindPred("fn?", types.KindFn)
	kindPred("bool?", types.KindBool)
	kindPred("boolean?", types.KindBool)
	kindPred("coll?", types.KindList, types.KindVector, types.KindMap, types.KindSet, types.KindSeq)
	kindPred("sequential?", types.KindList, types.KindVector, types.KindSeq)
	t.add("some?", 1, 1, func(_ *Thread, args []Value) (Value, error) { return Bool(args[0] != Nil), nil })
	t.add("true?", 1, 1, func(_ *Thread, args []Value) (Value, error) { return Bool(args[0] == True), nil })
	t.add("false?", 1, 1, func(_ *Thread, args []Value) (Value, error) { return Bool(args[0] == False), nil })
	t.add("zero?", 1, 1, signPred(func(f float64) bool { return f == 0 }))
	t.add("pos?", 1, 1, signPred(func(f float64) bool { return f > 0 }))
	t.add("neg?", 1, 1, signPred(func(f float64) bool { return f < 0 }))
	t.add("even?", 1, 1, parityPred(0))
	t.add("odd?", 1, 1, parityPred(1))
	t.add("nan?", 1, 1, func(th *Thread, args []Value) (Value, error) {
		var f float64
		if err := unpackArgs(th, args, &f); err != nil {
			return nil, err
		}
		return Bool(math.IsNaN(f)), nil
	})
}

func signPred(ok func(float64) bool) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		var x Value
		if err := unpackArgs(th, args, number(&x)); err != nil {
			return nil, err
		}
		if n, isInt := x.(Int); isInt {
			return Bool(ok(float64(max(min(n, 1), -1)))), nil
		}
		return Bool(ok(float64(x.(Float)))), nil
	}
}

func parityPred(want int64) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		var n int64
		if err := unpackArgs(th, args, &n); err != nil {
			return nil, err
		}
		return Bool(n&1 == want), nil
	}
}
