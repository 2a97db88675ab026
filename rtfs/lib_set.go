package rtfs

import (
	"fmt"
)

// clojure.set, under clojure.set/NAME and set/NAME. A relation (xrel) is a
// set (or any collection) of maps.

func addSetBuiltins(t builtinTable) {
	t.add("clojure.set/union", 0, -1, setUnion)
	t.add("clojure.set/intersection", 1, -1, setIntersection)
	t.add("clojure.set/difference", 1, -1, setDifference)
	t.add("clojure.set/project", 2, 2, setProject)
	t.add("clojure.set/rename", 2, 2, setRename)
	t.add("clojure.set/index", 2, 2, setIndex)
	t.add("clojure.set/join", 2, 3, setJoin)
	t.add("clojure.set/subset?", 2, 2, func(th *Thread, args []Value) (Value, error) { return setSubset(th, args[0], args[1]) })
	t.add("clojure.set/superset?", 2, 2, func(th *Thread, args []Value) (Value, error) { return setSubset(th, args[1], args[0]) })
	t.add("clojure.set/rename-keys", 2, 2, setRenameKeys)
	t.add("clojure.set/map-invert", 1, 1, func(th *Thread, args []Value) (Value, error) {
		m, err := mapArg(1, args[0])
		if err != nil {
			return nil, err
		}
		if err := th.build(2 * m.Len()); err != nil {
			return nil, err
		}
		kvs := make([]Value, 0, 2*m.Len())
		m.Range(func(k, v Value) bool {
			kvs = append(kvs, v, k)
			return true
		})
		return th.mapOf(kvs) // a later value's key wins, as in Clojure's reduce of assoc
	})
	t.add("clojure.set/select", 2, 2, func(th *Thread, args []Value) (Value, error) {
		return nil, th.redirectTo("%set-select", args[0], args[1])
	})
	for _, name := range []string{"union", "intersection", "difference", "subset?", "superset?", "select",
		"project", "rename-keys", "rename", "index", "map-invert", "join"} {
		t.alias("set/"+name, "clojure.set/"+name)
	}
}

// setArg reads a set argument; nil is the empty set.
func setArg(i int, v Value) (*Set, error) {
	switch s := v.(type) {
	case *Set:
		return s, nil
	case NilType:
		return emptySet, nil
	}
	return nil, argTypeError(i, "a set", v)
}

func mapArg(i int, v Value) (*Map, error) {
	switch m := v.(type) {
	case *Map:
		return m, nil
	case NilType:
		return emptyMap, nil
	}
	return nil, argTypeError(i, "a map", v)
}

// setUnion conjoins the smaller sets onto the largest, as Clojure does.
func setUnion(th *Thread, args []Value) (Value, error) {
	if len(args) == 0 {
		return emptySet, nil
	}
	sets := make([]*Set, len(args))
	big := 0
	for i, a := range args {
		s, err := setArg(i+1, a)
		if err != nil {
			return nil, err
		}
		sets[i] = s
		if s.Len() > sets[big].Len() {
			big = i
		}
	}
	if len(args) == 1 {
		return args[0], nil
	}
	out := sets[big]
	mt := meter{th: th}
	for i, s := range sets {
		if i == big {
			continue
		}
		var err error
		s.Range(func(x Value) bool {
			if out, err = conjSet(th, out, x, &mt); err == nil {
				err = mt.tick()
			}
			return err == nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, mt.done()
}

// setIntersection keeps the elements of the smallest set that every other
// holds.
func setIntersection(th *Thread, args []Value) (Value, error) {
	sets := make([]*Set, len(args))
	small := 0
	for i, a := range args {
		s, err := setArg(i+1, a)
		if err != nil {
			return nil, err
		}
		sets[i] = s
		if s.Len() < sets[small].Len() {
			small = i
		}
	}
	out := sets[small]
	mt := meter{th: th}
	sets[small].Range(func(x Value) bool {
		for _, s := range sets {
			if !s.has(x, &mt) {
				out = out.disj(x, &mt)
				break
			}
		}
		return mt.tick() == nil
	})
	return out, mt.done()
}

func setDifference(th *Thread, args []Value) (Value, error) {
	out, err := setArg(1, args[0])
	if err != nil {
		return nil, err
	}
	mt := meter{th: th}
	for i, a := range args[1:] {
		s, err := setArg(i+2, a)
		if err != nil {
			return nil, err
		}
		s.Range(func(x Value) bool {
			out = out.disj(x, &mt)
			return mt.tick() == nil
		})
		if err := mt.done(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func setSubset(th *Thread, a, b Value) (Value, error) {
	s1, err := setArg(1, a)
	if err != nil {
		return nil, err
	}
	s2, err := setArg(2, b)
	if err != nil {
		return nil, err
	}
	if s1.Len() > s2.Len() {
		return False, nil
	}
	ok := true
	mt := meter{th: th}
	s1.Range(func(x Value) bool {
		ok = s2.has(x, &mt)
		return ok && mt.tick() == nil
	})
	return Bool(ok), mt.done()
}

// relation reads an xrel: a collection of maps.
func relation(th *Thread, i int, v Value) ([]*Map, error) {
	elems, err := seqSlice(th, v)
	if err != nil {
		return nil, seqErr(err, argTypeError(i, "a set of maps", v))
	}
	out := make([]*Map, len(elems))
	for j, e := range elems {
		m, ok := e.(*Map)
		if !ok {
			return nil, fmt.Errorf("argument %d: expected a set of maps, it holds %s", i, describe(e))
		}
		out[j] = m
	}
	return out, nil
}

// relationAndKeys reads (f xrel ks).
func relationAndKeys(th *Thread, args []Value) ([]*Map, []Value, error) {
	rel, err := relation(th, 1, args[0])
	if err != nil {
		return nil, nil, err
	}
	ks, err := seqSlice(th, args[1])
	if err != nil {
		return nil, nil, seqErr(err, argTypeError(2, "a collection of keys", args[1]))
	}
	return rel, ks, nil
}

// selectKeys is (select-keys m ks) with ks already read, its work counted
// on mt.
func selectKeys(th *Thread, m *Map, ks []Value, mt *meter) (*Map, error) {
	out := emptyMap
	for _, k := range ks {
		if v, ok := m.get(k, mt); ok {
			var err error
			if out, err = assocEntry(th, out, k, v, mt); err != nil {
				return nil, err
			}
		}
		if err := mt.tick(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func setProject(th *Thread, args []Value) (Value, error) {
	rel, ks, err := relationAndKeys(th, args)
	if err != nil {
		return nil, err
	}
	out := emptySet
	mt := meter{th: th}
	for _, m := range rel {
		p, err := selectKeys(th, m, ks, &mt)
		if err != nil {
			return nil, err
		}
		if out, err = conjSet(th, out, p, &mt); err != nil {
			return nil, err
		}
	}
	return out, mt.done()
}

// renameKeys is (rename-keys m kmap): each key of kmap present in m moved
// to its new name (all old keys dissociated first, as Clojure does), its
// work counted on mt.
func renameKeys(th *Thread, m, kmap *Map, mt *meter) (*Map, error) {
	out := m
	kmap.Range(func(old, _ Value) bool {
		out = out.dissoc(old, mt)
		return mt.tick() == nil
	})
	var err error
	kmap.Range(func(old, nu Value) bool {
		if v, ok := m.get(old, mt); ok {
			if out, err = assocEntry(th, out, nu, v, mt); err != nil {
				return false
			}
		}
		err = mt.tick()
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return out, mt.done()
}

func setRenameKeys(th *Thread, args []Value) (Value, error) {
	m, err := mapArg(1, args[0])
	if err != nil {
		return nil, err
	}
	kmap, err := mapArg(2, args[1])
	if err != nil {
		return nil, err
	}
	if args[0] == Nil {
		return Nil, nil
	}
	if o := m.sorted(); o != nil && !o.goComparable() {
		return nil, errSortedBy
	}
	mt := meter{th: th}
	return renameKeys(th, m, kmap, &mt)
}

func setRename(th *Thread, args []Value) (Value, error) {
	rel, err := relation(th, 1, args[0])
	if err != nil {
		return nil, err
	}
	kmap, err := mapArg(2, args[1])
	if err != nil {
		return nil, err
	}
	out := emptySet
	mt := meter{th: th}
	for _, m := range rel {
		r, err := renameKeys(th, m, kmap, &mt)
		if err != nil {
			return nil, err
		}
		if out, err = conjSet(th, out, r, &mt); err != nil {
			return nil, err
		}
	}
	return out, mt.done()
}

// setIndex is (index xrel ks): a map from each combination of the ks'
// values (a map of them) to the set of the maps that have it.
func setIndex(th *Thread, args []Value) (Value, error) {
	rel, ks, err := relationAndKeys(th, args)
	if err != nil {
		return nil, err
	}
	out := emptyMap
	mt := meter{th: th}
	for _, m := range rel {
		ik, err := selectKeys(th, m, ks, &mt)
		if err != nil {
			return nil, err
		}
		cur, ok := out.get(ik, &mt)
		s, _ := cur.(*Set)
		if !ok {
			s = emptySet
		}
		if s, err = conjSet(th, s, m, &mt); err != nil {
			return nil, err
		}
		if out, err = assocEntry(th, out, ik, s, &mt); err != nil {
			return nil, err
		}
	}
	return out, mt.done()
}

// setJoin is the natural join of two relations on their common keys, or on
// the keys km maps from the first's to the second's.
func setJoin(th *Thread, args []Value) (Value, error) {
	xr, err := relation(th, 1, args[0])
	if err != nil {
		return nil, err
	}
	yr, err := relation(th, 2, args[1])
	if err != nil {
		return nil, err
	}
	if len(xr) == 0 || len(yr) == 0 {
		return emptySet, nil
	}
	mt := meter{th: th}
	var xks, yks []Value // the keys joined on, in the first and the second
	if len(args) == 3 {
		km, err := mapArg(3, args[2])
		if err != nil {
			return nil, err
		}
		km.Range(func(k, v Value) bool {
			xks, yks = append(xks, k), append(yks, v)
			return mt.tick() == nil
		})
	} else {
		xr[0].Range(func(k, _ Value) bool {
			if _, ok := yr[0].get(k, &mt); ok {
				xks = append(xks, k)
			}
			return mt.tick() == nil
		})
		yks = xks
	}
	if err := mt.done(); err != nil {
		return nil, err
	}
	if err := th.charge(int64(len(xr))*int64(len(yr)), 0); err != nil {
		return nil, err
	}
	out := emptySet
	for _, x := range xr {
		for _, y := range yr {
			match := true
			for i := range xks {
				a, ok1 := x.get(xks[i], &mt)
				b, ok2 := y.get(yks[i], &mt)
				if !ok1 || !ok2 || !mt.equal(a, b) {
					if !(ok1 == ok2 && !ok1) {
						match = false
						break
					}
				}
			}
			if err := mt.tick(); err != nil {
				return nil, err
			}
			if !match {
				continue
			}
			merged := x
			y.Range(func(k, v Value) bool {
				merged, err = assocEntry(th, merged, k, v, &mt)
				return err == nil && mt.tick() == nil
			})
			if err != nil {
				return nil, err
			}
			if out, err = conjSet(th, out, merged, &mt); err != nil {
				return nil, err
			}
		}
	}
	return out, mt.done()
}
