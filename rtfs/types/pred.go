package types

import (
	"regexp"
	"strconv"
	"unicode/utf8"
)

// cmpType is [:> n], [:>= n], [:< n] or [:<= n]: a number compared with n.
type cmpType struct {
	op string
	n  literal
}

func (t cmpType) String() string   { return "[:" + t.op + " " + t.n.String() + "]" }
func (t cmpType) describe() string { return "a number " + t.op + " " + t.n.String() }
func (t cmpType) check(v Value) *failure {
	c, ok := compareNum(v, t.n)
	if ok {
		switch t.op {
		case ">":
			ok = c > 0
		case ">=":
			ok = c >= 0
		case "<":
			ok = c < 0
		default:
			ok = c <= 0
		}
	}
	if !ok {
		return mismatch(t, v)
	}
	return nil
}

// rangeType is [:in-range lo hi]: a number with lo <= v <= hi.
type rangeType struct{ lo, hi literal }

func (t rangeType) String() string {
	return "[:in-range " + t.lo.String() + " " + t.hi.String() + "]"
}
func (t rangeType) describe() string {
	return "a number in the range " + t.lo.String() + " to " + t.hi.String()
}
func (t rangeType) check(v Value) *failure {
	lo, ok1 := compareNum(v, t.lo)
	hi, ok2 := compareNum(v, t.hi)
	if !ok1 || !ok2 || lo < 0 || hi > 0 {
		return mismatch(t, v)
	}
	return nil
}

// sizeOf returns the length of a string (in characters), sequence or map.
func sizeOf(v Value) (int, bool) {
	if kindOf(v) == KindString {
		if t, ok := v.(Text); ok {
			return utf8.RuneCountInString(t.Text()), true
		}
		return 0, false
	}
	switch x := v.(type) {
	case Sequence:
		return x.Len(), true
	case Mapping:
		return x.Len(), true
	}
	return 0, false
}

// sizeType is [:min-length n], [:max-length n], [:min-count n],
// [:max-count n] or [:non-empty] (n = 1, min): a bound on sizeOf.
type sizeType struct {
	op  string // "min-length", "max-length", "min-count", "max-count", "non-empty"
	n   int
	max bool
}

func (t sizeType) String() string {
	if t.op == "non-empty" {
		return "[:non-empty]"
	}
	return "[:" + t.op + " " + strconv.Itoa(t.n) + "]"
}
func (t sizeType) describe() string {
	switch {
	case t.op == "non-empty":
		return "a non-empty string or collection"
	case t.max:
		return "a string or collection of size <= " + strconv.Itoa(t.n)
	}
	return "a string or collection of size >= " + strconv.Itoa(t.n)
}
func (t sizeType) check(v Value) *failure {
	n, ok := sizeOf(v)
	if !ok {
		return mismatch(t, v)
	}
	if t.max && n > t.n || !t.max && n < t.n {
		return fail("expected " + t.describe() + ", got " + describeValue(v) +
			" of size " + strconv.Itoa(n))
	}
	return nil
}

// regexType is [:matches-regex "re"]: a string that the pattern matches as a
// whole.
type regexType struct {
	src string
	re  *regexp.Regexp // ^(?:src)$
}

func (t regexType) String() string   { return "[:matches-regex " + strconv.Quote(t.src) + "]" }
func (t regexType) describe() string { return "a string matching " + strconv.Quote(t.src) }
func (t regexType) check(v Value) *failure {
	if kindOf(v) == KindString {
		if s, ok := v.(Text); ok && t.re.MatchString(s.Text()) {
			return nil
		}
	}
	return mismatch(t, v)
}

// keysType is [:has-key :k] or [:required-keys [:k...]]: a map holding the keys.
type keysType struct {
	head string // "has-key" or "required-keys"
	keys []string
}

func (t keysType) String() string {
	if t.head == "has-key" {
		return "[:has-key :" + t.keys[0] + "]"
	}
	s := "[:required-keys ["
	for i, k := range t.keys {
		if i > 0 {
			s += " "
		}
		s += ":" + k
	}
	return s + "]]"
}
func (t keysType) describe() string { return "a map with keys " + t.String() }
func (t keysType) check(v Value) *failure {
	m, ok := v.(Mapping)
	if !ok || kindOf(v) != KindMap {
		return mismatch(t, v)
	}
	for _, k := range t.keys {
		if _, ok := m.GetKeyword(k); !ok {
			return fail("missing required key :" + k)
		}
	}
	return nil
}
