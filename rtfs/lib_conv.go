package rtfs

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Conversions: keyword symbol name namespace type-name type int float parse-int
// parse-float parse-json to-json (alias serialize-json).

// splitName splits a keyword's or symbol's text into its namespace and
// name as Clojure does: the namespace ends at the first "/" (:a/b/c is
// namespace "a", name "b/c"), and "/" alone is a name.
func splitName(s string) (ns, name string) {
	if i := strings.IndexByte(s, '/'); i > 0 && i < len(s)-1 {
		return s[:i], s[i+1:]
	}
	return "", s
}

func addConvBuiltins(t builtinTable) {
	t.add("keyword", 1, 2, builtinKeyword)
	t.add("symbol", 1, 2, func(th *Thread, args []Value) (Value, error) {
		name, err := qualifiedName(th, args)
		if err != nil || name == "" && args[0] == Nil {
			return Nil, err
		}
		return Symbol(name), nil
	})
	t.add("name", 1, 1, func(_ *Thread, args []Value) (Value, error) {
		switch x := args[0].(type) {
		case String:
			return x, nil
		case Keyword, Symbol:
			_, name := splitName(x.(interface{ Text() string }).Text())
			return String(name), nil
		}
		return nil, typeError("a string, keyword or symbol", args[0])
	})
	t.add("namespace", 1, 1, func(_ *Thread, args []Value) (Value, error) {
		switch x := args[0].(type) {
		case Keyword, Symbol:
			if ns, _ := splitName(x.(interface{ Text() string }).Text()); ns != "" {
				return String(ns), nil
			}
			return Nil, nil
		}
		return nil, typeError("a keyword or symbol", args[0])
	})
	t.add("type-name", 1, 1, func(_ *Thread, args []Value) (Value, error) {
		return String(args[0].Kind().String()), nil
	})
	// (type x) is the keyword that names x's kind in type annotations:
	// :nil :bool :int :float :string :keyword :symbol :list :vector :map :set
	// :fn. (Clojure returns a host class; RTFS has none.)
	t.add("type", 1, 1, func(_ *Thread, args []Value) (Value, error) {
		return Keyword(args[0].Kind().String()), nil
	})
	t.add("int", 1, 1, builtinInt)
	t.add("float", 1, 1, func(th *Thread, args []Value) (Value, error) {
		var f float64
		if err := unpackArgs(th, args, &f); err != nil {
			return nil, err
		}
		return Float(f), nil
	})
	t.alias("double", "float")
	t.add("parse-int", 1, 1, builtinParseInt)
	t.add("parse-float", 1, 1, builtinParseFloat)
	t.add("parse-json", 1, 1, func(th *Thread, args []Value) (Value, error) {
		var s string
		if err := unpackArgs(th, args, &s); err != nil {
			return nil, err
		}
		// A JSON document of n bytes builds at most about n values.
		if err := th.charge(int64(len(s)), int64(len(s))*elemBytes); err != nil {
			return nil, err
		}
		return FromJSON([]byte(s))
	})
	t.add("to-json", 1, 1, func(th *Thread, args []Value) (Value, error) {
		// Encoded within the room for text, counting each element: a
		// value that shares structure stops at a limit, not after it.
		m := meter{th: th}
		e := jsonEncoder{m: &m}
		if room := th.textRoom(); room >= 0 {
			e.max = max(int64(room), 1)
		}
		err := e.value(args[0], 0)
		if merr := m.done(); merr != nil {
			return nil, merr
		}
		var le *LimitError
		if errors.As(err, &le) && le.Limit == LimitOutput {
			return nil, th.buildText(len(e.b)) // over the size limit or the budget
		}
		if err != nil {
			return nil, err
		}
		return String(e.b), th.buildText(len(e.b))
	})
	t.alias("serialize-json", "to-json")
}

// qualifiedName is the name of (keyword x) / (symbol x) or of the
// two-argument (keyword ns name) form, which builds a string; "" for nil.
func qualifiedName(th *Thread, args []Value) (string, error) {
	if len(args) == 2 {
		var ns, name string
		if err := unpackArgs(th, args, &ns, &name); err != nil {
			return "", err
		}
		if err := th.buildText(len(ns) + 1 + len(name)); err != nil {
			return "", err
		}
		return ns + "/" + name, nil
	}
	switch x := args[0].(type) {
	case NilType:
		return "", nil
	case String:
		return string(x), nil
	case Keyword:
		return string(x), nil
	case Symbol:
		return string(x), nil
	}
	return "", typeError("a string, keyword or symbol", args[0])
}

func builtinKeyword(th *Thread, args []Value) (Value, error) {
	if k, ok := args[0].(Keyword); ok && len(args) == 1 {
		return k, nil
	}
	name, err := qualifiedName(th, args)
	if err != nil || name == "" && args[0] == Nil {
		return Nil, err
	}
	return Keyword(name), nil
}

// builtinInt converts to an int: floats truncate toward zero (a float
// outside the int range, NaN or infinity is an error).
func builtinInt(th *Thread, args []Value) (Value, error) {
	var x Value
	if err := unpackArgs(th, args, number(&x)); err != nil {
		return nil, err
	}
	if n, ok := x.(Int); ok {
		return n, nil
	}
	f := math.Trunc(float64(x.(Float)))
	if f != f || f >= 9.223372036854775807e18 || f < -9.223372036854775808e18 {
		return nil, fmt.Errorf("%s is out of the int range", x)
	}
	return Int(f), nil
}

// builtinParseInt parses a base-10 integer with an optional sign; like
// Clojure's parse-long it returns nil when the string is not one (or is
// out of range). A non-string argument is an error.
func builtinParseInt(th *Thread, args []Value) (Value, error) {
	var s string
	if err := unpackArgs(th, args, &s); err != nil {
		return nil, err
	}
	if err := th.scanText(len(s)); err != nil {
		return nil, err
	}
	n, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil || strings.ContainsRune(s, '_') {
		return Nil, nil
	}
	return Int(n), nil
}

// builtinParseFloat parses a decimal number (1.5, -2, 1e3, .5) or NaN,
// Infinity, -Infinity; nil when the string is not one. A non-string
// argument is an error.
func builtinParseFloat(th *Thread, args []Value) (Value, error) {
	var s string
	if err := unpackArgs(th, args, &s); err != nil {
		return nil, err
	}
	if err := th.scanText(len(s)); err != nil {
		return nil, err
	}
	switch s {
	case "NaN", "##NaN":
		return Float(math.NaN()), nil
	case "Infinity", "+Infinity", "##Inf":
		return Float(math.Inf(1)), nil
	case "-Infinity", "##-Inf":
		return Float(math.Inf(-1)), nil
	}
	if !isDecimal(s) {
		return Nil, nil
	}
	f, perr := strconv.ParseFloat(s, 64)
	if perr != nil {
		return Nil, nil
	}
	return Float(f), nil
}

// isDecimal accepts [+-]digits[.digits][(e|E)[+-]digits] with at least one
// digit before the exponent.
func isDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}
