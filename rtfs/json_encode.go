package rtfs

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rtfshost/rtfshost/internal/jsontext"
)

// ToJSON encodes v as compact JSON, one way (DESIGN §7): nil is null;
// keywords, as keys and as values, become their name without the colon
// (:my.ns/k is "my.ns/k"); symbols their name; lists, vectors and sets
// become arrays; maps objects, where a key that is not a keyword or string
// is written as its printed form (1 is "1"); integral floats keep a ".0" so
// FromJSON reads them back as floats. NaN, infinities and functions cannot
// be encoded: the error names the value. A value that shares structure is
// written in full, so its JSON may be far larger than the memory it takes:
// encode an untrusted value with AppendJSON and a bound.
func ToJSON(v Value) ([]byte, error) {
	return AppendJSON(make([]byte, 0, 64), v, EncodeOptions{})
}

// ToOutputJSON is ToJSON for showing a value (an output, a result) rather
// than storing it: it never fails. What JSON cannot hold is written in
// place, the rest of the value kept: NaN and the infinities become null, a
// function its printed form as a string ("#<fn step>"); a value nested
// deeper than JSON allows is its printed form. Cost: as ToJSON, and as
// unbounded: show an untrusted value with AppendJSON and a bound.
func ToOutputJSON(v Value) []byte {
	b, _ := OutputJSON(v, 0)
	return b
}

// OutputJSON is ToOutputJSON with a bound, for showing a value that a run
// produced (a result, an output, a state) to a client: past max bytes
// (max <= 0: none) it stops with a *LimitError (LimitOutput), and that is
// its only error. Limits.OutputLimit is the bound for the values of a run.
func OutputJSON(v Value, max int64) ([]byte, error) {
	o := EncodeOptions{Lenient: true, MaxBytes: max}
	b, err := AppendJSON(make([]byte, 0, 64), v, o)
	var le *LimitError
	if err == nil || errors.As(err, &le) {
		return b, err
	}
	// Nested deeper than JSON allows: its printed form, within the bound.
	var sb strings.Builder
	limit := -1
	if max > 0 {
		limit = int(max)
	}
	writeLimited(&sb, v, limit, nil)
	if max > 0 && int64(sb.Len()) > max {
		return nil, &LimitError{Limit: LimitOutput, Max: max}
	}
	return appendJSONString(nil, sb.String()), nil
}

// EncodeOptions say how AppendJSON and Program.MarshalValueOpts encode a
// value.
type EncodeOptions struct {
	// MaxBytes bounds the bytes the encoding may add: past it the encoder
	// stops (having written at most a little more than MaxBytes) with a
	// *LimitError whose Limit is LimitOutput. Zero or negative: no bound.
	// Limits.OutputLimit is the bound for the values of a run.
	MaxBytes int64
	// Lenient (JSON only) writes what JSON cannot hold in place, as
	// ToOutputJSON does, instead of failing.
	Lenient bool
}

// AppendJSON appends v's JSON, as ToJSON writes it (ToOutputJSON's with
// o.Lenient), to dst and returns the extended slice. With o.MaxBytes it
// stops at that bound with a *LimitError (LimitOutput), so a value that
// shares structure cannot make it write, or allocate, more than the bound:
// the one safe way to encode an untrusted value. Cost: O(bytes written).
func AppendJSON(dst []byte, v Value, o EncodeOptions) ([]byte, error) {
	e := jsonEncoder{b: dst, lenient: o.Lenient, start: len(dst), max: o.MaxBytes}
	if err := e.value(v, 0); err != nil {
		return nil, err
	}
	return e.b, nil
}

// jsonEncoder is the state of one AppendJSON.
type jsonEncoder struct {
	b       []byte
	lenient bool
	start   int    // len(b) before the value
	max     int64  // bound on len(b)-start; <= 0: none
	m       *meter // counts a unit per element for a builtin (to-json); nil: none
}

// full returns the error of an encoding past its bounds, if it is.
func (e *jsonEncoder) full() error {
	if e.max > 0 && int64(len(e.b)-e.start) > e.max {
		return &LimitError{Limit: LimitOutput, Max: e.max}
	}
	if e.m.failed() {
		return e.m.err
	}
	return nil
}

func (e *jsonEncoder) value(v Value, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("cannot encode JSON nested deeper than %d levels", maxJSONDepth)
	}
	switch x := v.(type) {
	case NilType:
		e.b = append(e.b, "null"...)
	case Bool:
		e.b = strconv.AppendBool(e.b, bool(x))
	case Int:
		e.b = strconv.AppendInt(e.b, int64(x), 10)
	case Float:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			if !e.lenient {
				return fmt.Errorf("cannot encode %s as JSON (JSON has no NaN or infinity)", x)
			}
			e.b = append(e.b, "null"...)
			break
		}
		e.b = append(e.b, x.String()...)
	case String:
		e.text(string(x))
	case Keyword:
		e.text(string(x))
	case Symbol:
		e.text(string(x))
	case *Regex:
		e.text(x.src)
	case *Lazy:
		l, ok := e.m.computedList(x)
		if e.m.failed() {
			return e.m.err
		}
		if !ok {
			return fmt.Errorf("cannot encode %s as JSON: a lazy sequence whose elements are not computed (realize it first with (vec s) or (doall s))", describe(x))
		}
		return e.value(l, depth)
	case *List, *Vector:
		if err := e.seq(newSeqIter(v), depth); err != nil {
			return err
		}
	case *Set:
		e.b = append(e.b, '[')
		first := true
		var err error
		x.Range(func(el Value) bool {
			if !first {
				e.b = append(e.b, ',')
			}
			first = false
			err = e.value(el, depth+1)
			return err == nil
		})
		if err != nil {
			return err
		}
		e.b = append(e.b, ']')
	case *Map:
		if err := e.object(x, depth); err != nil {
			return err
		}
	default:
		if !e.lenient {
			return fmt.Errorf("cannot encode %s as JSON", describe(v))
		}
		e.text(v.String())
	}
	return e.full()
}

// text appends s quoted, or its first bytes when it passes the bound.
func (e *jsonEncoder) text(s string) {
	if e.max > 0 {
		if room := e.max - int64(len(e.b)-e.start); int64(len(s)) > room {
			s = s[:max(room, 0)+1] // enough to pass the bound; full reports it
		}
	}
	e.m.visit(len(s) / textStepBytes)
	e.b = appendJSONString(e.b, s)
}

func (e *jsonEncoder) seq(it seqIter, depth int) error {
	e.b = append(e.b, '[')
	first := true
	for el, ok := it.next(); ok; el, ok = it.next() {
		if !first {
			e.b = append(e.b, ',')
		}
		first = false
		e.m.visit(1)
		if err := e.value(el, depth+1); err != nil {
			return err
		}
	}
	e.b = append(e.b, ']')
	return nil
}

func (e *jsonEncoder) object(m *Map, depth int) error {
	e.b = append(e.b, '{')
	var err error
	first := true
	m.Range(func(k, v Value) bool {
		if !first {
			e.b = append(e.b, ',')
		}
		first = false
		e.m.visit(1)
		switch key := k.(type) {
		case Keyword:
			e.text(string(key))
		case String:
			e.text(string(key))
		default:
			var b strings.Builder
			writeLimited(&b, k, e.keyRoom(), e.m)
			e.text(b.String())
		}
		if err = e.full(); err != nil {
			return false
		}
		e.b = append(e.b, ':')
		err = e.value(v, depth+1)
		return err == nil
	})
	if err != nil {
		return err
	}
	e.b = append(e.b, '}')
	return nil
}

// keyRoom is how much of a printed key may be written before the bound.
func (e *jsonEncoder) keyRoom() int {
	if e.max <= 0 {
		return -1
	}
	return int(max(e.max-int64(len(e.b)-e.start), 0))
}

// appendJSONString appends s quoted; invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte { return jsontext.AppendString(b, s) }
