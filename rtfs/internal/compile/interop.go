package compile

import (
	"math"
	"sort"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// The Java constants a Clojure program names (Math/PI, Long/MAX_VALUE),
// compiled to their values; the functions of the Java names are builtins
// of package rtfs. (instance? Class x) with a class written as a name
// compiles to (%instance? "Class" x).

var constants = map[string]syntax.Node{
	"Math/PI":                  &syntax.Float{Value: math.Pi},
	"Math/E":                   &syntax.Float{Value: math.E},
	"clojure.math/PI":          &syntax.Float{Value: math.Pi},
	"clojure.math/E":           &syntax.Float{Value: math.E},
	"math/PI":                  &syntax.Float{Value: math.Pi},
	"math/E":                   &syntax.Float{Value: math.E},
	"Long/MAX_VALUE":           &syntax.Int{Value: math.MaxInt64},
	"Long/MIN_VALUE":           &syntax.Int{Value: math.MinInt64},
	"Integer/MAX_VALUE":        &syntax.Int{Value: math.MaxInt32},
	"Integer/MIN_VALUE":        &syntax.Int{Value: math.MinInt32},
	"Double/MAX_VALUE":         &syntax.Float{Value: math.MaxFloat64},
	"Double/MIN_VALUE":         &syntax.Float{Value: math.SmallestNonzeroFloat64},
	"Double/POSITIVE_INFINITY": &syntax.Float{Value: math.Inf(1)},
	"Double/NEGATIVE_INFINITY": &syntax.Float{Value: math.Inf(-1)},
	"Double/NaN":               &syntax.Float{Value: math.NaN()},
}

// Constant returns the value of a Java or clojure.math constant name.
func Constant(name string) (syntax.Node, bool) {
	n, ok := constants[name]
	return n, ok
}

// Constants lists the constant names, sorted.
func Constants() []string {
	out := make([]string, 0, len(constants))
	for n := range constants {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// instanceClasses are the class names (instance? C x) knows, beside the
// exception classes.
var instanceClasses = []string{
	"String", "CharSequence", "Long", "Integer", "Short", "Byte", "BigInteger", "clojure.lang.BigInt",
	"Double", "Float", "Number", "Boolean", "Keyword", "clojure.lang.Keyword", "Symbol", "clojure.lang.Symbol",
	"java.util.Map", "clojure.lang.IPersistentMap", "clojure.lang.APersistentMap", "clojure.lang.Associative",
	"java.util.List", "clojure.lang.IPersistentVector", "clojure.lang.APersistentVector", "clojure.lang.PersistentVector",
	"java.util.Set", "clojure.lang.IPersistentSet", "clojure.lang.ISeq", "clojure.lang.IFn", "clojure.lang.Fn",
	"java.util.regex.Pattern", "clojure.lang.ExceptionInfo",
}

// InstanceClasses lists the class names instance? accepts, sorted.
func InstanceClasses() []string {
	out := append([]string(nil), instanceClasses...)
	out = append(out, ExceptionClasses()...)
	sort.Strings(out)
	return out
}

func isInstanceClass(name string) bool {
	for _, c := range instanceClasses {
		if c == name || "java.lang."+c == name {
			return true
		}
	}
	_, ok := ExceptionKinds(name)
	return ok
}

// instanceForm compiles (instance? Class x) when Class is a class name and
// instance? is the core function; it reports whether it did.
func (fc *fcomp) instanceForm(l *syntax.List) bool {
	if len(l.Elems) != 3 || !fc.resolvesToBuiltin("instance?") {
		return false
	}
	c, ok := l.Elems[1].(*syntax.Symbol)
	if !ok || fc.isLocal(c.Name) {
		return false
	}
	if _, ok := fc.c.global(c.Name); ok {
		return false
	}
	name := c.Name
	if !isInstanceClass(name) {
		errorf(c.At, "instance?: RTFS does not know the class %s (it knows %v)", name, InstanceClasses())
	}
	if len(name) > len("java.lang.") && name[:len("java.lang.")] == "java.lang." {
		name = name[len("java.lang."):]
	}
	fc.expr(list(l.At, sym(l.At, "%instance?"), &syntax.String{At: c.At, Value: name}, l.Elems[2]), false)
	return true
}
