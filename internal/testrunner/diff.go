package testrunner

import (
	"github.com/rtfshost/rtfshost/rtfs"
)

// diffString shows how two collections differ, as clojure.data/diff does:
// "- X + Y", X what only a has and Y what only b has (maps by key, vectors
// and lists by index, with nil where they agree). It is empty when either
// is not a collection or they are equal.
func diffString(a, b rtfs.Value) string {
	if !isColl(a) || !isColl(b) || rtfs.Equal(a, b) {
		return ""
	}
	onlyA, onlyB := diff(a, b)
	return "- " + show(orNil(onlyA)) + " + " + show(orNil(onlyB))
}

func orNil(v rtfs.Value) rtfs.Value {
	if v == nil {
		return rtfs.Nil
	}
	return v
}

func isColl(v rtfs.Value) bool {
	switch v.(type) {
	case *rtfs.Map, *rtfs.Vector, *rtfs.List, *rtfs.Set:
		return true
	}
	return false
}

// diff returns what only a has and what only b has (nil for nothing).
func diff(a, b rtfs.Value) (rtfs.Value, rtfs.Value) {
	if rtfs.Equal(a, b) {
		return nil, nil
	}
	switch x := a.(type) {
	case *rtfs.Map:
		if y, ok := b.(*rtfs.Map); ok {
			return diffMaps(x, y)
		}
	case *rtfs.Set:
		if y, ok := b.(*rtfs.Set); ok {
			return setMinus(x, y), setMinus(y, x)
		}
	default:
		if xs, ok := elems(a); ok {
			if ys, ok := elems(b); ok {
				return diffSeqs(xs, ys)
			}
		}
	}
	return a, b
}

func diffMaps(x, y *rtfs.Map) (rtfs.Value, rtfs.Value) {
	var oa, ob []rtfs.Value
	x.Range(func(k, v rtfs.Value) bool {
		w, ok := y.Get(k)
		if !ok {
			oa = append(oa, k, v)
			return true
		}
		da, db := diff(v, w)
		if da != nil {
			oa = append(oa, k, da)
		}
		if db != nil {
			ob = append(ob, k, db)
		}
		return true
	})
	y.Range(func(k, w rtfs.Value) bool {
		if !x.Has(k) {
			ob = append(ob, k, w)
		}
		return true
	})
	return mapOrNil(oa), mapOrNil(ob)
}

func mapOrNil(kvs []rtfs.Value) rtfs.Value {
	if len(kvs) == 0 {
		return nil
	}
	return rtfs.MapOf(kvs...)
}

func setMinus(x, y *rtfs.Set) rtfs.Value {
	var out []rtfs.Value
	x.Range(func(v rtfs.Value) bool {
		if !y.Has(v) {
			out = append(out, v)
		}
		return true
	})
	if len(out) == 0 {
		return nil
	}
	return rtfs.NewSet(out...)
}

func elems(v rtfs.Value) ([]rtfs.Value, bool) {
	switch s := v.(type) {
	case *rtfs.Vector:
		out := make([]rtfs.Value, s.Len())
		for i := range out {
			out[i] = s.Index(i)
		}
		return out, true
	case *rtfs.List:
		out := make([]rtfs.Value, s.Len())
		for i := range out {
			out[i] = s.Index(i)
		}
		return out, true
	}
	return nil, false
}

func diffSeqs(xs, ys []rtfs.Value) (rtfs.Value, rtfs.Value) {
	n := max(len(xs), len(ys))
	oa := make([]rtfs.Value, 0, len(xs))
	ob := make([]rtfs.Value, 0, len(ys))
	anyA, anyB := false, false
	for i := range n {
		var x, y rtfs.Value
		if i < len(xs) {
			x = xs[i]
		}
		if i < len(ys) {
			y = ys[i]
		}
		var da, db rtfs.Value
		switch {
		case x == nil:
			db = y
		case y == nil:
			da = x
		default:
			da, db = diff(x, y)
		}
		if i < len(xs) {
			oa = append(oa, orNil(da))
			anyA = anyA || da != nil
		}
		if i < len(ys) {
			ob = append(ob, orNil(db))
			anyB = anyB || db != nil
		}
	}
	var ra, rb rtfs.Value
	if anyA {
		ra = rtfs.NewVector(oa...)
	}
	if anyB {
		rb = rtfs.NewVector(ob...)
	}
	return ra, rb
}
