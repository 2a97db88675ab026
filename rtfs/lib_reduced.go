package rtfs

// reduced, reduced?, unreduced and ensure-reduced: how a step of reduce,
// transduce or a transducer says it is done.

func addReducedBuiltins(t builtinTable) {
	t.add("reduced", 1, 1, func(_ *Thread, args []Value) (Value, error) { return MapOf(kwReduced, args[0]), nil })
	t.add("reduced?", 1, 1, func(_ *Thread, args []Value) (Value, error) { return Bool(isReduced(args[0])), nil })
	t.add("unreduced", 1, 1, func(_ *Thread, args []Value) (Value, error) { return unreduced(args[0]), nil })
	t.add("ensure-reduced", 1, 1, func(_ *Thread, args []Value) (Value, error) {
		if isReduced(args[0]) {
			return args[0], nil
		}
		return MapOf(kwReduced, args[0]), nil
	})
}

// (reduced x) is the map {:rtfs.internal/reduced x}: reduce, transduce and
// the transducers stop when a step returns one, and unwrap it.
var kwReduced = Keyword("rtfs.internal/reduced")

func isReduced(v Value) bool {
	m, ok := v.(*Map)
	if !ok || m.n != 1 {
		return false
	}
	_, ok = m.GetKeyword(string(kwReduced))
	return ok
}

func unreduced(v Value) Value {
	if isReduced(v) {
		x, _ := v.(*Map).GetKeyword(string(kwReduced))
		return x
	}
	return v
}
