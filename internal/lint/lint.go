// Package lint finds, without running a program, the mistakes a run of it
// would stop on at once: every undefined symbol (the compiler stops at the
// first), a call to a function the file defines with a number of arguments
// no arity takes, a host call's literal map that lacks a required key or
// names an unknown one, and a stream processor that names no function of
// the file or takes neither 2 nor 3 parameters. `rtfshost check` prints what
// it finds.
//
// The analysis is conservative: it reports only what is certain from the
// source. A call through a name that a local binding may shadow, a map
// built at run time, a processor passed in a variable are not judged. A
// test file (NAME_test.rtfs) compiles as `rtfshost test` compiles it, its
// test forms expanded.
package lint

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/internal/testrunner"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/rtfs/suggest"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// A Problem is one mistake found in a file, at the position of the form it
// is about.
type Problem struct {
	Pos syntax.Pos
	Msg string // one line, without the position
}

// Error returns "file:line:col: message".
func (p Problem) Error() string { return p.Pos.String() + ": " + p.Msg }

// maxUndefined bounds the undefined symbols reported for one file (each
// costs a compilation).
const maxUndefined = 50

// Check reads and compiles src (named filename in positions) and returns its
// problems in source order; none means a run would not stop on any of them
// at once. calls, when not nil, holds the host calls a run may make: a host
// call it does not hold, and a literal map argument that does not fit its
// schema, are problems. Check is safe for concurrent use; it compiles the
// file once per undefined symbol.
func Check(filename string, src []byte, calls *capabilities.Registry) []Problem {
	nodes, err := syntax.Parse(filename, src)
	if err != nil {
		return []Problem{problemOf(err)}
	}
	probs := compileProblems(filename, src)
	c := newChecker(nodes, calls)
	c.run(nodes)
	probs = append(probs, c.probs...)
	sort.SliceStable(probs, func(i, j int) bool {
		a, b := probs[i].Pos, probs[j].Pos
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return probs
}

func problemOf(err error) Problem {
	var se *syntax.Error
	if errors.As(err, &se) {
		return Problem{Pos: se.Pos, Msg: se.Msg}
	}
	return Problem{Msg: err.Error()}
}

// compileProblems compiles src and returns its compile errors: every
// undefined symbol, found by compiling again with each one defined (as nil,
// on a line appended to the source, so no position moves), then the first
// other error, if any.
func compileProblems(filename string, src []byte) []Problem {
	var probs []Problem
	seen := make(map[string]bool)
	text := append([]byte(nil), src...)
	var opts rtfs.CompileOptions
	if testrunner.IsTestFile(filename) {
		opts = testrunner.CompileOptions(filename)
	}
	for range maxUndefined {
		_, err := rtfs.CompileWith(filename, text, opts)
		if err == nil {
			return probs
		}
		p := problemOf(err)
		name, ok := strings.CutPrefix(p.Msg, "undefined symbol ")
		if ok {
			name, _, _ = strings.Cut(name, " ")
		}
		if !ok || seen[name] || !plainName(name) {
			return append(probs, p)
		}
		seen[name] = true
		probs = append(probs, p)
		text = append(text, "\n(def "+name+" nil)"...)
	}
	return probs
}

// plainName reports whether name can be defined by (def name nil).
func plainName(name string) bool {
	return name != "" && !strings.ContainsAny(name, "/()[]{}\"';`~@^\\ ")
}

// An arity is one parameter list: fixed parameters, and whether a rest
// parameter follows them.
type arity struct {
	fixed    int
	variadic bool
}

// A fnDef is a top-level definition of the file.
type fnDef struct {
	name    string
	pos     syntax.Pos
	arities []arity // nil: not known to be a function
	defs    int     // how many top-level forms define the name
}

func (d *fnDef) accepts(n int) bool {
	for _, a := range d.arities {
		if n == a.fixed || (a.variadic && n >= a.fixed) {
			return true
		}
	}
	return false
}

// want describes what the arities accept, as the VM words it.
func (d *fnDef) want() string {
	if len(d.arities) == 1 {
		a := d.arities[0]
		if a.variadic {
			return fmt.Sprintf("at least %d argument%s", a.fixed, plural(a.fixed))
		}
		return fmt.Sprintf("%d argument%s", a.fixed, plural(a.fixed))
	}
	var parts []string
	for _, a := range d.arities {
		s := strconv.Itoa(a.fixed)
		if a.variadic {
			s = "at least " + s
		}
		parts = append(parts, s)
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1] + " arguments"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

type checker struct {
	defs  map[string]*fnDef
	bound map[string]bool // names some local binding of the file may shadow
	calls *capabilities.Registry
	file  string
	probs []Problem
}

func newChecker(nodes []syntax.Node, calls *capabilities.Registry) *checker {
	c := &checker{defs: make(map[string]*fnDef), bound: make(map[string]bool), calls: calls}
	if len(nodes) > 0 {
		c.file = nodes[0].Pos().Filename()
	}
	for _, n := range nodes {
		l, ok := n.(*syntax.List)
		if !ok || len(l.Elems) < 2 {
			continue
		}
		name, ok := l.Elems[1].(*syntax.Symbol)
		if !ok {
			continue
		}
		var arities []arity
		switch head(l) {
		case "defn", "defn-":
			arities = fnArities(l.Elems[2:])
		case "def":
			if len(l.Elems) > 2 {
				if fl, ok := l.Elems[len(l.Elems)-1].(*syntax.List); ok && head(fl) == "fn" {
					arities = fnLiteralArities(fl)
				}
			}
		default:
			continue
		}
		d := c.defs[name.Name]
		if d == nil {
			d = &fnDef{name: name.Name, pos: name.At}
			c.defs[name.Name] = d
		}
		d.defs++
		d.arities = arities
	}
	for _, n := range nodes {
		c.collectBound(n)
	}
	return c
}

func (c *checker) addf(at syntax.Pos, format string, args ...any) {
	c.probs = append(c.probs, Problem{Pos: at, Msg: fmt.Sprintf(format, args...)})
}

// head returns the name of a list's first element when it is a symbol.
func head(l *syntax.List) string {
	if len(l.Elems) == 0 {
		return ""
	}
	if s, ok := l.Elems[0].(*syntax.Symbol); ok {
		return s.Name
	}
	return ""
}

// fnLiteralArities returns the arities of (fn name? ...).
func fnLiteralArities(l *syntax.List) []arity {
	rest := l.Elems[1:]
	if len(rest) > 0 {
		if _, ok := rest[0].(*syntax.Symbol); ok {
			rest = rest[1:]
		}
	}
	return fnArities(rest)
}

// fnArities returns the arities of a function after its name: docstring?,
// attribute map?, then [params] body... or ([params] body...)...
func fnArities(rest []syntax.Node) []arity {
	if len(rest) > 1 {
		if _, ok := rest[0].(*syntax.String); ok {
			rest = rest[1:]
		}
	}
	if len(rest) > 1 {
		if _, ok := rest[0].(*syntax.Map); ok {
			rest = rest[1:]
		}
	}
	if len(rest) == 0 {
		return nil
	}
	if v, ok := rest[0].(*syntax.Vector); ok {
		return []arity{paramArity(v)}
	}
	var out []arity
	for _, n := range rest {
		l, ok := n.(*syntax.List)
		if !ok || len(l.Elems) == 0 {
			return nil
		}
		v, ok := l.Elems[0].(*syntax.Vector)
		if !ok {
			return nil
		}
		out = append(out, paramArity(v))
	}
	return out
}

// paramArity counts a parameter vector's parameters; a keyword or type
// expression after a parameter is its type annotation.
func paramArity(v *syntax.Vector) arity {
	var a arity
	for _, e := range v.Elems {
		switch e := e.(type) {
		case *syntax.Keyword, *syntax.TypeExpr:
			continue
		case *syntax.Symbol:
			if e.Name == "&" {
				a.variadic = true
				return a
			}
		}
		a.fixed++
	}
	return a
}

// letLike are the forms whose first argument is a vector of pattern and
// expression pairs.
var letLike = map[string]bool{
	"let": true, "loop": true, "if-let": true, "when-let": true, "if-some": true,
	"when-some": true, "when-first": true, "for": true, "doseq": true, "dotimes": true,
	"binding": true, "with-open": true,
}

// collectBound records every name a local binding of the form introduces:
// patterns of let-like vectors, parameters, fn names, catch names, as->
// and letfn names, and whatever a match clause may bind.
func (c *checker) collectBound(n syntax.Node) {
	switch n := n.(type) {
	case *syntax.List:
		h := head(n)
		switch {
		case h == "quote":
			return
		case letLike[h] && len(n.Elems) > 1:
			if v, ok := n.Elems[1].(*syntax.Vector); ok {
				c.bindingPairs(v.Elems)
			}
		case h == "fn" || h == "defn" || h == "defn-":
			for i, e := range n.Elems[1:] {
				switch e := e.(type) {
				case *syntax.Symbol:
					if i == 0 && h == "fn" {
						c.bound[e.Name] = true
					}
				case *syntax.Vector:
					c.patterns(e)
				case *syntax.List:
					if len(e.Elems) > 0 {
						if v, ok := e.Elems[0].(*syntax.Vector); ok {
							c.patterns(v)
						}
					}
				}
			}
		case h == "catch" || h == "as->" || h == "match":
			for _, e := range n.Elems[1:] {
				if h != "match" {
					if s, ok := e.(*syntax.Symbol); ok {
						c.bound[s.Name] = true
					}
					continue
				}
				c.patterns(e)
			}
		case h == "letfn" && len(n.Elems) > 1:
			if v, ok := n.Elems[1].(*syntax.Vector); ok {
				for _, f := range v.Elems {
					if fl, ok := f.(*syntax.List); ok && len(fl.Elems) > 0 {
						c.patterns(fl.Elems[0])
						for _, e := range fl.Elems[1:] {
							if pv, ok := e.(*syntax.Vector); ok {
								c.patterns(pv)
							}
						}
					}
				}
			}
		}
		for _, e := range n.Elems {
			c.collectBound(e)
		}
	case *syntax.Vector:
		for _, e := range n.Elems {
			c.collectBound(e)
		}
	case *syntax.Map:
		for _, e := range n.Elems {
			c.collectBound(e)
		}
	case *syntax.Set:
		for _, e := range n.Elems {
			c.collectBound(e)
		}
	}
}

// bindingPairs records the patterns of a binding vector; for's and doseq's
// modifiers (:let [..] :when e :while e) are skipped or followed.
func (c *checker) bindingPairs(es []syntax.Node) {
	for i := 0; i < len(es); i += 2 {
		if k, ok := es[i].(*syntax.Keyword); ok {
			if k.Name == "let" && i+1 < len(es) {
				if v, ok := es[i+1].(*syntax.Vector); ok {
					c.bindingPairs(v.Elems)
				}
			}
			continue
		}
		c.patterns(es[i])
		if i+1 < len(es) {
			switch es[i+1].(type) {
			case *syntax.Keyword, *syntax.TypeExpr: // a type annotation
				i++
			}
		}
	}
}

// patterns records every symbol of a binding pattern.
func (c *checker) patterns(n syntax.Node) {
	switch n := n.(type) {
	case *syntax.Symbol:
		c.bound[n.Name] = true
	case *syntax.Vector:
		for _, e := range n.Elems {
			c.patterns(e)
		}
	case *syntax.Map:
		for _, e := range n.Elems {
			c.patterns(e)
		}
	case *syntax.List:
		for _, e := range n.Elems {
			c.patterns(e)
		}
	}
}

// threading forms and how many arguments they add to each step.
var threading = map[string]bool{"->": true, "->>": true, "some->": true, "some->>": true}

func (c *checker) run(nodes []syntax.Node) {
	for _, n := range nodes {
		c.walk(n)
	}
}

// walk checks every call in n.
func (c *checker) walk(n syntax.Node) {
	switch n := n.(type) {
	case *syntax.List:
		c.list(n)
	case *syntax.Vector:
		c.walkAll(n.Elems)
	case *syntax.Map:
		c.walkAll(n.Elems)
	case *syntax.Set:
		c.walkAll(n.Elems)
	}
}

func (c *checker) walkAll(ns []syntax.Node) {
	for _, n := range ns {
		c.walk(n)
	}
}

func (c *checker) list(l *syntax.List) {
	h := head(l)
	switch {
	case h == "quote":
		return
	case threading[h] && len(l.Elems) > 1:
		c.walk(l.Elems[1])
		for _, step := range l.Elems[2:] {
			c.step(step, 1)
		}
		return
	case (h == "cond->" || h == "cond->>") && len(l.Elems) > 1:
		c.walk(l.Elems[1])
		for i, e := range l.Elems[2:] {
			if i%2 == 1 {
				c.step(e, 1)
			} else {
				c.walk(e)
			}
		}
		return
	case h == "as->" || h == "doto":
		for _, e := range l.Elems[1:] {
			if sl, ok := e.(*syntax.List); ok {
				c.walkAll(sl.Elems[min(1, len(sl.Elems)):])
				continue
			}
			c.walk(e)
		}
		return
	case h == "call":
		c.hostCall(l)
	case h != "":
		c.arity(l.Elems[0].(*syntax.Symbol), len(l.Elems)-1)
	}
	c.walkAll(l.Elems)
}

// step checks one step of a threading form, which gets extra arguments.
func (c *checker) step(n syntax.Node, extra int) {
	switch n := n.(type) {
	case *syntax.Symbol:
		c.arity(n, extra)
	case *syntax.List:
		if len(n.Elems) == 0 {
			return
		}
		if s, ok := n.Elems[0].(*syntax.Symbol); ok && s.Name != "fn" && s.Name != "quote" && !threading[s.Name] {
			c.arity(s, len(n.Elems)-1+extra)
			c.walkAll(n.Elems[1:])
			return
		}
		c.walk(n)
	default:
		c.walk(n)
	}
}

// arity checks a call of name with n arguments.
func (c *checker) arity(name *syntax.Symbol, n int) {
	d := c.defs[name.Name]
	if d == nil || d.defs != 1 || d.arities == nil || c.bound[name.Name] {
		return
	}
	if !d.accepts(n) {
		c.addf(name.At, "%s: expected %s, got %d (defined at line %d)", name.Name, d.want(), n, d.pos.Line)
	}
}

// hostCall checks (call :id {literal map}) against the capability's schema,
// and the :processor of a start.
func (c *checker) hostCall(l *syntax.List) {
	if c.calls == nil || len(l.Elems) < 2 {
		return
	}
	kw, ok := l.Elems[1].(*syntax.Keyword)
	if !ok {
		return
	}
	capab, ok := c.calls.Lookup(kw.Name)
	if !ok {
		var ids []string
		for _, x := range c.calls.List() {
			ids = append(ids, x.ID)
		}
		msg := fmt.Sprintf("unknown host call :%s", kw.Name)
		if near, ok := suggest.Closest(kw.Name, ids); ok {
			msg += fmt.Sprintf(" (did you mean :%s?)", near)
		}
		c.addf(kw.At, "%s", msg)
		return
	}
	if len(l.Elems) != 3 {
		return
	}
	m, ok := l.Elems[2].(*syntax.Map)
	if !ok {
		return
	}
	var names []capabilities.KeyName
	complete := true
	var processor syntax.Node
	for i := 0; i+1 < len(m.Elems); i += 2 {
		var name capabilities.KeyName
		switch k := m.Elems[i].(type) {
		case *syntax.Keyword:
			name = capabilities.KeyName{Name: k.Name}
		case *syntax.String:
			name = capabilities.KeyName{Name: k.Value, String: true}
		default:
			complete = false
			continue
		}
		names = append(names, name)
		if name.Name == "processor" {
			processor = m.Elems[i+1]
		}
		for _, e := range capab.Input.CheckKeyNames(capab.ID, []capabilities.KeyName{name}, false) {
			c.addf(m.Elems[i].Pos(), "%s", e.Error())
		}
	}
	for _, e := range capab.Input.CheckKeyNames(capab.ID, names, complete) {
		if e.Key != "" { // a required key missing; the unknown ones are reported above
			c.addf(m.At, "%s", e.Error())
		}
	}
	if processor != nil && capab.ID == "mcp.stream.start" {
		c.processor(processor)
	}
}

// processor checks a start's :processor: the function it names must be
// defined in the file and take 2 or 3 parameters.
func (c *checker) processor(n syntax.Node) {
	var name string
	var at syntax.Pos
	switch n := n.(type) {
	case *syntax.Symbol:
		if c.bound[n.Name] {
			return
		}
		name, at = n.Name, n.At
		if c.defs[name] == nil {
			return // an undefined symbol: the compiler says so
		}
	case *syntax.String:
		name, at = n.Value, n.At
	case *syntax.List:
		switch head(n) {
		case "quote":
			if len(n.Elems) == 2 {
				if s, ok := n.Elems[1].(*syntax.Symbol); ok {
					name, at = s.Name, s.At
				}
			}
		case "fn":
			c.processorArity("the anonymous processor", fnLiteralArities(n), n.At)
			return
		}
	}
	if name == "" {
		return
	}
	d := c.defs[name]
	if d == nil {
		c.addf(at, "processor: no function named %q is defined in %s", name, c.file)
		return
	}
	if d.defs == 1 {
		c.processorArity("processor "+name, d.arities, at)
	}
}

func (c *checker) processorArity(what string, arities []arity, at syntax.Pos) {
	if arities == nil {
		return
	}
	d := &fnDef{arities: arities}
	if d.accepts(2) || d.accepts(3) {
		return
	}
	c.addf(at, "%s takes %s; a processor takes 2 or 3: (processor state chunk) or (processor state chunk metadata)", what, d.want())
}
