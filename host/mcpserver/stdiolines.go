package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The framing of a stdio session, in front of go-sdk's.
//
// go-sdk's IOTransport reads stdin with a streaming JSON decoder: its first
// decode error (a line that is not JSON, data after a message, a frame
// over its limit) ends the whole session with no reply, and a truncated
// message runs on into the next line. An MCP server over stdio answers a
// bad message and goes on, so stdioLines reads stdin by lines itself:
// each line that is one JSON-RPC message go-sdk can read is passed on
// whole, and every other line is answered here with the JSON-RPC error
// the spec names and skipped. go-sdk only ever sees good lines, so its
// decoder never fails on the client's input.
//
// The answers: -32700 (parse error) for a line that is not one JSON value
// (NUL bytes, a truncated message, data after a message, nesting deeper
// than encoding/json reads); -32600 (invalid request) for a JSON value
// that is not a JSON-RPC 2.0 request, notification or response: an array
// (MCP has no batches since 2025-06-18), a scalar, a "jsonrpc" other than
// "2.0", an id that is neither a string nor an integer (MCP: never null),
// a method that is not a string, an object with neither a method nor a
// result or error; and for a line longer than maxStdioLine, which is read
// to its end and dropped unread. The error carries the message's id when
// it could be read, else "id": null as JSON-RPC 2.0 asks. Blank lines are
// skipped silently.

// maxStdioLine bounds one line of a stdio session: the same bound as an
// HTTP request body (maxRequestBody).
const maxStdioLine = maxRequestBody

// codeParseError is JSON-RPC's "Parse error" code (codeInvalidRequest is
// in presession.go).
const codeParseError = -32700

// syncWriter makes each Write of the server's stdout whole with respect to
// the others: go-sdk writes a message and its newline in one Write, and
// stdioLines writes its answers the same way, both through this lock.
type syncWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) Close() error { return s.w.Close() }

// stdioLines is the reader go-sdk's IOTransport reads: the good lines of r,
// each ending in a newline. It answers bad lines on out from within Read,
// which go-sdk calls from its one reading goroutine. Not safe for
// concurrent Reads (go-sdk makes none).
type stdioLines struct {
	r       *bufio.Reader
	closer  io.Closer
	out     io.Writer
	max     int
	pending []byte // the rest of the current good line
	err     error  // the error after the last line (io.EOF at the end)
}

func newStdioLines(r io.ReadCloser, out io.Writer, max int) *stdioLines {
	return &stdioLines{r: bufio.NewReaderSize(r, 64<<10), closer: r, out: out, max: max}
}

// Read returns the bytes of good lines; bad lines are answered and
// skipped. A write error of an answer ends the session.
func (s *stdioLines) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		line, tooLong, err := s.readLine()
		s.err = err
		if tooLong {
			if werr := s.answer(json.RawMessage("null"), codeInvalidRequest,
				fmt.Sprintf("invalid request: the line is longer than %d bytes; it was skipped", s.max)); werr != nil {
				return 0, werr
			}
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if id, code, msg, ok := checkLine(line); !ok {
			if werr := s.answer(id, code, msg); werr != nil {
				return 0, werr
			}
			continue
		}
		s.pending = append(line, '\n')
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// Close closes the underlying reader.
func (s *stdioLines) Close() error { return s.closer.Close() }

// readLine reads the next line without its line ending. A line over max
// bytes is read to its end and dropped (tooLong). At the end of r the
// last line may lack its newline; err is then io.EOF (or r's error) along
// with that line.
func (s *stdioLines) readLine() (line []byte, tooLong bool, err error) {
	for {
		chunk, rerr := s.r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > s.max+2 { // room for "\r\n"
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(rerr, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if !tooLong && len(line) > s.max {
			tooLong, line = true, nil
		}
		return line, tooLong, rerr
	}
}

// answer writes a JSON-RPC error response with id (its JSON).
func (s *stdioLines) answer(id json.RawMessage, code int, msg string) error {
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, msg}})
	if err != nil {
		return fmt.Errorf("mcpserver: answering a bad line over stdio: %w", err)
	}
	if _, err := s.out.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("mcpserver: answering a bad line over stdio: %w", err)
	}
	return nil
}

// checkLine reports whether line is one JSON-RPC 2.0 message go-sdk can
// read; if not, the error code and message to answer it with and the id
// to answer (null when it cannot be read).
func checkLine(line []byte) (id json.RawMessage, code int, msg string, ok bool) {
	null := json.RawMessage("null")
	if !json.Valid(line) {
		return null, codeParseError, "parse error: the line is not one JSON value", false
	}
	trimmed := bytes.TrimSpace(line)
	switch trimmed[0] {
	case '{':
	case '[':
		return null, codeInvalidRequest, "invalid request: batches are not supported; send one message per line", false
	default:
		return null, codeInvalidRequest, "invalid request: a message must be a JSON object", false
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &top); err != nil {
		return null, codeParseError, "parse error: " + err.Error(), false
	}
	rawID, hasID := top["id"]
	if hasID && isRequestID(rawID) {
		id = rawID
	} else {
		id = null
	}
	for k := range top {
		switch lk := strings.ToLower(k); lk {
		case "jsonrpc", "id", "method", "params", "result", "error":
			if k != lk {
				return id, codeInvalidRequest, fmt.Sprintf("invalid request: member %q must be spelled %q", k, lk), false
			}
		}
	}
	if string(top["jsonrpc"]) != `"2.0"` {
		return id, codeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`, false
	}
	if hasID && !isRequestID(rawID) {
		return id, codeInvalidRequest, "invalid request: id must be a string or an integer", false
	}
	method, hasMethod := top["method"]
	if hasMethod {
		var m string
		if json.Unmarshal(method, &m) != nil {
			return id, codeInvalidRequest, "invalid request: method must be a string", false
		}
	} else {
		_, hasResult := top["result"]
		_, hasError := top["error"]
		if !hasID || hasResult == hasError {
			return id, codeInvalidRequest, "invalid request: neither a request (a method) nor a response (an id with a result or an error)", false
		}
	}
	if _, err := jsonrpc.DecodeMessage(trimmed); err != nil {
		return id, codeInvalidRequest, "invalid request: " + err.Error(), false
	}
	return nil, 0, "", true
}

// isRequestID reports whether raw is a JSON string or integer, the ids MCP
// allows.
func isRequestID(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		var s string
		return json.Unmarshal(raw, &s) == nil
	}
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return false
	}
	return !bytes.ContainsAny(raw, ".eE")
}
