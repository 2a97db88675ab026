package rtfs

import "fmt"

// Associative functions: get get-in assoc assoc-in dissoc merge keys vals
// contains? zipmap select-keys disj find, and key and val of a map entry.

func addMapBuiltins(t builtinTable) {
	t.add("get", 2, 3, func(th *Thread, args []Value) (Value, error) {
		m := meter{th: th}
		v := getOr(args[0], args[1], args[2:], &m)
		return v, m.done()
	})
	t.add("get-in", 2, 3, builtinGetIn)
	t.add("assoc", 3, -1, builtinAssoc)
	t.add("assoc-in", 3, 3, builtinAssocIn)
	t.add("dissoc", 1, -1, builtinDissoc)
	t.add("merge", 0, -1, builtinMerge)
	t.add("keys", 1, 1, func(th *Thread, args []Value) (Value, error) { return mapColumn(th, args[0], 0) })
	t.add("vals", 1, 1, func(th *Thread, args []Value) (Value, error) { return mapColumn(th, args[0], 1) })
	t.add("contains?", 2, 2, builtinContains)
	t.add("zipmap", 2, 2, builtinZipmap)
	t.add("select-keys", 2, 2, builtinSelectKeys)
	t.add("disj", 1, -1, builtinDisj)
	t.add("find", 2, 2, func(th *Thread, args []Value) (Value, error) {
		m := meter{th: th}
		if v, ok := lookup(args[0], args[1], &m); ok {
			return NewVector(args[1], v), m.done()
		}
		return Nil, m.done()
	})
	t.add("key", 1, 1, entryPart(0, "key"))
	t.add("val", 1, 1, entryPart(1, "val"))
}

func defaultArg(args []Value, i int) Value {
	if len(args) > i {
		return args[i]
	}
	return Nil
}

// getOr is (get coll k [default]) with the optional default in def (empty
// or one value), hashing and comparing the key on m. It is the single
// implementation of get, of a keyword called as a function ((:k coll
// [default])) and of a map called as a function, so the three agree on
// every argument: anything that holds no k, nil and non-collections
// included, gives the default or nil.
func getOr(coll, k Value, def []Value, m *meter) Value {
	if v, ok := lookup(coll, k, m); ok {
		return v
	}
	if len(def) > 0 {
		return def[0]
	}
	return Nil
}

// lookup is get's lookup: a map key, a vector, list or string index, a set
// member, hashing and comparing a key on m (and counting the code points a
// string index skips). Anything else, nil included, holds nothing (as in
// Clojure).
func lookup(coll, k Value, m *meter) (Value, bool) {
	switch c := coll.(type) {
	case *Map:
		return c.get(k, m)
	case *Vector:
		if i, ok := k.(Int); ok && i >= 0 && int64(i) < int64(c.cnt) {
			return c.Index(int(i)), true
		}
	case *Set:
		if c.has(k, m) {
			return k, true
		}
	case String:
		if i, ok := k.(Int); ok && i >= 0 {
			return runeAt(string(c), int64(i), m)
		}
	}
	return nil, false
}

// runeAt returns code point i of s as a one-code-point string, counting the
// bytes it skips on m.
func runeAt(s string, i int64, m *meter) (Value, bool) {
	if i >= freeText && !m.visit(min(int(i), len(s))/textStepBytes) {
		return nil, false
	}
	for _, r := range s {
		if i == 0 {
			return String(string(r)), true
		}
		i--
	}
	return nil, false
}

// keyPath returns the elements of a get-in/assoc-in key path.
func keyPath(th *Thread, i int, v Value) ([]Value, error) {
	switch v.(type) {
	case NilType, *Vector, *List:
		return seqSlice(th, v)
	}
	return nil, argTypeError(i, "a vector of keys", v)
}

func builtinGetIn(th *Thread, args []Value) (Value, error) {
	path, err := keyPath(th, 2, args[1])
	if err != nil {
		return nil, err
	}
	v := args[0]
	m := meter{th: th}
	for _, k := range path {
		var ok bool
		if v, ok = lookup(v, k, &m); !ok {
			return defaultArg(args, 2), m.done()
		}
	}
	return v, m.done()
}

// assocOne is (assoc coll k v) for a map, a vector (index 0..len) or nil,
// counting on m the work of a map's key.
func assocOne(th *Thread, coll, k, v Value, m *meter) (Value, error) {
	switch c := coll.(type) {
	case NilType:
		return MapOf(k, v), th.alloc(2 * elemBytes)
	case *Map:
		if c.isSorted() {
			if err := sortedCheck(th, c, k); err != nil {
				return nil, err
			}
		}
		return assocEntry(th, c, k, v, m)
	case *Vector:
		i, ok := k.(Int)
		if !ok {
			return nil, fmt.Errorf("a vector index must be an int, got %s", describe(k))
		}
		if i < 0 || int64(i) > int64(c.cnt) {
			return nil, indexError("index %d out of bounds for vector of length %d", i, c.cnt)
		}
		// Replacing an element copies the path to it: a node of 32 per level.
		m.visit(int(c.shift()/vbits) * copyCost(vwidth))
		nv, _ := c.Assoc(int(i), v)
		if err := th.checkSize(nv.cnt); err != nil {
			return nil, err
		}
		return nv, th.alloc(elemBytes)
	}
	return nil, argTypeError(1, "a map or vector", coll)
}

func builtinAssoc(th *Thread, args []Value) (Value, error) {
	if len(args)%2 != 1 {
		return nil, fmt.Errorf("expected a collection and key value pairs, got %d arguments", len(args))
	}
	if c, ok := args[0].(*Map); ok && c.root == nil && len(args) == 3 {
		if _, ok := args[1].(Keyword); ok { // the usual case: nothing to hash or copy
			return assocEntry(th, c, args[1], args[2], nil)
		}
	}
	coll := args[0]
	m := meter{th: th}
	for i := 1; i < len(args); i += 2 {
		var err error
		if coll, err = assocOne(th, coll, args[i], args[i+1], &m); err != nil {
			return nil, err
		}
	}
	return coll, m.done()
}

// builtinAssocIn is (assoc-in m [k & ks] v): missing levels become maps.
func builtinAssocIn(th *Thread, args []Value) (Value, error) {
	path, err := keyPath(th, 2, args[1])
	if err != nil {
		return nil, err
	}
	if len(path) == 0 {
		return nil, fmt.Errorf("argument 2: the key path is empty")
	}
	m := meter{th: th}
	v, err := assocIn(th, args[0], path, args[2], &m)
	if err != nil {
		return nil, err
	}
	return v, m.done()
}

func assocIn(th *Thread, coll Value, path []Value, v Value, m *meter) (Value, error) {
	if len(path) > 1 {
		inner, _ := lookup(coll, path[0], m)
		if inner == nil {
			inner = Nil
		}
		var err error
		if v, err = assocIn(th, inner, path[1:], v, m); err != nil {
			return nil, err
		}
	}
	return assocOne(th, coll, path[0], v, m)
}

func builtinDissoc(th *Thread, args []Value) (Value, error) {
	var m *Map
	var keys []Value
	if err := unpackArgs(th, args, orNil(&m), rest(&keys)); err != nil || m == nil {
		return Nil, err
	}
	mt := meter{th: th}
	for _, k := range keys {
		m = m.dissoc(k, &mt)
	}
	return m, mt.done()
}

func builtinDisj(th *Thread, args []Value) (Value, error) {
	var s *Set
	var xs []Value
	if err := unpackArgs(th, args, orNil(&s), rest(&xs)); err != nil || s == nil {
		return Nil, err
	}
	m := meter{th: th}
	for _, x := range xs {
		s = s.disj(x, &m)
	}
	return s, m.done()
}

// builtinMerge merges maps left to right (later keys win), skipping nils;
// nil when every argument is nil.
func builtinMerge(th *Thread, args []Value) (Value, error) {
	var out *Map
	for i, a := range args {
		switch m := a.(type) {
		case NilType:
		case *Map:
			if out == nil || out.n == 0 && !out.isSorted() {
				out = m
				continue
			}
			var err error
			mt := meter{th: th}
			m.Range(func(k, v Value) bool {
				if err = sortedCheck(th, out, k); err != nil {
					return false
				}
				if out, err = assocEntry(th, out, k, v, &mt); err == nil {
					err = mt.tick()
				}
				return err == nil
			})
			if err == nil {
				err = mt.done()
			}
			if err != nil {
				return nil, err
			}
		default:
			return nil, argTypeError(i+1, "a map", a)
		}
	}
	if out == nil {
		return Nil, nil
	}
	return out, nil
}

// mapColumn returns a list of a map's keys (col 0) or values (col 1), nil
// for nil or an empty map.
func mapColumn(th *Thread, v Value, col int) (Value, error) {
	m, ok := v.(*Map)
	if !ok {
		if v == Nil {
			return Nil, nil
		}
		return nil, typeError("a map", v)
	}
	if m.n == 0 {
		return Nil, nil
	}
	if err := th.build(m.Len()); err != nil {
		return nil, err
	}
	out := make([]Value, 0, m.Len())
	m.Range(func(k, v Value) bool {
		if col == 0 {
			out = append(out, k)
		} else {
			out = append(out, v)
		}
		return true
	})
	return listOwned(out), nil
}

// builtinContains is (contains? coll k): a map key, a set member, or a
// valid index of a vector or string; false for nil.
func builtinContains(th *Thread, args []Value) (Value, error) {
	switch args[0].(type) {
	case NilType, *Map, *Set, *Vector, String:
		m := meter{th: th}
		_, ok := lookup(args[0], args[1], &m)
		return Bool(ok), m.done()
	}
	return nil, argTypeError(1, "a map, set, vector or string", args[0])
}

func builtinZipmap(th *Thread, args []Value) (Value, error) {
	if allInfinite(args) {
		return nil, errInfinite(args[0])
	}
	cols, err := boundedSlices(th, args)
	if err != nil {
		return nil, err
	}
	ks, vs := cols[0], cols[1]
	n := min(len(ks), len(vs))
	if err := th.build(2 * n); err != nil {
		return nil, err
	}
	kvs := make([]Value, 0, 2*n)
	for i := 0; i < n; i++ {
		kvs = append(kvs, ks[i], vs[i])
	}
	m, err := th.mapOf(kvs)
	return m, err
}

func builtinSelectKeys(th *Thread, args []Value) (Value, error) {
	var m *Map
	var keys Value
	if err := unpackArgs(th, args, orNil(&m), &keys); err != nil {
		return nil, err
	}
	ks, err := keyPath(th, 2, keys)
	if err != nil {
		return nil, err
	}
	out := emptyMap
	if m == nil {
		return out, nil
	}
	mt := meter{th: th}
	for _, k := range ks {
		if err := mt.tick(); err != nil {
			return nil, err
		}
		if v, ok := m.get(k, &mt); ok {
			if out, err = assocEntry(th, out, k, v, &mt); err != nil {
				return nil, err
			}
		}
	}
	return out, mt.done()
}

// entryPart is key or val of a map entry, a [k v] vector here.
func entryPart(i int, name string) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		if v, ok := args[0].(*Vector); ok && v.Len() == 2 {
			return v.Index(i), nil
		}
		return nil, typeError("a map entry ([k v], as a map's seq gives)", args[0])
	}
}
