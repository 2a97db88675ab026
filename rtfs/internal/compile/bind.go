package compile

import (
	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

type binding struct {
	pattern syntax.Node
	typ     syntax.Node
	value   syntax.Node
}

// parseBindings splits a let or loop binding vector into bindings. A binding
// is `pattern value` or `pattern type value`. The type annotation is a keyword
// or a :[...] type expression; a keyword after a name is an annotation only if
// reading it as one leaves a well-formed rest of the vector, and otherwise it
// is the bound value ((let [x :foo] x) binds :foo). When both readings are
// well formed, the plain one (no annotation) wins.
func parseBindings(v *syntax.Vector, form string) []binding {
	es := v.Elems
	memo := map[int]bool{}
	var ok func(i int) bool
	ok = func(i int) bool {
		if i == len(es) {
			return true
		}
		if r, done := memo[i]; done {
			return r
		}
		r := false
		if isPattern(es[i]) {
			if i+2 <= len(es) && !isTypeExpr(es[i+1]) && ok(i+2) {
				r = true
			} else if i+3 <= len(es) && isTypeForm(es[i+1]) && ok(i+3) {
				r = true
			}
		}
		memo[i] = r
		return r
	}
	if !ok(0) {
		bindingsError(es, form, v.At)
	}
	var bs []binding
	for i := 0; i < len(es); {
		if i+2 <= len(es) && !isTypeExpr(es[i+1]) && ok(i+2) {
			bs = append(bs, binding{pattern: es[i], value: es[i+1]})
			i += 2
		} else {
			bs = append(bs, binding{pattern: es[i], typ: es[i+1], value: es[i+2]})
			i += 3
		}
	}
	return bs
}

func isTypeExpr(n syntax.Node) bool {
	_, ok := n.(*syntax.TypeExpr)
	return ok
}

// bindingsError reports the first element of a malformed binding vector.
func bindingsError(es []syntax.Node, form string, at syntax.Pos) {
	for i := 0; i < len(es); i += 2 {
		if !isPattern(es[i]) {
			errorf(es[i].Pos(), "%s: expected a binding name or pattern, got %s", form, es[i])
		}
		if i+1 < len(es) && isTypeForm(es[i+1]) && i+2 < len(es) {
			i++
		}
		if i+1 >= len(es) {
			errorf(es[i].Pos(), "%s: binding %s has no value", form, es[i])
		}
	}
	errorf(at, "%s: malformed binding vector", form)
}

// bind pops the value on top of the stack and binds it to pattern.
func (fc *fcomp) bind(p syntax.Node) {
	switch p := p.(type) {
	case *syntax.Symbol:
		if p.Name == "_" {
			fc.emit(POP, 0)
			return
		}
		slot := fc.newSlot()
		fc.emit(SETLOCAL, slot)
		fc.bindName(p.Name, slot)
	case *syntax.Vector:
		fc.bindVector(p)
	case *syntax.Map:
		fc.bindMap(p)
	default:
		errorf(p.Pos(), "cannot bind to %s: expected a symbol, vector or map pattern", p)
	}
}

func (fc *fcomp) bindVector(v *syntax.Vector) {
	tmp := fc.newSlot()
	fc.emit(SETLOCAL, tmp)
	es := v.Elems
	for i, idx := 0, 0; i < len(es); i++ {
		e := es[i]
		if s, ok := e.(*syntax.Symbol); ok && s.Name == "&" {
			if i+1 >= len(es) || !isPattern(es[i+1]) {
				errorf(s.At, "destructuring: & must be followed by a pattern")
			}
			fc.emit(LOCAL, tmp)
			fc.emit(RESTFROM, idx)
			fc.bind(es[i+1])
			i++
			continue
		}
		if k, ok := e.(*syntax.Keyword); ok && k.Name == "as" {
			if i+1 >= len(es) {
				errorf(k.At, "destructuring: :as must be followed by a name")
			}
			fc.emit(LOCAL, tmp)
			fc.bind(es[i+1])
			i++
			continue
		}
		if !isPattern(e) {
			errorf(e.Pos(), "destructuring: expected a name or pattern, got %s", e)
		}
		fc.emit(LOCAL, tmp)
		fc.emit(INDEX, idx)
		fc.bind(e)
		idx++
	}
}

type keyBinding struct {
	target syntax.Node // pattern to bind
	key    syntax.Node // key to look up
	name   string      // symbol name for :or defaults, "" if not a symbol
}

func (fc *fcomp) bindMap(m *syntax.Map) {
	tmp := fc.newSlot()
	if !fc.c.before4() {
		// A sequence becomes a map first, as Clojure's
		// seq-to-map-for-destructuring: (defn f [& {:as opts}]) binds
		// opts to a map; :as binds the map too.
		fc.emit(MAPARG, 0)
	}
	fc.emit(SETLOCAL, tmp)
	var keys []keyBinding
	var as syntax.Node
	defaults := map[string]syntax.Node{}
	for i := 0; i+1 < len(m.Elems); i += 2 {
		k, v := m.Elems[i], m.Elems[i+1]
		if kw, ok := k.(*syntax.Keyword); ok {
			if ns, kind, ok := nsKeys(kw.Name); ok {
				// {:person/keys [name]} binds name to (:person/name m).
				keys = append(keys, keysBindings(kind, v, ns)...)
				continue
			}
			switch kw.Name {
			case "keys", "strs", "syms":
				keys = append(keys, keysBindings(kw.Name, v, "")...)
				continue
			case "as":
				as = v
				continue
			case "or":
				om, ok := v.(*syntax.Map)
				if !ok {
					errorf(v.Pos(), "destructuring: :or must be a map, got %s", v)
				}
				for j := 0; j+1 < len(om.Elems); j += 2 {
					s, ok := om.Elems[j].(*syntax.Symbol)
					if !ok {
						errorf(om.Elems[j].Pos(), "destructuring: :or keys must be symbols, got %s", om.Elems[j])
					}
					defaults[s.Name] = om.Elems[j+1]
				}
				continue
			}
		}
		if !isPattern(k) {
			errorf(k.Pos(), "destructuring: expected a name or pattern, got %s", k)
		}
		kb := keyBinding{target: k, key: v}
		if s, ok := k.(*syntax.Symbol); ok {
			kb.name = s.Name
		}
		keys = append(keys, kb)
	}
	for _, kb := range keys {
		fc.emit(LOCAL, tmp)
		def, hasDef := defaults[kb.name]
		if !hasDef {
			fc.emit(LOOKUP, fc.constant(kb.key))
			fc.bind(kb.target)
			continue
		}
		fc.emit(LOOKUPD, fc.constant(kb.key))
		j := fc.emit(JMPT, 0)
		fc.emit(POP, 0)
		fc.expr(def, false)
		fc.patch(j)
		fc.bind(kb.target)
	}
	if as != nil {
		fc.emit(LOCAL, tmp)
		fc.bind(as)
	}
}

// nsKeys reads :ns/keys and :ns/syms, the destructuring keys that take
// their names from the namespace ns.
func nsKeys(name string) (ns, kind string, ok bool) {
	i := lastSlash(name)
	if i <= 0 {
		return "", "", false
	}
	switch kind = name[i+1:]; kind {
	case "keys", "syms":
		return name[:i], kind, true
	}
	return "", "", false
}

// keysBindings reads the names of :keys, :strs or :syms (in the namespace
// ns unless a name has its own, for :ns/keys).
func keysBindings(kind string, v syntax.Node, ns string) []keyBinding {
	vec, ok := v.(*syntax.Vector)
	if !ok {
		errorf(v.Pos(), "destructuring: :%s must be a vector, got %s", kind, v)
	}
	var out []keyBinding
	for _, e := range vec.Elems {
		var name string
		var at syntax.Pos
		switch e := e.(type) {
		case *syntax.Symbol:
			name, at = e.Name, e.At
		case *syntax.Keyword:
			name, at = e.Name, e.At
		default:
			errorf(e.Pos(), "destructuring: :%s entries must be names, got %s", kind, e)
		}
		local := name
		if i := lastSlash(name); i >= 0 {
			local = name[i+1:]
		} else if ns != "" {
			name = ns + "/" + name
		}
		var key syntax.Node
		switch kind {
		case "keys":
			key = &syntax.Keyword{At: at, Name: name}
		case "strs":
			key = &syntax.String{At: at, Value: name}
		default:
			key = &syntax.Symbol{At: at, Name: name}
		}
		out = append(out, keyBinding{target: &syntax.Symbol{At: at, Name: local}, key: key, name: local})
	}
	return out
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}
