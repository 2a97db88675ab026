package syntax

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestLiterals(t *testing.T) {
	tests := []struct {
		src  string
		want Node // positions are checked separately: all at 1:1
	}{
		{"nil", &Nil{}},
		{"true", &Bool{Value: true}},
		{"false", &Bool{Value: false}},
		{"0", &Int{Value: 0}},
		{"42", &Int{Value: 42}},
		{"+7", &Int{Value: 7}},
		{"-7", &Int{Value: -7}},
		{"007", &Int{Value: 7}},
		{"9223372036854775807", &Int{Value: math.MaxInt64}},
		{"-9223372036854775808", &Int{Value: math.MinInt64}},
		{"1.5", &Float{Value: 1.5}},
		{"-2.5", &Float{Value: -2.5}},
		{"1e3", &Float{Value: 1000}},
		{"1E3", &Float{Value: 1000}},
		{"-2.5e-3", &Float{Value: -0.0025}},
		{"+1.5e+2", &Float{Value: 150}},
		{"1e-400", &Float{Value: 0}},
		{"##Inf", &Float{Value: math.Inf(1)}},
		{"##-Inf", &Float{Value: math.Inf(-1)}},
		{"##NaN", &Float{Value: math.NaN()}},
		{`""`, &String{Value: ""}},
		{`"plain"`, &String{Value: "plain"}},
		{`"a\nb\tc\rd\"e\\f\/g\bh\fi\0j"`, &String{Value: "a\nb\tc\rd\"e\\f/g\bh\fi\x00j"}},
		{`"\u00e9\u20AC"`, &String{Value: "é€"}},
		{`"\uD83D\uDE00"`, &String{Value: "😀"}},
		{`"\a\v\x03\x7f\xff\U0001F600"`, &String{Value: "\a\v\x03\x7f\xff😀"}},
		{"\"two\nlines\"", &String{Value: "two\nlines"}},
		{`"héllo"`, &String{Value: "héllo"}},
		{":a", &Keyword{Name: "a"}},
		{":mcp.stream.start", &Keyword{Name: "mcp.stream.start"}},
		{":my.ns/foo", &Keyword{Name: "my.ns/foo"}},
		{":com.acme:v1.0/fn", &Keyword{Name: "com.acme:v1.0/fn"}},
		{":should-continue?", &Keyword{Name: "should-continue?"}},
		{":1", &Keyword{Name: "1"}},
		{"foo", &Symbol{Name: "foo"}},
		{"update-state", &Symbol{Name: "update-state"}},
		{"should-continue?", &Symbol{Name: "should-continue?"}},
		{"a.b/c", &Symbol{Name: "a.b/c"}},
		{"com.acme:v1.0/fn", &Symbol{Name: "com.acme:v1.0/fn"}},
		{".method", &Symbol{Name: ".method"}},
		{"λ", &Symbol{Name: "λ"}},
		{"x@y", &Symbol{Name: "x@y"}},
		{"$_*!", &Symbol{Name: "$_*!"}},
		{"nil?", &Symbol{Name: "nil?"}},
		{"true-ish", &Symbol{Name: "true-ish"}},
	}
	for _, s := range []string{"+", "-", "*", "/", "=", "<", ">", "<=", ">=", "not=", "->", "->>", "--1", "&", "%", "%1", "-x", "+inf"} {
		tests = append(tests, struct {
			src  string
			want Node
		}{s, &Symbol{Name: s}})
	}
	for _, tt := range tests {
		got := parseOne(t, tt.src)
		if reflect.TypeOf(got) != reflect.TypeOf(tt.want) || !equalNode(got, tt.want) {
			t.Errorf("Parse(%q) = %T %s, want %T %s", tt.src, got, got, tt.want, tt.want)
		}
		if p := got.Pos(); p.Filename() != "t.rtfs" || p.Line != 1 || p.Col != 1 {
			t.Errorf("Parse(%q): position %v, want t.rtfs:1:1", tt.src, p)
		}
	}
}

func TestNegativeZeroAndSpecialFloats(t *testing.T) {
	f := parseOne(t, "-0.0").(*Float)
	if !math.Signbit(f.Value) || f.Value != 0 {
		t.Errorf("-0.0 read as %v", f.Value)
	}
	if s := f.String(); s != "-0.0" {
		t.Errorf("-0.0 prints as %q", s)
	}
	for src, want := range map[string]string{"1e3": "1000.0", "##Inf": "##Inf", "##-Inf": "##-Inf", "##NaN": "##NaN", "1.5": "1.5", "1e100": "1e+100"} {
		if got := parseOne(t, src).String(); got != want {
			t.Errorf("%s prints as %q, want %q", src, got, want)
		}
	}
}

func TestForms(t *testing.T) {
	tests := []struct {
		src, want, pos string
	}{
		{"()", "()", "1:1"},
		{"(a b)", "(a b)", "1:1 1:2 1:4"},
		{"[1 [2] {}]", "[1 [2] {}]", "1:1 1:2 1:4 1:5 1:8"},
		{"{:a 1, :b \"x\"}", `{:a 1 :b "x"}`, "1:1 1:2 1:5 1:8 1:11"},
		{"(f\n  x\n\ty)", "(f x y)", "1:1 1:2 2:3 3:2"},
		{"'x", "(quote x)", "1:1 1:1 1:2"},
		{"'(a b)", "(quote (a b))", "1:1 1:1 1:2 1:3 1:5"},
		{"' x", "(quote x)", "1:1 1:1 1:3"},
		{"@a", "(deref a)", "1:1 1:1 1:2"},
		{"`(a ~b ~@c)", "(quasiquote (a (unquote b) (unquote-splicing c)))", "1:1 1:1 1:2 1:3 1:5 1:5 1:6 1:8 1:8 1:10"},
		{"#{1 :a}", "#{1 :a}", "1:1 1:3 1:5"},
		{":[ :map { :state :any } ]", ":[:map {:state :any}]", "1:1 1:2 1:4 1:9 1:11 1:18"},
		{"#(+ % 1)", "(fn [%1] (+ %1 1))", "1:1 1:1 1:1 1:1 1:2 1:3 1:5 1:7"},
		{"#(f %2 %&)", "(fn [%1 %2 & %&] (f %2 %&))", "1:1 1:1 1:1 1:1 1:1 1:1 1:1 1:2 1:3 1:5 1:8"},
		{"#(now)", "(fn [] (now))", "1:1 1:1 1:1 1:2 1:3"},
		{"^:private x", "^{:private true} x", "1:11 1:2 1:2 1:2"},
		{"^{:doc \"d\"} [a]", `^{:doc "d"} [a]`, "1:13 1:2 1:3 1:8 1:14"},
		{"^:a ^:b (f)", "^{:b true :a true} (f)", "1:9 1:2 1:6 1:6 1:2 1:2 1:10"},
		{"^:a ^{:a false} x", "^{:a true} x", "1:17 1:2 1:7 1:2"},
		{"^String s", "^{:tag String} s", "1:9 1:2 1:2 1:2"},
		{"^:delegation :local f", "^{:delegation :local} f", "1:21 1:2 1:2 1:14"},
		{`^:delegation :remote "gpt" f`, `^{:delegation :remote :delegation-target "gpt"} f`, "1:28 1:2 1:2 1:14 1:14 1:22"},
		{"^:delegation f", "^{:delegation true} f", "1:14 1:2 1:2 1:2"},
		{"#| c |# a", "a", "1:9"},
		{"a ; comment\n", "a", "1:1"},
	}
	for _, tt := range tests {
		n := parseOne(t, tt.src)
		if got := n.String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %s, want %s", tt.src, got, tt.want)
		}
		if got := positions(n); got != tt.pos {
			t.Errorf("Parse(%q) positions = %s, want %s", tt.src, got, tt.pos)
		}
	}
}

func TestTypeExprAndMeta(t *testing.T) {
	n := parseOne(t, "(defn ^:private f [s :int] :[ :map { :state :any } ] s)").(*List)
	name := n.Elems[1].(*Symbol)
	if name.Name != "f" || name.Meta == nil || name.Meta.String() != "{:private true}" {
		t.Fatalf("name = %s with meta %v", name.Name, name.Meta)
	}
	te, ok := n.Elems[3].(*TypeExpr)
	if !ok || te.Pos() != (Pos{te.At.file, 1, 28}) || te.Vec.Pos().Col != 29 {
		t.Fatalf("elem 3 = %T %v, want *TypeExpr at 1:28 with vector at 1:29", n.Elems[3], n.Elems[3].Pos())
	}
	if te.String() != ":[:map {:state :any}]" {
		t.Errorf("TypeExpr prints %s", te)
	}
	if k, ok := n.Elems[2].(*Vector).Elems[1].(*Keyword); !ok || k.Name != "int" {
		t.Errorf("param type = %v", n.Elems[2].(*Vector).Elems[1])
	}
}

func TestEmptyAndComments(t *testing.T) {
	for _, src := range []string{"", "  \n\t,,", "; only a comment", "#| block |#", "#| a #| b |# c |#\n; x\n"} {
		nodes, err := Parse("e.rtfs", []byte(src))
		if err != nil || len(nodes) != 0 {
			t.Errorf("Parse(%q) = %v, %v; want no forms", src, nodes, err)
		}
	}
	nodes, err := Parse("e.rtfs", []byte("a ;; b c\n d #| e\n f |# g"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.String()+"@"+posString(n.Pos()))
	}
	if got := strings.Join(names, " "); got != "a@1:1 d@2:2 g@3:7" {
		t.Errorf("forms = %s", got)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		src, pos, msg string
	}{
		{"(a b", "1:1", "unterminated list: missing ')'"},
		{"[a\n(b c)", "1:1", "unterminated vector: missing ']'"},
		{"x {:a", "1:3", "unterminated map: missing '}'"},
		{"#{1", "1:1", "unterminated set: missing '}'"},
		{"#(f", "1:1", "unterminated #() function literal"},
		{"(a]", "1:3", "unexpected ']': the list opened at 1:1 needs ')'"},
		{")", "1:1", "unexpected ')'"},
		{"a\n  }", "2:3", "unexpected '}'"},
		{"\"abc", "1:1", "unterminated string: missing closing '\"'"},
		{"x \"a\nb", "1:3", "unterminated string"},
		{"#| a #| b |#", "1:1", "unterminated block comment: missing |#"},
		{"9223372036854775808", "1:1", "integer literal 9223372036854775808 does not fit in a 64-bit integer"},
		{"-9223372036854775809", "1:1", "does not fit"},
		{"1e400", "1:1", "float literal 1e400 is out of range"},
		{"1.", "1:1", "invalid number 1."},
		{"1.e5", "1:1", "invalid number"},
		{"12abc", "1:1", "invalid number 12abc"},
		{"0x10", "1:1", "invalid number 0x10"},
		{"1/2", "1:1", "invalid number 1/2"},
		{`"\q"`, "1:2", `unknown escape sequence \q in string`},
		{`"\u12"`, "1:2", `invalid \u escape: expected 4 hex digits`},
		{`"\uZZZZ"`, "1:2", `invalid \u escape`},
		{`"\uD800"`, "1:2", "unpaired surrogate"},
		{`"\uDC00"`, "1:2", "unpaired surrogate"},
		{`"\`, "1:2", "unterminated escape sequence"},
		{`"\x4"`, "1:2", `invalid \x escape: expected 2 hex digits`},
		{`"\U0000D800"`, "1:2", `invalid \U escape`},
		{`"\UFFFFFFFF"`, "1:2", `invalid \U escape`},
		{`"\U00110000"`, "1:2", `invalid \U escape`},
		{"{:a 1 :b}", "1:1", "map literal needs an even number of forms, has 3"},
		{"{:a 1 :a 2}", "1:7", "duplicate key :a in map literal"},
		{`{"k" 1 "k" 2}`, "1:8", `duplicate key "k" in map literal`},
		{"#{1 2 1}", "1:7", "duplicate element 1 in set literal"},
		{":", "1:1", "':' must be followed by a keyword name or '['"},
		{"(: a)", "1:2", "':' must be followed"},
		{"::a", "1:1", "invalid keyword ::a"},
		{":a/", "1:1", "invalid keyword :a/: a name cannot end with '/'"},
		{"a:", "1:1", "invalid symbol a:"},
		{"/a", "1:1", "invalid symbol /a"},
		{"a|b", "1:1", `invalid symbol a|b: "|" is not allowed in a name`},
		{"a\xffb", "1:2", "invalid UTF-8 byte 0xff: not a UTF-8 text file"},
		{"(+ 1\n 2 \x00)", "2:4", `NUL byte (\x00): not a UTF-8 text file`},
		{"(+\u00a01 2)", "1:2", `invalid symbol +\u00a01: it holds the invisible character U+00A0`},
		{"(a\u200bb)", "1:2", "invisible character U+200B"},
		{":k\ufeff", "1:1", "invisible character U+FEFF"},
		{"#?(:clj 1 :cljs 2)", "1:1", "reader conditionals (#?) are not supported in RTFS"},
		{"'", "1:1", "' must be followed by a form, found end of input"},
		{"('x ')", "1:5", "' must be followed by a form, found ')'"},
		{"@", "1:1", "@ must be followed by a form"},
		{"~@", "1:1", "~@ must be followed by a form"},
		{"^:a", "1:1", "metadata :a must be followed by a form"},
		{"^", "1:1", "'^' must be followed by a form"},
		{"^1 x", "1:2", "metadata must be a map, keyword, symbol or string, not 1"},
		{"^:a 1", "1:5", "metadata can only be attached to a symbol or a collection, not 1"},
		{"^:a :b", "1:5", "not :b"},
		{"^:delegation :remote 5 f", "1:22", "^:delegation :remote needs a string id, got 5"},
		{"^:delegation :cloud f", "1:14", `^:delegation needs :local, :local-model "id" or :remote "id", got :cloud`},
		{`^:delegation :local-model "x"`, "1:1", "^:delegation must be followed by a form"},
		{`^:delegation :remote`, "1:1", "^:delegation :remote must be followed by a form"},
		{"##Foo", "1:1", "unknown special value ##Foo"},
		{"##", "1:1", "unknown special value ##"},
		{"#", "1:1", "'#' at end of input"},
		{"#x", "1:1", "unknown reader syntax #x"},
		{"#(a #(b))", "1:5", "nested #() function literals are not allowed"},
		{"#(f %0)", "1:5", "invalid #() parameter %0"},
		{"#(f %21)", "1:5", "invalid #() parameter %21"},
		{":[", "1:2", "unterminated vector"},
		{"\n\n   (x", "3:4", "unterminated list"},
	}
	for _, tt := range tests {
		nodes, err := Parse("bad.rtfs", []byte(tt.src))
		var se *Error
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, %v; want a *Error", tt.src, nodes, err)
			continue
		}
		want := "bad.rtfs:" + tt.pos + ": "
		if !strings.HasPrefix(err.Error(), want) || !strings.Contains(se.Msg, tt.msg) {
			t.Errorf("Parse(%q) error = %q, want prefix %q and %q", tt.src, err, want, tt.msg)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q) error spans lines: %q", tt.src, err)
		}
	}
}

func TestNesting(t *testing.T) {
	ok := strings.Repeat("[", MaxNesting) + strings.Repeat("]", MaxNesting)
	if _, err := Parse("deep.rtfs", []byte(ok)); err != nil {
		t.Errorf("%d levels: %v", MaxNesting, err)
	}
	for _, open := range []string{"(", "[", "{", "#{", "'", "@", "^:a ", "#(", ":["} {
		src := strings.Repeat(open, MaxNesting+5) + "x"
		_, err := Parse("deep.rtfs", []byte(src))
		var se *Error
		if !errors.As(err, &se) || !strings.Contains(se.Msg, fmt.Sprintf("nested too deeply (more than %d levels)", MaxNesting)) {
			if open != "#(" { // nested #() is rejected earlier, with its own error
				t.Errorf("%q x %d: %v", open, MaxNesting+5, err)
			}
		}
		if se != nil && !se.Pos.IsValid() {
			t.Errorf("%q: invalid position in %v", open, err)
		}
	}
}

func TestBigLiteralsAndBOM(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&b, ":k%d %d ", i, i)
	}
	ok := b.String() + "}"
	if n := parseOne(t, ok).(*Map); len(n.Elems) != 80 {
		t.Errorf("40-entry map read with %d forms", len(n.Elems))
	}
	_, err := Parse("big.rtfs", []byte(b.String()+":k7 0}"))
	if err == nil || !strings.Contains(err.Error(), "duplicate key :k7 in map literal") {
		t.Errorf("41-entry map with a repeated key: %v", err)
	}
	_, err = Parse("big.rtfs", []byte("#{"+strings.Repeat("1.5 ", 1)+strings.Repeat("x ", 20)+"1.5}"))
	if err == nil || !strings.Contains(err.Error(), "duplicate element 1.5 in set literal") {
		t.Errorf("big set with a repeated element: %v", err)
	}
	n := parseOne(t, "\xEF\xBB\xBFabc")
	if n.String() != "abc" || n.Pos().Col != 1 {
		t.Errorf("BOM: read %s at %v", n, n.Pos())
	}
}

func TestPosAndErrorFormat(t *testing.T) {
	if got := (Pos{}).String(); got != "0:0" {
		t.Errorf("zero Pos prints %q", got)
	}
	f := "x.rtfs"
	p := MakePos(&f, 3, 7)
	if p.String() != "x.rtfs:3:7" || !p.IsValid() || p.Filename() != "x.rtfs" {
		t.Errorf("MakePos: %v", p)
	}
	_, err := Parse("", []byte("\n ("))
	if err == nil || err.Error() != "2:2: unterminated list: missing ')'" {
		t.Errorf("error without file name = %v", err)
	}
}

func TestSharedFileName(t *testing.T) {
	nodes, err := Parse("shared.rtfs", []byte("a b (c)"))
	if err != nil {
		t.Fatal(err)
	}
	if nodes[0].Pos().file != nodes[2].(*List).Elems[0].Pos().file {
		t.Error("positions of one file do not share the file name")
	}
}
