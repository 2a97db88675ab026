package types

import (
	"errors"
	"strings"
	"testing"
)

// specType is a processor's declared return type: an enum of actions and a
// nested config map.
const specType = `:[ :map { :state :any
            :action :[ :enum :continue :pause :resume :cancel :complete ]
            :output :any
            :config :[ :map { :buffer_size :int :timeout_ms :int } ] } ]`

func TestCheck(t *testing.T) {
	tests := []struct {
		typ, val, want string // want "" means the value conforms
	}{
		{":int", "5", ""},
		{":int", "5.0", "expected int, got float 5.0"},
		{":int", `"x"`, `expected int, got string "x"`},
		{":float", "2.5", ""},
		{":float", "2", "expected float, got int 2"},
		{":number", "2", ""},
		{":number", "##NaN", ""},
		{":number", ":a", "expected number, got :a"},
		{":string", `"s"`, ""},
		{":string", "s", "expected string, got symbol s"},
		{":bool", "false", ""},
		{":bool", "nil", "expected bool, got nil"},
		{":nil", "nil", ""},
		{":nil", "false", "expected nil, got false"},
		{":keyword", ":k", ""},
		{":symbol", "sym", ""},
		{":fn", "fn", ""},
		{":fn", "{}", "expected fn, got map {}"},
		{":map", "{:a 1}", ""},
		{":vector", "[]", ""},
		{":vector", "()", "expected vector, got list ()"},
		{":list", "(1)", ""},
		{":set", "#{1}", ""},
		{":any", "nil", ""},
		{":never", "nil", "expected no value (:never), got nil"},
		{":string?", "nil", ""},
		{":string?", `"a"`, ""},
		{":string?", "1", "expected string or nil, got int 1"},
		{":my.app/Reading", "[1]", ""},
		{"[:vector :int]", "[1 2 3]", ""},
		{"[:vector :int]", `[1 2 "x"]`, `at [2]: expected int, got string "x"`},
		{"[:vector :int]", "(1)", "expected vector of int, got list (1)"},
		{"[:list :int]", "(1 2)", ""},
		{"[:set :keyword]", "#{:a 1}", "at [1]: expected keyword, got int 1"},
		{"[:* :int]", "(1 2)", ""},
		{"[:* :int]", "[1 2]", ""},
		{"[:* :int]", "#{1}", "expected a list or vector of int, got set #{1}"},
		{"[:vector [:vector :int]]", "[[1] [2 :x]]", "at [1] [1]: expected int, got :x"},
		{"[:map [:k :int] [:j :string?]]", "{:k 1}", ""},
		{"[:map [:k :int] [:j :string?]]", "{:j nil}", "missing required key :k"},
		{"[:map [:k :int ?]]", "{}", ""},
		{"[:map [:k :int ?]]", "{:k nil}", "at :k: expected int, got nil"},
		{"[:map {:k :int}]", "{:k 1 :extra 2}", ""},
		{"[:map {:k :any}]", "{}", ""},
		{"[:map {:k :nil}]", "{}", ""},
		{"[:map {:k [:union :int :nil]}]", "{}", ""},
		{"[:map {:k :int}]", "[]", "expected map [:map {:k :int}], got vector []"},
		{"[:map {:k :int}]", `{"k" 1}`, ""}, // braced keys are optional: a string key is not :k
		{"[:map [:k :int]]", `{"k" 1}`, "missing required key :k"},
		{"[:map-of :keyword :int]", "{:a 1 :b 2}", ""},
		{"[:map-of :keyword :int]", `{:a 1 :b "2"}`, `at :b: expected int, got string "2"`},
		{"[:map-of :keyword :int]", `{:a 1 "b" 2}`, `invalid key: expected keyword, got string "b"`},
		{"[:tuple :int :string]", `[1 "a"]`, ""},
		{"[:tuple :int :string]", `[1 2]`, "at [1]: expected string, got int 2"},
		{"[:tuple :int :string]", `[1]`, "expected 2 elements, got 1 in vector [1]"},
		{"[:tuple :int]", "{}", "expected tuple [:tuple :int], got map {}"},
		{"[:enum :a :b]", ":b", ""},
		{"[:enum :a :b]", ":c", "expected one of :a :b, got :c"},
		{"[:enum :a :b]", `"a"`, `expected one of :a :b, got string "a"`},
		{`[:enum "a" 1 2.5 true nil]`, `"a"`, ""},
		{`[:enum "a" 1 2.5 true nil]`, "1", ""},
		{`[:enum "a" 1 2.5 true nil]`, "1.0", `expected one of "a" 1 2.5 true nil, got float 1.0`},
		{`[:enum "a" 1 2.5 true nil]`, "2.5", ""},
		{`[:enum "a" 1 2.5 true nil]`, "true", ""},
		{`[:enum "a" 1 2.5 true nil]`, "false", `expected one of "a" 1 2.5 true nil, got false`},
		{`[:enum "a" 1 2.5 true nil]`, "nil", ""},
		{"[:enum 9007199254740993]", "9007199254740993", ""},
		{"[:enum 9007199254740993]", "9007199254740992", "expected one of 9007199254740993, got int 9007199254740992"},
		{"[:val :x]", ":x", ""},
		{"[:val :x]", ":y", "expected :x, got :y"},
		{"[:union :int :string]", `"a"`, ""},
		{"[:union :int :string]", ":a", "expected int or string, got :a"},
		{"[:and :int [:> 0]]", "5", ""},
		{"[:and :int [:> 0]]", "0", "expected a number > 0, got int 0"},
		{"[:and :int [:> 0]]", "1.5", "expected int, got float 1.5"},
		{"[:fn [:int] :int]", "fn", ""},
		{"[:fn [:int] :int]", "1", "expected fn, got int 1"},
		{"[:> 0]", "0.5", ""},
		{"[:> 0]", `"1"`, `expected a number > 0, got string "1"`},
		{"[:>= 1]", "1", ""},
		{"[:< 1]", "1", "expected a number < 1, got int 1"},
		{"[:<= 1.5]", "1", ""},
		{"[:> 1]", "##NaN", "expected a number > 1, got float ##NaN"},
		{"[:> 9007199254740992]", "9007199254740993", ""},
		{"[:in-range 0 10]", "10", ""},
		{"[:in-range 0 10]", "-1", "expected a number in the range 0 to 10, got int -1"},
		{"[:in-range 0 10]", "10.5", "expected a number in the range 0 to 10, got float 10.5"},
		{"[:min-length 2]", `"é€"`, ""},
		{"[:min-length 3]", `"é€"`, `expected a string or collection of size >= 3, got string "é€" of size 2`},
		{"[:max-length 2]", `"abc"`, `expected a string or collection of size <= 2, got string "abc" of size 3`},
		{"[:min-count 1]", "[1]", ""},
		{"[:min-count 2]", "{:a 1}", "expected a string or collection of size >= 2, got map {:a 1} of size 1"},
		{"[:max-count 1]", "#{1 2}", "of size 2"},
		{"[:min-count 1]", "5", "expected a string or collection of size >= 1, got int 5"},
		{"[:non-empty]", "[1]", ""},
		{"[:non-empty]", `""`, `expected a non-empty string or collection, got string "" of size 0`},
		{`[:matches-regex "[a-z]+"]`, `"abc"`, ""},
		{`[:matches-regex "[a-z]+"]`, `"abc1"`, `expected a string matching "[a-z]+", got string "abc1"`},
		{`[:matches-regex "a|b"]`, `"ab"`, `expected a string matching "a|b", got string "ab"`},
		{`[:matches-regex "a"]`, ":a", `expected a string matching "a", got :a`},
		{"[:has-key :id]", "{:id nil}", ""},
		{"[:has-key :id]", "{:x 1}", "missing required key :id"},
		{"[:has-key :id]", "[:id]", "expected a map with keys [:has-key :id], got vector [:id]"},
		{"[:required-keys [:a :b]]", "{:a 1}", "missing required key :b"},
		{specType, "{:state {} :action :continue :output nil :config {:buffer_size 1 :timeout_ms 2}}", ""},
		{specType, "{:state {} :action :explode :output nil :config {:buffer_size 1 :timeout_ms 2}}",
			"at :action: expected one of :continue :pause :resume :cancel :complete, got :explode"},
		{specType, `{:state {} :action :pause :output 1 :config {:buffer_size "x" :timeout_ms 2}}`,
			`at :config :buffer_size: expected int, got string "x"`},
		// The keys of a braced map type are optional (docs/rtfs-syntax.md):
		// a processor declaring this type returns :config {:buffer_size 100}.
		{specType, "{:state {} :output 1 :config {}}", ""},
		{specType, "{:state {} :action :pause :output 1 :config {:buffer_size 100}}", ""},
		{specType, "{:state {} :action :pause :output 1 :config {:buffer_size 100 :timeout_ms 1.5}}",
			"at :config :timeout_ms: expected int, got float 1.5"},
		{"[:map [:a :int] [:b :int ?]]", "{:b 1}", "missing required key :a"},
		{"[:map [:a :int] [:b :int ?]]", "{:a 1}", ""},
		{"[:map {:r [:vector [:map {:t :float}]]}]", "{:r [{:t 1.5} {:t 2}]}", "at :r [1] :t: expected float, got int 2"},
	}
	for _, tt := range tests {
		err := Check(typ(t, tt.typ), val(t, tt.val))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Check(%s, %s) = %v, want nil", tt.typ, tt.val, err)
		case tt.want != "" && err == nil:
			t.Errorf("Check(%s, %s) = nil, want %q", tt.typ, tt.val, tt.want)
		case tt.want != "" && !strings.Contains(err.Error(), tt.want):
			t.Errorf("Check(%s, %s) = %q, want %q", tt.typ, tt.val, err, tt.want)
		}
	}
}

func TestCheckErrorFields(t *testing.T) {
	err := Check(typ(t, specType), val(t, `{:action :pause :config {:buffer_size "x" :timeout_ms 1}}`))
	var ce *CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is %T", err, err)
	}
	if ce.Path != ":config :buffer_size" || ce.Msg != `expected int, got string "x"` {
		t.Errorf("CheckError = %+v", ce)
	}
	err = Check(typ(t, ":int"), val(t, ":a"))
	if !errors.As(err, &ce) || ce.Path != "" || err.Error() != "expected int, got :a" {
		t.Errorf("top-level error = %v", err)
	}
}

func TestCheckEdgeValues(t *testing.T) {
	if err := Check(nil, val(t, "1")); err != nil {
		t.Errorf("nil type: %v", err)
	}
	if err := Check(typ(t, ":nil"), nil); err != nil {
		t.Errorf("Go nil as RTFS nil: %v", err)
	}
	if err := Check(typ(t, ":int"), nil); err == nil || err.Error() != "expected int, got nil" {
		t.Errorf("Go nil against :int: %v", err)
	}
	err := Check(typ(t, "[:map {:k :int}]"), fMapNoView{})
	if err == nil || !strings.Contains(err.Error(), "cannot look inside map {?}") {
		t.Errorf("opaque map: %v", err)
	}
	long := `"` + strings.Repeat("é", 100) + `"`
	err = Check(typ(t, ":int"), val(t, long))
	if err == nil || !strings.HasSuffix(err.Error(), "...") || len(err.Error()) > 120 {
		t.Errorf("long value: %v", err)
	}
}

// TestCheckConcurrent runs checks of one type from several goroutines (run
// with -race): types are immutable.
func TestCheckConcurrent(t *testing.T) {
	ty := typ(t, specType)
	good := val(t, "{:state {} :action :continue :config {:buffer_size 1 :timeout_ms 2}}")
	bad := val(t, "{:state {} :action :x}")
	done := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			for j := 0; j < 200; j++ {
				if Check(ty, good) != nil || Check(ty, bad) == nil {
					done <- errors.New("wrong result")
					return
				}
			}
			done <- nil
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
