package types

import "testing"

// BenchmarkCheck measures Check on conforming values (the per-processor-call
// case), with the test's fake values; rtfs_values_test.go has the same with
// package rtfs's values.
func BenchmarkCheck(b *testing.B) {
	cases := []struct{ name, typ, val string }{
		{"SpecResult", specType, "{:state {:readings [1 2 3]} :action :continue :output 3 :config {:buffer_size 1 :timeout_ms 2}}"},
		{"Keyword", ":keyword", ":continue"},
		{"Enum", "[:enum :continue :pause :resume :cancel :complete]", ":complete"},
		{"Vector10", "[:vector [:and :int [:>= 0]]]", "[0 1 2 3 4 5 6 7 8 9]"},
		{"Regex", `[:matches-regex "[a-z]+-[0-9]+"]`, `"sensor-42"`},
	}
	for _, c := range cases {
		ty, v := typ(b, c.typ), val(b, c.val)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := Check(ty, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseType measures parsing a processor's return type from its form.
func BenchmarkParseType(b *testing.B) {
	n := parseNode(b, specType)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(n); err != nil {
			b.Fatal(err)
		}
	}
}
