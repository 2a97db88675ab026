package rtfs

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// The Java names a Clojure programmer types without thinking (Math/abs,
// Integer/parseInt, (.toUpperCase s), (Exception. "msg") ...), as RTFS
// functions that give what the JVM gives, values and errors: RTFS has no
// Java, only these names. None reads the clock, randomness or the
// environment (Math/random, System/currentTimeMillis are not here), so a
// replay computes the same. docs/rtfs-values.md lists them; the constants
// (Math/PI, Long/MAX_VALUE ...) are compile.Constant's, and the compiler
// turns (instance? String x) into %instance?.

func addInteropBuiltins(t builtinTable) {
	// java.lang.Math: the methods of one overload, all of doubles, take
	// any number, as Clojure converts a long for them.
	for java, core := range map[string]string{
		"floor": "floor", "ceil": "ceil", "sqrt": "sqrt", "cbrt": "clojure.math/cbrt",
		"pow": "pow", "exp": "exp", "log": "clojure.math/log", "log10": "log10",
		"log1p": "clojure.math/log1p", "expm1": "clojure.math/expm1",
		"sin": "clojure.math/sin", "cos": "clojure.math/cos", "tan": "clojure.math/tan",
		"asin": "clojure.math/asin", "acos": "clojure.math/acos", "atan": "clojure.math/atan",
		"atan2": "clojure.math/atan2", "sinh": "clojure.math/sinh", "cosh": "clojure.math/cosh",
		"tanh": "clojure.math/tanh", "hypot": "clojure.math/hypot", "rint": "clojure.math/rint",
		"toRadians": "clojure.math/to-radians", "toDegrees": "clojure.math/to-degrees",
		"IEEEremainder": "clojure.math/IEEE-remainder",
	} {
		t.alias("Math/"+java, core)
	}
	// The methods with float and double overloads take only floats: a
	// long matches none of them on the JVM ("No matching method").
	t.add("Math/round", 1, 1, floatsOnly("round", builtinJavaRound))
	t.add("Math/signum", 1, 1, floatsOnly("signum", floatFn(signum)))
	t.add("Math/ulp", 1, 1, floatsOnly("ulp", floatFn(ulp)))
	t.add("Math/nextUp", 1, 1, floatsOnly("nextUp", t["clojure.math/next-up"].impl))
	t.add("Math/nextDown", 1, 1, floatsOnly("nextDown", t["clojure.math/next-down"].impl))
	t.add("Math/copySign", 2, 2, floatsOnly("copySign", t["clojure.math/copy-sign"].impl))
	t.add("Math/abs", 1, 1, func(_ *Thread, args []Value) (Value, error) {
		switch x := args[0].(type) {
		case Int:
			if x < 0 {
				return -x, nil // Math.abs(Long.MIN_VALUE) is Long.MIN_VALUE
			}
			return x, nil
		case Float:
			return Float(math.Abs(float64(x))), nil
		}
		return nil, noMethod("abs", args)
	})
	t.add("Math/max", 2, 2, javaMinMax("max", 1))
	t.add("Math/min", 2, 2, javaMinMax("min", -1))
	for java, core := range map[string]string{
		"floorDiv": "floor-div", "floorMod": "floor-mod", "addExact": "add-exact",
		"subtractExact": "subtract-exact", "multiplyExact": "multiply-exact",
		"incrementExact": "increment-exact", "decrementExact": "decrement-exact",
		"negateExact": "negate-exact",
	} {
		b := t["clojure.math/"+core]
		t.add("Math/"+java, b.minArgs, b.maxArgs, longsOnly(java, b.impl))
	}

	// Parsing numbers as Integer, Long and Double do.
	t.add("Integer/parseInt", 1, 1, parseJavaInt(32))
	t.add("Long/parseLong", 1, 1, parseJavaInt(64))
	t.alias("Integer/valueOf", "Integer/parseInt")
	t.alias("Long/valueOf", "Long/parseLong")
	t.add("Double/parseDouble", 1, 1, parseJavaDouble)
	t.alias("Double/valueOf", "Double/parseDouble")
	// Their messages are Java's, without the function's name before them.
	for _, name := range []string{"Integer/parseInt", "Long/parseLong", "Integer/valueOf", "Long/valueOf", "Double/parseDouble", "Double/valueOf"} {
		t[name].bare = true
	}

	t.add("clojure.string/escape", 2, 2, builtinEscape)
	t.alias("str/escape", "clojure.string/escape")

	// String methods: (.method s args...). Indexes and lengths count
	// UTF-16 code units, as Java's (the same as RTFS's code points for
	// text without characters beyond U+FFFF).
	t.add(".toUpperCase", 1, 1, stringMethod("toUpperCase", func(th *Thread, s string, _ []Value) (Value, error) {
		return String(upperCase(s)), nil
	}))
	t.add(".toLowerCase", 1, 1, stringMethod("toLowerCase", func(th *Thread, s string, _ []Value) (Value, error) {
		return String(lowerCase(s)), nil
	}))
	t.add(".trim", 1, 1, stringMethod("trim", func(_ *Thread, s string, _ []Value) (Value, error) {
		// Java's trim removes the characters up to U+0020, not Unicode spaces.
		return String(strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })), nil
	}))
	t.add(".length", 1, 1, stringMethod("length", func(_ *Thread, s string, _ []Value) (Value, error) {
		return Int(utf16Len(s)), nil
	}))
	t.add(".isEmpty", 1, 1, stringMethod("isEmpty", func(_ *Thread, s string, _ []Value) (Value, error) {
		return Bool(s == ""), nil
	}))
	t.add(".startsWith", 2, 2, stringMethod("startsWith", func(_ *Thread, s string, a []Value) (Value, error) {
		p, err := methodText("startsWith", a[0])
		return Bool(strings.HasPrefix(s, p)), err
	}))
	t.add(".endsWith", 2, 2, stringMethod("endsWith", func(_ *Thread, s string, a []Value) (Value, error) {
		p, err := methodText("endsWith", a[0])
		return Bool(strings.HasSuffix(s, p)), err
	}))
	t.add(".contains", 2, 2, stringMethod("contains", func(_ *Thread, s string, a []Value) (Value, error) {
		p, err := methodText("contains", a[0])
		return Bool(strings.Contains(s, p)), err
	}))
	t.add(".equals", 2, 2, func(_ *Thread, args []Value) (Value, error) {
		if args[0] == Nil {
			return nil, nilMethod("equals")
		}
		return Bool(Equal(args[0], args[1])), nil
	})
	t.add(".indexOf", 2, 3, stringMethod("indexOf", func(_ *Thread, s string, a []Value) (Value, error) {
		return javaIndexOf(s, a, false)
	}))
	t.add(".lastIndexOf", 2, 2, stringMethod("lastIndexOf", func(_ *Thread, s string, a []Value) (Value, error) {
		return javaIndexOf(s, a, true)
	}))
	t.add(".substring", 2, 3, stringMethod("substring", javaSubstring))
	t[".substring"].bare = true // its bounds error is Java's message

	// Exceptions: (Exception. msg) and (IllegalArgumentException. msg
	// cause) build the error a catch of that class catches.
	for _, class := range compile.ExceptionClasses() {
		kinds, _ := compile.ExceptionKinds(class)
		kind := kindVM
		if len(kinds) > 0 && kinds[0] != compile.KindExInfo {
			kind = kinds[0]
		}
		if class == "ExceptionInfo" || class == "IExceptionInfo" || class == "Object" {
			continue
		}
		t.add(class+".", 0, 2, newException(class, kind))
	}

	t.add("instance?", 2, 2, func(_ *Thread, args []Value) (Value, error) {
		return nil, withKind(compile.KindArgument, fmt.Errorf("the class must be written as a name in the call, e.g. (instance? String x), one of: %s", strings.Join(compile.InstanceClasses(), " ")))
	})
}

// intrInstanceOf is (%instance? "Class" v), what the compiler makes of
// (instance? Class v).
func intrInstanceOf(_ *Thread, args []Value) (Value, error) {
	class, _ := args[0].(String)
	return Bool(instanceOf(string(class), args[1])), nil
}

// instanceOf is (instance? class v) for the classes compile.InstanceClasses
// names: the RTFS kinds that Clojure holds in objects of that class.
func instanceOf(class string, v Value) bool {
	switch class {
	case "String", "CharSequence":
		_, ok := v.(String)
		return ok
	case "Long", "Integer", "Short", "Byte", "BigInteger", "clojure.lang.BigInt":
		_, ok := v.(Int)
		return ok
	case "Double", "Float":
		_, ok := v.(Float)
		return ok
	case "Number":
		return isNumber(v)
	case "Boolean":
		_, ok := v.(Bool)
		return ok
	case "clojure.lang.Keyword", "Keyword":
		_, ok := v.(Keyword)
		return ok
	case "clojure.lang.Symbol", "Symbol":
		_, ok := v.(Symbol)
		return ok
	case "java.util.Map", "clojure.lang.IPersistentMap", "clojure.lang.APersistentMap", "clojure.lang.Associative":
		_, ok := v.(*Map)
		return ok
	case "java.util.List", "clojure.lang.IPersistentVector", "clojure.lang.APersistentVector", "clojure.lang.PersistentVector":
		_, ok := v.(*Vector)
		return ok
	case "java.util.Set", "clojure.lang.IPersistentSet":
		_, ok := v.(*Set)
		return ok
	case "clojure.lang.ISeq":
		switch v.(type) {
		case *List, *Lazy:
			return true
		}
	case "clojure.lang.IFn", "clojure.lang.Fn":
		return isFn(v)
	case "java.util.regex.Pattern":
		_, ok := v.(*Regex)
		return ok
	case "clojure.lang.ExceptionInfo", "ExceptionInfo":
		return classMatches("ExceptionInfo", v) && isErrorMap(v)
	case "Throwable", "Exception", "RuntimeException":
		return isErrorMap(v)
	}
	if kinds, ok := compile.ExceptionKinds(class); ok && kinds != nil {
		return isErrorMap(v) && classMatches(class, v)
	}
	return false
}

func isErrorMap(v Value) bool {
	m, ok := v.(*Map)
	if !ok {
		return false
	}
	t, _ := m.GetKeyword("type")
	_, hasMsg := m.GetKeyword("message")
	return t == Keyword("error") && hasMsg
}

func newException(class, kind string) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		kvs := []Value{Keyword("type"), Keyword("error"), Keyword("message"), Nil, Keyword("kind"), Keyword(kind), Keyword("class"), String(class)}
		if len(args) > 0 {
			switch m := args[0].(type) {
			case String, NilType:
				kvs[3] = m
			default:
				return nil, withKind(compile.KindArgument, fmt.Errorf("%s.: expected a message string, got %s", class, describe(args[0])))
			}
		}
		if len(args) > 1 {
			kvs = append(kvs, Keyword("cause"), args[1])
		}
		return MapOf(kvs...), nil
	}
}

// noMethod is the JVM's error for arguments that match no overload.
func noMethod(name string, args []Value) error {
	kinds := make([]string, len(args))
	for i, a := range args {
		kinds[i] = javaClassOf(a)
	}
	return withKind(compile.KindArgument, fmt.Errorf("no matching method Math/%s taking %s", name, strings.Join(kinds, ", ")))
}

func javaClassOf(v Value) string {
	switch v.(type) {
	case Int:
		return "a long"
	case Float:
		return "a double"
	case NilType:
		return "nil"
	}
	return "a " + v.Kind().String()
}

func floatsOnly(name string, fn builtinFn) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		for _, a := range args {
			if _, ok := a.(Float); !ok {
				if _, isInt := a.(Int); isInt {
					return nil, withKind(compile.KindArgument, fmt.Errorf("no matching method Math/%s taking a long: Java has it for floats and doubles only; use (double x)", name))
				}
				return nil, noMethod(name, args)
			}
		}
		return fn(th, args)
	}
}

func longsOnly(name string, fn builtinFn) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		for _, a := range args {
			if _, ok := a.(Int); !ok {
				return nil, noMethod(name, args)
			}
		}
		return fn(th, args)
	}
}

// javaMinMax is Math/max (sign 1) or Math/min (-1): two longs give a long,
// two doubles a double (NaN wins, -0.0 is below 0.0); a long and a double
// match no overload on the JVM.
func javaMinMax(name string, sign int) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		switch a := args[0].(type) {
		case Int:
			if b, ok := args[1].(Int); ok {
				if (sign > 0) == (a >= b) {
					return a, nil
				}
				return b, nil
			}
		case Float:
			if b, ok := args[1].(Float); ok {
				if sign > 0 {
					return Float(math.Max(float64(a), float64(b))), nil
				}
				return Float(math.Min(float64(a), float64(b))), nil
			}
		}
		return nil, noMethod(name, args)
	}
}

// numberFormat is Java's NumberFormatException for s.
func numberFormat(s string) error {
	return withKind(compile.KindNumberFormat, errors.New(`For input string: "`+s+`"`)) // Java's message
}

// parseJavaInt is Integer.parseInt (bits 32) or Long.parseLong (64): an
// optional sign and decimal digits, in range, else "For input string".
func parseJavaInt(bits int) builtinFn {
	return func(_ *Thread, args []Value) (Value, error) {
		s, ok := args[0].(String)
		if !ok {
			if args[0] == Nil {
				//lint:ignore ST1005 Java's message, as Clojure programs see it
				return nil, withKind(compile.KindNumberFormat, errors.New("Cannot parse null string: null"))
			}
			return nil, argTypeError(1, "a string", args[0])
		}
		digits := strings.TrimPrefix(strings.TrimPrefix(string(s), "+"), "-")
		if digits == "" || strings.HasPrefix(digits, "+") || strings.HasPrefix(digits, "-") || strings.ContainsFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) {
			return nil, numberFormat(string(s))
		}
		n, err := strconv.ParseInt(string(s), 10, bits)
		if err != nil {
			return nil, numberFormat(string(s))
		}
		return Int(n), nil
	}
}

var javaDouble = regexp.MustCompile(`^[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?)$`)

// parseJavaDouble is Double.parseDouble: leading and trailing characters
// up to U+0020 ignored, Java's decimal syntax (a trailing f or d allowed,
// NaN and Infinity spelled so), else "For input string".
func parseJavaDouble(_ *Thread, args []Value) (Value, error) {
	s, ok := args[0].(String)
	if !ok {
		if args[0] == Nil {
			return nil, withKind(compile.KindNil, fmt.Errorf("cannot parse nil as a double"))
		}
		return nil, argTypeError(1, "a string", args[0])
	}
	t := strings.TrimFunc(string(s), func(r rune) bool { return r <= ' ' })
	if t == "" {
		return nil, withKind(compile.KindNumberFormat, fmt.Errorf("empty String"))
	}
	if !javaDouble.MatchString(t) {
		return nil, numberFormat(string(s))
	}
	t = strings.TrimRight(t, "fFdD")
	switch strings.TrimLeft(t, "+-") {
	case "NaN":
		return Float(math.NaN()), nil
	case "Infinity":
		if strings.HasPrefix(t, "-") {
			return Float(math.Inf(-1)), nil
		}
		return Float(math.Inf(1)), nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return nil, numberFormat(string(s))
	}
	return Float(f), nil // out of range: Java's too is ±Infinity or 0.0
}

func nilMethod(name string) error {
	return withKind(compile.KindNil, fmt.Errorf("cannot call .%s on nil", name))
}

// stringMethod is a method of java.lang.String: the receiver must be a
// string (nil is Java's NullPointerException, another value has no such
// method); the method's work is charged per byte.
func stringMethod(name string, f func(th *Thread, s string, args []Value) (Value, error)) builtinFn {
	return func(th *Thread, args []Value) (Value, error) {
		s, ok := args[0].(String)
		if !ok {
			if args[0] == Nil {
				return nil, nilMethod(name)
			}
			return nil, withKind(compile.KindArgument, fmt.Errorf("no method .%s for %s: RTFS has the String methods only (rtfshost doc .)", name, describe(args[0])))
		}
		if err := th.scanText(len(s)); err != nil {
			return nil, err
		}
		v, err := f(th, string(s), args[1:])
		if err != nil {
			return nil, err
		}
		if r, ok := v.(String); ok && len(r) > len(s) {
			return v, th.buildText(len(r))
		}
		return v, nil
	}
}

func methodText(name string, v Value) (string, error) {
	if s, ok := v.(String); ok {
		return string(s), nil
	}
	if v == Nil {
		return "", withKind(compile.KindNil, fmt.Errorf(".%s: argument is nil", name))
	}
	return "", withKind(compile.KindArgument, fmt.Errorf(".%s: expected a string argument, got %s", name, describe(v)))
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// utf16Offset is the byte offset of UTF-16 index i in s, or -1 when i
// falls inside a character beyond U+FFFF (or past the end).
func utf16Offset(s string, i int) int {
	u := 0
	for b, r := range s {
		if u == i {
			return b
		}
		u += utf16.RuneLen(r)
		if u > i {
			return -1
		}
	}
	if u == i {
		return len(s)
	}
	return -1
}

// utf16Index is the UTF-16 index of byte offset b of s.
func utf16Index(s string, b int) int { return utf16Len(s[:b]) }

func javaIndexOf(s string, a []Value, last bool) (Value, error) {
	name := "indexOf"
	if last {
		name = "lastIndexOf"
	}
	from := 0
	if len(a) > 1 {
		n, err := toInt(2, a[1])
		if err != nil {
			return nil, err
		}
		from = int(max(0, min(n, int64(utf16Len(s)))))
	}
	var sub string
	switch x := a[0].(type) {
	case String:
		sub = string(x)
	case Int:
		if x < 0 || x > utf8.MaxRune {
			return Int(-1), nil
		}
		sub = string(rune(x)) // indexOf(int ch)
	default:
		_, err := methodText(name, a[0])
		return nil, err
	}
	if last {
		i := strings.LastIndex(s, sub)
		if i < 0 {
			return Int(-1), nil
		}
		return Int(utf16Index(s, i)), nil
	}
	off := utf16Offset(s, from)
	for off < 0 { // inside a pair: Java looks from the next index
		from++
		off = utf16Offset(s, from)
	}
	i := strings.Index(s[off:], sub)
	if i < 0 {
		return Int(-1), nil
	}
	return Int(utf16Index(s, off+i)), nil
}

// javaSubstring is (.substring s begin end?) with Java's bounds check and
// message (StringIndexOutOfBoundsException).
func javaSubstring(_ *Thread, s string, a []Value) (Value, error) {
	n := utf16Len(s)
	begin, err := toInt(2, a[0])
	if err != nil {
		return nil, fmt.Errorf(".substring: %w", err)
	}
	end := int64(n)
	if len(a) > 1 {
		if end, err = toInt(3, a[1]); err != nil {
			return nil, fmt.Errorf(".substring: %w", err)
		}
	}
	if begin < 0 || end > int64(n) || begin > end {
		return nil, indexError("begin %d, end %d, length %d", begin, end, n)
	}
	b, e := utf16Offset(s, int(begin)), utf16Offset(s, int(end))
	if b < 0 || e < 0 {
		return nil, withKind(compile.KindArgument, fmt.Errorf(".substring: index %d or %d splits a character beyond U+FFFF, which an RTFS string cannot hold half of", begin, end))
	}
	return String(s[b:e]), nil
}

// upperCase and lowerCase are Java's toUpperCase and toLowerCase: the full
// case mappings of Unicode's SpecialCasing ("ß" is "SS"; a final sigma
// lowers to "ς"), where Go's strings.ToUpper maps rune by rune.
func upperCase(s string) string { return cases.Upper(language.Und).String(s) }

func lowerCase(s string) string { return cases.Lower(language.Und).String(s) }

// The intrinsics of with-out-str: %out-begin opens a capture, %out? tells
// print and println to write to it (%out-write), %out-end closes it and
// returns its text, %out-abort drops it (when the body threw).
func intrOutBegin(th *Thread, _ []Value) (Value, error) {
	th.out = append(th.out, &strings.Builder{})
	return Nil, nil
}

func intrOutCapturing(th *Thread, _ []Value) (Value, error) { return Bool(len(th.out) > 0), nil }

func intrOutWrite(th *Thread, args []Value) (Value, error) {
	if len(th.out) == 0 {
		return nil, withKind(compile.KindState, fmt.Errorf("with-out-str: no capture is open"))
	}
	b := th.out[len(th.out)-1]
	for _, a := range args {
		s, _ := a.(String)
		if err := th.buildText(b.Len() + len(s)); err != nil {
			return nil, err
		}
		b.WriteString(string(s))
	}
	return Nil, nil
}

func intrOutEnd(th *Thread, args []Value) (Value, error) {
	if len(th.out) == 0 {
		return nil, withKind(compile.KindState, fmt.Errorf("with-out-str: its output was lost (the program was suspended inside it)"))
	}
	b := th.out[len(th.out)-1]
	th.out[len(th.out)-1] = nil // an idle thread keeps no captured text
	th.out = th.out[:len(th.out)-1]
	if len(args) > 0 && Truth(args[0]) {
		return Nil, nil // dropped
	}
	return String(b.String()), nil
}

// builtinEscape is clojure.string/escape: s with each character c for
// which (cmap c) is not nil replaced by (str (cmap c)). A map is looked up
// here; a function is called by the prelude (%escape).
func builtinEscape(th *Thread, args []Value) (Value, error) {
	var s string
	var cmapArg Value
	if err := unpackArgs(th, args, &s, &cmapArg); err != nil {
		return nil, err
	}
	cmap, ok := cmapArg.(*Map)
	if !ok {
		if isFn(args[1]) {
			return nil, th.redirectTo("%escape", args...)
		}
		return nil, argTypeError(2, "a map or a function of a character", args[1])
	}
	if err := th.scanText(len(s)); err != nil {
		return nil, err
	}
	var b strings.Builder
	m := meter{th: th}
	for _, r := range s {
		if !m.visit(1) {
			break
		}
		c := String(string(r))
		if v, ok := cmap.get(c, &m); ok && v != Nil {
			if err := strInto(th, &b, v, &m); err != nil {
				return nil, err
			}
			continue
		}
		b.WriteRune(r)
	}
	if err := m.done(); err != nil {
		return nil, err
	}
	return String(b.String()), th.buildText(b.Len())
}
