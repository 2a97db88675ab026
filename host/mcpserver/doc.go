// Package mcpserver exposes an rtfshost host to MCP clients (agent hosts,
// IDEs, the MCP Inspector) as an MCP server over Streamable HTTP, with the
// legacy HTTP+SSE transport beside it (DESIGN §9).
//
// The main types are Server and Options. New builds a Server on a
// host.Host: the programs of the tools run with the host's capabilities, and
// the host's provider runs their streams. Server.Handler is its http.Handler
// and Server.Serve serves it on a listener.
//
// The tools are mcp.stream.start, mcp.stream.inspect, mcp.stream.status,
// mcp.stream.pause, mcp.stream.resume, mcp.stream.cancel,
// mcp.stream.remove, mcp.stream.upgrade and rtfs.eval. Each
// has a JSON input schema; arguments that break it are JSON-RPC errors -32602
// naming the tool and the argument, as is an unknown tool. Failures of the
// work itself (a program error with its position, a stream that ends in
// :error, a timeout) are CallToolResults with isError set.
//
// A call that carries a progress token (params._meta.progressToken) gets
// each processor :output of the streams it started as a
// notifications/progress message: the token, a rising progress (the number
// of outputs so far) and the output as JSON in message. With a progress
// interval the outputs in between are coalesced into the next notification,
// counted in its _meta, and all kept for the final result, which always
// comes as one buffered CallToolResult with a single text block. A client
// that accepts application/json only gets that single result.
//
// /mcp serves both eras of MCP (eras.go): revision 2026-07-28, with no
// session and the revision in each request, through go-sdk's stateless
// handler, and revisions 2025-03-26 to 2025-11-25 through its stateful one.
// Sessions use Mcp-Session-Id. A request other than initialize (or ping)
// that arrives without one is refused with HTTP 400 and a JSON-RPC error
// -32600 echoing its id; an unknown session is 404. A dropped SSE response
// resumes with Last-Event-ID from an event store in the host's data
// directory, also after a restart of the server (resume.go); its priming
// event carries retry (SEP-1699, sep1699.go). notifications/cancelled
// cancels the streams of the call. mcp.stream.start and rtfs.eval run as
// durable MCP Tasks when asked, in the shapes of both eras (tasks.go). The
// handler rejects a foreign Origin with 403 and, when a token is set, a
// request without "Authorization: Bearer <token>" with 401; Serve refuses a
// non-loopback listener without a token.
//
// The protocol layer is github.com/modelcontextprotocol/go-sdk; this package
// is the mapping between MCP tools and the host. docs/mcp-server.md shows how
// to point a client at it.
package mcpserver
