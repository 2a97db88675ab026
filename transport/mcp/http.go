package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
)

// HTTP header names of the Streamable HTTP transport.
const (
	headerSession     = "Mcp-Session-Id"
	headerProtocol    = "MCP-Protocol-Version"
	headerLastEventID = "Last-Event-ID"
	headerMethod      = "Mcp-Method" // 2026-07-28: the JSON-RPC method
	headerName        = "Mcp-Name"   // 2026-07-28: the tool's name on tools/call
	acceptBoth        = "application/json, text/event-stream"
	contentSSE        = "text/event-stream"
	contentJSON       = "application/json"
)

// conn holds what every HTTP request of one Run needs. It is owned by that
// Run and not safe for concurrent use.
type conn struct {
	streamID string
	target   *egress.URL // the URL as the provider checked it
	url      *url.URL    // target's canonical form, requested
	client   *http.Client
	header   http.Header // from Spec.Header: secrets, never logged
	maxEvent int
	session  string
	proto    string
	// answers answers the server's requests, POSTed to answerURL (the MCP
	// endpoint; for :mcp-sse the message endpoint, once known). It is
	// read-only, shared with the copy the standalone stream's reader has.
	answers   *answerer
	answerURL *url.URL
}

// newConn validates spec and builds the connection state for rawURL.
func newConn(spec *transport.Spec, rawURL string) (*conn, error) {
	perm := func(err error) error {
		return &transport.Error{StreamID: spec.StreamID, Op: "spec", Permanent: true, Err: err}
	}
	target := spec.HTTP.URL
	if target == nil {
		var err error
		if target, err = egress.Parse(rawURL); err != nil {
			return nil, perm(fmt.Errorf("server URL: %w", err))
		}
	}
	if spec.Endpoint == "" {
		return nil, perm(errors.New("endpoint (the MCP tool name) is empty"))
	}
	c := &conn{streamID: spec.StreamID, target: target, url: target.URL(), client: spec.HTTP.Client, header: spec.HTTP.Header,
		maxEvent: spec.MaxEventBytes}
	if c.client == nil {
		c.client = &http.Client{}
	}
	if c.maxEvent <= 0 {
		c.maxEvent = transport.DefaultMaxEventBytes
	}
	return c, nil
}

// toolArguments returns spec.Arguments as a JSON object ("{}" when empty).
func toolArguments(spec *transport.Spec) (json.RawMessage, error) {
	args := bytes.TrimSpace(spec.Arguments)
	if len(args) == 0 || string(args) == "null" {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid(args) || args[0] != '{' {
		return nil, &transport.Error{StreamID: spec.StreamID, Op: "spec", Permanent: true,
			Err: fmt.Errorf("tool arguments must be a JSON object, got %.40q", args)}
	}
	return json.RawMessage(args), nil
}

// request builds a request to target with the Spec headers and, once known,
// the session and protocol-version headers. A non-nil body is JSON.
func (c *conn) request(ctx context.Context, method string, target *url.URL, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target.String(), rd)
	if err != nil {
		return nil, c.fail("request", 0, true, err)
	}
	for k, vs := range c.header {
		req.Header[k] = append([]string(nil), vs...)
	}
	switch {
	case body != nil:
		req.Header.Set("Content-Type", contentJSON)
		req.Header.Set("Accept", acceptBoth)
	case method == http.MethodGet:
		req.Header.Set("Accept", contentSSE)
	}
	if c.session != "" {
		req.Header.Set(headerSession, c.session)
	}
	if c.proto != "" {
		req.Header.Set(headerProtocol, c.proto)
	}
	return req, nil
}

// answerRequests answers the server's requests among msgs (answerer),
// each POSTed as a JSON-RPC response to answerURL with the request headers
// of the run (Spec.Header, the session id and protocol version). Under
// 2026-07-28, which has no server-to-client requests and no session to
// answer on, they are ignored.
func (c *conn) answerRequests(ctx context.Context, msgs []rpcMessage) {
	if c.answers == nil || c.answerURL == nil || c.proto == version20260728 {
		return
	}
	c.answers.answer(ctx, msgs, func(ctx context.Context, body []byte) error {
		return c.postMessage(ctx, c.answerURL, body, "answer")
	})
}

// postMessage POSTs one JSON-RPC message to target, a server that answers
// it without a body of interest (202 for a notification or a response; the
// legacy message endpoint for anything).
func (c *conn) postMessage(ctx context.Context, target *url.URL, body []byte, op string) error {
	req, err := c.request(ctx, http.MethodPost, target, body)
	if err != nil {
		return err
	}
	resp, err := c.do(req, op)
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

// do sends req and returns the response if its status is 2xx. Other statuses
// become a *transport.Error (permanent for 4xx other than 408 and 429) and
// network failures a transient one. The caller closes the body.
func (c *conn) do(req *http.Request, op string) (*http.Response, error) {
	resp, err := c.client.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, c.fail(op, 0, egress.Refused(err), scrubURL(err))
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if re := rpcErrorOf(resp, body); re != nil {
		// A JSON-RPC error sent with a 4xx (a 2026-07-28 server's -32022,
		// with the versions it supports in its data): keep it whole.
		return nil, c.fail(op, resp.StatusCode, permanentStatus(resp.StatusCode), re)
	}
	if len(body) > 256 {
		body = body[:256]
	}
	msg := strings.TrimSpace(strings.ToValidUTF8(string(body), string(utf8.RuneError)))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return nil, c.fail(op, resp.StatusCode, permanentStatus(resp.StatusCode), errors.New(msg))
}

// maxErrorBody bounds what is read of a response that is not a success.
const maxErrorBody = 8 << 10

// rpcErrorOf returns the JSON-RPC error a JSON body of a failed response
// carries, or nil.
func rpcErrorOf(resp *http.Response, body []byte) *rpcError {
	if mediaType(resp) != contentJSON {
		return nil
	}
	var m rpcMessage
	if json.Unmarshal(body, &m) != nil || m.Error == nil {
		return nil
	}
	return m.Error
}

// permanentStatus reports whether an HTTP status must not be retried.
func permanentStatus(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout &&
		status != http.StatusTooManyRequests
}

// scrubURL drops the request URL from a *url.Error: its query may carry a
// secret, and the stream id already says what failed.
func scrubURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

func (c *conn) fail(op string, status int, permanent bool, err error) *transport.Error {
	return &transport.Error{StreamID: c.streamID, Op: op, Status: status, Permanent: permanent, Err: err}
}

// mediaType returns the response's media type without parameters.
func mediaType(resp *http.Response) string {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

// readJSONBody reads a JSON response body of at most max bytes.
func (c *conn) readJSONBody(resp *http.Response, op string) ([]rpcMessage, error) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(c.maxEvent)+1))
	if err != nil {
		return nil, c.fail(op, 0, false, fmt.Errorf("reading JSON response: %w", err))
	}
	if len(data) > c.maxEvent {
		return nil, c.fail(op, 0, true, fmt.Errorf("JSON response over %d bytes: %w", c.maxEvent, transport.ErrEventTooLarge))
	}
	msgs, err := decodeMessages(data)
	if err != nil {
		return nil, c.fail(op, 0, true, err)
	}
	return msgs, nil
}

// drain discards the rest of a short body so the connection can be reused,
// then closes it. An SSE body is closed at once: it may never end.
func drain(resp *http.Response) {
	if mediaType(resp) != contentSSE {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	}
	resp.Body.Close()
}

// statusOf returns the HTTP status carried by a *transport.Error, or 0.
func statusOf(err error) int {
	var te *transport.Error
	if errors.As(err, &te) {
		return te.Status
	}
	return 0
}

// notRetried marks a failed tools/call POST permanent: the server may have
// started the tool, so sending the call again could run it twice.
func notRetried(err error) error {
	var te *transport.Error
	if !errors.As(err, &te) || te.Permanent {
		return err
	}
	out := *te
	out.Permanent = true
	out.Err = fmt.Errorf("%w (tools/call is not sent twice)", te.Err)
	return &out
}
