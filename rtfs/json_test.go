package rtfs

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestFromJSON(t *testing.T) {
	cases := []struct {
		in   string
		want Value
	}{
		{`null`, Nil},
		{` true `, True},
		{`false`, False},
		{`0`, Int(0)},
		{`-12`, Int(-12)},
		{`9223372036854775807`, Int(math.MaxInt64)},
		{`-9223372036854775808`, Int(math.MinInt64)},
		{`9223372036854775808`, Float(9223372036854775808)},
		{`1.0`, Float(1)},
		{`1e3`, Float(1000)},
		{`-2.5E-1`, Float(-0.25)},
		{`""`, String("")},
		{`"a\"b\\c\/d\b\f\n\r\t"`, String("a\"b\\c/d\b\f\n\r\t")},
		{`"\u00e9\ud83d\ude00"`, String("é😀")},
		{`"\ud800x"`, String("\ufffdx")},
		{"\"h\xffi\"", String("h\ufffdi")},
		{`"héllo"`, String("héllo")},
		{`[]`, NewVector()},
		{`[1, "a", [null]]`, NewVector(Int(1), String("a"), NewVector(Nil))},
		{`{}`, MapOf()},
		{`{"temp": 21.5, "my.ns/k": {"x": [true]}}`,
			MapOf(Keyword("temp"), Float(21.5), Keyword("my.ns/k"), MapOf(Keyword("x"), NewVector(True)))},
		{`{"a": 1, "a": 2}`, MapOf(Keyword("a"), Int(2))},
	}
	for _, c := range cases {
		got, err := FromJSON([]byte(c.in))
		if err != nil {
			t.Errorf("FromJSON(%s): %v", c.in, err)
			continue
		}
		if !Equal(got, c.want) || got.Kind() != c.want.Kind() {
			t.Errorf("FromJSON(%s) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestFromJSONLargeObject(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 50; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + Int(i).String() + `":` + Int(i).String())
	}
	b.WriteString("}")
	v, err := FromJSON([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(*Map)
	if x, ok := m.GetKeyword("k37"); m.Len() != 50 || !ok || x != Int(37) {
		t.Fatalf("large object: len %d, k37 = %v", m.Len(), x)
	}
}

func TestFromJSONErrors(t *testing.T) {
	cases := map[string]string{
		``:                 "offset 0 (line 1, column 1): unexpected end of input",
		`{"a" 1}`:          "offset 5 (line 1, column 6): unexpected character '1', expected ':'",
		`[1,]`:             "offset 3",
		`{"a":1,}`:         "expected a string key",
		`[1 2]`:            "expected ',' or ']'",
		"{\n  \"a\": tru}": "line 2, column 8): invalid literal, expected true",
		`"abc`:             "unterminated string",
		"\"a\x01\"":        "control character 0x01 in string",
		`"\x"`:             `invalid escape \x`,
		`"\u12"`:           `invalid \u escape`,
		`01`:               "invalid number",
		`-`:                "invalid number",
		`1.`:               "expected a digit after '.'",
		`1e+`:              "expected a digit in the exponent",
		`1e999`:            "number out of range",
		`{} []`:            "unexpected character '[' after the JSON value",
		`nul`:              "expected null",
		`'a'`:              "unexpected character '\\'', expected a value",
	}
	for in, want := range cases {
		_, err := FromJSON([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("FromJSON(%q) error = %v, want it to contain %q", in, err, want)
		}
	}
	deep := strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)
	if _, err := FromJSON([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nesting deeper than") {
		t.Errorf("deep JSON: err = %v", err)
	}
	ok := strings.Repeat(`{"a":`, 1000) + "1" + strings.Repeat("}", 1000)
	if _, err := FromJSON([]byte(ok)); err != nil {
		t.Errorf("1000 levels: %v", err)
	}
}

func TestToJSON(t *testing.T) {
	cases := []struct {
		v    Value
		want string
	}{
		{Nil, `null`},
		{True, `true`},
		{Int(-3), `-3`},
		{Float(2), `2.0`},
		{Float(0.1), `0.1`},
		{Float(1e21), `1e+21`},
		{String("a\"\\\n\x01<é>"), `"a\"\\\n\u0001<é>"`},
		{String("bad\xff"), `"bad` + "\ufffd" + `"`},
		{Keyword("my.ns/k"), `"my.ns/k"`},
		{Symbol("sym"), `"sym"`},
		{NewList(Int(1), Keyword("a")), `[1,"a"]`},
		{NewVector(), `[]`},
		{NewSet(Int(1)), `[1]`},
		{MapOf(Keyword("a"), Keyword("b"), String("s"), Nil, Int(1), Int(2), NewVector(Int(1)), True), `{"a":"b","s":null,"1":2,"[1]":true}`},
		{MapOf(), `{}`},
	}
	for _, c := range cases {
		got, err := ToJSON(c.v)
		if err != nil || string(got) != c.want {
			t.Errorf("ToJSON(%v) = %s, %v; want %s", c.v, got, err, c.want)
		}
		if err == nil && !json.Valid(got) {
			t.Errorf("ToJSON(%v) = %s is not valid JSON", c.v, got)
		}
	}
	for _, v := range []Value{Float(math.NaN()), Float(math.Inf(1)), NewVector(Float(math.Inf(-1))),
		MapOf(Keyword("f"), lookupBuiltin("count"))} {
		if _, err := ToJSON(v); err == nil || !strings.Contains(err.Error(), "cannot encode") {
			t.Errorf("ToJSON(%v) error = %v, want 'cannot encode'", v, err)
		}
	}
}

// jsonSeeds are valid and invalid inputs for FuzzFromJSON.
var jsonSeeds = []string{
	`{"seq": 1, "data": {"city": "Paris", "temperature_c": 21.5, "tags": ["a", "b"]}}`,
	`{"action": "pause", "config": {"resume-after-ms": 100}}`,
	`[1, -2, 3.5e-3, true, false, null, "\u00e9\n"]`,
	`{"a": {"b": {"c": []}}}`,
	`"just a string"`,
	`{"k": 1, "k": 2}`,
	`{"bad": }`,
	`[1, 2`,
	"\"\xff\"",
}

func FuzzFromJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := FromJSON(data)
		if err != nil && strings.Contains(err.Error(), errJSONNumberRange.Error()) {
			return // valid JSON text, but beyond float64
		}
		if (err == nil) != json.Valid(data) {
			t.Fatalf("FromJSON(%q) err = %v, but encoding/json says valid = %v", data, err, json.Valid(data))
		}
		if err != nil {
			return
		}
		out, err := ToJSON(v)
		if err != nil {
			t.Fatalf("ToJSON(FromJSON(%q)) failed: %v", data, err)
		}
		back, err := FromJSON(out)
		if err != nil {
			t.Fatalf("FromJSON(ToJSON(...)) = %v for %s", err, out)
		}
		if !Equal(back, v) {
			t.Fatalf("round trip of %q: %v became %v", data, v, back)
		}
	})
}

func TestFromJSONDoesNotAliasInput(t *testing.T) {
	for _, pad := range []int{0, jsonShareMax} {
		data := []byte(`{"city": "Paris", "tags": ["x"], "pad": "` + strings.Repeat("p", pad) + `"}`)
		v, err := FromJSON(data)
		if err != nil {
			t.Fatal(err)
		}
		for i := range data {
			data[i] = '#'
		}
		m := v.(*Map)
		city, _ := m.GetKeyword("city")
		tags, _ := m.GetKeyword("tags")
		if city != String("Paris") || !Equal(tags, NewVector(String("x"))) {
			t.Fatalf("input of %d bytes: decoded values changed with the input: %v", len(data), v)
		}
	}
}

// TestFromJSONIntegersBeyondInt64: JSON numbers are doubles, so an integer
// that does not fit int64 decodes as the nearest Float (FromJSON and
// JSONDecoder alike), and only a number beyond the float64 range fails.
func TestFromJSONIntegersBeyondInt64(t *testing.T) {
	var dec JSONDecoder
	decoders := map[string]func([]byte) (Value, error){"FromJSON": FromJSON, "Decode": dec.Decode}
	for who, decode := range decoders {
		v, err := decode([]byte(`{"n":12345678901234567890, "m": -12345678901234567890, "k": 9223372036854775807}`))
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		m := v.(*Map)
		for key, want := range map[string]Value{"n": Float(12345678901234567890), "m": Float(-12345678901234567890), "k": Int(math.MaxInt64)} {
			if got, _ := m.GetKeyword(key); got != want {
				t.Errorf("%s: %s = %v (%s), want %v (%s)", who, key, got, got.Kind(), want, want.Kind())
			}
		}
		huge := "1" + strings.Repeat("0", 400)
		if _, err := decode([]byte(`[` + huge + `]`)); err == nil || !strings.Contains(err.Error(), "offset 1 (line 1, column 2): number out of range") {
			t.Errorf("%s(10^400): err = %v, want number out of range at offset 1", who, err)
		}
	}
}

// ToOutputJSON never fails: what JSON cannot hold is written in place and
// the rest of the value is kept (docs/mcp-server.md, rtfs.eval).
func TestToOutputJSON(t *testing.T) {
	p := mustCompile(t, `(defn step [s] s) {:avg ##NaN :hi ##Inf :f step :xs [1 ##-Inf "<b>"]}`)
	out := mustRun(t, NewThread(Limits{}), p)
	got := string(ToOutputJSON(out.Value))
	want := `{"avg":null,"hi":null,"f":"#<fn step>","xs":[1,null,"<b>"]}`
	if got != want {
		t.Errorf("ToOutputJSON = %s, want %s", got, want)
	}
	if _, err := ToJSON(out.Value); err == nil {
		t.Error("ToJSON encoded NaN")
	}
}
