package mcpserver

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// headerProtocolVersion is the HTTP header in which clients of 2025-06-18
// and later name the request's protocol revision.
const headerProtocolVersion = "MCP-Protocol-Version"

// routeEras serves both eras of MCP on one endpoint. Requests of the
// sessionless revision (2026-07-28 and later: no initialize, no session,
// the revision and capabilities in each request's _meta, server/discover)
// go to modern, a stateless go-sdk handler; every other request (a
// session's, an initialize, GET and DELETE) goes to legacy, the stateful
// handler with sessions and resumability. A POST is modern when it carries
// no Mcp-Session-Id and either its MCP-Protocol-Version header or, without
// the header, its body (a server/discover, or a _meta protocolVersion) says
// 2026-07-28 or later.
func routeEras(legacy, modern http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
			legacy.ServeHTTP(w, r)
			return
		}
		if v := r.Header.Get(headerProtocolVersion); v != "" {
			if v >= sessionlessVersion {
				modern.ServeHTTP(w, r)
			} else {
				legacy.ServeHTTP(w, r)
			}
			return
		}
		body, ok := requestBody(w, r)
		if !ok {
			return
		}
		if isModern(body) {
			modern.ServeHTTP(w, r)
			return
		}
		legacy.ServeHTTP(w, r)
	})
}

// isModern reports whether a JSON-RPC body (a message or the first of a
// batch) is of the sessionless revision.
func isModern(body []byte) bool {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var raws []json.RawMessage
		if json.Unmarshal(trimmed, &raws) != nil || len(raws) == 0 {
			return false
		}
		trimmed = raws[0]
	}
	var m rpcMessage
	if json.Unmarshal(trimmed, &m) != nil {
		return false
	}
	if m.Method == methodDiscover {
		return true
	}
	v, _ := m.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	return v >= sessionlessVersion
}

// methodDiscover is the sessionless revision's capability query.
const methodDiscover = "server/discover"
