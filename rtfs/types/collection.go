package types

import "strconv"

// seqType is [:vector T], [:list T], [:set T] or [:* T] (a list or vector),
// every element a T.
type seqType struct {
	head string // "vector", "list", "set" or "*"
	elem Type
}

func (t seqType) String() string { return "[:" + t.head + " " + t.elem.String() + "]" }
func (t seqType) describe() string {
	if t.head == "*" {
		return "a list or vector of " + t.elem.describe()
	}
	return t.head + " of " + t.elem.describe()
}

func (t seqType) kindOK(k Kind) bool {
	switch t.head {
	case "vector":
		return k == KindVector
	case "list":
		return k == KindList
	case "set":
		return k == KindSet
	}
	return k == KindVector || k == KindList
}

func (t seqType) check(v Value) *failure {
	if !t.kindOK(kindOf(v)) {
		return mismatch(t, v)
	}
	s, ok := v.(Sequence)
	if !ok {
		return fail("cannot look inside " + describeValue(v))
	}
	for i, n := 0, s.Len(); i < n; i++ {
		if f := t.elem.check(s.Index(i)); f != nil {
			return f.at(indexElem(i))
		}
	}
	return nil
}

// tupleType is [:tuple T...]: a vector (or list) of exactly len(elems)
// elements, element i a T_i.
type tupleType struct{ elems []Type }

func (t tupleType) String() string   { return listString("tuple", t.elems) }
func (t tupleType) describe() string { return "tuple " + t.String() }
func (t tupleType) check(v Value) *failure {
	k := kindOf(v)
	s, ok := v.(Sequence)
	if !ok || (k != KindVector && k != KindList) {
		return mismatch(t, v)
	}
	if s.Len() != len(t.elems) {
		return fail("expected " + strconv.Itoa(len(t.elems)) + " elements, got " +
			strconv.Itoa(s.Len()) + " in " + describeValue(v))
	}
	for i, et := range t.elems {
		if f := et.check(s.Index(i)); f != nil {
			return f.at(indexElem(i))
		}
	}
	return nil
}

// mapEntry is one listed key of a map type.
type mapEntry struct {
	key      string // keyword name
	typ      Type
	marked   bool // written [:k T ?]
	optional bool // marked, or typ accepts nil
}

// mapType is [:map ...]: a map holding the listed keyword keys (the optional
// ones may be missing) with values of their types; other keys are allowed.
type mapType struct {
	entries []mapEntry
	braced  bool // print as [:map {:k T}] rather than [:map [:k T]]
}

func (t mapType) String() string {
	if len(t.entries) == 0 {
		return ":map"
	}
	s := "[:map "
	if t.braced {
		s += "{"
	}
	for i, e := range t.entries {
		if i > 0 {
			s += " "
		}
		switch {
		case t.braced:
			s += ":" + e.key + " " + e.typ.String()
		case e.marked:
			s += "[:" + e.key + " " + e.typ.String() + " ?]"
		default:
			s += "[:" + e.key + " " + e.typ.String() + "]"
		}
	}
	if t.braced {
		s += "}"
	}
	return s + "]"
}

func (t mapType) describe() string {
	if len(t.entries) == 0 {
		return "map"
	}
	return "map " + t.String()
}

func (t mapType) check(v Value) *failure {
	if kindOf(v) != KindMap {
		return mismatch(t, v)
	}
	if len(t.entries) == 0 {
		return nil
	}
	m, ok := v.(Mapping)
	if !ok {
		return fail("cannot look inside " + describeValue(v))
	}
	for i := range t.entries {
		e := &t.entries[i]
		ev, ok := m.GetKeyword(e.key)
		if !ok {
			if e.optional {
				continue
			}
			return fail("missing required key :" + e.key)
		}
		if f := e.typ.check(ev); f != nil {
			return f.at(":" + e.key)
		}
	}
	return nil
}

// mapOfType is [:map-of K V] (or [:dict K V]): a map whose keys are all K and
// values all V.
type mapOfType struct {
	head     string
	key, val Type
}

func (t mapOfType) String() string {
	return "[:" + t.head + " " + t.key.String() + " " + t.val.String() + "]"
}
func (t mapOfType) describe() string {
	return "map of " + t.key.describe() + " to " + t.val.describe()
}
func (t mapOfType) check(v Value) *failure {
	if kindOf(v) != KindMap {
		return mismatch(t, v)
	}
	m, ok := v.(Mapping)
	if !ok {
		return fail("cannot look inside " + describeValue(v))
	}
	var f *failure
	m.Range(func(k, ev Value) bool {
		if kf := t.key.check(k); kf != nil {
			f = fail("invalid key: " + kf.toError().Error())
			return false
		}
		if vf := t.val.check(ev); vf != nil {
			f = vf.at(k.String())
			return false
		}
		return true
	})
	return f
}
