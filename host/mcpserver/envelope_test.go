package mcpserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestEnvelope: what readEnvelope knows of a request, and the era it
// routes it to.
func TestEnvelope(t *testing.T) {
	const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	for _, tc := range []struct {
		name, method, body string
		header             map[string]string
		era                era
		msgs               int  // messages known
		full               bool // the first one's params decoded whole
		tool, token        string
	}{
		{name: "call", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rtfs.eval","_meta":{"progressToken": 7}}}`,
			era: eraSessions, msgs: 1, full: true, tool: "rtfs.eval", token: "7"},
		{name: "discover", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, era: eraSessionless, msgs: 1, full: true},
		{name: "discover with an older header", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`,
			header: map[string]string{"MCP-Protocol-Version": "2025-11-25"}, era: eraSessions, msgs: 1, full: true},
		{name: "revision in _meta", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`,
			era: eraSessionless, msgs: 1, full: true},
		{name: "revision in the header", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			header: map[string]string{"MCP-Protocol-Version": "2026-07-28"}, era: eraSessionless, msgs: 1, full: true},
		{name: "a session is of the sessions era", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`,
			header: map[string]string{"Mcp-Session-Id": "s"}, era: eraSessions, msgs: 1, full: true},
		{name: "batch: its first message decides", method: "POST", body: `[{"jsonrpc":"2.0","id":1,"method":"ping","params":{` + modernMeta + `}},{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
			era: eraSessionless, msgs: 2, full: true},
		{name: "params of another type: _meta still known", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5,"_meta":{"progressToken":"p"}}}`,
			era: eraSessions, msgs: 1, full: false, token: `"p"`},
		{name: "not JSON-RPC", method: "POST", body: `{"jsonrpc":`, era: eraSessions},
		{name: "_meta not an object", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":3}}`, era: eraSessions},
		{name: "not JSON", method: "POST", body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, era: eraSessions},
		{name: "GET", method: "GET", era: eraSessions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/mcp", strings.NewReader(tc.body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set(headerJSONOnly, "forged by the client")
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			var env *envelope
			var forged string
			readEnvelope(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				env, forged = envelopeOf(r), r.Header.Get(headerJSONOnly)
			})).ServeHTTP(httptest.NewRecorder(), r)
			if forged != "" {
				t.Errorf("the client's %s reached the layers", headerJSONOnly)
			}
			if env.era != tc.era || len(env.msgs) != tc.msgs {
				t.Fatalf("era %d with %d messages, want %d with %d", env.era, len(env.msgs), tc.era, tc.msgs)
			}
			if tc.msgs == 0 {
				return
			}
			m := env.msgs[0]
			if m.full != tc.full || m.Params.Name != tc.tool || m.progressToken() != tc.token {
				t.Errorf("message %+v: full %v, tool %q, token %q", m, m.full, m.Params.Name, m.progressToken())
			}
		})
	}
}
