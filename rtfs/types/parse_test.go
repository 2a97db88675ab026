package types

import (
	"errors"
	"strings"
	"testing"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

func TestParseAndString(t *testing.T) {
	tests := []struct{ src, want string }{
		{":int", ":int"},
		{":float", ":float"},
		{":number", ":number"},
		{":string", ":string"},
		{":bool", ":bool"},
		{":nil", ":nil"},
		{":keyword", ":keyword"},
		{":symbol", ":symbol"},
		{":any", ":any"},
		{":never", ":never"},
		{":map", ":map"},
		{":vector", ":vector"},
		{":list", ":list"},
		{":set", ":set"},
		{":fn", ":fn"},
		{"int", ":int"},
		{":string?", ":string?"},
		{":any?", ":any"},
		{":my.app/Reading", ":my.app/Reading"},
		{":my.app/Reading?", ":my.app/Reading?"},
		{"[:int]", ":int"},
		{"[:vector :int]", "[:vector :int]"},
		{"[:list :string?]", "[:list :string?]"},
		{"[:set :keyword]", "[:set :keyword]"},
		{"[:* :number]", "[:* :number]"},
		{"[:vector [:vector :int]]", "[:vector [:vector :int]]"},
		{"[:map]", ":map"},
		{"[:map [:k :int] [:j :string?]]", "[:map [:k :int] [:j :string?]]"},
		{"[:map [:k :int ?]]", "[:map [:k :int ?]]"},
		{"[:map {:k :int :j :string}]", "[:map {:k :int :j :string}]"},
		{"[:map {:k :int} [:j :bool]]", "[:map [:k :int ?] [:j :bool]]"},
		{"{:k :int}", "[:map {:k :int}]"},
		{":[ :map { :state :any :action :keyword } ]", "[:map {:state :any :action :keyword}]"},
		{"[:map-of :keyword :int]", "[:map-of :keyword :int]"},
		{"[:dict :string :any]", "[:dict :string :any]"},
		{"[:tuple :int :string]", "[:tuple :int :string]"},
		{"[:tuple]", "[:tuple]"},
		{`[:enum :continue :pause 1 2.5 "s" true nil]`, `[:enum :continue :pause 1 2.5 "s" true nil]`},
		{"[:val :x]", "[:val :x]"},
		{"[:union :int :string]", "[:union :int :string]"},
		{"[:and :int [:> 0] [:<= 10]]", "[:and :int [:> 0] [:<= 10]]"},
		{"[:fn [:int :string] :bool]", "[:fn [:int :string] :bool]"},
		{"[:fn [:int & :string] :any]", "[:fn [:int & :string] :any]"},
		{"[:=> [] :nil]", "[:=> [] :nil]"},
		{"[:fn]", ":fn"},
		{"[:> 0]", "[:> 0]"},
		{"[:>= 1.5]", "[:>= 1.5]"},
		{"[:< -3]", "[:< -3]"},
		{"[:<= 1e3]", "[:<= 1000.0]"},
		{"[:in-range 0 100]", "[:in-range 0 100]"},
		{"[:min-length 2]", "[:min-length 2]"},
		{"[:max-length 5]", "[:max-length 5]"},
		{"[:min-count 1]", "[:min-count 1]"},
		{"[:max-count 3]", "[:max-count 3]"},
		{"[:non-empty]", "[:non-empty]"},
		{`[:matches-regex "[a-z]+"]`, `[:matches-regex "[a-z]+"]`},
		{"[:has-key :id]", "[:has-key :id]"},
		{"[:required-keys [:a :b]]", "[:required-keys [:a :b]]"},
		{"[:required-keys :a :b]", "[:required-keys [:a :b]]"},
		{"[vector int]", "[:vector :int]"},
	}
	for _, tt := range tests {
		ty := typ(t, tt.src)
		if got := ty.String(); got != tt.want {
			t.Errorf("Parse(%s).String() = %s, want %s", tt.src, got, tt.want)
		}
		// The printed form parses back to the same type.
		if again := typ(t, ty.String()).String(); again != tt.want {
			t.Errorf("Parse(%s) reprints as %s", tt.want, again)
		}
	}
}

func TestParseSpecReturnType(t *testing.T) {
	src := `:[ :map { :state :any
            :action :[ :enum :continue :pause :resume :cancel :complete ]
            :output :any
            :config :[ :map { :buffer_size :int :timeout_ms :int } ] } ]`
	want := "[:map {:state :any :action [:enum :continue :pause :resume :cancel :complete] :output :any :config [:map {:buffer_size :int :timeout_ms :int}]}]"
	if got := typ(t, src).String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ src, pos, msg string }{
		{":strng", "1:1", "unknown type :strng (want one of :int"},
		{"strng", "1:1", "unknown type strng"},
		{":strng?", "1:1", "unknown type :strng"},
		{"42", "1:1", "expected a type, got 42"},
		{`"int"`, "1:1", `expected a type, got "int"`},
		{"[]", "1:1", "empty type vector"},
		{":[]", "1:2", "empty type vector"},
		{"[1 2]", "1:2", "a type vector starts with a type name such as :map, not 1"},
		{"[:vector]", "", ""}, // valid: any vector
		{"[:vector :int :int]", "1:1", "[:vector T] takes 1 argument(s), got 2"},
		{"[:* ]", "1:1", "[:* T] takes 1 argument(s), got 0"},
		{"[:vector :nope]", "1:10", "unknown type :nope"},
		{"[:map [:k]]", "1:7", "a map type entry is [:k T] or [:k T ?]"},
		{"[:map [:k :int !]]", "1:16", "a map type entry is [:k T] or [:k T ?]"},
		{`[:map ["k" :int]]`, "1:8", `a map type's keys must be keywords, got "k"`},
		{"[:map [:k :int] [:k :int]]", "1:18", "key :k appears twice in the map type"},
		{"[:map :int]", "1:7", "a map type lists {:k T ...} or [:k T] entries, not :int"},
		{"[:map {:k :bad}]", "1:11", "unknown type :bad"},
		{"[:map-of :int]", "1:1", "[:map-of K V] takes 2 argument(s), got 1"},
		{"[:enum]", "1:1", "[:enum ...] needs at least one value"},
		{"[:enum :a [1]]", "1:11", "expected a literal (nil, boolean, number, string or keyword), got [1]"},
		{"[:val]", "1:1", "[:val value] takes 1 argument(s), got 0"},
		{"[:union]", "1:1", "[:union ...] needs at least one type"},
		{"[:and]", "1:1", "[:and ...] needs at least one type"},
		{"[:fn :int :int]", "1:6", "needs a vector of parameter types, got :int"},
		{"[:fn [& :int :int] :int]", "1:7", "& must be followed by exactly one rest parameter type"},
		{"[:fn [:int]]", "1:1", "takes 2 argument(s), got 1"},
		{"[:> :a]", "1:5", "expected a number, got :a"},
		{"[:> ##NaN]", "1:5", "expected a number, got ##NaN"},
		{"[:in-range 5 1]", "1:1", "[:in-range lo hi] needs lo <= hi, got 5 > 1"},
		{"[:min-length -1]", "1:14", "[:min-length n] needs a non-negative integer, got -1"},
		{"[:max-count 1.5]", "1:13", "needs a non-negative integer"},
		{"[:non-empty 1]", "1:1", "[:non-empty ] takes 0 argument(s), got 1"},
		{`[:matches-regex "a("]`, "1:17", `invalid regular expression "a("`},
		{`[:matches-regex "a)|(b"]`, "1:17", "invalid regular expression"},
		{"[:matches-regex 1]", "1:17", "needs a string, got 1"},
		{"[:has-key]", "1:1", "[:has-key :k] takes 1 argument(s), got 0"},
		{"[:has-key 1]", "1:11", "[:has-key ...] needs keyword keys, got 1"},
		{"[:required-keys []]", "1:1", "needs at least one key"},
		{"[:int 1]", "1:1", "type :int takes no arguments, got 1"},
		{"[:array :int [2]]", "1:1", "type [:array ...] is not supported"},
		{"[:record]", "1:1", "not supported"},
		{"[:frobnicate]", "1:2", "unknown type constructor :frobnicate"},
	}
	for _, tt := range tests {
		nodes, err := syntax.Parse("ty.rtfs", []byte(tt.src))
		if err != nil {
			t.Fatalf("%s: %v", tt.src, err)
		}
		ty, err := Parse(nodes[0])
		if tt.msg == "" {
			if err != nil {
				t.Errorf("Parse(%s): %v", tt.src, err)
			}
			continue
		}
		var se *syntax.Error
		if !errors.As(err, &se) {
			t.Errorf("Parse(%s) = %v, %v; want a *syntax.Error", tt.src, ty, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "ty.rtfs:"+tt.pos+": ") || !strings.Contains(se.Msg, tt.msg) {
			t.Errorf("Parse(%s) error = %q, want at %s: %q", tt.src, err, tt.pos, tt.msg)
		}
	}
}

func TestParseNilAndOddNodes(t *testing.T) {
	if _, err := Parse(nil); err == nil || !strings.Contains(err.Error(), "missing type expression") {
		t.Errorf("Parse(nil) = %v", err)
	}
	if _, err := Parse(&syntax.TypeExpr{}); err == nil || !strings.Contains(err.Error(), "empty type expression") {
		t.Errorf("Parse(empty TypeExpr) = %v", err)
	}
	if _, err := Parse(&syntax.Vector{Elems: []syntax.Node{&syntax.Keyword{Name: "enum"}, nil}}); err == nil {
		t.Error("Parse([:enum <nil>]) succeeded")
	}
}
