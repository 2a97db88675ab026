package mcpserver

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// codeInvalidRequest is JSON-RPC's "Invalid Request" error code.
const codeInvalidRequest = -32600

// requireSession refuses a Streamable HTTP POST that has no Mcp-Session-Id
// and carries JSON-RPC requests but no initialize: go-sdk would answer it
// with HTTP 200 and an error of code 0. The refusal is HTTP 400 with a
// JSON-RPC error -32600 for each request (an array for a batch). initialize,
// ping (allowed before initialize by the MCP lifecycle), notifications,
// sessionless-revision requests, bodies that are not JSON-RPC and requests
// with another method or Content-Type go to next.
func requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env := envelopeOf(r)
		if !env.post || env.session != "" {
			next.ServeHTTP(w, r)
			return
		}
		refusal := refusalOf(env)
		if refusal == nil {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(refusal)
	})
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
func refusalOf(env *envelope) []byte {
	refuse := false
	for _, m := range env.msgs {
		if m.invalid || m.Method == "initialize" {
			return nil
		}
		refuse = refuse || needsSession(m)
	}
	if !refuse {
		return nil
	}
	if !env.batch {
		out, _ := json.Marshal(refusal(env.msgs[0]))
		return out
	}
	var errs []rpcError
	for _, m := range env.msgs {
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
func needsSession(m message) bool {
	if m.ID == nil || m.Method == "" || m.Method == "ping" {
		return false
	}
	return m.meta(mcp.MetaKeyProtocolVersion) < sessionlessVersion
}

// refusal is the -32600 error answering m, echoing its id when that is a
// string or a number (else null, as JSON-RPC asks).
func refusal(m message) rpcError {
	e := rpcError{JSONRPC: "2.0", ID: m.echoID()}
	e.Error.Code = codeInvalidRequest
	e.Error.Message = fmt.Sprintf("session not initialized: send initialize first, then %q with the Mcp-Session-Id it returns", m.Method)
	return e
}
