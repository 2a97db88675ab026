package types

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// Parse turns a type expression read by package syntax into a Type. n is one of
//
//	*syntax.Keyword   :int :string? :my.app/Reading
//	*syntax.Symbol    int (a primitive's bare name)
//	*syntax.TypeExpr  :[ :map { :state :any } ]
//	*syntax.Vector    [:vector :int], [:enum :a :b], [:and :int [:> 0]] ...
//	*syntax.Map       { :k T ... }, short for [:map { :k T ... }]
//
// An invalid type is a *syntax.Error carrying the position of the offending
// form. Parse does not retain n. Its cost is linear in the size of n, plus the
// compilation of any [:matches-regex] pattern.
func Parse(n syntax.Node) (Type, error) {
	switch n := n.(type) {
	case *syntax.Keyword:
		return parseName(n.At, n.Name, ":")
	case *syntax.Symbol:
		return parseName(n.At, n.Name, "")
	case *syntax.TypeExpr:
		if n.Vec == nil {
			return nil, errorf(n.At, "empty type expression")
		}
		return parseVector(n.Vec)
	case *syntax.Vector:
		return parseVector(n)
	case *syntax.Map:
		return parseMap(n.At, []syntax.Node{n})
	case nil:
		return nil, errorf(syntax.Pos{}, "missing type expression")
	}
	return nil, errorf(n.Pos(), "expected a type, got %s", n)
}

func errorf(at syntax.Pos, format string, args ...any) error {
	return &syntax.Error{Pos: at, Msg: fmt.Sprintf(format, args...)}
}

// primitive returns the type a primitive name denotes.
func primitive(name string) (Type, bool) {
	switch name {
	case "any":
		return anyType{}, true
	case "never":
		return neverType{}, true
	case "number":
		return numberType{}, true
	}
	for k := KindNil; int(k) < len(kindNames); k++ {
		if k.String() == name {
			return primType{k}, true
		}
	}
	return nil, false
}

// knownNames lists the primitive names for error messages.
const knownNames = ":int :float :number :string :bool :nil :keyword :symbol :any :never :map :vector :list :set :fn :regex :seq"

// parseName parses a type name; sigil is ":" for a keyword, "" for a symbol.
func parseName(at syntax.Pos, name, sigil string) (Type, error) {
	if t, ok := primitive(name); ok {
		return t, nil
	}
	if sigil == ":" && strings.ContainsAny(name, "./") {
		return namedType{name}, nil // a custom type (with or without a "?")
	}
	if base, ok := strings.CutSuffix(name, "?"); ok && base != "" {
		t, err := parseName(at, base, sigil)
		if err != nil {
			return nil, err
		}
		if t.check(nil) == nil { // already accepts nil
			return t, nil
		}
		return optType{t}, nil
	}
	return nil, errorf(at, "unknown type %s%s (want one of %s, T? or a qualified name such as :my.app/Type)",
		sigil, name, knownNames)
}

// parseAll parses each node as a type.
func parseAll(ns []syntax.Node) ([]Type, error) {
	ts := make([]Type, len(ns))
	for i, n := range ns {
		t, err := Parse(n)
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	return ts, nil
}

// parseVector parses [:head args...].
func parseVector(v *syntax.Vector) (Type, error) {
	if len(v.Elems) == 0 {
		return nil, errorf(v.At, "empty type vector: want a type name such as [:vector :int]")
	}
	var head string
	switch h := v.Elems[0].(type) {
	case *syntax.Keyword:
		head = h.Name
	case *syntax.Symbol:
		head = h.Name
	default:
		return nil, errorf(h.Pos(), "a type vector starts with a type name such as :map, not %s", h)
	}
	args := v.Elems[1:]
	if t, ok, err := parseCollection(v, head, args); ok || err != nil {
		return t, err
	}
	if t, ok, err := parseCombinator(v, head, args); ok || err != nil {
		return t, err
	}
	if t, ok, err := parsePredicate(v, head, args); ok || err != nil {
		return t, err
	}
	if t, ok := primitive(head); ok {
		if len(args) == 0 {
			return t, nil
		}
		return nil, errorf(v.At, "type :%s takes no arguments, got %d", head, len(args))
	}
	switch head {
	case "record", "resource", "array":
		return nil, errorf(v.At, "type [:%s ...] is not supported", head)
	}
	return nil, errorf(v.Elems[0].Pos(), "unknown type constructor :%s", head)
}

// arity checks that [:head ...] has n arguments, described as what.
func arity(v *syntax.Vector, head string, args []syntax.Node, n int, what string) error {
	if len(args) != n {
		return errorf(v.At, "[:%s %s] takes %d argument(s), got %d", head, what, n, len(args))
	}
	return nil
}

// parseCollection parses :vector :list :set :* :map :map-of :dict :tuple.
func parseCollection(v *syntax.Vector, head string, args []syntax.Node) (Type, bool, error) {
	switch head {
	case "vector", "list", "set", "*":
		if len(args) == 0 && head != "*" {
			return nil, false, nil // the primitive
		}
		if err := arity(v, head, args, 1, "T"); err != nil {
			return nil, true, err
		}
		elem, err := Parse(args[0])
		if err != nil {
			return nil, true, err
		}
		return seqType{head: head, elem: elem}, true, nil
	case "map":
		if len(args) == 0 {
			return nil, false, nil
		}
		t, err := parseMap(v.At, args)
		return t, true, err
	case "map-of", "dict":
		if err := arity(v, head, args, 2, "K V"); err != nil {
			return nil, true, err
		}
		ts, err := parseAll(args)
		if err != nil {
			return nil, true, err
		}
		return mapOfType{head: head, key: ts[0], val: ts[1]}, true, nil
	case "tuple":
		ts, err := parseAll(args)
		if err != nil {
			return nil, true, err
		}
		return tupleType{ts}, true, nil
	}
	return nil, false, nil
}

// parseCombinator parses :union :and :enum :val :fn :=>.
func parseCombinator(v *syntax.Vector, head string, args []syntax.Node) (Type, bool, error) {
	switch head {
	case "union", "and":
		if len(args) == 0 {
			return nil, true, errorf(v.At, "[:%s ...] needs at least one type", head)
		}
		ts, err := parseAll(args)
		if err != nil {
			return nil, true, err
		}
		if head == "union" {
			return unionType{ts}, true, nil
		}
		return andType{ts}, true, nil
	case "enum":
		if len(args) == 0 {
			return nil, true, errorf(v.At, "[:enum ...] needs at least one value")
		}
		lits := make([]literal, len(args))
		for i, a := range args {
			l, err := parseLiteral(a)
			if err != nil {
				return nil, true, err
			}
			lits[i] = l
		}
		return enumType{lits}, true, nil
	case "val":
		if err := arity(v, head, args, 1, "value"); err != nil {
			return nil, true, err
		}
		l, err := parseLiteral(args[0])
		return valType{l}, true, err
	case "fn", "=>":
		if len(args) == 0 && head == "fn" {
			return nil, false, nil
		}
		t, err := parseFn(v, head, args)
		return t, true, err
	}
	return nil, false, nil
}

// parseFn parses [:fn [P... & R] Ret].
func parseFn(v *syntax.Vector, head string, args []syntax.Node) (Type, error) {
	if err := arity(v, head, args, 2, "[P...] R"); err != nil {
		return nil, err
	}
	pv, ok := args[0].(*syntax.Vector)
	if !ok {
		return nil, errorf(args[0].Pos(), "[:%s [P...] R] needs a vector of parameter types, got %s", head, args[0])
	}
	t := fnType{head: head}
	ps := pv.Elems
	for i, p := range ps {
		if s, ok := p.(*syntax.Symbol); ok && s.Name == "&" {
			if i != len(ps)-2 {
				return nil, errorf(s.At, "& must be followed by exactly one rest parameter type")
			}
			rest, err := Parse(ps[i+1])
			if err != nil {
				return nil, err
			}
			t.rest = rest
			break
		}
		pt, err := Parse(p)
		if err != nil {
			return nil, err
		}
		t.params = append(t.params, pt)
	}
	ret, err := Parse(args[1])
	if err != nil {
		return nil, err
	}
	t.ret = ret
	return t, nil
}

// parseLiteral parses a constant: nil, boolean, number, string or keyword.
func parseLiteral(n syntax.Node) (literal, error) {
	switch n := n.(type) {
	case *syntax.Nil:
		return literal{kind: KindNil}, nil
	case *syntax.Bool:
		return literal{kind: KindBool, b: n.Value}, nil
	case *syntax.Int:
		return literal{kind: KindInt, i: n.Value}, nil
	case *syntax.Float:
		return literal{kind: KindFloat, f: n.Value}, nil
	case *syntax.String:
		return literal{kind: KindString, s: n.Value}, nil
	case *syntax.Keyword:
		return literal{kind: KindKeyword, s: n.Name}, nil
	case nil:
		return literal{}, errorf(syntax.Pos{}, "missing literal")
	}
	return literal{}, errorf(n.Pos(), "expected a literal (nil, boolean, number, string or keyword), got %s", n)
}

// regexpFor compiles a [:matches-regex] pattern to match whole strings.
func regexpFor(at syntax.Pos, src string) (*regexp.Regexp, error) {
	// Compile src alone first: wrapping an unbalanced pattern such as "a)|(b"
	// could otherwise yield a valid regexp with another meaning.
	if _, err := regexp.Compile(src); err != nil {
		return nil, errorf(at, "invalid regular expression %q: %v", src, err)
	}
	return regexp.MustCompile("^(?:" + src + ")$"), nil
}
