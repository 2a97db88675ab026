package compile

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A catch clause may name a Clojure or Java exception class. RTFS has no
// classes: each name stands for the kinds of RTFS errors that Clojure would
// raise as that class (the :kind of a caught runtime error map, see
// docs/continuations.md). Throwable, Exception and RuntimeException catch
// everything; an unknown class name is a compile error.

// The RTFS error kinds a class can stand for. An ex-info error has no :kind:
// it is an error map with :data.
const (
	KindExInfo     = "ex-info"    // (throw (ex-info msg data))
	KindArithmetic = "arithmetic" // divide by zero, integer overflow
	KindIndex      = "index"      // an index out of bounds
	KindType       = "type"       // an argument of the wrong type
	KindNil        = "nil"        // nil where a value was needed: calling nil, (inc nil)
	KindArity      = "arity"      // a wrong number of arguments
	KindArgument   = "argument"   // any other bad argument (no matching clause, odd pairs...)
	KindState      = "state"      // an operation the value's state does not allow (pop of an empty vector)
	KindAssert     = "assert"     // (assert test) failed
	// KindNumberFormat is a string that is not a number (Integer/parseInt
	// "x"): Java's NumberFormatException, an IllegalArgumentException.
	KindNumberFormat = "number-format"
)

// exceptionClasses maps class names, without their java.lang. or
// clojure.lang. package, to the kinds they catch; nil catches everything.
var exceptionClasses = map[string][]string{
	"Throwable":                       nil,
	"Exception":                       nil,
	"RuntimeException":                nil,
	"Error":                           nil,
	"Object":                          nil,
	"ExceptionInfo":                   {KindExInfo},
	"IExceptionInfo":                  {KindExInfo},
	"ArithmeticException":             {KindArithmetic},
	"IndexOutOfBoundsException":       {KindIndex},
	"ArrayIndexOutOfBoundsException":  {KindIndex},
	"StringIndexOutOfBoundsException": {KindIndex},
	"ClassCastException":              {KindType},
	"UnsupportedOperationException":   {KindType},
	"NullPointerException":            {KindNil},
	"ArityException":                  {KindArity},
	"IllegalArgumentException":        {KindArgument, KindArity, KindType, KindNumberFormat},
	"NumberFormatException":           {KindNumberFormat},
	"IllegalStateException":           {KindState},
	"AssertionError":                  {KindAssert},
}

// ExceptionKinds returns the error kinds a catch of the class name catches
// (nil: every error) and whether the name is a class RTFS knows. The name
// may carry its java.lang. or clojure.lang. package.
func ExceptionKinds(name string) (kinds []string, ok bool) {
	kinds, ok = exceptionClasses[className(name)]
	return kinds, ok
}

func className(name string) string {
	for _, pkg := range []string{"java.lang.", "clojure.lang."} {
		if rest, ok := strings.CutPrefix(name, pkg); ok {
			return rest
		}
	}
	return name
}

// ExceptionClasses lists the class names a catch may use, sorted.
func ExceptionClasses() []string {
	names := make([]string, 0, len(exceptionClasses))
	for n := range exceptionClasses {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// looksLikeClass reports whether a catch pattern symbol is meant as a class
// name: capitalized (Exception) or qualified by a package (java.io.IOException).
func looksLikeClass(name string) bool {
	r, _ := utf8.DecodeRuneInString(name)
	return unicode.IsUpper(r) || strings.Contains(name, ".")
}

// knownClasses lists the class names a catch may use, for the error that
// names an unknown one.
func knownClasses() string { return strings.Join(ExceptionClasses(), " ") }
