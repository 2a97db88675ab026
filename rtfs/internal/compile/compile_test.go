package compile

import (
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

func parse(t *testing.T, src string) []syntax.Node {
	t.Helper()
	nodes, err := syntax.Parse("c.rtfs", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func builtins(name string) bool { return name == "+" || name == "conj" }

func TestBindingAnnotations(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want string // pattern:type=value ...
	}{
		{"[x :foo]", "x=:foo"},
		{"[x :int 5]", "x:int=5"},
		{"[x :int y 5]", "x=:int y=5"},
		{"[x :[:vector :int] [1]]", "x:[:vector :int]=[1]"},
		{"[x :int 5 y :string \"a\"]", "x:int=5 y:string=\"a\""},
		{"[[a b] :any v {:keys [c]} m]", "[a b]:any=v {:keys [c]}=m"},
	} {
		v := parse(t, tc.src)[0].(*syntax.Vector)
		var parts []string
		for _, b := range parseBindings(v, "let") {
			s := b.pattern.String()
			if b.typ != nil {
				s += strings.TrimPrefix(b.typ.String(), ":")
				s = strings.Replace(s, b.pattern.String(), b.pattern.String()+":", 1)
			}
			parts = append(parts, s+"="+b.value.String())
		}
		if got := strings.Join(parts, " "); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.src, got, tc.want)
		}
	}
}

func TestCompileProgramShape(t *testing.T) {
	p, err := Compile(nil, []Unit{{Nodes: parse(t, "(def a 1)\n(defn f [x & r] :int (+ x a))")}}, builtins)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Globals) != 2 || p.Globals[0] != "a" || p.Globals[1] != "f" {
		t.Errorf("globals %v", p.Globals)
	}
	f := p.Funcs[len(p.Funcs)-1]
	if f.Name != "f" || f.NumParams != 1 || !f.Variadic || f.ReturnType == nil || f.NumLocals < 2 {
		t.Errorf("f: %+v", f)
	}
	if pos := f.PosAt(len(f.Code) - 1); pos.Line != 2 {
		t.Errorf("position of f's last instruction: %v", pos)
	}
	op, arg := Decode(Encode(CALL, 12345))
	if op != CALL || arg != 12345 || op.String() != "call" {
		t.Errorf("decode: %v %d", op, arg)
	}
}

func TestCompileErrorsArePositioned(t *testing.T) {
	for src, want := range map[string]string{
		"(undefined 1)":                   "c.rtfs:1:2: undefined symbol undefined",
		"(let [x 1] (recur 2))":           "c.rtfs:1:12: recur outside of loop or fn",
		"(fn [x] (+ (recur 1) 1))":        "c.rtfs:1:12: recur not in tail position",
		"(match 1 2)":                     "c.rtfs:1:10: match: pattern 2 has no body",
		"(try 1 (finally 2) (catch e 3))": "c.rtfs:1:20: try: catch after finally",
		"(cond 1)":                        "c.rtfs:1:1: cond: odd number of forms; expected test/expression pairs",
		"(quote)":                         "c.rtfs:1:1: quote: wrong number of forms (0), expected (quote form)",
		"(if 1 2 3 4)":                    "c.rtfs:1:1: if: wrong number of forms (4), expected (if test then else?)",
		"(fn [& ] 1)":                     "c.rtfs:1:6: fn: & must be followed by a rest parameter",
		"(let [{:keys x} {}] 1)":          "c.rtfs:1:14: destructuring: :keys must be a vector, got x",
		"(defn f ([x] 1) ([y] 2))":        "c.rtfs:1:17: fn f: two arities with 1 parameters",
		"conj":                            "",
	} {
		_, err := Compile(nil, []Unit{{Nodes: parse(t, src)}}, builtins)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", src, got, want)
		}
	}
}

func TestFormsAreSpecial(t *testing.T) {
	for _, name := range Forms() {
		if !isSpecial(name) {
			t.Errorf("Forms lists %s, which is no special form", name)
		}
	}
}
