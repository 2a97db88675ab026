package syntax

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// String implements Node.
func (n *Nil) String() string { return "nil" }

// String implements Node.
func (n *Bool) String() string { return strconv.FormatBool(n.Value) }

// String implements Node.
func (n *Int) String() string { return strconv.FormatInt(n.Value, 10) }

// String implements Node: always with a decimal point or exponent, so that it
// reads back as a float; the special values print as ##Inf, ##-Inf and ##NaN.
func (n *Float) String() string { return FormatFloat(n.Value) }

// String implements Node: the quoted form with escapes.
func (n *String) String() string { return quote(n.Value) }

// String implements Node.
func (n *Keyword) String() string { return ":" + n.Name }

// String implements Node: #"pattern", as written.
func (n *Regex) String() string { return `#"` + n.Pattern + `"` }

// String implements Node.
func (n *Symbol) String() string { return toString(n) }

// String implements Node.
func (n *List) String() string { return toString(n) }

// String implements Node.
func (n *Vector) String() string { return toString(n) }

// String implements Node.
func (n *Map) String() string { return toString(n) }

// String implements Node.
func (n *Set) String() string { return toString(n) }

// String implements Node.
func (n *TypeExpr) String() string { return toString(n) }

func toString(n Node) string {
	var b strings.Builder
	writeNode(&b, n)
	return b.String()
}

func writeNode(b *strings.Builder, n Node) {
	switch n := n.(type) {
	case *Symbol:
		writeMeta(b, n.Meta)
		b.WriteString(n.Name)
	case *List:
		writeMeta(b, n.Meta)
		writeSeq(b, "(", n.Elems, ")")
	case *Vector:
		writeMeta(b, n.Meta)
		writeSeq(b, "[", n.Elems, "]")
	case *Map:
		writeMeta(b, n.Meta)
		writeSeq(b, "{", n.Elems, "}")
	case *Set:
		writeMeta(b, n.Meta)
		writeSeq(b, "#{", n.Elems, "}")
	case *TypeExpr:
		b.WriteByte(':')
		if n.Vec != nil {
			writeNode(b, n.Vec)
		} else {
			b.WriteString("[]")
		}
	case nil:
		b.WriteString("<nil node>")
	default:
		b.WriteString(n.String())
	}
}

func writeMeta(b *strings.Builder, m *Map) {
	if m == nil {
		return
	}
	b.WriteByte('^')
	writeSeq(b, "{", m.Elems, "}")
	b.WriteByte(' ')
}

func writeSeq(b *strings.Builder, open string, elems []Node, close string) {
	b.WriteString(open)
	for i, e := range elems {
		if i > 0 {
			b.WriteByte(' ')
		}
		writeNode(b, e)
	}
	b.WriteString(close)
}

// FormatFloat is the printed form of every RTFS float, the one function
// the reader's nodes, the values of package rtfs and the type literals of
// rtfs/types print floats with: Go's shortest representation that reads
// back exactly, always with a decimal point or an exponent (2.0, 1.5,
// 1e+21), and ##Inf, ##-Inf, ##NaN.
func FormatFloat(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "##Inf"
	case math.IsInf(x, -1):
		return "##-Inf"
	case math.IsNaN(x):
		return "##NaN"
	}
	s := strconv.FormatFloat(x, 'g', -1, 64)
	if strings.ContainsAny(s, ".e") {
		return s
	}
	return s + ".0"
}

// quote returns s as an RTFS string literal: the escapes \" \\ \n \t \r and
// \uXXXX for other control characters; other bytes are written as they are.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20 || c == 0x7f:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigit(c >> 4))
			b.WriteByte(hexDigit(c & 0xf))
		case c < utf8.RuneSelf:
			b.WriteByte(c)
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 { // a byte that is no UTF-8: \xHH reads back as it
				b.WriteString(`\x`)
				b.WriteByte(hexDigit(c >> 4))
				b.WriteByte(hexDigit(c & 0xf))
				i++
				continue
			}
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		i++
	}
	b.WriteByte('"')
	return b.String()
}

func hexDigit(c byte) byte { return "0123456789abcdef"[c] }
