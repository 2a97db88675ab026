package rtfs

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// String functions. Indexes and lengths count Unicode code points, not
// bytes. Separators and patterns are literal strings (there are no
// regular expressions).

func addStrBuiltins(t builtinTable) {
	t.add("str", 0, -1, builtinStr)
	t.add("subs", 2, 3, builtinSubs)
	t.alias("substring", "subs")
	t.add("string-length", 1, 1, func(th *Thread, args []Value) (Value, error) {
		var s string
		if err := unpackArgs(th, args, &s); err != nil {
			return nil, err
		}
		return Int(utf8.RuneCountInString(s)), th.scanText(len(s))
	})
	t.add("split", 2, 3, builtinSplit)
	t.add("join", 1, 2, builtinJoin)
	t.alias("string-join", "join")
	t.add("upper-case", 1, 1, strMap(upperCase))
	t.alias("string-upper", "upper-case")
	t.add("lower-case", 1, 1, strMap(lowerCase))
	t.alias("string-lower", "lower-case")
	t.add("trim", 1, 1, strMap(strings.TrimSpace))
	t.alias("string-trim", "trim")
	t.add("starts-with?", 2, 2, strPred(strings.HasPrefix))
	t.add("ends-with?", 2, 2, strPred(strings.HasSuffix))
	t.add("includes?", 2, 2, strPred(strings.Contains))
	t.alias("string-contains", "includes?")
	t.alias("string-contains?", "includes?")
	t.add("blank?", 1, 1, func(th *Thread, args []Value) (Value, error) {
		var s string // nil is blank
		if err := unpackArgs(th, args, orNil(&s)); err != nil {
			return nil, err
		}
		return Bool(strings.TrimSpace(s) == ""), th.scanText(len(s))
	})
	t.add("replace", 3, 3, func(th *Thread, args []Value) (Value, error) {
		if done, v, err := replacePattern(th, args, true); done {
			return v, err
		}
		var s, old, repl string
		if err := unpackArgs(th, args, &s, &old, &repl); err != nil {
			return nil, err
		}
		if old == "" {
			return nil, fmt.Errorf("argument 2: the string to replace is empty")
		}
		if err := th.scanText(len(s)); err != nil {
			return nil, err
		}
		if n := strings.Count(s, old); n > 0 && len(repl) > len(old) {
			if err := th.buildText(len(s) + n*(len(repl)-len(old))); err != nil {
				return nil, err
			}
		} else if err := th.buildText(len(s)); err != nil {
			return nil, err
		}
		return String(strings.ReplaceAll(s, old, repl)), nil
	})
}

// strInto appends the str of v to b, printing no more than the thread's
// room for text (see textRoom) and counting each element printed on m: a
// value too large to print is a limit error, found before all of it is
// printed, and so is one that shares so much structure that printing it
// would outrun the step budget.
func strInto(th *Thread, b *strings.Builder, v Value, m *meter) error {
	room := th.textRoom()
	toStrLimited(b, v, room, m)
	if m.failed() {
		return m.err
	}
	if room >= 0 && b.Len() > room {
		return th.buildText(b.Len()) // over the size limit or the budget
	}
	return nil
}

// builtinStr concatenates the str of each argument: nil adds nothing, a
// string its contents, anything else its printed form.
func builtinStr(th *Thread, args []Value) (Value, error) {
	if len(args) == 1 {
		if s, ok := args[0].(String); ok {
			return s, nil
		}
	}
	if err := realizeLazyArgs(th, args, true); err != nil {
		return nil, err
	}
	var b strings.Builder
	m := meter{th: th}
	for _, a := range args {
		if err := strInto(th, &b, a, &m); err != nil {
			return nil, err
		}
	}
	if err := m.done(); err != nil {
		return nil, err
	}
	return String(b.String()), th.buildText(b.Len())
}

// strMap is a builtin that maps a string to a string with f: it reads
// the string and builds the result.
func strMap(f func(string) string) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		var s string
		if err := unpackArgs(th, args, &s); err != nil {
			return nil, err
		}
		if err := th.scanText(len(s)); err != nil {
			return nil, err
		}
		out := f(s)
		return String(out), th.buildText(len(out))
	}
}

// strPred is a builtin that tests a string against another with f, which
// reads up to the whole of the first.
func strPred(f func(s, sub string) bool) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		var s, sub string
		if err := unpackArgs(th, args, &s, &sub); err != nil {
			return nil, err
		}
		if err := th.scanText(len(s)); err != nil {
			return nil, err
		}
		return Bool(f(s, sub)), nil
	}
}

// builtinSubs is (subs s start [end]): the code points start..end-1.
func builtinSubs(th *Thread, args []Value) (Value, error) {
	var s string
	var start, end int64
	if err := unpackArgs(th, args, &s, &start, &end); err != nil {
		return nil, err
	}
	if err := th.scanText(len(s)); err != nil {
		return nil, err
	}
	n := utf8.RuneCountInString(s)
	if len(args) < 3 {
		end = int64(n)
	}
	if start < 0 || end > int64(n) || start > end {
		return nil, indexError("range %d..%d out of bounds for string of length %d", start, end, n)
	}
	if n == len(s) {
		return String(s[start:end]), nil
	}
	lo := runeOffset(s, int(start))
	return String(s[lo : lo+runeOffset(s[lo:], int(end-start))]), nil
}

// runeOffset returns the byte offset of code point i of s (len(s) past the
// end).
func runeOffset(s string, i int) int {
	for off := range s {
		if i == 0 {
			return off
		}
		i--
	}
	return len(s)
}

// builtinSplit is (split s sep limit?): the pieces of s around each match
// of the regex sep, or each occurrence of the literal string sep, as a
// vector of strings, with Java's String.split rules (splitRegex): trailing
// empty pieces dropped unless a limit is given, at most limit pieces when
// it is positive. An empty sep splits into code points.
func builtinSplit(th *Thread, args []Value) (Value, error) {
	var s string
	var sep Value
	var n int64
	if err := unpackArgs(th, args, &s, &sep, &n); err != nil {
		return nil, err
	}
	limit := int(max(min(n, 1<<30), -1))
	var re *regexp.Regexp
	switch sep := sep.(type) {
	case *Regex:
		re = sep.re
	case String:
		re = regexp.MustCompile(regexp.QuoteMeta(string(sep)))
	default:
		return nil, argTypeError(2, "a regex or a string", sep)
	}
	parts, err := splitRegex(th, re, s, limit)
	if err != nil {
		return nil, err
	}
	if err := th.build(len(parts)); err != nil {
		return nil, err
	}
	out := make([]Value, len(parts))
	for i, p := range parts {
		out[i] = String(p)
	}
	return vectorOwned(out), nil
}

// dropTrailingEmpty drops the empty strings at the end of parts, as Java's
// String.split (and so clojure.string/split) does; a string without any
// separator stays one piece, even the empty string.
func dropTrailingEmpty(parts []string) []string {
	if len(parts) == 1 {
		return parts
	}
	n := len(parts)
	for n > 0 && parts[n-1] == "" {
		n--
	}
	return parts[:n]
}

// builtinJoin is (join coll) or (join sep coll): the str of each element,
// separated by sep.
func builtinJoin(th *Thread, args []Value) (Value, error) {
	var sep string
	var elems []Value
	dst := []any{&sep, &elems}
	if len(args) == 1 {
		dst = dst[1:] // (join coll)
	}
	if err := unpackArgs(th, args, dst...); err != nil {
		return nil, err
	}
	var b strings.Builder
	m := meter{th: th}
	for i, e := range elems {
		if i > 0 {
			b.WriteString(sep)
		}
		if err := strInto(th, &b, e, &m); err != nil {
			return nil, err
		}
	}
	if err := m.done(); err != nil {
		return nil, err
	}
	return String(b.String()), th.buildText(b.Len())
}
