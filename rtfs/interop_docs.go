package rtfs

import (
	"strings"

	"github.com/rtfshost/rtfshost/rtfs/internal/compile"
)

// The docs of the functions of lib_math.go and lib_interop.go, added to
// funcDocs once when the package is initialized: families of names
// (clojure.math's, the Java methods, the exception constructors) share a
// description.
func init() {
	add := func(name, usage, doc string) { funcDocs[name] = [2]string{usage, doc} }
	for _, n := range []string{"sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "expm1", "log1p", "cbrt", "rint", "signum", "ulp", "next-up", "next-down", "to-radians", "to-degrees"} {
		add("clojure.math/"+n, "(clojure.math/"+n+" x)", "java.lang.Math's "+javaName(n)+" of x as a double (rint rounds half to even)")
	}
	for _, n := range []string{"atan2", "hypot", "IEEE-remainder", "copy-sign", "next-after"} {
		add("clojure.math/"+n, "(clojure.math/"+n+" x y)", "java.lang.Math's "+javaName(n)+" of x and y as doubles")
	}
	add("clojure.math/round", "(clojure.math/round x)", "the long closest to x, ties toward positive infinity ((round -2.5) is -2), NaN 0, clamped to the long range (Java's Math.round)")
	add("clojure.math/get-exponent", "(clojure.math/get-exponent x)", "the unbiased binary exponent of the double x")
	add("clojure.math/scalb", "(clojure.math/scalb x n)", "x times 2 to the int n")
	add("clojure.math/floor-div", "(clojure.math/floor-div x y)", "the quotient of the longs x and y rounded toward negative infinity")
	add("clojure.math/floor-mod", "(clojure.math/floor-mod x y)", "the modulus of the longs x and y with y's sign ((floor-mod -7 3) is 2)")
	for _, n := range []string{"add", "subtract", "multiply"} {
		add("clojure.math/"+n+"-exact", "(clojure.math/"+n+"-exact x y)", "x "+n+" y of longs; an overflow is an error")
	}
	for _, n := range []string{"increment", "decrement", "negate"} {
		add("clojure.math/"+n+"-exact", "(clojure.math/"+n+"-exact x)", n+" the long x; an overflow is an error")
	}
	for _, n := range []string{"add", "subtract", "multiply"} {
		add("unchecked-"+n, "(unchecked-"+n+" x y)", n+" wrapping around on a long overflow (as Java's long arithmetic)")
		add("unchecked-"+n+"-int", "(unchecked-"+n+"-int x y)", n+" of ints (32 bits), wrapping around at 32 bits")
	}
	for _, n := range []string{"inc", "dec", "negate"} {
		add("unchecked-"+n, "(unchecked-"+n+" x)", n+" wrapping around on a long overflow")
		add("unchecked-"+n+"-int", "(unchecked-"+n+"-int x)", n+" of an int (32 bits), wrapping around at 32 bits")
	}
	add("unchecked-int", "(unchecked-int x)", "x truncated to 32 bits (a float first toward zero)")
	add("unchecked-long", "(unchecked-long x)", "x as a long (a float truncated toward zero, clamped)")
	add("unchecked-divide-int", "(unchecked-divide-int x y)", "the int quotient of x and y, truncated")
	add("unchecked-remainder-int", "(unchecked-remainder-int x y)", "the remainder of the int division of x and y")
	for _, n := range []string{"+'", "-'", "*'"} {
		add(n, "("+n+" x ...)", n[:1]+" (Clojure promotes an overflow to a BigInt; RTFS has none, so an overflow is an error)")
	}
	add("inc'", "(inc' x)", "inc (an overflow is an error: RTFS has no BigInt)")
	add("dec'", "(dec' x)", "dec (an overflow is an error: RTFS has no BigInt)")

	// Java names.
	add("Math/round", "(Math/round x)", "Java's Math.round of the double x: the closest long, ties toward positive infinity, NaN 0; a long argument matches no overload (an error, as on the JVM)")
	add("Math/abs", "(Math/abs x)", "Java's Math.abs: a long stays a long (Long/MIN_VALUE stays itself), a double a double")
	add("Math/max", "(Math/max x y)", "Java's Math.max of two longs or two doubles (NaN wins); a long and a double match no overload")
	add("Math/min", "(Math/min x y)", "Java's Math.min of two longs or two doubles (NaN wins, -0.0 below 0.0); a long and a double match no overload")
	for _, n := range []string{"signum", "ulp", "nextUp", "nextDown"} {
		add("Math/"+n, "(Math/"+n+" x)", "Java's Math."+n+" of the double x (a long matches no overload)")
	}
	add("Math/copySign", "(Math/copySign x y)", "x with the sign of y, doubles")
	for java, core := range map[string]string{"floorDiv": "floor-div", "floorMod": "floor-mod", "addExact": "add-exact", "subtractExact": "subtract-exact", "multiplyExact": "multiply-exact"} {
		add("Math/"+java, "(Math/"+java+" x y)", "clojure.math/"+core+" of longs (a double matches no overload)")
	}
	for java, core := range map[string]string{"incrementExact": "increment-exact", "decrementExact": "decrement-exact", "negateExact": "negate-exact"} {
		add("Math/"+java, "(Math/"+java+" x)", "clojure.math/"+core+" of a long")
	}
	add("Integer/parseInt", "(Integer/parseInt s)", "the int s spells (an optional sign and decimal digits, within 32 bits), else Java's NumberFormatException \"For input string: ...\"")
	add("Long/parseLong", "(Long/parseLong s)", "the long s spells, else Java's NumberFormatException \"For input string: ...\"")
	add("Double/parseDouble", "(Double/parseDouble s)", "the double s spells in Java's syntax (surrounding spaces ignored, NaN, Infinity, a trailing d or f), else NumberFormatException")
	add(".toUpperCase", "(.toUpperCase s)", "s in upper case with Java's full mappings (\"ß\" is \"SS\")")
	add(".toLowerCase", "(.toLowerCase s)", "s in lower case with Java's full mappings (a final sigma is ς)")
	add(".trim", "(.trim s)", "s without the characters up to U+0020 at either end (Java's trim: Unicode spaces stay)")
	add(".length", "(.length s)", "the number of UTF-16 code units of s (Java's length)")
	add(".isEmpty", "(.isEmpty s)", "whether s is \"\"")
	add(".startsWith", "(.startsWith s prefix)", "whether s starts with prefix")
	add(".endsWith", "(.endsWith s suffix)", "whether s ends with suffix")
	add(".contains", "(.contains s sub)", "whether s contains sub")
	add(".equals", "(.equals x y)", "(= x y); nil as x is an error (NullPointerException)")
	add(".indexOf", "(.indexOf s sub from?)", "the UTF-16 index of the first sub in s (from from), else -1")
	add(".lastIndexOf", "(.lastIndexOf s sub)", "the UTF-16 index of the last sub in s, else -1")
	add(".substring", "(.substring s begin end?)", "the UTF-16 code units begin..end-1 of s; out of bounds is StringIndexOutOfBoundsException \"begin b, end e, length n\"")
	for _, c := range compile.ExceptionClasses() {
		if c == "ExceptionInfo" || c == "IExceptionInfo" || c == "Object" {
			continue
		}
		add(c+".", "("+c+". message cause?)", "the error a (catch "+c+" e ...) catches, to throw: {:type :error :message message :kind ... :class \""+c+"\"}")
	}
	add("instance?", "(instance? Class x)", "whether x is of the class written as a name (String, Long, Double, Number, Keyword, java.util.Map, an exception class ...), which RTFS reads as its kinds")
	for _, c := range compile.Constants() {
		v, _ := compile.Constant(c)
		add(c, c, "the constant "+v.String()+" (Java's, as a "+map[bool]string{true: "long", false: "double"}[strings.HasSuffix(c, "_VALUE") && !strings.HasPrefix(c, "Double/")]+")")
	}
	add("memoize", "(memoize f)", "a function that calls f (RTFS keeps no cache: no mutable cells; a pure f gives the same values)")
	add("run!", "(run! proc coll)", "(proc x) for each element, for effect; nil")
	add("tree-seq", "(tree-seq branch? children root)", "the nodes of the tree depth first, lazily")
	add("prn-str", "(prn-str x ...)", "pr-str and a newline")
	add("print-str", "(print-str x ...)", "the text print writes: strings, inside collections too, without quotes")
	add("println-str", "(println-str x ...)", "print-str and a newline")
	add("clojure.string/escape", "(clojure.string/escape s cmap)", "s with each character c replaced by (str (cmap c)) when that is not nil; cmap is a map or a function")
}

// javaName is the java.lang.Math name of a clojure.math function.
func javaName(n string) string {
	switch n {
	case "to-radians":
		return "toRadians"
	case "to-degrees":
		return "toDegrees"
	case "next-up":
		return "nextUp"
	case "next-down":
		return "nextDown"
	case "IEEE-remainder":
		return "IEEEremainder"
	case "copy-sign":
		return "copySign"
	case "next-after":
		return "nextAfter"
	}
	return strings.TrimSpace(n)
}
