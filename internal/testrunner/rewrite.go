package testrunner

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// The test forms are expanded here, in the test file's own compilation
// (rtfs.CompileOptions.Rewrite), never in an ordinary program's: RTFS has
// no user macros, and making deftest, is and testing special forms of the
// language would change the universe every program compiles in (and so the
// compile version). Only a file that `rtfshost test` runs sees them:
//
//	(load "weather.rtfs")            the definitions of a program, at the top level
//	(deftest name body...)           (defn name [] body...), run by the runner
//	(testing "what" body...)         body, with "what" named in its failures
//	(is form msg?)                   one assertion: see isForm
//	(run-processor p state chunks)   a dry run of processor p (provider.DryRun)
//	(read-recording "file.ndjson")   a recording's chunks as a processor gets them
//
// The expansions call builtins whose names begin with % (builtins.go).

// prelude defines the test functions that are plain RTFS over host calls.
const prelude = `
(defn run-processor
  ([p state chunks] (run-processor p state chunks {}))
  ([p state chunks opts]
   (call :test.run-processor
         (merge opts {:processor p :initial-state state
                      :chunks (if (string? chunks) chunks (vec chunks))}))))
(defn read-recording [file] (call :test.read-recording file))
`

// A test is a deftest found in a file.
type test struct {
	name string
	pos  syntax.Pos
}

// rewriter expands one test file's forms.
type rewriter struct {
	file  string // the test file's path
	tests []test
	core  map[string]bool // names of core functions (their arguments are shown)
}

func newRewriter(file string) *rewriter {
	rw := &rewriter{file: file, core: make(map[string]bool)}
	for _, d := range rtfs.Universe() {
		rw.core[d.Name] = true
	}
	return rw
}

func (rw *rewriter) rewrite(forms []syntax.Node) ([]syntax.Node, error) {
	pre, err := syntax.Parse("<rtfshost test>", []byte(prelude))
	if err != nil {
		return nil, err
	}
	out := pre
	rw.tests = nil // a compilation again starts over
	for _, f := range forms {
		l, ok := f.(*syntax.List)
		switch {
		case ok && headIs(l, "load"):
			loaded, err := rw.load(l)
			if err != nil {
				return nil, err
			}
			out = append(out, loaded...)
		case ok && headIs(l, "deftest"):
			if len(l.Elems) < 2 {
				return nil, &syntax.Error{Pos: l.At, Msg: "deftest: expected (deftest name body...)"}
			}
			name, ok := l.Elems[1].(*syntax.Symbol)
			if !ok {
				return nil, &syntax.Error{Pos: l.Elems[1].Pos(), Msg: fmt.Sprintf("deftest: expected a name, got %s", l.Elems[1])}
			}
			for _, t := range rw.tests {
				if t.name == name.Name {
					return nil, &syntax.Error{Pos: name.At, Msg: fmt.Sprintf("deftest: %s is defined twice (first at line %d)", name.Name, t.pos.Line)}
				}
			}
			rw.tests = append(rw.tests, test{name: name.Name, pos: l.At})
			body := rw.exprs(l.Elems[2:])
			out = append(out, list(l.At, append([]syntax.Node{sym(l.At, "defn"), name, vec(l.At)}, body...)...))
		default:
			out = append(out, rw.expr(f))
		}
	}
	return out, nil
}

// load reads (load "file.rtfs"), a path relative to the test file, and
// returns the program's definitions: its defn, defn- and declare forms,
// and its defs, except that a def whose value makes a host call (a
// stream's start, an await) or uses such a def defines nil. Its other
// top-level forms (the calls that start and await streams) are left out:
// a test drives the processors itself.
func (rw *rewriter) load(l *syntax.List) ([]syntax.Node, error) {
	if len(l.Elems) != 2 {
		return nil, &syntax.Error{Pos: l.At, Msg: `load: expected (load "program.rtfs")`}
	}
	s, ok := l.Elems[1].(*syntax.String)
	if !ok {
		return nil, &syntax.Error{Pos: l.Elems[1].Pos(), Msg: fmt.Sprintf("load: expected a file name string, got %s", l.Elems[1])}
	}
	path := s.Value
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(rw.file), path)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, &syntax.Error{Pos: s.At, Msg: fmt.Sprintf("load: %v", err)}
	}
	forms, err := syntax.Parse(path, src)
	if err != nil {
		return nil, err
	}
	return Definitions(forms), nil
}

// Definitions returns a program's definitions, as load brings them in:
// its defn, defn- and declare forms, and its defs, a def whose value needs
// the program's run defining nil. The playground (host/dashboard) runs a
// program's processors on them.
func Definitions(forms []syntax.Node) []syntax.Node {
	var out []syntax.Node
	nilled := make(map[string]bool) // defs left nil
	for _, f := range forms {
		fl, ok := f.(*syntax.List)
		if !ok {
			continue
		}
		switch {
		case headIs(fl, "defn"), headIs(fl, "defn-"), headIs(fl, "declare"):
			out = append(out, fl)
		case headIs(fl, "def") && len(fl.Elems) > 2:
			if needsRun(fl.Elems[len(fl.Elems)-1], nilled) {
				if s, ok := fl.Elems[1].(*syntax.Symbol); ok {
					nilled[s.Name] = true
				}
				out = append(out, list(fl.At, fl.Elems[0], fl.Elems[1], &syntax.Nil{At: fl.At}))
				continue
			}
			out = append(out, fl)
		}
	}
	return out
}

// needsRun reports whether a def's value needs the program's run: it
// makes a host call outside a fn, or names a def left nil for that reason.
func needsRun(n syntax.Node, nilled map[string]bool) bool {
	switch n := n.(type) {
	case *syntax.Symbol:
		return nilled[n.Name]
	case *syntax.List:
		if headIs(n, "call") {
			return true
		}
		if headIs(n, "fn") || headIs(n, "quote") {
			return false
		}
		return anyNeedsRun(n.Elems, nilled)
	case *syntax.Vector:
		return anyNeedsRun(n.Elems, nilled)
	case *syntax.Map:
		return anyNeedsRun(n.Elems, nilled)
	case *syntax.Set:
		return anyNeedsRun(n.Elems, nilled)
	}
	return false
}

func anyNeedsRun(ns []syntax.Node, nilled map[string]bool) bool {
	for _, e := range ns {
		if needsRun(e, nilled) {
			return true
		}
	}
	return false
}

func (rw *rewriter) exprs(ns []syntax.Node) []syntax.Node {
	out := make([]syntax.Node, len(ns))
	for i, n := range ns {
		out[i] = rw.expr(n)
	}
	return out
}

// expr expands the is and testing forms inside n.
func (rw *rewriter) expr(n syntax.Node) syntax.Node {
	switch n := n.(type) {
	case *syntax.List:
		switch {
		case headIs(n, "quote"):
			return n
		case headIs(n, "is"):
			return rw.isForm(n)
		case headIs(n, "testing") && len(n.Elems) >= 2:
			at := n.At
			body := append([]syntax.Node{sym(at, "do")}, rw.exprs(n.Elems[2:])...)
			return list(at, sym(at, "do"),
				list(at, sym(at, "%testing-push"), rw.expr(n.Elems[1])),
				list(at, sym(at, "try"), list(at, body...),
					list(at, sym(at, "finally"), list(at, sym(at, "%testing-pop")))))
		}
		return &syntax.List{At: n.At, Elems: rw.exprs(n.Elems), Meta: n.Meta}
	case *syntax.Vector:
		return &syntax.Vector{At: n.At, Elems: rw.exprs(n.Elems), Meta: n.Meta}
	case *syntax.Map:
		return &syntax.Map{At: n.At, Elems: rw.exprs(n.Elems), Meta: n.Meta}
	case *syntax.Set:
		return &syntax.Set{At: n.At, Elems: rw.exprs(n.Elems), Meta: n.Meta}
	}
	return n
}

// isForm expands (is form msg?) into a call of %is with the outcome of
// form, caught if it throws:
//
//	(is (= a b ...))                 the values of a, b ...: expected a, got the others (a diff for collections)
//	(is (f a b))                     f a core function: the values of its arguments, shown as (not (f 1 2))
//	(is (thrown? Class body...))     body must throw (an error Class catches)
//	(is (thrown-with-msg? Class #"re" body...))  ... with a message re finds
//	(is x)                           x must be truthy
func (rw *rewriter) isForm(l *syntax.List) syntax.Node {
	at := l.At
	if len(l.Elems) < 2 || len(l.Elems) > 3 {
		return list(at, sym(at, "throw"), list(at, sym(at, "ex-info"),
			str(at, fmt.Sprintf("%s: is: expected (is form) or (is form \"message\")", at)), &syntax.Map{At: at}))
	}
	form := l.Elems[1]
	var msg syntax.Node = &syntax.Nil{At: at}
	if len(l.Elems) == 3 {
		msg = rw.expr(l.Elems[2])
	}
	caught := func(ok syntax.Node) syntax.Node {
		return list(at, sym(at, "try"), ok,
			list(at, sym(at, "catch"), sym(at, "%is-e"), vec(at, kw(at, "error"), sym(at, "%is-e"))))
	}
	kind := "value"
	var res syntax.Node
	var extra []syntax.Node
	fl, isList := form.(*syntax.List)
	switch {
	case isList && (headIs(fl, "thrown?") || headIs(fl, "thrown-with-msg?")) && len(fl.Elems) >= 2:
		class := fl.Elems[1]
		body := fl.Elems[2:]
		kind = "thrown"
		if headIs(fl, "thrown-with-msg?") {
			kind = "thrown-msg"
			if len(body) > 0 {
				extra = append(extra, rw.expr(body[0]))
				body = body[1:]
			}
		}
		tryForm := append([]syntax.Node{sym(at, "try")}, rw.exprs(body)...)
		tryForm = append(tryForm, vec(at, kw(at, "none")),
			list(at, sym(at, "catch"), class, sym(at, "%is-e"), vec(at, kw(at, "thrown"), sym(at, "%is-e"))))
		res = list(at, tryForm...)
	case isList && len(fl.Elems) > 0 && rw.isCoreCall(fl):
		kind = "call"
		if headIs(fl, "=") {
			kind = "eq"
		}
		args := vec(at, rw.exprs(fl.Elems[1:])...)
		res = caught(list(at, sym(at, "let"), vec(at, sym(at, "%is-v"), args),
			vec(at, kw(at, "ok"), list(at, sym(at, "apply"), fl.Elems[0], sym(at, "%is-v")), sym(at, "%is-v"))))
	default:
		res = caught(vec(at, kw(at, "ok"), rw.expr(form)))
	}
	args := []syntax.Node{sym(at, "%is"), kw(at, kind), res, str(at, form.String()),
		&syntax.Int{At: at, Value: int64(at.Line)}, &syntax.Int{At: at, Value: int64(at.Col)}, msg}
	return list(at, append(args, extra...)...)
}

// isCoreCall reports whether l calls a core function by its name (and not
// a special form or macro, whose arguments are not values).
func (rw *rewriter) isCoreCall(l *syntax.List) bool {
	s, ok := l.Elems[0].(*syntax.Symbol)
	if !ok || !rw.core[s.Name] {
		return false
	}
	_, form := rtfs.LookupForm(s.Name)
	return !form
}

func headIs(l *syntax.List, name string) bool {
	if len(l.Elems) == 0 {
		return false
	}
	s, ok := l.Elems[0].(*syntax.Symbol)
	return ok && s.Name == name
}

func sym(at syntax.Pos, name string) *syntax.Symbol { return &syntax.Symbol{At: at, Name: name} }
func kw(at syntax.Pos, name string) *syntax.Keyword { return &syntax.Keyword{At: at, Name: name} }
func str(at syntax.Pos, s string) *syntax.String    { return &syntax.String{At: at, Value: s} }
func vec(at syntax.Pos, es ...syntax.Node) *syntax.Vector {
	return &syntax.Vector{At: at, Elems: es}
}
func list(at syntax.Pos, es ...syntax.Node) *syntax.List { return &syntax.List{At: at, Elems: es} }
