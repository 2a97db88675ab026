// Package mcpserver exposes an rtfshost host to MCP clients (agent hosts,
// IDEs, the MCP Inspector) as an MCP server over Streamable HTTP, with the
// legacy HTTP+SSE transport beside it, or over stdin and stdout for a
// desktop client that launches it (docs/mcp-server.md).
//
// The main types are Server and Options. New builds a Server on a
// host.Host: the programs of the tools run with the host's capabilities, and
// the host's provider runs their streams. Server.Handler is its http.Handler
// and Server.Serve serves it on a listener; Server.ServeStdio serves one
// session on a pair of pipes.
//
// The tools are mcp.stream.start, mcp.stream.inspect, mcp.stream.status,
// mcp.stream.pause, mcp.stream.resume, mcp.stream.cancel, mcp.stream.remove,
// mcp.stream.upgrade, mcp.stream.dead-letters and rtfs.eval. Each has a JSON input schema; arguments that break it are
// JSON-RPC errors -32602 naming the tool and the argument up to revision
// 2025-06-18, and from 2025-11-25 on results with isError set and the same
// text; an unknown tool, or arguments that are not an object, are -32602 in
// every revision. Failures of the work itself (a program error with its position, a
// stream that ends in :error, a timeout) are CallToolResults with isError
// set.
//
// The streams are also resources: rtfs://streams (the list) and, through a
// resource template, rtfs://streams/{id} (a stream's snapshot, as
// mcp.stream.inspect gives it), as JSON. A client that subscribes to a
// stream's URI (resources/subscribe, or subscriptions/listen under
// 2026-07-28) gets notifications/resources/updated when its snapshot
// changes, at most one per Options.ResourceInterval.
//
// A call that carries a progress token (params._meta.progressToken) gets
// the processor outputs of the streams it started as notifications/progress
// messages, delivered by the call's provider.Outbox (Options.Delivery, a
// stream's :delivery): immediate outputs at once, normal and low ones in
// batches, one notification each, with a rising progress (the streams' work
// done out of their total, or the number of outputs so far), the last
// output (or the progress's message) in message and the batch in _meta.
// Every output is kept for the final result, which always comes as one
// buffered CallToolResult with a single text block. A client that accepts
// application/json only gets that single result.
//
// /mcp serves both eras of MCP: revision 2026-07-28, with no session and
// the revision in each request, through go-sdk's stateless handler, and
// revisions 2025-03-26 to 2025-11-25 through its stateful one, with
// sessions (Mcp-Session-Id). A request meets a list of layers before go-sdk
// (http.go's mcpLayers, each with its reason): the token check (a static
// token, or an OAuth 2.1 access token), the envelope (the body read once:
// method, id, tool, progress token, task, era), the scopes the token
// grants, MCP Tasks and their status notifications, the resumption after
// a restart, the refusal of calls before initialize, the JSON-only
// adapter and the priming event's retry.
//
// The files, in the order a request travels:
//
//	conns.go       the http.Server of Serve: header, idle and body timeouts, size limits
//	server.go      Options, Server, New, Close; the calls in flight per session
//	http.go        the handler, the layers of /mcp in order, Origin, Host and token checks, Serve
//	oauth.go       OAuth 2.1: the resource's metadata, access tokens checked, the scopes of tools and methods
//	oauth_issuer.go what oauth.go reads from the issuer: a token's claims, the issuer's metadata and keys
//	wire.go        the envelope, read once from the body; every reading of JSON-RPC
//	stdio.go       ServeStdio: one session on stdin and stdout, with the tasks layers of HTTP in front of go-sdk
//	stdiolines.go  the lines of a stdio session: a bad line is answered with its JSON-RPC error and skipped
//	presession.go  the refusal of a request before initialize
//	taskwire.go    the task methods of both eras, and what initialize and tools/list say of tasks
//	taskstore.go   the task table and its records in the host's store
//	taskrun.go     creating a task and driving it to its end; its notifications (2025-11-25)
//	taskout.go     a stream task's outputs, kept in the store as they come, for its result
//	resume.go      the resumption of a response stream after a restart
//	eventstore.go  the event store of the stateful era, in the data directory
//	jsononly.go    the adapter for clients that read application/json only
//	sep1699.go     the priming event's retry, coalesced flushes, events stored before sent
//	observe.go     the request id for spans, and the metrics and span of a call
//	tools.go       the tool specs (input, output, hints, task mode) and their handler
//	outputs.go     the tools' answers as Go types, and the output schemas generated from them
//	args.go        a call's arguments, checked against the tool's input
//	call.go        one call in flight: the streams it watches, its results
//	start.go       mcp.stream.start
//	eval.go        rtfs.eval
//	upgrade.go     mcp.stream.upgrade
//	run.go         running a tool's program on the host
//	progress.go    progress notifications and their coalescing
//	watch.go       the events of a call's streams, from their subscriptions to the call
//	resources.go   the streams as resources: reads, subscriptions, throttled updates
//
// The protocol layer is github.com/modelcontextprotocol/go-sdk; this package
// is the mapping between MCP tools and the host, and what go-sdk does not
// have (Tasks, durable resumption, the era routing).
package mcpserver
