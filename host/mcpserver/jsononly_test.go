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

// TestRequestBodyReadOnce: readEnvelope reads the body once; the layers
// behind it read the envelope, and the handler at the end (go-sdk) still
// reads the whole body, without another read of the connection.
func TestRequestBodyReadOnce(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	src := &countingReader{r: strings.NewReader(body)}
	r := httptest.NewRequest(http.MethodPost, "/mcp", src)
	r.Header.Set("Content-Type", "application/json")
	var reads int
	var rest []byte
	var env *envelope
	readEnvelope(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env = envelopeOf(r)
		reads = src.reads
		rest, _ = io.ReadAll(r.Body)
	})).ServeHTTP(httptest.NewRecorder(), r)
	if string(rest) != body || src.reads != reads {
		t.Fatalf("the handler read %q and the connection %d more times", rest, src.reads-reads)
	}
	if m, ok := env.single(); !ok || m.Method != "ping" || string(m.ID) != "1" {
		t.Fatalf("envelope %+v", env)
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
