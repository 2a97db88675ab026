package types

import (
	"errors"
	"testing"

	"github.com/rtfshost/rtfshost/rtfs/syntax"
)

// FuzzParseType checks that Parse never panics, reports *syntax.Error with a
// valid position, prints types that parse back to the same text, and that
// Check never panics on a set of sample values.
func FuzzParseType(f *testing.F) {
	for _, s := range []string{
		":int", ":string?", specType, "[:vector [:map-of :keyword [:union :int :nil]]]",
		`[:and :string [:min-length 1] [:matches-regex "[a-z]+"]]`, "[:tuple :int [:enum :a 1 2.5]]",
		"[:fn [:int & :string] [:val nil]]", "[:map [:k :int ?] {:j [:in-range 0 1]}]",
		"[:required-keys [:a]]", "[:has-key :a]", "[:* [:> 0]]", "[:non-empty]", "{:a :b}",
	} {
		f.Add(s)
	}
	samples := []string{"nil", "1", "-2.5", `"abc"`, ":a", "sym", "fn", "[1 :a]", "(1 2)", "#{:a}",
		"{:a 1 :k nil :j 0.5}", "{:state {} :action :pause :config {:buffer_size 1}}"}
	f.Fuzz(func(t *testing.T, src string) {
		nodes, err := syntax.Parse("f.rtfs", []byte(src))
		if err != nil || len(nodes) == 0 {
			return
		}
		ty, err := Parse(nodes[0])
		if err != nil {
			var se *syntax.Error
			if !errors.As(err, &se) || !se.Pos.IsValid() {
				t.Fatalf("Parse(%s): error %v without a valid position", nodes[0], err)
			}
			return
		}
		printed := ty.String()
		again := typ(t, printed)
		if again.String() != printed {
			t.Fatalf("%s prints as %s, which reprints as %s", src, printed, again)
		}
		for _, s := range samples {
			if err := Check(ty, val(t, s)); err != nil && err.Error() == "" {
				t.Fatalf("Check(%s, %s): empty error", printed, s)
			}
		}
	})
}
