package types

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Fake values, one Go type per kind (so that each implements only the views
// its kind has), built from RTFS source by val.

type (
	fNil   struct{}
	fBool  bool
	fInt   int64
	fFloat float64
	fStr   string
	fKw    string
	fSym   string
	fFn    struct{}
	fSeq   struct {
		kind  Kind
		elems []Value
	}
	fMap struct{ kvs []Value }
)

func (fNil) Kind() Kind        { return KindNil }
func (fNil) String() string    { return "nil" }
func (fBool) Kind() Kind       { return KindBool }
func (b fBool) String() string { return strconv.FormatBool(bool(b)) }
func (fInt) Kind() Kind        { return KindInt }
func (i fInt) String() string  { return strconv.FormatInt(int64(i), 10) }
func (i fInt) Float64() float64 {
	return float64(i)
}
func (i fInt) Int64() int64       { return int64(i) }
func (fFloat) Kind() Kind         { return KindFloat }
func (f fFloat) String() string   { return syntax.FormatFloat(float64(f)) }
func (f fFloat) Float64() float64 { return float64(f) }
func (fStr) Kind() Kind           { return KindString }
func (s fStr) String() string     { return strconv.Quote(string(s)) }
func (s fStr) Text() string       { return string(s) }
func (fKw) Kind() Kind            { return KindKeyword }
func (k fKw) String() string      { return ":" + string(k) }
func (k fKw) Text() string        { return string(k) }
func (fSym) Kind() Kind           { return KindSymbol }
func (s fSym) String() string     { return string(s) }
func (s fSym) Text() string       { return string(s) }
func (fFn) Kind() Kind            { return KindFn }
func (fFn) String() string        { return "#<fn>" }
func (s *fSeq) Kind() Kind        { return s.kind }
func (s *fSeq) Len() int          { return len(s.elems) }
func (s *fSeq) Index(i int) Value { return s.elems[i] }
func (m *fMap) Kind() Kind        { return KindMap }
func (m *fMap) Len() int          { return len(m.kvs) / 2 }
func (s *fSeq) String() string {
	switch s.kind {
	case KindList:
		return "(" + join(s.elems) + ")"
	case KindSet:
		return "#{" + join(s.elems) + "}"
	}
	return "[" + join(s.elems) + "]"
}
func (m *fMap) String() string { return "{" + join(m.kvs) + "}" }
func (m *fMap) GetKeyword(name string) (Value, bool) {
	for i := 0; i < len(m.kvs); i += 2 {
		if k, ok := m.kvs[i].(fKw); ok && string(k) == name {
			return m.kvs[i+1], true
		}
	}
	return nil, false
}
func (m *fMap) Range(f func(k, v Value) bool) {
	for i := 0; i < len(m.kvs); i += 2 {
		if !f(m.kvs[i], m.kvs[i+1]) {
			return
		}
	}
}

// fMapNoView is a map kind that does not implement Mapping.
type fMapNoView struct{}

func (fMapNoView) Kind() Kind     { return KindMap }
func (fMapNoView) String() string { return "{?}" }

func join(vs []Value) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.String()
	}
	return strings.Join(s, " ")
}

// val reads an RTFS literal into a fake value; the symbol fn reads as a function.
func val(t testing.TB, src string) Value {
	t.Helper()
	nodes, err := syntax.Parse("v.rtfs", []byte(src))
	if err != nil || len(nodes) != 1 {
		t.Fatalf("val(%q): %v", src, err)
	}
	return fromNode(nodes[0])
}

func fromNode(n syntax.Node) Value {
	switch n := n.(type) {
	case *syntax.Nil:
		return fNil{}
	case *syntax.Bool:
		return fBool(n.Value)
	case *syntax.Int:
		return fInt(n.Value)
	case *syntax.Float:
		return fFloat(n.Value)
	case *syntax.String:
		return fStr(n.Value)
	case *syntax.Keyword:
		return fKw(n.Name)
	case *syntax.Symbol:
		if n.Name == "fn" {
			return fFn{}
		}
		return fSym(n.Name)
	case *syntax.List:
		return &fSeq{KindList, fromNodes(n.Elems)}
	case *syntax.Vector:
		return &fSeq{KindVector, fromNodes(n.Elems)}
	case *syntax.Set:
		return &fSeq{KindSet, fromNodes(n.Elems)}
	case *syntax.Map:
		return &fMap{fromNodes(n.Elems)}
	}
	panic("unsupported node in test value")
}

func fromNodes(ns []syntax.Node) []Value {
	out := make([]Value, len(ns))
	for i, n := range ns {
		out[i] = fromNode(n)
	}
	return out
}

// parseNode reads one form.
func parseNode(t testing.TB, src string) syntax.Node {
	t.Helper()
	nodes, err := syntax.Parse("t.rtfs", []byte(src))
	if err != nil || len(nodes) != 1 {
		t.Fatalf("parseNode(%q): %v", src, err)
	}
	return nodes[0]
}

// typ parses a type expression from source.
func typ(t testing.TB, src string) Type {
	t.Helper()
	ty, err := Parse(parseNode(t, src))
	if err != nil {
		t.Fatalf("typ(%q): %v", src, err)
	}
	return ty
}
