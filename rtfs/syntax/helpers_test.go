package syntax

import (
	"math"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// equalNode reports whether a and b are the same form, positions aside.
func equalNode(a, b Node) bool {
	switch a := a.(type) {
	case *Nil, *Bool, *Int, *String, *Keyword:
		return sameLiteral(a, b)
	case *Float:
		b, ok := b.(*Float)
		return ok && (a.Value == b.Value || math.IsNaN(a.Value) && math.IsNaN(b.Value))
	case *Symbol:
		b, ok := b.(*Symbol)
		return ok && a.Name == b.Name && equalMeta(a.Meta, b.Meta)
	case *List:
		b, ok := b.(*List)
		return ok && equalElems(a.Elems, b.Elems) && equalMeta(a.Meta, b.Meta)
	case *Vector:
		b, ok := b.(*Vector)
		return ok && equalElems(a.Elems, b.Elems) && equalMeta(a.Meta, b.Meta)
	case *Map:
		b, ok := b.(*Map)
		return ok && equalElems(a.Elems, b.Elems) && equalMeta(a.Meta, b.Meta)
	case *Set:
		b, ok := b.(*Set)
		return ok && equalElems(a.Elems, b.Elems) && equalMeta(a.Meta, b.Meta)
	case *TypeExpr:
		b, ok := b.(*TypeExpr)
		return ok && equalNode(a.Vec, b.Vec)
	case *Regex:
		b, ok := b.(*Regex)
		return ok && a.Pattern == b.Pattern
	}
	return false
}

func equalMeta(a, b *Map) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return equalNode(a, b)
}

func equalElems(a, b []Node) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equalNode(a[i], b[i]) {
			return false
		}
	}
	return true
}

// children returns the forms directly inside n, metadata first.
func children(n Node) []Node {
	var out []Node
	add := func(m *Map, elems []Node) {
		if m != nil {
			out = append(out, m)
		}
		out = append(out, elems...)
	}
	switch n := n.(type) {
	case *Symbol:
		add(n.Meta, nil)
	case *List:
		add(n.Meta, n.Elems)
	case *Vector:
		add(n.Meta, n.Elems)
	case *Map:
		add(n.Meta, n.Elems)
	case *Set:
		add(n.Meta, n.Elems)
	case *TypeExpr:
		out = append(out, n.Vec)
	}
	return out
}

// positions lists the line:col of n and every form inside it, in pre-order.
func positions(n Node) string {
	var b strings.Builder
	var walk func(Node)
	walk = func(n Node) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(posString(n.Pos()))
		for _, c := range children(n) {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

func posString(p Pos) string {
	return strings.TrimPrefix(p.String(), p.Filename()+":")
}

// parseOne parses src, which must hold exactly one form.
func parseOne(t *testing.T, src string) Node {
	t.Helper()
	nodes, err := Parse("t.rtfs", []byte(src))
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	if len(nodes) != 1 {
		t.Fatalf("Parse(%q): got %d forms, want 1", src, len(nodes))
	}
	return nodes[0]
}
