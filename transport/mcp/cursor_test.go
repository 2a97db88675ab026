package mcp

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// TestCursorEncoding checks that encoding/json reads what the hand-written
// encoder writes, and the round trip through decodeCursor.
func TestCursorEncoding(t *testing.T) {
	states := []callState{
		{Kind: kindStreamable, Req: 2, Token: "rtfs-X"},
		{Kind: kindStreamable, Session: "S1", Proto: version20251125, Req: 2, Token: "rtfs-Y",
			Event: "abc_12", Progress: 3.25, HasProgress: true, Chunks: 9, Done: true},
		{Kind: kindLegacy, Req: 2, Token: "t", Event: "quote\" back\\slash \x01 é", Progress: -1e-9, HasProgress: true},
		{Kind: kindStreamable, Req: 7, Token: "t", Progress: 1e21, Chunks: 1 << 40},
	}
	for _, st := range states {
		c := st.encode()
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(c, cursorPrefix))
		if err != nil {
			t.Fatal(err)
		}
		var viaJSON callState
		if err := json.Unmarshal(raw, &viaJSON); err != nil || viaJSON != st {
			t.Errorf("encode(%+v) = %s, which encoding/json reads as %+v (%v)", st, raw, viaJSON, err)
		}
		got, err := decodeCursor(c, st.Kind)
		if err != nil || got != st {
			t.Errorf("round trip of %+v = %+v (%v)", st, got, err)
		}
	}
}

func FuzzCursorDecode(f *testing.F) {
	f.Add((&callState{Kind: kindStreamable, Req: 2, Token: "t", Event: "e"}).encode())
	f.Add(cursorPrefix + "e30")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, c string) {
		st, err := decodeCursor(c, kindStreamable)
		if err != nil {
			return
		}
		again, err := decodeCursor(st.encode(), kindStreamable)
		if err != nil || again != st {
			t.Fatalf("re-encoding %+v gave %+v (%v)", st, again, err)
		}
	})
}
