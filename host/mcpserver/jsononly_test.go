package mcpserver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestResponseOf(t *testing.T) {
	for _, tc := range []struct{ stream, want string }{
		{"event: message\nid: a_0\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n" +
			"event: message\nid: a_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n", `{"jsonrpc":"2.0","id":3,"result":{}}`},
		{"event: prime\r\nid: a_0\r\ndata: \r\n\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":\"x\",\"error\":{\"code\":-32602}}\r\n\r\n",
			"{\"jsonrpc\":\"2.0\",\n\"id\":\"x\",\"error\":{\"code\":-32602}}"},
		{"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n", ""},
		{"", ""},
	} {
		if got := string(responseOf([]byte(tc.stream))); got != tc.want {
			t.Errorf("responseOf(%q) = %q, want %q", tc.stream, got, tc.want)
		}
	}
}

func TestWithoutProgressToken(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"p","other":1}}}`,
			`{"id":12345678901234567890,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"other":1},"name":"x"}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"progressToken":"p"}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"progressToken":"p"}}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`},
		{`not json`, `not json`},
	} {
		if got := string(withoutProgressToken([]byte(tc.in))); got != tc.want {
			t.Errorf("withoutProgressToken(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestAcceptsJSONOnly(t *testing.T) {
	for _, tc := range []struct {
		accept []string
		want   bool
	}{
		{[]string{"application/json"}, true},
		{[]string{"application/json;q=0.9"}, true},
		{[]string{"application/json, text/event-stream"}, false},
		{[]string{"application/json", "text/event-stream"}, false},
		{[]string{"*/*"}, false},
		{[]string{"text/event-stream"}, false},
		{nil, false},
	} {
		if got := acceptsJSONOnly(tc.accept); got != tc.want {
			t.Errorf("acceptsJSONOnly(%q) = %v", tc.accept, got)
		}
	}
}

// TestRequestBodyReadOnce: the first middleware that asks reads the body;
// later ones get the same bytes without reading the connection again, and
// the handler at the end still reads the whole body.
func TestRequestBodyReadOnce(t *testing.T) {
	src := &countingReader{r: strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)}
	r := httptest.NewRequest(http.MethodPost, "/mcp", src)
	w := httptest.NewRecorder()
	first, ok1 := requestBody(w, r)
	second, ok2 := requestBody(w, r)
	if !ok1 || !ok2 || string(first) != string(second) || &first[0] != &second[0] {
		t.Fatalf("bodies %q, %q", first, second)
	}
	reads := src.reads
	rest, err := io.ReadAll(r.Body)
	if err != nil || string(rest) != string(first) || src.reads != reads {
		t.Fatalf("the handler read %q (%v) and the connection %d more times", rest, err, src.reads-reads)
	}
}

type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}
