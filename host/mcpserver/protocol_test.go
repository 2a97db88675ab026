package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// TestCancelReachesStream: a client that cancels its call sends
// notifications/cancelled, and the server cancels the call's stream.
func TestCancelReachesStream(t *testing.T) {
	f := newFixture(t, Options{})
	log := newProgressLog()
	cs := f.connect(context.Background(), log, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	params := &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("c1")}
	params.SetProgressToken("c")
	ch := callAsync(ctx, cs, params)
	f.feed(context.Background(), "c1", values(1)...)
	log.waitFor(t, 1)
	f.cancelledEnds(t, cancel, ch, "c1")
}

// TestRefusedBeforeInitialize: a request without Mcp-Session-Id other than
// initialize is refused with HTTP 400 and JSON-RPC -32600 echoing its id; an
// unknown session id is 404; initialize alone (before
// notifications/initialized) is enough for go-sdk to serve calls.
func TestRefusedBeforeInitialize(t *testing.T) {
	f := newFixture(t, Options{})
	url := f.ts.URL + PathStreamable
	list := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	call := `{"jsonrpc":"2.0","id":"c-2","method":"tools/call","params":{"name":"mcp.stream.inspect","arguments":{}}}`
	for _, tc := range []struct {
		body   string
		header map[string]string
		id     string
	}{
		{list, nil, "7"},
		{call, nil, `"c-2"`},
		{call, map[string]string{"Accept": "application/json"}, `"c-2"`},
	} {
		resp, body := rawPost(t, url, tc.body, tc.header)
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s before initialize: %d (session %q) %s", tc.body, resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), body)
		}
		checkRefusal(t, []byte(body), tc.id)
	}
	// A batch is refused as a whole, one error per request; an id that is
	// neither a string nor a number is answered as null.
	batch := `[{"jsonrpc":"2.0","id":3,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/progress"},{"jsonrpc":"2.0","id":{"x":1},"method":"tools/list"}]`
	resp, body := rawPost(t, url, batch, nil)
	var errs []json.RawMessage
	if err := json.Unmarshal([]byte(body), &errs); resp.StatusCode != http.StatusBadRequest || err != nil || len(errs) != 2 {
		t.Fatalf("batch: %d %s", resp.StatusCode, body)
	}
	checkRefusal(t, errs[0], "3")
	checkRefusal(t, errs[1], "null")
	// Passed to go-sdk: a malformed body, ping (allowed before initialize)
	// and a request of the sessionless revision (to the stateless handler,
	// which wants the revision in the MCP-Protocol-Version header too).
	for _, tc := range []struct{ body, want string }{
		{`{"jsonrpc":`, "malformed payload"},
		{`{"jsonrpc":"2.0","id":5,"method":"ping"}`, `"id":5,"result":{}`},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, `"code":-32020`},
	} {
		if _, body := rawPost(t, url, tc.body, nil); !strings.Contains(body, tc.want) {
			t.Errorf("%s: got %s, want %s", tc.body, body, tc.want)
		}
	}
	resp, body = rawPost(t, url, call, map[string]string{"Mcp-Session-Id": "no-such-session"})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown session: %d %s", resp.StatusCode, body)
	}
	// After initialize, the session works, even before
	// notifications/initialized (go-sdk gates on initialize only).
	resp, _ = rawPost(t, url, initializeBody, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	h := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
	resp, body = rawPost(t, url, call, h)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `\"total\":0`) {
		t.Errorf("call before notifications/initialized: %d %s", resp.StatusCode, body)
	}
	resp, _ = rawPost(t, url, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	resp, body = rawPost(t, url, call, h)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"result"`) || !strings.Contains(body, `\"total\":0`) {
		t.Errorf("call after initialize: %d %s", resp.StatusCode, body)
	}
	deleteSession(t, url, sid)
	// A deleted (or expired) session is unknown: 404.
	if resp, body = rawPost(t, url, call, h); resp.StatusCode != http.StatusNotFound {
		t.Errorf("deleted session: %d %s", resp.StatusCode, body)
	}
}

// checkRefusal asserts that msg is a JSON-RPC -32600 error with the given id
// that tells the client to initialize.
func checkRefusal(t *testing.T, msg []byte, id string) {
	t.Helper()
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg, &r); err != nil {
		t.Fatalf("refusal is not JSON-RPC: %v: %s", err, msg)
	}
	if r.JSONRPC != "2.0" || string(r.ID) != id || r.Result != nil || r.Error == nil ||
		r.Error.Code != -32600 || !strings.Contains(r.Error.Message, "send initialize first") {
		t.Errorf("refusal %s, want error -32600 with id %s", msg, id)
	}
}

// TestLegacyRefusedBeforeInitialize: on the legacy endpoint, go-sdk answers
// a POST without sessionid with 400, an unknown sessionid with 404, and a
// call on an opened but uninitialized session with 202 and a JSON-RPC error
// on the event stream.
func TestLegacyRefusedBeforeInitialize(t *testing.T) {
	f := newFixture(t, Options{})
	list := `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`
	if resp, body := rawPost(t, f.ts.URL+PathSSE, list, nil); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "sessionid") {
		t.Errorf("POST without sessionid: %d %s", resp.StatusCode, body)
	}
	if resp, body := rawPost(t, f.ts.URL+PathSSE+"?sessionid=nope", list, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST with an unknown sessionid: %d %s", resp.StatusCode, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.ts.URL+PathSSE, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := bufio.NewReader(resp.Body)
	endpoint := nextSSEData(t, events)
	if !strings.Contains(endpoint, "sessionid=") {
		t.Fatalf("endpoint event %q", endpoint)
	}
	if r, body := rawPost(t, f.ts.URL+endpoint, list, nil); r.StatusCode != http.StatusAccepted {
		t.Fatalf("POST on the new session: %d %s", r.StatusCode, body)
	}
	msg := nextSSEData(t, events)
	if !strings.Contains(msg, `"id":9`) || !strings.Contains(msg, `"error"`) || strings.Contains(msg, `"result"`) ||
		!strings.Contains(msg, "invalid during session initialization") {
		t.Errorf("answer on the stream: %s", msg)
	}
}

// nextSSEData returns the data of the next event on an SSE stream.
func nextSSEData(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	var data []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the event stream: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" && len(data) > 0 {
			return strings.Join(data, "\n")
		}
		if rest, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(rest, " "))
		}
	}
}

func deleteSession(t *testing.T, url, sid string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// dropper is an http.RoundTripper that cuts the SSE response of the first
// tools/call after its second progress notification, as a broken network
// would.
type dropper struct {
	mu      sync.Mutex
	dropped bool
	gets    []string // Last-Event-ID of each GET
}

func (d *dropper) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if r.Method == http.MethodGet {
		d.mu.Lock()
		d.gets = append(d.gets, r.Header.Get("Last-Event-ID"))
		d.mu.Unlock()
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.Method != http.MethodPost || !bytes.Contains(body, []byte(`"tools/call"`)) {
		return resp, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.dropped {
		d.dropped = true
		resp.Body = &cutReader{r: resp.Body, after: 2}
	}
	return resp, nil
}

// cutReader passes SSE events through until it has passed `after` progress
// notifications, then fails like a dropped connection.
type cutReader struct {
	r     io.ReadCloser
	after int
	seen  []byte
	cut   bool
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.cut {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := c.r.Read(p)
	start := len(c.seen)
	c.seen = append(c.seen, p[:n]...)
	if end := afterNth(c.seen, c.after); end >= 0 {
		c.cut = true
		c.r.Close()
		return end - start, nil
	}
	return n, err
}

func (c *cutReader) Close() error { return c.r.Close() }

// afterNth returns the offset just past the event that holds the nth
// progress notification in b, or -1.
func afterNth(b []byte, n int) int {
	off := 0
	for i := 0; i < n; i++ {
		j := bytes.Index(b[off:], []byte("notifications/progress"))
		if j < 0 {
			return -1
		}
		off += j + 1
	}
	k := bytes.Index(b[off:], []byte("\n\n"))
	if k < 0 {
		return -1
	}
	return off + k + 2
}

// TestResumeAfterDrop: the SSE response of a call breaks after two
// notifications; the client resumes with GET and Last-Event-ID and misses
// nothing.
func TestResumeAfterDrop(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	log := newProgressLog()
	d := &dropper{}
	cs := f.connectSession(ctx, log, &http.Client{Transport: d}) // 2026-07-28 has no resumability
	params := &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("r1")}
	params.SetProgressToken("r")
	ch := callAsync(ctx, cs, params)
	f.feed(ctx, "r1", values(2)...)
	log.waitFor(t, 2)
	f.feed(ctx, "r1", append(values(4)[2:], end)...)
	r := await(t, ch)
	if r.err != nil || r.res.IsError {
		t.Fatalf("call: %v %+v", r.err, r.res)
	}
	notes := log.waitFor(t, 5)
	if len(notes) != 5 {
		t.Fatalf("got %d notifications, want 5", len(notes))
	}
	for i, n := range notes {
		if n.Progress != float64(i+1) {
			t.Errorf("notification %d has progress %v: missed or repeated", i, n.Progress)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	resumed := false
	for _, id := range d.gets {
		resumed = resumed || id != ""
	}
	if !d.dropped || !resumed {
		t.Errorf("dropped %v, GETs with Last-Event-ID %q", d.dropped, d.gets)
	}
	if got := decode(t, r.res); got["output-count"] != 5.0 {
		t.Errorf("result = %v", got)
	}
}

func TestOriginCheck(t *testing.T) {
	f := newFixture(t, Options{AllowedOrigins: []string{"http://localhost:6274"}})
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"http://evil.example", http.StatusForbidden},
		{"http://localhost:6275", http.StatusForbidden},
		{"null", http.StatusForbidden},
		{"", http.StatusOK},
		{"http://localhost:6274", http.StatusOK},
		{"http://" + f.ts.Listener.Addr().String(), http.StatusOK},
	} {
		h := map[string]string{}
		if tc.origin != "" {
			h["Origin"] = tc.origin
		}
		resp, body := rawPost(t, f.ts.URL+PathStreamable, initializeBody, h)
		if resp.StatusCode != tc.want {
			t.Errorf("Origin %q: status %d, want %d (%s)", tc.origin, resp.StatusCode, tc.want, body)
		}
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			deleteSession(t, f.ts.URL+PathStreamable, sid)
		}
	}
	// An allowed origin gets CORS headers, and its preflight is answered.
	req, _ := http.NewRequest(http.MethodOptions, f.ts.URL+PathStreamable, nil)
	req.Header.Set("Origin", "http://localhost:6274")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:6274" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Mcp-Session-Id") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	// The legacy endpoint is guarded too.
	req, _ = http.NewRequest(http.MethodGet, f.ts.URL+PathSSE, nil)
	req.Header.Set("Origin", "http://evil.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("legacy GET with a foreign Origin: %d", resp.StatusCode)
	}
}

func TestTokenRequired(t *testing.T) {
	f := newFixture(t, Options{Token: "s3cret", AllowedOrigins: []string{"http://localhost:6274"}})
	// A browser's preflight carries no credentials and is answered anyway.
	req, _ := http.NewRequest(http.MethodOptions, f.ts.URL+PathStreamable, nil)
	req.Header.Set("Origin", "http://localhost:6274")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("preflight with a token set: %d", resp.StatusCode)
	}
	for _, auth := range []string{"", "Bearer wrong", "s3cret", "Basic czNjcmV0"} {
		h := map[string]string{}
		if auth != "" {
			h["Authorization"] = auth
		}
		resp, _ := rawPost(t, f.ts.URL+PathStreamable, initializeBody, h)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("Authorization %q: status %d, WWW-Authenticate %q", auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	// The scheme is case-insensitive (RFC 7235 §2.1).
	for _, auth := range []string{"bearer s3cret", "BEARER s3cret", "Bearer  s3cret"} {
		resp, _ := rawPost(t, f.ts.URL+PathStreamable, initializeBody, map[string]string{"Authorization": auth})
		if resp.StatusCode == http.StatusUnauthorized {
			t.Errorf("Authorization %q was refused", auth)
		}
	}
	ctx := context.Background()
	cs := f.connect(ctx, nil, withToken("s3cret"))
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": "(* 6 7)"}})
	if err != nil || text(t, res) != "42" {
		t.Fatalf("with the token: %v %+v", err, res)
	}
}

func TestCheckExposure(t *testing.T) {
	strong := "0123456789abcdef"
	for _, tc := range []struct {
		addr  string
		token string
		ok    bool
	}{
		{"127.0.0.1:7070", "", true},
		{"[::1]:7070", "", true},
		{"localhost:7070", "", true},
		{"10.1.2.3:7070", "", false},
		{"0.0.0.0:7070", "", false},
		{"0.0.0.0:7070", "t", false},
		{"0.0.0.0:7070", "a", false},
		{"0.0.0.0:7070", " ", false},
		{"0.0.0.0:7070", "                    ", false},
		{"0.0.0.0:7070", strong[:15], false},
		{"0.0.0.0:7070", strong, true},
		{"127.0.0.1:7070", "a", true}, // loopback: any token, or none
	} {
		err := CheckExposure(tc.addr, tc.token)
		if (err == nil) != tc.ok {
			t.Errorf("CheckExposure(%v, %q) = %v", tc.addr, tc.token, err)
		}
		if err != nil && !strings.Contains(err.Error(), "token") {
			t.Errorf("the refusal does not mention the token: %v", err)
		}
	}
}

// TestServe serves on a loopback listener until the context ends.
func TestServe(t *testing.T) {
	f := newFixture(t, Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- f.srv.Serve(ctx, ln) }()
	cs := connectTo(context.Background(), t, &mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + PathStreamable}, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": `(str "a" "b")`}})
	if err != nil || text(t, res) != `"ab"` {
		t.Fatalf("call: %v %+v", err, res)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Serve did not return")
	}
}

// TestLegacySSE: the legacy HTTP+SSE transport serves the same tools,
// progress included.
func TestLegacySSE(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	log := newProgressLog()
	cs := connectTo(ctx, t, &mcp.SSEClientTransport{Endpoint: f.ts.URL + PathSSE}, log)
	params := &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("l1")}
	params.SetProgressToken("legacy")
	ch := callAsync(ctx, cs, params)
	f.feed(ctx, "l1", append(values(2), end)...)
	r := await(t, ch)
	if r.err != nil || r.res.IsError {
		t.Fatalf("call: %v %+v", r.err, r.res)
	}
	if got := decode(t, r.res); got["state"] != "completed" || got["output-count"] != 3.0 {
		t.Errorf("result = %v", got)
	}
	notes := log.waitFor(t, 3)
	if notes[2].Message != `{"total":3}` || notes[2].Progress != 3 {
		t.Errorf("last notification %+v", notes[2])
	}
}

// TestJSONOnlyClient: a client that accepts application/json only gets
// one JSON response with the buffered result, even with a progress token.
func TestJSONOnlyClient(t *testing.T) {
	f := newFixture(t, Options{})
	jsonOnly := map[string]string{"Accept": "application/json"}
	resp, body := rawPost(t, f.ts.URL+PathStreamable, initializeBody, jsonOnly)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("initialize: %d %q %q %s", resp.StatusCode, sid, resp.Header.Get("Content-Type"), body)
	}
	defer deleteSession(t, f.ts.URL+PathStreamable, sid)
	h := map[string]string{"Accept": "application/json", "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
	if resp, _ := rawPost(t, f.ts.URL+PathStreamable, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	args, _ := json.Marshal(startArgs("j1"))
	call := fmt.Sprintf(`{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":{"name":"mcp.stream.start","arguments":%s,"_meta":{"progressToken":"p"}}}`, args)
	go f.feed(context.Background(), "j1", append(values(2), end)...)
	resp, body = rawPost(t, f.ts.URL+PathStreamable, call, h)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("call: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var msg struct {
		ID     string             `json:"id"`
		Result mcp.CallToolResult `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil {
		t.Fatalf("response is not one JSON-RPC message: %v\n%s", err, body)
	}
	if msg.ID != "call-1" || msg.Result.IsError {
		t.Fatalf("response %s", body)
	}
	if got := decode(t, &msg.Result); got["output-count"] != 3.0 || got["progress-notifications"] != 0.0 {
		t.Errorf("result = %v", got)
	}
}

// TestThrottledProgress: with a normal interval longer than the stream,
// the outputs go out in batches of at most ten, in order, the first at
// once: each notification carries its outputs in rtfshost/outputs (the
// message is the last of them) and progress counts the outputs so far; the
// final result has every one.
func TestThrottledProgress(t *testing.T) {
	f := newFixture(t, Options{Delivery: &provider.Delivery{Normal: provider.Throttle{Interval: time.Hour, MaxBatch: 10}, Low: provider.Throttle{Interval: -1}}})
	ctx := context.Background()
	log := newProgressLog()
	cs := f.connect(ctx, log, nil)
	params := &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("th")}
	params.SetProgressToken("t")
	ch := callAsync(ctx, cs, params)
	f.feed(ctx, "th", append(values(20), end)...)
	r := await(t, ch)
	if r.err != nil || r.res.IsError {
		t.Fatalf("call: %v %+v", r.err, r.res)
	}
	got := decode(t, r.res)
	notes := log.waitFor(t, int(got["progress-notifications"].(float64)))
	var seqs []int64
	last := 0.0
	for i, n := range notes {
		outs := notedOutputs(t, n)
		if len(outs) == 0 || len(outs) > 10 {
			t.Fatalf("notification %d carries %d outputs", i, len(outs))
		}
		for _, o := range outs {
			seqs = append(seqs, o.Seq)
		}
		if n.Progress <= last || n.Progress != float64(outs[len(outs)-1].Seq) || n.Message != string(outs[len(outs)-1].Output) {
			t.Errorf("notification %d: progress %v message %s, outputs %+v", i, n.Progress, n.Message, outs)
		}
		last = n.Progress
	}
	if len(notes) > 4 || fmt.Sprint(seqs) != fmt.Sprint(seqsUpTo(21)) {
		t.Errorf("%d notifications with the outputs of seqs %v", len(notes), seqs)
	}
	if got["output-count"] != 21.0 || len(got["outputs"].([]any)) != 21 || got["coalesced"] != 0.0 || got["progress-notifications"] != float64(len(notes)) {
		t.Errorf("result = %v", got)
	}
}

// notedOutputs returns the outputs a progress notification carries: its
// rtfshost/outputs, or the one in its message.
func notedOutputs(t *testing.T, n *mcp.ProgressNotificationParams) []batchOutput {
	t.Helper()
	if raw, ok := n.Meta[metaOutputs]; ok {
		b, _ := json.Marshal(raw)
		var outs []batchOutput
		if err := json.Unmarshal(b, &outs); err != nil {
			t.Fatalf("%s: %v", metaOutputs, err)
		}
		return outs
	}
	seq, _ := n.Meta[metaSeq].(float64)
	return []batchOutput{{Seq: int64(seq), Output: json.RawMessage(n.Message)}}
}

// seqsUpTo returns 1..n, the numbers of a stream's first n chunks.
func seqsUpTo(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

// TestCloseEndsCalls: closing the server ends the calls in flight and
// cancels their streams; later calls are refused.
func TestCloseEndsCalls(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	log := newProgressLog()
	cs := f.connect(ctx, log, nil)
	params := &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("cl")}
	params.SetProgressToken("cl")
	ch := callAsync(ctx, cs, params)
	f.feed(ctx, "cl", values(1)...)
	log.waitFor(t, 1)
	if err := f.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if r := await(t, ch); r.err == nil {
		t.Errorf("the call in flight returned %+v after Close", r.res)
	}
	st, err := f.host.Provider().Status(ctx, "cl")
	if err != nil || st.State != provider.StateCancelled {
		t.Errorf("stream after Close: %+v %v", st, err)
	}
	if err := f.srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestDeliveryCut: a call that holds more immediate and normal outputs than
// MaxPendingOutputs for its client stops its notifications; its result
// says why and still lists every output, and the stream's inspect map
// counts the outputs its client did not get.
func TestDeliveryCut(t *testing.T) {
	held := provider.Delivery{Normal: provider.Throttle{Interval: time.Hour, MaxBatch: 1000}, Low: provider.Throttle{Interval: -1}}
	f := newFixture(t, Options{Delivery: &held, MaxPendingOutputs: 5})
	ctx := context.Background()
	log := newProgressLog()
	cs := f.connect(ctx, log, nil)
	params := &mcp.CallToolParams{Name: ToolStart, Arguments: startArgs("cut")}
	params.SetProgressToken("c")
	ch := callAsync(ctx, cs, params)
	f.feed(ctx, "cut", append(values(20), end)...)
	r := await(t, ch)
	got := decode(t, r.res)
	cut, _ := got["delivery-cut"].(string)
	if !strings.Contains(cut, "fell more than 5 immediate and normal outputs behind") || got["output-count"] != 21.0 || len(got["outputs"].([]any)) != 21 {
		t.Fatalf("result %v", got)
	}
	notes := log.waitFor(t, int(got["progress-notifications"].(float64)))
	if len(notes) > 1 {
		// The outputs that came before the client fell behind go at once
		// (none, when they all came together), then none.
		t.Errorf("%d notifications: the first outputs at once, then none", len(notes))
	}
	sent := 0
	for _, n := range notes {
		sent += len(notedOutputs(t, n))
	}
	in, err := f.host.Provider().Info("cut", provider.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := in.Stats.DroppedOutputs; d.Normal != int64(21-sent) {
		t.Errorf("dropped outputs %+v, want %d normal (%d were notified)", d, 21-sent, sent)
	}
}

// TestNotifierFill: a notification's progress, total, message and _meta
// from batches: outputs so far without a progress model, the work done
// with one (rising by the least amount when it did not move), the progress
// message before the output, and rtfshost/outputs when it carries more
// than its message.
func TestNotifierFill(t *testing.T) {
	var n notifier
	var p mcp.ProgressNotificationParams
	one := []provider.Output{{Seq: 0, Value: rtfs.Int(7), Count: 1}}
	n.fill(&p, &provider.Batch{StreamID: "s", Outputs: one, Through: 1})
	if p.Progress != 1 || p.Total != 0 || p.Message != "7" || p.Meta[metaSeq] != int64(0) || p.Meta[metaOutputs] != nil {
		t.Fatalf("one output: %+v", p)
	}
	two := []provider.Output{{Seq: 1, Value: rtfs.Int(8), Count: 1}, {Seq: 4, Value: rtfs.Int(9), Kind: "k", Count: 3}}
	if c := n.fill(&p, &provider.Batch{StreamID: "s", Priority: provider.PriorityLow, Outputs: two, Through: 6, Dropped: 2}); c != 2 {
		t.Fatalf("coalesced %d, want 2", c)
	}
	b, _ := json.Marshal(p.Meta)
	if p.Progress != 6 || p.Message != "9" || string(b) != `{"rtfshost/coalesced":2,"rtfshost/dropped":2,"rtfshost/outputs":[{"seq":1,"output":8},{"seq":4,"output":9,"count":3,"kind":"k"}],"rtfshost/priority":"low","rtfshost/seq":4,"rtfshost/stream-id":"s"}` {
		t.Fatalf("a batch: progress %v message %q meta %s", p.Progress, p.Message, b)
	}
	total := 2.0
	pr := &provider.ProgressInfo{Done: 0.5, Total: &total, Message: "scanning"}
	n.fill(&p, &provider.Batch{StreamID: "s", Outputs: one, Progress: pr, Through: 7})
	// The work done (0.5) is below the outputs counted before (6): it
	// rises by the least amount.
	if p.Progress <= 6 || p.Progress > 6.000001 || p.Total != 2 || p.Message != "scanning" || p.Meta[metaOutputs] == nil {
		t.Fatalf("progress model: %+v", p)
	}
	var fresh notifier
	fresh.fill(&p, &provider.Batch{StreamID: "s", Progress: pr, Through: 0})
	if p.Progress != 0.5 || p.Total != 2 || p.Meta[metaSeq] != int64(-1) {
		t.Fatalf("progress only: %+v", p)
	}
}
