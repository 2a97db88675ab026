package rtfs

import "strings"

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
	full := func() bool { return limit >= 0 && b.Len() > limit || m.failed() }
	switch x := v.(type) {
	case *List:
		writeSeq(b, '(', ')', x, limit, m)
	case *Vector:
		writeSeq(b, '[', ']', x, limit, m)
	case *Map:
		b.WriteByte('{')
		first := true
		x.Range(func(k, v Value) bool {
			if !first {
				b.WriteByte(' ')
			}
			first = false
			writeLimited(b, k, limit, m)
			b.WriteByte(' ')
			writeLimited(b, v, limit, m)
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
			writeLimited(b, e, limit, m)
			return m.visit(1) && !full()
		})
		b.WriteByte('}')
	default:
		n := b.Len()
		b.WriteString(v.String())
		m.visit((b.Len() - n) / textStepBytes)
	}
}

func writeSeq(b *strings.Builder, open, close byte, s sequential, limit int, m *meter) {
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
		writeLimited(b, e, limit, m)
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
	default:
		writeLimited(b, v, limit, m)
	}
}
