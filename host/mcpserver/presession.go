package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxRequestBody bounds the request bodies the package's middleware reads,
// as go-sdk's DefaultMaxRequestBodyBytes does.
const maxRequestBody = 4 << 20

// codeInvalidRequest is JSON-RPC's "Invalid Request" error code.
const codeInvalidRequest = -32600

// sessionlessVersion is the first MCP revision whose requests carry their
// protocol version in _meta and need no session; go-sdk answers those itself.
const sessionlessVersion = "2026-07-28"

// requireSession refuses a Streamable HTTP POST that has no Mcp-Session-Id
// and carries JSON-RPC requests but no initialize: go-sdk would answer it
// with HTTP 200 and an error of code 0. The refusal is HTTP 400 with a
// JSON-RPC error -32600 for each request (an array for a batch). initialize,
// ping (allowed before initialize by the MCP lifecycle), notifications,
// sessionless-revision requests, bodies that are not JSON-RPC and requests
// with another method or Content-Type go to next with the body restored.
func requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" || !isJSON(r.Header.Get("Content-Type")) {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := requestBody(w, r)
		if !ok {
			return
		}
		refusal := refusalOf(body)
		if refusal == nil {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(refusal)
	})
}

// requestBody returns r's body, reading it (readBody) only for the first
// middleware that asks: r.Body then holds the bytes (a bufferedBody), which
// later middlewares and go-sdk read again without another read or copy. On
// a read failure it has answered w and returns false.
func requestBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if b, ok := r.Body.(*bufferedBody); ok {
		return b.data, true
	}
	body, ok := readBody(w, r)
	if ok {
		setBody(r, body)
	}
	return body, ok
}

// setBody makes body r's body (a middleware that rewrites the request).
func setBody(r *http.Request, body []byte) {
	r.Body = &bufferedBody{Reader: bytes.NewReader(body), data: body}
	r.ContentLength = int64(len(body))
}

// A bufferedBody is a request body held in memory.
type bufferedBody struct {
	*bytes.Reader
	data []byte
}

func (*bufferedBody) Close() error { return nil }

// readBody reads r's body up to maxRequestBody bytes. On failure it answers
// 413 (too large) or 400 and returns false.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err == nil {
		return body, true
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
	} else {
		http.Error(w, "failed to read body", http.StatusBadRequest)
	}
	return nil, false
}

// isJSON reports whether a Content-Type is application/json.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// An rpcMessage is the part of a JSON-RPC message the refusal looks at.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta map[string]any `json:"_meta"`
	} `json:"params"`
}

// An rpcError is a JSON-RPC error response.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// refusalOf returns the response refusing a session-less body, or nil if the
// body may go to go-sdk: it is not JSON-RPC, holds an initialize, or holds no
// request that needs a session. A batch is refused as a whole, with an error
// for each request in it.
func refusalOf(body []byte) []byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var raws []json.RawMessage
		if json.Unmarshal(trimmed, &raws) != nil {
			return nil
		}
		msgs := make([]rpcMessage, 0, len(raws))
		for _, raw := range raws {
			var m rpcMessage
			if json.Unmarshal(raw, &m) != nil {
				return nil
			}
			msgs = append(msgs, m)
		}
		return refuseBatch(msgs)
	}
	var m rpcMessage
	if json.Unmarshal(trimmed, &m) != nil || !needsSession(m) || m.Method == "initialize" {
		return nil
	}
	out, _ := json.Marshal(refusal(m))
	return out
}

// refuseBatch returns the refusal of a batch, or nil if it may pass.
func refuseBatch(msgs []rpcMessage) []byte {
	refuse := false
	for _, m := range msgs {
		if m.Method == "initialize" {
			return nil
		}
		refuse = refuse || needsSession(m)
	}
	if !refuse {
		return nil
	}
	var errs []rpcError
	for _, m := range msgs {
		if m.ID != nil && m.Method != "" {
			errs = append(errs, refusal(m))
		}
	}
	out, _ := json.Marshal(errs)
	return out
}

// needsSession reports whether m is a request that go-sdk would refuse
// before initialize: a call (it has an id) other than ping, not of the
// sessionless revision.
func needsSession(m rpcMessage) bool {
	if m.ID == nil || m.Method == "" || m.Method == "ping" {
		return false
	}
	v, _ := m.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	return v < sessionlessVersion
}

// refusal is the -32600 error answering m, echoing its id when that is a
// string or a number (else null, as JSON-RPC asks).
func refusal(m rpcMessage) rpcError {
	e := rpcError{JSONRPC: "2.0", ID: json.RawMessage("null")}
	var id any
	if json.Unmarshal(m.ID, &id) == nil {
		switch id.(type) {
		case string, float64:
			e.ID = m.ID
		}
	}
	e.Error.Code = codeInvalidRequest
	e.Error.Message = fmt.Sprintf("session not initialized: send initialize first, then %q with the Mcp-Session-Id it returns", m.Method)
	return e
}
