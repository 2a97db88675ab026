package types

import "github.com/rtfshost/rtfshost/rtfs/syntax"

// parseMap parses the arguments of [:map ...]: braced maps {:k T ...} and
// entries [:k T] or [:k T ?], in any mix. The keys of a braced map are
// optional (the streaming processors' shorthand: a processor declaring
// :config :[:map {:buffer_size :int :timeout_ms :int}] usually returns only
// :buffer_size; docs/rtfs-syntax.md): a key may be missing, and if present
// its value must match. A [:k T] entry is required unless marked ?, as in
// Malli.
func parseMap(at syntax.Pos, args []syntax.Node) (Type, error) {
	t := mapType{braced: true}
	seen := map[string]bool{}
	add := func(kn syntax.Node, tn syntax.Node, marked bool) error {
		k, ok := kn.(*syntax.Keyword)
		if !ok {
			return errorf(kn.Pos(), "a map type's keys must be keywords, got %s", kn)
		}
		if seen[k.Name] {
			return errorf(k.At, "key :%s appears twice in the map type", k.Name)
		}
		seen[k.Name] = true
		et, err := Parse(tn)
		if err != nil {
			return err
		}
		opt := marked || et.check(nil) == nil
		t.entries = append(t.entries, mapEntry{key: k.Name, typ: et, marked: marked, optional: opt})
		return nil
	}
	for _, a := range args {
		switch a := a.(type) {
		case *syntax.Map:
			for i := 0; i+1 < len(a.Elems); i += 2 {
				if err := add(a.Elems[i], a.Elems[i+1], true); err != nil {
					return nil, err
				}
			}
		case *syntax.Vector:
			t.braced = false
			marked, err := entryShape(a)
			if err != nil {
				return nil, err
			}
			if err := add(a.Elems[0], a.Elems[1], marked); err != nil {
				return nil, err
			}
		default:
			return nil, errorf(a.Pos(), "a map type lists {:k T ...} or [:k T] entries, not %s", a)
		}
	}
	if len(t.entries) == 0 {
		return primType{KindMap}, nil
	}
	return t, nil
}

// entryShape checks a [:k T] or [:k T ?] entry and reports whether it is marked
// optional.
func entryShape(e *syntax.Vector) (bool, error) {
	switch len(e.Elems) {
	case 2:
		return false, nil
	case 3:
		if s, ok := e.Elems[2].(*syntax.Symbol); ok && s.Name == "?" {
			return true, nil
		}
		return false, errorf(e.Elems[2].Pos(), "a map type entry is [:k T] or [:k T ?], got %s", e)
	}
	return false, errorf(e.At, "a map type entry is [:k T] or [:k T ?], got %s", e)
}

// parsePredicate parses the predicate types :> :>= :< :<= :in-range
// :min-length :max-length :min-count :max-count :non-empty :matches-regex
// :has-key :required-keys.
func parsePredicate(v *syntax.Vector, head string, args []syntax.Node) (Type, bool, error) {
	switch head {
	case ">", ">=", "<", "<=":
		if err := arity(v, head, args, 1, "n"); err != nil {
			return nil, true, err
		}
		n, err := parseNumber(args[0])
		return cmpType{op: head, n: n}, true, err
	case "in-range":
		if err := arity(v, head, args, 2, "lo hi"); err != nil {
			return nil, true, err
		}
		lo, err := parseNumber(args[0])
		if err != nil {
			return nil, true, err
		}
		hi, err := parseNumber(args[1])
		if err != nil {
			return nil, true, err
		}
		if lo.float() > hi.float() {
			return nil, true, errorf(v.At, "[:in-range lo hi] needs lo <= hi, got %s > %s", lo, hi)
		}
		return rangeType{lo: lo, hi: hi}, true, nil
	case "min-length", "max-length", "min-count", "max-count":
		if err := arity(v, head, args, 1, "n"); err != nil {
			return nil, true, err
		}
		n, ok := args[0].(*syntax.Int)
		if !ok || n.Value < 0 || n.Value > 1<<31 {
			return nil, true, errorf(args[0].Pos(), "[:%s n] needs a non-negative integer, got %s", head, args[0])
		}
		isMax := head == "max-length" || head == "max-count"
		return sizeType{op: head, n: int(n.Value), max: isMax}, true, nil
	case "non-empty":
		if err := arity(v, head, args, 0, ""); err != nil {
			return nil, true, err
		}
		return sizeType{op: head, n: 1}, true, nil
	case "matches-regex":
		if err := arity(v, head, args, 1, "\"re\""); err != nil {
			return nil, true, err
		}
		s, ok := args[0].(*syntax.String)
		if !ok {
			return nil, true, errorf(args[0].Pos(), "[:matches-regex re] needs a string, got %s", args[0])
		}
		re, err := regexpFor(s.At, s.Value)
		return regexType{src: s.Value, re: re}, true, err
	case "has-key", "required-keys":
		t, err := parseKeys(v, head, args)
		return t, true, err
	}
	return nil, false, nil
}

// parseNumber parses a numeric literal (not NaN).
func parseNumber(n syntax.Node) (literal, error) {
	l, err := parseLiteral(n)
	if err == nil && (l.kind != KindInt && l.kind != KindFloat || l.f != l.f) {
		err = errorf(n.Pos(), "expected a number, got %s", n)
	}
	return l, err
}

// parseKeys parses [:has-key :k] and [:required-keys [:k ...]] (the vector may
// also be left out: [:required-keys :a :b]).
func parseKeys(v *syntax.Vector, head string, args []syntax.Node) (Type, error) {
	if head == "has-key" {
		if err := arity(v, head, args, 1, ":k"); err != nil {
			return nil, err
		}
	} else if len(args) == 1 {
		if kv, ok := args[0].(*syntax.Vector); ok {
			args = kv.Elems
		}
	}
	if len(args) == 0 {
		return nil, errorf(v.At, "[:%s ...] needs at least one key", head)
	}
	t := keysType{head: head}
	for _, a := range args {
		k, ok := a.(*syntax.Keyword)
		if !ok {
			return nil, errorf(a.Pos(), "[:%s ...] needs keyword keys, got %s", head, a)
		}
		t.keys = append(t.keys, k.Name)
	}
	return t, nil
}
