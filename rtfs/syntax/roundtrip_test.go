package syntax

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// gen builds random forms; every form it makes is one the reader can produce.
type gen struct{ r *rand.Rand }

var nameChars = []string{"a", "z", "Q", "_", "$", "+", "-", "*", "=", "<", ">", "!", "?", "%", "&", ".", "λ", "é", "1", "@", ":", "/"}

func (g gen) name() string {
	for {
		s := []string{"x", "fn", "update-state", "a.b/c", "+", "/", "->"}[g.r.IntN(7)]
		for n := g.r.IntN(4); n > 0; n-- {
			s += nameChars[g.r.IntN(len(nameChars))]
		}
		if checkName(s) == "" && !isNumberStart(s) && s != "nil" && s != "true" && s != "false" {
			return s
		}
	}
}

func isNumberStart(s string) bool {
	return isDigit(s[0]) || (s[0] == '+' || s[0] == '-') && len(s) > 1 && isDigit(s[1])
}

func (g gen) str() string {
	pieces := []string{"a", " ", "\n", "\t", "\r", "\"", "\\", "é", "😀", "\x00", "\x1f", "\x7f", "%", "#|", ";"}
	s := ""
	for n := g.r.IntN(6); n > 0; n-- {
		s += pieces[g.r.IntN(len(pieces))]
	}
	return s
}

func (g gen) float() float64 {
	switch g.r.IntN(6) {
	case 0:
		return math.Float64frombits(g.r.Uint64())
	case 1:
		return []float64{math.Inf(1), math.Inf(-1), math.NaN(), 0, math.Copysign(0, -1), math.MaxFloat64, math.SmallestNonzeroFloat64}[g.r.IntN(7)]
	}
	return g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(40)-20))
}

func (g gen) meta() *Map {
	if g.r.IntN(4) != 0 {
		return nil
	}
	return &Map{Elems: []Node{&Keyword{Name: g.name()}, g.form(0)}}
}

// keys returns n distinct literal keys.
func (g gen) keys(n int) []Node {
	out := make([]Node, n)
	for i := range out {
		if i%2 == 0 {
			out[i] = &Keyword{Name: "k" + strconv.Itoa(i)}
		} else {
			out[i] = &String{Value: g.str() + strconv.Itoa(i)}
		}
	}
	return out
}

func (g gen) form(depth int) Node {
	k := g.r.IntN(14)
	if depth > 4 {
		k %= 7
	}
	switch k {
	case 0:
		return &Nil{}
	case 1:
		return &Bool{Value: g.r.IntN(2) == 0}
	case 2:
		return &Int{Value: int64(g.r.Uint64())}
	case 3:
		return &Float{Value: g.float()}
	case 4:
		return &String{Value: g.str()}
	case 5:
		return &Keyword{Name: g.name()}
	case 6:
		return &Symbol{Name: g.name(), Meta: g.meta()}
	case 7:
		return &List{Elems: g.forms(depth), Meta: g.meta()}
	case 8:
		return &Vector{Elems: g.forms(depth), Meta: g.meta()}
	case 9:
		return &TypeExpr{Vec: &Vector{Elems: g.forms(depth)}}
	case 10:
		keys := g.keys(g.r.IntN(4))
		m := &Map{Meta: g.meta()}
		for _, key := range keys {
			m.Elems = append(m.Elems, key, g.form(depth+1))
		}
		return m
	case 11:
		elems := g.keys(g.r.IntN(3))
		for _, f := range g.forms(depth) {
			if _, literal := literalKey(f); !literal { // literals could repeat
				elems = append(elems, f)
			}
		}
		return &Set{Elems: elems, Meta: g.meta()}
	case 12:
		return &List{Elems: []Node{&Symbol{Name: "quote"}, g.form(depth + 1)}}
	}
	return &Map{Elems: []Node{g.form(depth + 1), g.form(depth + 1)}} // one key: no duplicates
}

func (g gen) forms(depth int) []Node {
	var out []Node
	for n := g.r.IntN(4); n > 0; n-- {
		out = append(out, g.form(depth+1))
	}
	return out
}

// TestRoundTripProperty: for random forms x, Parse(x.String()) is a form equal
// to x, and printing it again gives the same text.
func TestRoundTripProperty(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(1, 2))}
	for i := 0; i < 3000; i++ {
		x := g.form(0)
		src := x.String()
		nodes, err := Parse("rt.rtfs", []byte(src))
		if err != nil {
			t.Fatalf("form %d: %s: %v", i, src, err)
		}
		if len(nodes) != 1 || !equalNode(x, nodes[0]) {
			t.Fatalf("form %d: %s read back as %v", i, src, nodes)
		}
		if again := nodes[0].String(); again != src {
			t.Fatalf("form %d: printed %s, reprinted %s", i, src, again)
		}
	}
}

// TestGoQuotedStringsRead: the reader reads Go's strconv.Quote output (which
// package rtfs uses to print strings) back to the same bytes, including
// control characters, invalid UTF-8 and non-printable runes.
func TestGoQuotedStringsRead(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		b := make([]byte, r.IntN(12))
		for j := range b {
			b[j] = byte(r.IntN(256))
		}
		s := string(b)
		if i%2 == 0 {
			s = string([]rune{rune(r.IntN(0x110000)), rune(r.IntN(0x3000)), '\u2028', '\U000E0001'})
		}
		n := parseOne(t, strconv.Quote(s))
		if got := n.(*String).Value; got != s {
			t.Fatalf("%s read as %q, want %q", strconv.Quote(s), got, s)
		}
	}
}
