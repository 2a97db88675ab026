package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// Server-to-client requests. In the session era (2024-11-05 ... 2025-11-25)
// a server may send the client requests of its own while a call runs:
// ping (go-sdk's KeepAlive closes the session after one unanswered),
// roots/list, elicitation/create and sampling/createMessage. The three
// transports answer them with one implementation, answerer, and differ
// only in how an answer travels: a line on the child's stdin (:stdio), a
// POST to the endpoint with the session id (:mcp), a POST to the message
// endpoint (:mcp-sse). 2026-07-28 has no server-initiated requests (a
// server asks for input with resultType input_required instead).

// JSON-RPC methods a server sends the client.
const (
	methodPing        = "ping"
	methodRootsList   = "roots/list"
	methodElicitation = "elicitation/create"
	methodSampling    = "sampling/createMessage"
)

// codeMethodNotFound is the JSON-RPC error of a request the client does not
// serve: it declares no capability for elicitation or sampling, and MCP
// says a client without a capability answers its requests with it.
const codeMethodNotFound = -32601

// answerTimeout bounds the sending of one answer: a server that does not
// take it cannot stall the reading of the call.
const answerTimeout = 5 * time.Second

// A Root is one root the client offers a server's roots/list: a file://
// URI and an optional name, from the start key :roots.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// rootsKey is the :roots start key of :mcp, :mcp-sse and :stdio.
func rootsKey() transport.Key {
	return transport.Key{Name: "roots", Type: "vector",
		Doc: "the roots the MCP client lists when the server asks (roots/list): file:// URIs, or maps {:uri :name}; default none"}
}

// parseRoots reads :roots from a start call's transport keys: a vector of
// file:// URIs or of {uri, name} maps. The error names the key and the
// entry at fault.
func parseRoots(keys map[string]json.RawMessage) ([]Root, error) {
	raw, ok := keys["roots"]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf(`:roots: want a vector of file:// URIs or {:uri "file://..." :name "..."} maps, got %.100s`, raw)
	}
	roots := make([]Root, 0, len(items))
	for i, item := range items {
		var r Root
		if err := json.Unmarshal(item, &r.URI); err != nil {
			if err := json.Unmarshal(item, &r); err != nil {
				return nil, fmt.Errorf(":roots: entry %d: want a file:// URI or a map {:uri :name}, got %.100s", i, item)
			}
		}
		if !strings.HasPrefix(r.URI, "file://") {
			return nil, fmt.Errorf(":roots: entry %d: %q is not a file:// URI (MCP roots are file:// URIs)", i, r.URI)
		}
		roots = append(roots, r)
	}
	return roots, nil
}

// clientCapabilities are the capabilities a session-era initialize
// declares: roots (listed from :roots, none by default); no sampling, no
// elicitation, which are answered with codeMethodNotFound.
var clientCapabilities = map[string]any{"roots": map[string]any{}}

// answerer answers the requests a server sends during one Run. It is owned
// by that Run; send is the transport's way to the server and is called
// from the goroutine that read the request.
type answerer struct {
	roots    []Root
	streamID string
	log      *slog.Logger
}

// isServerRequest reports whether m is a request from the server (a method
// and an id), which needs an answer.
func isServerRequest(m *rpcMessage) bool {
	return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null"
}

// answer sends, through send, the answer to every server request among
// msgs, each within answerTimeout. A failure to send is logged: the server
// then times the request out on its side, as it would have before.
func (a *answerer) answer(ctx context.Context, msgs []rpcMessage, send func(context.Context, []byte) error) {
	for i := range msgs {
		m := &msgs[i]
		if !isServerRequest(m) {
			continue
		}
		reply, err := a.reply(m)
		if err == nil {
			actx, cancel := context.WithTimeout(ctx, answerTimeout)
			err = send(actx, reply)
			cancel()
		}
		if err != nil && ctx.Err() == nil && a.log != nil {
			a.log.Warn("mcp: could not answer the server's request", "stream", a.streamID, "method", m.Method, "err", err)
		}
	}
}

// reply is the JSON-RPC response to the server request m: ping gets {},
// roots/list the configured roots (an empty list by default), anything else
// an error with codeMethodNotFound saying why.
func (a *answerer) reply(m *rpcMessage) ([]byte, error) {
	type rpcReply struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *rpcError       `json:"error,omitempty"`
	}
	r := rpcReply{JSONRPC: "2.0", ID: bytes.TrimSpace(m.ID)}
	switch m.Method {
	case methodPing:
		r.Result = struct{}{}
	case methodRootsList:
		roots := a.roots
		if roots == nil {
			roots = []Root{}
		}
		r.Result = map[string]any{"roots": roots}
	case methodElicitation:
		r.Error = &rpcError{Code: codeMethodNotFound, Message: "elicitation is not supported: rtfshost calls the tool for a stream processor, which cannot answer a question (the client declared no elicitation capability)"}
	case methodSampling:
		r.Error = &rpcError{Code: codeMethodNotFound, Message: "sampling is not supported: rtfshost calls the tool for a stream processor and offers no language model (the client declared no sampling capability)"}
	default:
		r.Error = &rpcError{Code: codeMethodNotFound, Message: fmt.Sprintf("method not found: this client does not offer %.100q", m.Method)}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding the answer to %s: %w", m.Method, err)
	}
	return b, nil
}
