package rtfs

import "strings"

// writeValue appends v's printed form to b. Collections print their
// elements with their own printed forms: (1 2), [1 2], {:a 1 :b "x"},
// #{1 2}. Functions print as #<fn name>.
func writeValue(b *strings.Builder, v Value) { writeLimited(b, v, -1) }

// writeLimited is writeValue that stops printing collection elements once
// b holds more than limit bytes (limit < 0: no limit); the output is then
// a truncated form.
func writeLimited(b *strings.Builder, v Value, limit int) {
	full := func() bool { return limit >= 0 && b.Len() > limit }
	switch x := v.(type) {
	case *List:
		writeSeq(b, '(', ')', x, limit)
	case *Vector:
		writeSeq(b, '[', ']', x, limit)
	case *Lazy:
		writeLazy(b, x, limit)
	case *Map:
		b.WriteByte('{')
		first := true
		x.Range(func(k, v Value) bool {
			if !first {
				b.WriteByte(' ')
			}
			first = false
			writeLimited(b, k, limit)
			b.WriteByte(' ')
			writeLimited(b, v, limit)
			return !full()
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
			writeLimited(b, e, limit)
			return !full()
		})
		b.WriteByte('}')
	default:
		b.WriteString(v.String())
	}
}

func writeSeq(b *strings.Builder, open, close byte, s sequential, limit int) {
	b.WriteByte(open)
	it := newSeqIter(s)
	for i := 0; limit < 0 || b.Len() <= limit; i++ {
		e, ok := it.next()
		if !ok {
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		writeLimited(b, e, limit)
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
	writeLimited(&b, v, maxDescribe)
	s := b.String()
	if len(s) > maxDescribe {
		s = s[:maxDescribe] + "..."
	}
	if v == Nil {
		return "nil"
	}
	return v.Kind().String() + " " + s
}

// toStr is the str of one value: "" for nil, a string's contents, a
// character's text, and the printed form of anything else.
func toStr(b *strings.Builder, v Value) { toStrLimited(b, v, -1) }

// toStrLimited is toStr that stops printing a collection's elements once b
// holds more than limit bytes (limit < 0: no limit), as writeLimited does.
func toStrLimited(b *strings.Builder, v Value, limit int) {
	switch x := v.(type) {
	case NilType:
	case String:
		b.WriteString(string(x))
	case *Regex:
		b.WriteString(x.src) // as Java's Pattern.toString
	default:
		writeLimited(b, v, limit)
	}
}
