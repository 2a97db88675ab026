package rtfs

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// The part of Clojure's core library that processor writers reach for first
// (docs/rtfs-values.md, The core library): errors as data (ex-info ...), math, parsing and coercion,
// format and pr-str, the clojure.string functions under their namespaced
// names, and the sequence functions that need no callback. The ones that
// take a function are in the prelude.

func addCljBuiltins(t builtinTable) {
	// Errors as data. A caught error is a map {:type :error :message m};
	// ex-info builds one with :data (and :cause), so (throw (ex-info ...))
	// and a runtime error are read the same way.
	t.add("ex-info", 2, 3, builtinExInfo)
	t.add("ex-message", 1, 1, exField("message"))
	t.add("ex-data", 1, 1, exField("data"))
	t.add("ex-cause", 1, 1, exField("cause"))

	// Math. round is half-up to an int, as Clojure's round; floor and ceil
	// return floats, as clojure.math's.
	t.add("round", 1, 1, builtinRound)
	t.add("round-to", 2, 2, builtinRoundTo)
	t.add("floor", 1, 1, floatFn(math.Floor))
	t.add("ceil", 1, 1, floatFn(math.Ceil))
	t.add("sqrt", 1, 1, floatFn(math.Sqrt))
	t.add("exp", 1, 1, floatFn(math.Exp))
	// Plain log is RTFS's logging function (println's sibling): the natural
	// logarithm is clojure.math/log (and math/log) only.
	t.add("clojure.math/log", 1, 1, floatFn(math.Log))
	t.add("log10", 1, 1, floatFn(math.Log10))
	t.add("pow", 2, 2, floatFn2(math.Pow))

	// Parsing and coercion.
	t.alias("parse-long", "parse-int")
	t.alias("parse-double", "parse-float")
	t.add("parse-boolean", 1, 1, func(th *Thread, args []Value) (Value, error) {
		var s string
		if err := unpackArgs(th, args, &s); err != nil {
			return nil, err
		}
		switch s {
		case "true":
			return True, nil
		case "false":
			return False, nil
		}
		return Nil, nil
	})
	t.add("boolean", 1, 1, func(_ *Thread, args []Value) (Value, error) { return Bool(Truth(args[0])), nil })
	t.alias("long", "int")
	t.add("num", 1, 1, func(th *Thread, args []Value) (Value, error) {
		var x Value
		err := unpackArgs(th, args, number(&x))
		return x, err
	})
	t.add("pos-int?", 1, 1, intPred(func(n Int) bool { return n > 0 }))
	t.add("neg-int?", 1, 1, intPred(func(n Int) bool { return n < 0 }))
	t.add("nat-int?", 1, 1, intPred(func(n Int) bool { return n >= 0 }))
	t.add("identical?", 2, 2, func(_ *Thread, args []Value) (Value, error) { return Bool(args[0] == args[1]), nil })

	// Printing.
	t.add("format", 1, -1, builtinFormat)
	t.add("pr-str", 0, -1, printStr(styleClj, ""))
	t.add("prn-str", 0, -1, printStr(styleClj, "\n"))
	t.add("print-str", 0, -1, printStr(stylePrint, ""))
	t.add("println-str", 0, -1, printStr(stylePrint, "\n"))

	addCljStringBuiltins(t)

	// Sequences without a callback.
	t.add("partition-all", 1, 3, xformArity(1, "%xf-partition-all", builtinPartitionAll))
	t.add("interleave", 0, -1, builtinInterleave)
	t.add("flatten", 1, 1, builtinFlatten)
	t.add("dedupe", 0, 1, xformArity(0, "%xf-dedupe", lazyArity(0, "%lazy-dedupe", builtinDedupe, Keyword("rtfs.internal/none"))))
	t.add("split-at", 2, 2, builtinSplitAt)
	t.add("take-nth", 1, 2, xformArity(1, "%xf-take-nth", builtinTakeNth))
	t.add("distinct?", 1, -1, func(th *Thread, args []Value) (Value, error) {
		seen := make(valueSet, len(args))
		m := meter{th: th}
		for _, a := range args {
			if !seen.add(a, &m) {
				return False, m.done()
			}
		}
		return True, m.done()
	})
	t.add("nthrest", 2, 2, func(th *Thread, args []Value) (Value, error) {
		var coll Value
		var n int
		if err := unpackArgs(th, args, &coll, &n); err != nil {
			return nil, err
		}
		if coll == Nil {
			return emptyList, nil
		}
		return dropSeq(th, coll, n)
	})
	t.add("nthnext", 2, 2, func(th *Thread, args []Value) (Value, error) {
		var coll Value
		var n int
		if err := unpackArgs(th, args, &coll, &n); err != nil {
			return nil, err
		}
		return nextSeq(th, coll, n)
	})
	// doall and dorun compute a lazy sequence's elements (the others are
	// computed already).
	t.add("doall", 1, 2, func(th *Thread, args []Value) (Value, error) {
		l, ok := args[len(args)-1].(*Lazy)
		if !ok {
			return args[len(args)-1], nil
		}
		elems, _, err := realize(th, l, -1)
		if err != nil {
			return nil, err
		}
		return lazyRun(elems, Nil), nil
	})
	t.add("dorun", 1, 2, func(th *Thread, args []Value) (Value, error) {
		if l, ok := args[len(args)-1].(*Lazy); ok {
			if _, _, err := realize(th, l, -1); err != nil {
				return nil, err
			}
		}
		return Nil, nil
	})
	t.add("array-map", 0, -1, func(th *Thread, args []Value) (Value, error) {
		if len(args)%2 != 0 {
			return nil, fmt.Errorf("expected an even number of arguments (key value ...), got %d", len(args))
		}
		m, err := th.mapOf(args)
		return m, err
	})

	// The lazy infinite forms have no eager meaning: each error names the
	// bounded form to use instead.
	// rtfs-compile-2 programs call this iterate (the prelude's is lazy).
	t.add("iterate", 2, 2, lazyOnly("iterate", "(iterate-n n f x), the first n values of x, (f x), (f (f x)) ..."))
	t.add("cycle", 1, 1, func(th *Thread, args []Value) (Value, error) {
		var elems []Value
		if err := unpackArgs(th, args, &elems); err != nil {
			return nil, err
		}
		if len(elems) == 0 {
			return emptyList, nil
		}
		return &Lazy{kind: lzCycle, inf: true, origin: "(cycle coll)", a: vectorOwned(elems)}, nil
	})

}

// intrNoMatch is the default of a case or condp without one.
func intrNoMatch(_ *Thread, args []Value) (Value, error) {
	form, _ := args[0].(String)
	return nil, fmt.Errorf("%s: no matching clause: %s", string(form), args[1])
}

// intrLazyOnly is the error of a prelude function's infinite form.
func intrLazyOnly(_ *Thread, args []Value) (Value, error) {
	name, _ := args[0].(String)
	instead, _ := args[1].(String)
	return lazyOnly(string(name), string(instead))(nil, nil)
}

func lazyOnly(name, instead string) builtinFn {
	return func(_ *Thread, _ []Value) (Value, error) {
		return nil, fmt.Errorf("(%s ...) would be an infinite lazy sequence, and RTFS sequences are eager: write %s", name, instead)
	}
}

func builtinExInfo(th *Thread, args []Value) (Value, error) {
	var msg string
	var data, cause Value
	if err := unpackArgs(th, args, &msg, &data, &cause); err != nil {
		return nil, err
	}
	switch data.(type) {
	case *Map, NilType:
	default:
		return nil, argTypeError(2, "a map of data", data)
	}
	kvs := []Value{Keyword("type"), Keyword("error"), Keyword("message"), String(msg), Keyword("data"), data}
	if cause != nil {
		kvs = append(kvs, Keyword("cause"), cause)
	}
	return MapOf(kvs...), nil
}

// exField reads a key of an error value (a caught error or an ex-info);
// anything else has none, as Clojure's ex-data of a non-exception is nil.
func exField(key string) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		if m, ok := args[0].(*Map); ok {
			if v, ok := m.GetKeyword(key); ok {
				return v, nil
			}
		}
		return Nil, nil
	}
}

func builtinAssert(th *Thread, args []Value) (Value, error) {
	if Truth(args[0]) {
		return Nil, nil
	}
	form, _ := args[2].(String)
	if args[1] != Nil {
		var b strings.Builder
		if err := strInto(th, &b, args[1], &meter{th: th}); err != nil {
			return nil, err
		}
		//lint:ignore ST1005 Clojure's AssertionError text, documented (docs/rtfs-syntax.md) and matched by programs
		return nil, withKind(compile.KindAssert, fmt.Errorf("Assert failed: %s\n%s", b.String(), string(form)))
	}
	//lint:ignore ST1005 Clojure's AssertionError text, documented (docs/rtfs-syntax.md) and matched by programs
	return nil, withKind(compile.KindAssert, fmt.Errorf("Assert failed: %s", string(form)))
}

func floatFn(f func(float64) float64) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		var x float64
		if err := unpackArgs(th, args, &x); err != nil {
			return nil, err
		}
		return Float(f(x)), nil
	}
}

// builtinRound is Clojure's round: half up (toward +Inf on a tie), an int.
func builtinRound(th *Thread, args []Value) (Value, error) {
	var x Value
	if err := unpackArgs(th, args, number(&x)); err != nil {
		return nil, err
	}
	if n, ok := x.(Int); ok {
		return n, nil
	}
	r := math.Floor(float64(x.(Float)) + 0.5)
	if math.IsNaN(r) || r >= math.MaxInt64 || r < math.MinInt64 {
		return nil, fmt.Errorf("%s does not round to an int", x)
	}
	return Int(r), nil
}

// builtinRoundTo is (round-to x n): x rounded half up to n decimal places,
// a float, so that averages print as 18.55 rather than 18.549999999999997.
func builtinRoundTo(th *Thread, args []Value) (Value, error) {
	var x float64
	var n int64
	if err := unpackArgs(th, args, &x, &n); err != nil {
		return nil, err
	}
	if n < 0 || n > 15 {
		return nil, fmt.Errorf("argument 2: expected 0 to 15 decimal places, got %d", n)
	}
	s := strconv.FormatFloat(x, 'f', int(n), 64)
	if p := math.Pow(10, float64(n)); !math.IsInf(x*p, 0) {
		s = strconv.FormatFloat(math.Floor(x*p+0.5)/p, 'f', int(n), 64)
	}
	f, _ := strconv.ParseFloat(s, 64)
	return Float(f), nil
}

func intPred(f func(Int) bool) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		n, ok := args[0].(Int)
		return Bool(ok && f(n)), nil
	}
}

// builtinFormat is the part of java.util.Formatter that people use: %s %d
// %f %e %x %o %b %% %n, a width, a precision, and the flags - and 0.
func builtinFormat(th *Thread, args []Value) (Value, error) {
	var f string
	var vals []Value
	if err := unpackArgs(th, args, &f, rest(&vals)); err != nil {
		return nil, err
	}
	var b strings.Builder
	next := 1
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(f) && strings.IndexByte("-0+ ,#", f[j]) >= 0 {
			j++
		}
		for j < len(f) && (f[j] >= '0' && f[j] <= '9' || f[j] == '.') {
			j++
		}
		if j >= len(f) {
			return nil, fmt.Errorf("format string %q ends inside a conversion", f)
		}
		spec, conv := f[i+1:j], f[j]
		i = j
		switch conv {
		case '%':
			b.WriteByte('%')
			continue
		case 'n':
			b.WriteByte('\n')
			continue
		}
		if strings.Contains(spec, "#") || strings.ContainsAny(spec, "+ ,") && !strings.ContainsRune("dfeEg", rune(conv)) {
			return nil, fmt.Errorf("format: the flag %s is not supported with %%%c (in %%%s%c)", flagsIn(spec), conv, spec, conv)
		}
		if next > len(vals) {
			return nil, fmt.Errorf("format: %%%s%c has no argument (%d given)", spec, conv, len(vals))
		}
		a := vals[next-1]
		next++
		if err := formatOne(th, &b, spec, conv, a, next-1); err != nil {
			return nil, err
		}
	}
	return String(b.String()), th.buildText(b.Len())
}

// formatOne appends one conversion to b. The width and the printed value
// must fit the thread's room for text.
func formatOne(th *Thread, b *strings.Builder, spec string, conv byte, a Value, argNo int) error {
	room := th.textRoom()
	if w := formatWidth(spec); room >= 0 && w > room-b.Len() {
		return th.buildText(b.Len() + w) // over the size limit or the budget
	}
	bad := func(want string) error {
		return fmt.Errorf("format: %%%s%c needs %s, argument %d is %s", spec, conv, want, argNo, describe(a))
	}
	switch conv {
	case 's', 'S':
		var sb strings.Builder
		if a == Nil {
			sb.WriteString("null") // as Java prints it
		} else if err := strInto(th, &sb, a, &meter{th: th}); err != nil {
			return err
		}
		s := sb.String()
		if conv == 'S' {
			s = strings.ToUpper(s)
		}
		fmt.Fprintf(b, "%"+spec+"s", s)
	case 'd':
		n, ok := a.(Int)
		if !ok {
			return bad("an int")
		}
		writeGrouped(b, spec, "d", int64(n))
	case 'x', 'X', 'o':
		n, ok := a.(Int)
		if !ok {
			return bad("an int")
		}
		fmt.Fprintf(b, "%"+spec+string(conv), int64(n))
	case 'f', 'e', 'E', 'g':
		x, ok := a.(Float)
		if !ok {
			return bad("a float (use (double x))")
		}
		if !strings.Contains(spec, ".") {
			spec += ".6"
		}
		if conv == 'f' {
			writeFixed(b, spec, float64(x))
			break
		}
		writeGrouped(b, spec, string(conv), float64(x))
	case 'b', 'B':
		s := strconv.FormatBool(Truth(a))
		if conv == 'B' {
			s = strings.ToUpper(s)
		}
		fmt.Fprintf(b, "%"+spec+"s", s)
	default:
		return fmt.Errorf("format: the conversion %%%c is not supported (use %%s %%d %%f %%e %%x %%o %%b %%%% %%n)", conv)
	}
	return nil
}

// formatWidth is the width of a conversion's spec ("-08.3" is 8), at most
// maxInt.
func formatWidth(spec string) int {
	spec = spec[len(flagsIn(spec)):]
	if i := strings.IndexByte(spec, '.'); i >= 0 {
		spec = spec[:i]
	}
	w, err := strconv.Atoi(spec)
	if err != nil && spec != "" {
		return maxInt // out of range
	}
	return w
}

func addCljStringBuiltins(t builtinTable) {
	t.add("capitalize", 1, 1, strMap(func(s string) string {
		_, n := utf8.DecodeRuneInString(s)
		if n == 0 {
			return s
		}
		return upperCase(s[:n]) + lowerCase(s[n:]) // Java's full case mappings
	}))
	t.add("triml", 1, 1, strMap(func(s string) string { return strings.TrimLeftFunc(s, unicode.IsSpace) }))
	t.add("trimr", 1, 1, strMap(func(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) }))
	t.add("trim-newline", 1, 1, strMap(func(s string) string { return strings.TrimRight(s, "\r\n") }))
	t.add("split-lines", 1, 1, func(th *Thread, args []Value) (Value, error) {
		var s string
		if err := unpackArgs(th, args, &s); err != nil {
			return nil, err
		}
		lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
		for len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1] // Java's split drops trailing empty strings
		}
		if err := th.build(len(lines)); err != nil {
			return nil, err
		}
		out := make([]Value, len(lines))
		for i, l := range lines {
			out[i] = String(l)
		}
		return vectorOwned(out), nil
	})
	t.add("index-of", 2, 3, stringIndex(false))
	t.add("last-index-of", 2, 3, stringIndex(true))
	t.add("replace-first", 3, 3, func(th *Thread, args []Value) (Value, error) {
		if done, v, err := replacePattern(th, args, false); done {
			return v, err
		}
		var s, old, repl string
		if err := unpackArgs(th, args, &s, &old, &repl); err != nil {
			return nil, err
		}
		out := strings.Replace(s, old, repl, 1)
		return String(out), th.buildText(len(out))
	})
	t.add("string-reverse", 1, 1, strMap(func(s string) string {
		r := []rune(s)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return string(r)
	}))
	// clojure.string's names, also under the usual alias str/. Patterns are
	// literal strings: RTFS has no regular expressions.
	for name, core := range map[string]string{
		"upper-case": "upper-case", "lower-case": "lower-case", "capitalize": "capitalize",
		"trim": "trim", "triml": "triml", "trimr": "trimr", "trim-newline": "trim-newline",
		"blank?": "blank?", "starts-with?": "starts-with?", "ends-with?": "ends-with?",
		"includes?": "includes?", "index-of": "index-of", "last-index-of": "last-index-of",
		"replace": "replace", "replace-first": "replace-first", "split": "split",
		"split-lines": "split-lines", "join": "join", "reverse": "string-reverse",
	} {
		t.alias("clojure.string/"+name, core)
		t.alias("str/"+name, core)
	}
}

func stringIndex(last bool) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		var s, sub string
		var i int64 = -1
		if err := unpackArgs(th, args, &s, &sub, &i); err != nil {
			return nil, err
		}
		if err := th.scanText(len(s)); err != nil {
			return nil, err
		}
		n := utf8.RuneCountInString(s)
		from := -1
		if len(args) == 3 {
			from = int(min(max(i, 0), int64(n)))
		}
		at := -1
		if last {
			end := len(s)
			if from >= 0 {
				end = runeOffset(s, min(from+utf8.RuneCountInString(sub), n))
			}
			at = strings.LastIndex(s[:end], sub)
		} else {
			start := runeOffset(s, max(from, 0))
			if i := strings.Index(s[start:], sub); i >= 0 {
				at = start + i
			}
		}
		if at < 0 {
			return Nil, nil
		}
		return Int(utf8.RuneCountInString(s[:at])), nil
	}
}

func builtinInterleave(th *Thread, args []Value) (Value, error) {
	if len(args) > 0 && allLazy(args) {
		return nil, th.redirectTo("%lazy-interleave", NewVector(args...))
	}
	cols, err := boundedSlices(th, args)
	if err != nil {
		return nil, err
	}
	n := -1
	for _, xs := range cols {
		if n < 0 || len(xs) < n {
			n = len(xs)
		}
	}
	if n <= 0 {
		return emptyList, nil
	}
	if err := th.build(n * len(args)); err != nil {
		return nil, err
	}
	out := make([]Value, 0, n*len(args))
	for i := 0; i < n; i++ {
		for _, c := range cols {
			out = append(out, c[i])
		}
	}
	return listOwned(out), nil
}

// builtinFlatten flattens nested lists and vectors (not maps or sets, as in
// Clojure) into one list; nil and a non-sequential value give (). It
// counts every element it walks, nested collections included, so a value
// that shares structure costs what its flattened form does.
func builtinFlatten(th *Thread, args []Value) (Value, error) {
	var out []Value
	m := meter{th: th, bytes: elemBytes}
	var walk func(v Value, depth int) error
	walk = func(v Value, depth int) error {
		if depth > 10000 {
			return errors.New("nested deeper than 10000 levels")
		}
		if err := m.tick(); err != nil {
			return err
		}
		switch v.(type) {
		case *List, *Vector:
		default:
			out = append(out, v)
			return nil
		}
		it := newSeqIter(v)
		for x, ok := it.next(); ok; x, ok = it.next() {
			if err := walk(x, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	switch args[0].(type) {
	case *List, *Vector:
		if err := walk(args[0], 0); err != nil {
			return nil, err
		}
	}
	if err := m.done(); err != nil {
		return nil, err
	}
	return listOwned(out), th.checkSize(len(out))
}

// builtinDedupe drops consecutive duplicates.
func builtinDedupe(th *Thread, args []Value) (Value, error) {
	var elems []Value
	if err := unpackArgs(th, args, &elems); err != nil {
		return nil, err
	}
	out := elems[:0]
	m := meter{th: th}
	for i, e := range elems {
		if i == 0 || !m.equal(e, out[len(out)-1]) {
			out = append(out, e)
		}
	}
	return listOwned(out), m.done()
}

// builtinSplitAt is (split-at n coll): [(take n coll) (drop n coll)].
func builtinSplitAt(th *Thread, args []Value) (Value, error) {
	var n int
	var elems []Value
	if err := unpackArgs(th, args, &n, &elems); err != nil {
		return nil, err
	}
	n = min(n, len(elems))
	return NewVector(listOwned(elems[:n:n]), listOwned(elems[n:])), nil
}

// builtinTakeNth is (take-nth n coll): every nth element from the first, a
// list; over a lazy sequence, the lazy sequence of them (in the prelude).
func builtinTakeNth(th *Thread, args []Value) (Value, error) {
	var n int64
	var coll Value
	if err := unpackArgs(th, args, &n, &coll); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("argument 1: expected a positive int, got %d", n)
	}
	if _, ok := coll.(*Lazy); ok {
		return nil, th.redirectTo("%lazy-take-nth", args[0], coll)
	}
	elems, err := toElems(th, 2, coll)
	if err != nil {
		return nil, err
	}
	size := (len(elems) + int(min(n, int64(len(elems)+1))) - 1) / int(min(n, int64(len(elems)+1)))
	if err := th.build(size); err != nil {
		return nil, err
	}
	out := make([]Value, 0, size)
	for i := 0; i < len(elems); i += int(min(n, int64(len(elems)))) {
		out = append(out, elems[i])
	}
	return listOwned(out), nil
}

// flagsIn returns the flags of a format specifier.
func flagsIn(spec string) string {
	end := 0
	for end < len(spec) && strings.IndexByte("-0+ ,#", spec[end]) >= 0 {
		end++
	}
	return spec[:end]
}

// writeGrouped formats x with Go's verb, after java.util.Formatter's flags:
// + and space as Go has them, and , grouping the integer digits by
// thousands (the width then counts the commas, as in Java).
func writeGrouped(b *strings.Builder, spec, verb string, x any) {
	flags := flagsIn(spec)
	if !strings.Contains(flags, ",") {
		fmt.Fprintf(b, "%"+spec+verb, x)
		return
	}
	rest := spec[len(flags):]
	width, prec, _ := strings.Cut(rest, ".")
	goSpec := strings.NewReplacer(",", "", "0", "", "-", "").Replace(flags)
	if prec != "" || strings.Contains(rest, ".") {
		goSpec += "." + prec
	}
	s := fmt.Sprintf("%"+goSpec+verb, x)
	// Group the digits before the decimal point (after any sign).
	start := strings.IndexAny(s, "0123456789")
	end := start
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if start >= 0 {
		digits := s[start:end]
		var g strings.Builder
		for i, c := range digits {
			if i > 0 && (len(digits)-i)%3 == 0 {
				g.WriteByte(',')
			}
			g.WriteRune(c)
		}
		s = s[:start] + g.String() + s[end:]
	}
	w := 0
	fmt.Sscan(width, &w)
	for len(s) < w {
		switch {
		case strings.Contains(flags, "-"):
			s += " "
		case strings.Contains(flags, "0") && start >= 0:
			s = s[:start] + "0" + s[start:]
			start++
		default:
			s = " " + s
		}
	}
	b.WriteString(s)
}

// xformArity is a sequence builtin that, called with n arguments (no
// collection), returns its transducer: a function the prelude builds
// (name), since it calls the reducing function it is given.
func xformArity(n int, name string, fn builtinFn) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		if len(args) == n {
			return nil, th.redirectTo(name, args...)
		}
		return fn(th, args)
	}
}

// writeFixed is Java's %f of x: the digits of x's shortest decimal form
// (Double.toString's, not the exact binary value's) rounded half up to the
// precision, so (format "%.1f" 0.25) is "0.3" and (format "%.2f" 1.005)
// "1.01" where Go's fmt gives "0.2" and "1.00"; then the flags (- 0 + space
// ,) and the width. NaN and the infinities print as Java prints them.
func writeFixed(b *strings.Builder, spec string, x float64) {
	flags := flagsIn(spec)
	width, prec, _ := strings.Cut(spec[len(flags):], ".")
	p, _ := strconv.Atoi(prec)
	var body string
	switch {
	case math.IsNaN(x):
		body = "NaN"
	case math.IsInf(x, 0):
		body = "Infinity"
	default:
		body = fixedDigits(math.Abs(x), p)
		if strings.Contains(flags, ",") {
			ip, fp, hasFrac := strings.Cut(body, ".")
			body = groupDigits(ip)
			if hasFrac {
				body += "." + fp
			}
		}
	}
	sign := ""
	switch {
	case math.Signbit(x) && !math.IsNaN(x):
		sign = "-"
	case strings.Contains(flags, "+") && !math.IsNaN(x):
		sign = "+"
	case strings.Contains(flags, " ") && !math.IsNaN(x):
		sign = " "
	}
	w, _ := strconv.Atoi(width)
	pad := w - len(sign) - len(body)
	switch {
	case pad <= 0:
		b.WriteString(sign + body)
	case strings.Contains(flags, "-"):
		b.WriteString(sign + body + strings.Repeat(" ", pad))
	case strings.Contains(flags, "0") && !math.IsNaN(x) && !math.IsInf(x, 0):
		b.WriteString(sign + strings.Repeat("0", pad) + body)
	default:
		b.WriteString(strings.Repeat(" ", pad) + sign + body)
	}
}

// fixedDigits is x >= 0 with prec decimals, rounded half up on the digits
// of its shortest decimal form.
func fixedDigits(x float64, prec int) string {
	e := strconv.FormatFloat(x, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	digits := []byte(strings.Replace(mant, ".", "", 1))
	ex, _ := strconv.Atoi(exp)
	intDigits := ex + 1 // digits before the point; <= 0 for x < 1
	if x == 0 {
		digits, intDigits = nil, 1
	}
	keep := intDigits + prec
	switch {
	case keep < 0:
		digits = nil
	case keep < len(digits):
		up := digits[keep] >= '5'
		digits = digits[:keep]
		if up {
			i := keep - 1
			for ; i >= 0 && digits[i] == '9'; i-- {
				digits[i] = '0'
			}
			if i >= 0 {
				digits[i]++
			} else {
				digits = append([]byte{'1'}, digits...)
				intDigits++
			}
		}
	}
	// Place the point: pad with zeros on the left (x < 1) and the right.
	if intDigits <= 0 {
		digits = append([]byte(strings.Repeat("0", 1-intDigits)), digits...)
		intDigits = 1
	}
	for len(digits) < intDigits+prec {
		digits = append(digits, '0')
	}
	if prec == 0 {
		return string(digits[:intDigits])
	}
	return string(digits[:intDigits]) + "." + string(digits[intDigits:])
}

// groupDigits puts a comma between each group of three digits.
func groupDigits(d string) string {
	var g strings.Builder
	for i, c := range d {
		if i > 0 && (len(d)-i)%3 == 0 {
			g.WriteByte(',')
		}
		g.WriteRune(c)
	}
	return g.String()
}

// printStr is pr-str (styleClj) or print-str (stylePrint): the arguments'
// printed forms separated by spaces, then end ("\n" for prn-str and
// println-str). print's form of a string is its text.
func printStr(style printStyle, end string) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		if err := realizeLazyArgs(th, args, true); err != nil {
			return nil, err
		}
		var b strings.Builder
		m := meter{th: th}
		for i, a := range args {
			if i > 0 {
				b.WriteByte(' ')
			}
			if s, ok := a.(String); ok && style == stylePrint {
				b.WriteString(string(s))
				m.visit(len(s) / textStepBytes)
				continue
			}
			writeForm(&b, a, th.textRoom(), &m, style)
		}
		b.WriteString(end)
		if err := m.done(); err != nil {
			return nil, err
		}
		return String(b.String()), th.buildText(b.Len())
	}
}
