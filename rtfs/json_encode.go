package rtfs

import (
	"fmt"
	"math"
	"strconv"

	"github.com/rtfshost/rtfshost/internal/jsontext"
)

// ToJSON encodes v as compact JSON, one way (DESIGN §7): nil is null;
// keywords, as keys and as values, become their name without the colon
// (:my.ns/k is "my.ns/k"); symbols their name; lists, vectors and sets
// become arrays; maps objects, where a key that is not a keyword or string
// is written as its printed form (1 is "1"); integral floats keep a ".0" so
// FromJSON reads them back as floats. NaN, infinities and functions cannot
// be encoded: the error names the value.
func ToJSON(v Value) ([]byte, error) {
	return appendJSON(make([]byte, 0, 64), v, 0, false)
}

// ToOutputJSON is ToJSON for showing a value (an output, a result) rather
// than storing it: it never fails. What JSON cannot hold is written in
// place, the rest of the value kept: NaN and the infinities become null, a
// function its printed form as a string ("#<fn step>"); a value nested
// deeper than JSON allows is its printed form. Cost: as ToJSON.
func ToOutputJSON(v Value) []byte {
	b, err := appendJSON(make([]byte, 0, 64), v, 0, true)
	if err != nil {
		return appendJSONString(nil, v.String())
	}
	return b
}

func appendJSON(b []byte, v Value, depth int, lenient bool) ([]byte, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("cannot encode JSON nested deeper than %d levels", maxJSONDepth)
	}
	switch x := v.(type) {
	case NilType:
		return append(b, "null"...), nil
	case Bool:
		return strconv.AppendBool(b, bool(x)), nil
	case Int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case Float:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			if lenient {
				return append(b, "null"...), nil
			}
			return nil, fmt.Errorf("cannot encode %s as JSON (JSON has no NaN or infinity)", x)
		}
		return append(b, x.String()...), nil
	case String:
		return appendJSONString(b, string(x)), nil
	case Keyword:
		return appendJSONString(b, string(x)), nil
	case Symbol:
		return appendJSONString(b, string(x)), nil
	case *Regex:
		return appendJSONString(b, x.src), nil
	case *Lazy:
		l, ok := computedList(x)
		if !ok {
			return nil, fmt.Errorf("cannot encode %s as JSON: a lazy sequence whose elements are not computed (realize it first with (vec s) or (doall s))", describe(x))
		}
		return appendJSON(b, l, depth, lenient)
	case *List, *Vector:
		return appendJSONSeq(b, newSeqIter(v), depth, lenient)
	case *Set:
		return appendJSONSeq(b, newSeqIter(listOwned(mustSlice(x))), depth, lenient)
	case *Map:
		return appendJSONMap(b, x, depth, lenient)
	}
	if lenient {
		return appendJSONString(b, v.String()), nil
	}
	return nil, fmt.Errorf("cannot encode %s as JSON", describe(v))
}

func mustSlice(v Value) []Value {
	elems, _ := seqSlice(nil, v)
	return elems
}

func appendJSONSeq(b []byte, it seqIter, depth int, lenient bool) ([]byte, error) {
	b = append(b, '[')
	first := true
	for e, ok := it.next(); ok; e, ok = it.next() {
		if !first {
			b = append(b, ',')
		}
		first = false
		var err error
		if b, err = appendJSON(b, e, depth+1, lenient); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

func appendJSONMap(b []byte, m *Map, depth int, lenient bool) ([]byte, error) {
	b = append(b, '{')
	var err error
	first := true
	m.Range(func(k, v Value) bool {
		if !first {
			b = append(b, ',')
		}
		first = false
		switch key := k.(type) {
		case Keyword:
			b = appendJSONString(b, string(key))
		case String:
			b = appendJSONString(b, string(key))
		default:
			b = appendJSONString(b, k.String())
		}
		b = append(b, ':')
		b, err = appendJSON(b, v, depth+1, lenient)
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// appendJSONString appends s quoted; invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte { return jsontext.AppendString(b, s) }
