package rtfs

import (
	"strings"
	"unicode/utf8"
)

// writeValue appends v's printed form to b. Collections print their
// elements with their own printed forms: (1 2), [1 2], {:a 1 :b "x"},
// #{1 2}. Functions print as #<fn name>. A value that shares structure
// prints all of it, however long: show an untrusted value with
// writeLimited.
func writeValue(b *strings.Builder, v Value) { writeLimited(b, v, -1, nil) }

// writeLimited is writeValue that stops printing collection elements once
// b holds more than limit bytes (limit < 0: no limit) or m's budget is
// spent; the output is then a truncated form. It counts on m a unit per
// element and one per textStepBytes bytes written.
func writeLimited(b *strings.Builder, v Value, limit int, m *meter) {
	writeForm(b, v, limit, m, styleHost)
}

// A printStyle is how writeForm prints.
type printStyle uint8

const (
	// styleHost is the host's displays and error messages: {:a 1 :b 2}.
	styleHost printStyle = iota
	// styleClj is Clojure's pr: map entries separated by ", " ({:a 1,
	// :b 2}), the form of pr-str, prn, str and format's %s.
	styleClj
	// stylePrint is Clojure's print: styleClj with the strings inside a
	// collection written without quotes (print-str, with-out-str's println).
	stylePrint
)

// writeForm is writeLimited in a style.
func writeForm(b *strings.Builder, v Value, limit int, m *meter, style printStyle) {
	clj := style != styleHost
	full := func() bool { return limit >= 0 && b.Len() > limit || m.failed() }
	switch x := v.(type) {
	case *List:
		writeSeq(b, '(', ')', x, limit, m, style)
	case *Vector:
		writeSeq(b, '[', ']', x, limit, m, style)
	case *Lazy:
		writeLazy(b, x, limit, m, style)
	case *Map:
		b.WriteByte('{')
		first := true
		x.Range(func(k, v Value) bool {
			if !first {
				if clj {
					b.WriteByte(',')
				}
				b.WriteByte(' ')
			}
			first = false
			writeForm(b, k, limit, m, style)
			b.WriteByte(' ')
			writeForm(b, v, limit, m, style)
			return m.visit(1) && !full()
		})
		b.WriteByte('}')
	case *Set:
		b.WriteString("#{")
		first := true
		x.Range(func(e Value) bool {
			if !first {
				b.WriteByte(' ')
			}
			first = false
			writeForm(b, e, limit, m, style)
			return m.visit(1) && !full()
		})
		b.WriteByte('}')
	case String:
		n := b.Len()
		if style == stylePrint {
			b.WriteString(string(x))
		} else {
			b.WriteString(x.String())
		}
		m.visit((b.Len() - n) / textStepBytes)
	default:
		n := b.Len()
		b.WriteString(v.String())
		m.visit((b.Len() - n) / textStepBytes)
	}
}

func writeSeq(b *strings.Builder, open, close byte, s sequential, limit int, m *meter, style printStyle) {
	b.WriteByte(open)
	it := newSeqIter(s)
	for i := 0; (limit < 0 || b.Len() <= limit) && m.visit(1); i++ {
		e, ok := it.next()
		if !ok {
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		writeForm(b, e, limit, m, style)
	}
	b.WriteByte(close)
}

// maxDescribe bounds the printed value in error messages.
const maxDescribe = 60

// describe returns "kind printed-form" for error messages, the printed form
// cut to a readable length: `int 5`, `string "abc"`, `map {:a 1 ...`.
func describe(v Value) string {
	if v == nil {
		return "no value"
	}
	var b strings.Builder
	writeLimited(&b, v, maxDescribe, nil)
	s := b.String()
	if len(s) > maxDescribe {
		s = s[:maxDescribe] + "..."
	}
	if v == Nil {
		return "nil"
	}
	return v.Kind().String() + " " + s
}

// toStrLimited is the str of one value: "" for nil, a string's contents, a
// character's text, and the printed form of anything else; it stops
// printing a collection's elements once b holds more than limit bytes
// (limit < 0: no limit) or m's budget is spent, as writeLimited does.
func toStrLimited(b *strings.Builder, v Value, limit int, m *meter) {
	switch x := v.(type) {
	case NilType:
	case String:
		b.WriteString(string(x))
	case *Regex:
		b.WriteString(x.src) // as Java's Pattern.toString
	default:
		writeForm(b, v, limit, m, styleClj)
	}
}

// Excerpt returns v's printed form cut to max bytes, with "..." when it was
// longer: the way to show a value a program made in a message or a line.
// It stops printing once past max, so a value that shares structure costs
// O(max), not what its whole printed form would.
func Excerpt(v Value, max int) string {
	if v == nil {
		return "no value"
	}
	var b strings.Builder
	writeLimited(&b, v, max, nil)
	s := b.String()
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max] + "..."
}

// CheckOutputSize returns a *LimitError (LimitOutput) when v's JSON or
// printed form would pass max bytes (max <= 0: no bound), without writing
// it: it counts a lower bound of the size (a byte per number, a text's
// bytes, the brackets and separators) and stops at max, so it costs
// O(min(size, max)) whatever v shares. Hosts use it to refuse an output
// before they send or keep it.
func CheckOutputSize(v Value, max int64) error {
	if max <= 0 {
		return nil
	}
	c := sizeCounter{left: max}
	if c.count(v, 0) {
		return nil
	}
	return &LimitError{Limit: LimitOutput, Max: max}
}

// sizeCounter counts a lower bound of an encoding's size down from left.
type sizeCounter struct{ left int64 }

// count counts v and reports whether the bound still holds.
func (c *sizeCounter) count(v Value, depth int) bool {
	if depth > maxJSONDepth {
		return true // the encoders refuse it or print it; not a size matter
	}
	switch x := v.(type) {
	case String:
		c.left -= int64(len(x)) + 2
	case Keyword:
		c.left -= int64(len(x)) + 2
	case Symbol:
		c.left -= int64(len(x)) + 2
	case *List, *Vector:
		c.left -= 2
		it := newSeqIter(v)
		for e, ok := it.next(); ok && c.left >= 0; e, ok = it.next() {
			c.left--
			c.count(e, depth+1)
		}
	case *Map:
		c.left -= 2
		x.Range(func(k, e Value) bool {
			c.left -= 2
			c.count(k, depth+1)
			c.count(e, depth+1)
			return c.left >= 0
		})
	case *Set:
		c.left -= 2
		x.Range(func(e Value) bool {
			c.left--
			c.count(e, depth+1)
			return c.left >= 0
		})
	case *Lazy:
		// What writeLazy prints: the elements computed in Go, the first
		// lazyPrintMax of an infinite one.
		c.left -= 2
		var s Value = x
		for i := 0; c.left >= 0 && (i < lazyPrintMax || !isInfinite(s)); i++ {
			e, rest, ok, thunk, _ := stepPure(s)
			if !ok || thunk != nil {
				break
			}
			c.left--
			c.count(e, depth+1)
			s = rest
		}
	default:
		c.left--
	}
	return c.left >= 0
}
