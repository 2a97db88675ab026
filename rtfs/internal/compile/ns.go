package compile

import (
	"sort"
	"strings"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// A Clojure file starts with (ns name (:require [clojure.string :as str]))
// and a script with (require '[clojure.math :as math]). RTFS has no
// namespaces of its own, but it has clojure.string, clojure.set and
// clojure.math under their full names: these forms give them the aliases
// (:as) and bare names (:refer) they ask for, from that form on, and are
// nil. Any other namespace is an error that says which ones there are.

// libNamespaces are the namespaces a require may name.
var libNamespaces = map[string]bool{
	"clojure.string": true, "clojure.set": true, "clojure.math": true, "clojure.core": true,
}

func libNames() string {
	out := make([]string, 0, len(libNamespaces))
	for n := range libNamespaces {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// resolveAlias returns the full name an alias or a referred name stands
// for.
func (c *compiler) resolveAlias(name string) (string, bool) {
	if i := strings.IndexByte(name, '/'); i > 0 && i < len(name)-1 {
		if ns, ok := c.aliases[name[:i]]; ok {
			return ns + "/" + name[i+1:], true
		}
		return "", false
	}
	full, ok := c.refers[name]
	return full, ok
}

// nsForm compiles (ns name docstring? attrs? (:require spec...) ...).
func (fc *fcomp) nsForm(l *syntax.List, _ bool) {
	arity(l, 1, -1, "(ns name (:require [lib :as alias] ...))")
	if _, ok := l.Elems[1].(*syntax.Symbol); !ok {
		errorf(l.Elems[1].Pos(), "ns: expected a namespace name, got %s", l.Elems[1])
	}
	for _, e := range l.Elems[2:] {
		switch e := e.(type) {
		case *syntax.String, *syntax.Map: // docstring, attributes
		case *syntax.List:
			k, ok := at(e.Elems, 0).(*syntax.Keyword)
			if !ok {
				errorf(e.At, "ns: expected (:require ...), got %s", e)
			}
			switch k.Name {
			case "require":
				for _, spec := range e.Elems[1:] {
					fc.requireSpec(spec)
				}
			case "refer-clojure", "gen-class":
			default:
				errorf(k.At, "ns: RTFS has no %s (only :require of %s)", k, libNames())
			}
		default:
			errorf(e.Pos(), "ns: expected (:require ...), got %s", e)
		}
	}
	fc.setPos(l.At)
	fc.emit(NIL, 0)
}

// requireForm compiles (require '[lib :as alias] ...).
func (fc *fcomp) requireForm(l *syntax.List, _ bool) {
	arity(l, 1, -1, "(require '[lib :as alias] ...)")
	for _, e := range l.Elems[1:] {
		q, ok := e.(*syntax.List)
		if !ok || len(q.Elems) != 2 || !isSym(q.Elems[0], "quote") {
			errorf(e.Pos(), "require: expected a quoted spec such as '[clojure.string :as str], got %s", e)
		}
		fc.requireSpec(q.Elems[1])
	}
	fc.setPos(l.At)
	fc.emit(NIL, 0)
}

func isSym(n syntax.Node, name string) bool {
	s, ok := n.(*syntax.Symbol)
	return ok && s.Name == name
}

// requireSpec reads lib or [lib :as alias :refer [names]|:all].
func (fc *fcomp) requireSpec(spec syntax.Node) {
	var lib *syntax.Symbol
	var opts []syntax.Node
	switch s := spec.(type) {
	case *syntax.Symbol:
		lib = s
	case *syntax.Vector:
		l, ok := at(s.Elems, 0).(*syntax.Symbol)
		if !ok {
			errorf(s.At, "require: expected [lib :as alias], got %s", s)
		}
		lib, opts = l, s.Elems[1:]
	default:
		errorf(spec.Pos(), "require: expected [lib :as alias], got %s", spec)
	}
	if !libNamespaces[lib.Name] {
		errorf(lib.At, "require: RTFS has no namespace %s (it has %s)", lib.Name, libNames())
	}
	c := fc.c
	for i := 0; i < len(opts); i += 2 {
		k, ok := opts[i].(*syntax.Keyword)
		if !ok || i+1 >= len(opts) {
			errorf(opts[i].Pos(), "require: expected :as or :refer and a value, got %s", opts[i])
		}
		switch v := opts[i+1]; k.Name {
		case "as":
			a, ok := v.(*syntax.Symbol)
			if !ok {
				errorf(v.Pos(), "require: :as needs a name, got %s", v)
			}
			if c.aliases == nil {
				c.aliases = make(map[string]string)
			}
			c.aliases[a.Name] = lib.Name
		case "refer":
			names, ok := v.(*syntax.Vector)
			if !ok {
				errorf(v.Pos(), "require: :refer needs a vector of names (RTFS has no :refer :all), got %s", v)
			}
			for _, n := range names.Elems {
				s, ok := n.(*syntax.Symbol)
				if !ok {
					errorf(n.Pos(), "require: :refer names must be symbols, got %s", n)
				}
				full := lib.Name + "/" + s.Name
				if lib.Name == "clojure.core" {
					full = s.Name
				}
				if c.isBuiltin == nil || !c.isBuiltin(full) {
					errorf(s.At, "require: %s has no %s in RTFS", lib.Name, s.Name)
				}
				if c.refers == nil {
					c.refers = make(map[string]string)
				}
				c.refers[s.Name] = full
			}
		default:
			errorf(k.At, "require: RTFS knows :as and :refer, not %s", k)
		}
	}
}
