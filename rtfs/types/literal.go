package types

import (
	"math"
	"strconv"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// literal is a constant in a type: an :enum member, a :val, a predicate bound.
type literal struct {
	kind Kind // KindNil, KindBool, KindInt, KindFloat, KindString or KindKeyword
	b    bool
	i    int64
	f    float64
	s    string // string contents or keyword name
}

func (l literal) String() string {
	switch l.kind {
	case KindBool:
		return strconv.FormatBool(l.b)
	case KindInt:
		return strconv.FormatInt(l.i, 10)
	case KindFloat:
		return syntax.FormatFloat(l.f)
	case KindString:
		return strconv.Quote(l.s)
	case KindKeyword:
		return ":" + l.s
	}
	return "nil"
}

// matches reports whether v equals the literal (ints and floats are distinct,
// as in RTFS equality).
func (l literal) matches(v Value) bool {
	if kindOf(v) != l.kind {
		return false
	}
	switch l.kind {
	case KindNil:
		return true
	case KindBool:
		return v.String() == strconv.FormatBool(l.b)
	case KindInt:
		if iv, ok := v.(Integer); ok {
			return iv.Int64() == l.i
		}
		n, ok := v.(Number)
		return ok && n.Float64() == float64(l.i)
	case KindFloat:
		n, ok := v.(Number)
		return ok && n.Float64() == l.f
	}
	t, ok := v.(Text)
	return ok && t.Text() == l.s
}

// float returns a numeric literal as a float.
func (l literal) float() float64 {
	if l.kind == KindInt {
		return float64(l.i)
	}
	return l.f
}

// compareNum compares the number v with the numeric literal l: -1, 0 or +1,
// and false if v is not a number or either is NaN.
func compareNum(v Value, l literal) (int, bool) {
	k := kindOf(v)
	if k == KindInt && l.kind == KindInt {
		if iv, ok := v.(Integer); ok {
			return cmp3(iv.Int64(), l.i), true
		}
	}
	if k != KindInt && k != KindFloat {
		return 0, false
	}
	n, ok := v.(Number)
	if !ok {
		return 0, false
	}
	x, y := n.Float64(), l.float()
	if math.IsNaN(x) || math.IsNaN(y) {
		return 0, false
	}
	return cmp3(x, y), true
}

func cmp3[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// enumType is [:enum lit...]: a value equal to one of the literals.
type enumType struct{ lits []literal }

func (t enumType) String() string { return "[:enum " + t.members() + "]" }
func (t enumType) describe() string {
	return "one of " + t.members()
}
func (t enumType) members() string {
	s := ""
	for i, l := range t.lits {
		if i > 0 {
			s += " "
		}
		s += l.String()
	}
	return s
}
func (t enumType) check(v Value) *failure {
	k := kindOf(v)
	if k == KindKeyword || k == KindString {
		// The common case, an enum of keywords: read the text once.
		if tv, ok := v.(Text); ok {
			s := tv.Text()
			for _, l := range t.lits {
				if l.kind == k && l.s == s {
					return nil
				}
			}
		}
		return mismatch(t, v)
	}
	for _, l := range t.lits {
		if l.matches(v) {
			return nil
		}
	}
	return mismatch(t, v)
}

// valType is [:val lit]: a value equal to the literal.
type valType struct{ lit literal }

func (t valType) String() string   { return "[:val " + t.lit.String() + "]" }
func (t valType) describe() string { return t.lit.String() }
func (t valType) check(v Value) *failure {
	if !t.lit.matches(v) {
		return mismatch(t, v)
	}
	return nil
}
