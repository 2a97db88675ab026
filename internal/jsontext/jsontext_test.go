package jsontext

import (
	"encoding/json"
	"testing"
)

// TestAppendStringMatchesEncodingJSON: whatever the bytes, the text decodes
// to what encoding/json makes of them.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "quote \" and \\", "tab\tnl\ncr\r\x01\x1f", "héllo ✓", "bad \xff utf8 \xc3", "\u2028"} {
		got := AppendString(nil, []byte(s))
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, got, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("%q: decodes to %q, want %q", s, back, wantBack)
		}
		if string(AppendString(nil, s)) != string(got) {
			t.Fatalf("%q: string and []byte forms differ", s)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add([]byte("a\"b\\c\n\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var back string
		if err := json.Unmarshal(AppendString(nil, in), &back); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
	})
}
