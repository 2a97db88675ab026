package rtfs

// The sequence builtins that Clojure computes lazily hand a lazy sequence
// to the prelude's lazy form of themselves (%lazy-partition, %lazy-dedupe
// ...), which computes only the elements taken, so (take 2 (partition 3 1
// (range))) ends; over eager collections they stay Go loops. Their
// one-argument forms are transducers, also in the prelude.

// lazyRedirect reports whether coll is a lazy sequence that the prelude
// function name should compute, and returns the redirect to it. A program
// compiled under an earlier version's prelude, which lacks name, keeps the
// eager builtin (an infinite sequence is then an error naming it).
func (th *Thread) lazyRedirect(coll Value, name string, args ...Value) (bool, error) {
	if _, ok := coll.(*Lazy); !ok || !th.preludeHas(name) {
		return false, nil
	}
	return true, th.redirectTo(name, args...)
}

// preludeHas reports whether the running program's prelude defines name.
func (th *Thread) preludeHas(name string) bool {
	if th == nil || th.prog == nil {
		return false
	}
	i, ok := th.prog.index[name]
	return ok && i < len(th.prog.init) && th.prog.init[i] != nil
}

// lazyArity wraps fn so that, when its argument collArg (an index) is a
// lazy sequence, the prelude function name computes it from all the
// arguments (with extra appended).
func lazyArity(collArg int, name string, fn builtinFn, extra ...Value) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		if collArg < len(args) {
			if ok, err := th.lazyRedirect(args[collArg], name, append(append([]Value(nil), args...), extra...)...); ok {
				return nil, err
			}
		}
		return fn(th, args)
	}
}

func addLazySeqBuiltins(t builtinTable) {
	// (replace smap) is a transducer, (replace smap coll) clojure.core's,
	// (replace s match repl) clojure.string's; str/replace and
	// clojure.string/replace keep only the last.
	strReplace := t["replace"].impl
	t["replace"] = &Builtin{name: "replace", minArgs: 1, maxArgs: 3, impl: func(th *Thread, args []Value) (Value, error) {
		switch len(args) {
		case 1:
			return nil, th.redirectTo("%xf-replace", args...)
		case 2:
			return nil, th.redirectTo("%replace", args...)
		}
		return strReplace(th, args)
	}}
}
