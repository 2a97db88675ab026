// Package mcp implements the MCP client transports of rtfshost: it calls one
// MCP tool and turns its progress notifications, the status of a task it
// became, and its final result into transport.Chunk values.
//
// The main types are Streamable, the Streamable HTTP transport, and
// LegacySSE, the 2024-11-05 HTTP+SSE transport; Stdio speaks the same
// protocol to a child process. All implement transport.StreamTransport.
// Streamable prefers revision 2026-07-28 and falls back to a session of
// 2025-11-25, 2025-06-18 or 2025-03-26, deciding as go-sdk's client does: it
// sends server/discover first and initializes a session only when the
// server does not answer it with 2026-07-28 among its supportedVersions.
//
// For the HTTP transports, Spec.HTTP.ServerURL is the MCP endpoint (for
// LegacySSE the SSE URL), Spec.Endpoint is the tool name and Spec.Arguments
// the tool's arguments (a JSON object, or empty for none). Every
// notifications/progress carrying the call's progress token becomes a chunk
// with Event "progress" whose Data is the notification's params; progress
// values only increase, so a regression or a replayed notification is
// dropped. The tool's CallToolResult becomes the last chunk, with Event
// "result" and Data the result object; for Streamable that holds also when
// the server answers in JSON-response mode and sends progress on the
// session's standalone GET stream, which Run opens before the call and
// reads, waiting boundedly for progress that trails the result. A result
// with isError true is not delivered: Run returns a permanent error wrapping
// ErrToolFailed with the tool's text.
//
// A call answered with a task (a 2025-11-25 CreateTaskResult, a 2026-07-28
// result with resultType "task") is polled with tasks/get: each change of
// the task's status becomes a chunk with Event "task" and the task object
// as Data, and the task's result the last chunk, as above.
//
// How a call survives a lost connection depends on the revision, and every
// rule is one that never runs a tool twice unless allowed:
//
//   - 2025 sessions: the stream is resumed by GET with Last-Event-ID, on the
//     same session, from memory or from a cursor after a host restart;
//     tools/call is never sent again once the server may have started it.
//   - 2026-07-28: there is no session and no resumable stream. A lost call
//     is sent again only when tools/list annotates the tool idempotentHint
//     true or the stream has :restart :on-failure (StreamableConfig);
//     otherwise Run ends with a permanent error saying the tool is not
//     called again.
//   - Tasks, either revision: the task id is in the cursor, so a Run from it
//     polls the same task instead of calling the tool again.
//
// In the session era a server's own requests are answered by one
// implementation for all three transports (requests.go): ping, roots/list
// with the start key :roots (StreamableConfig, LegacyConfig, StdioConfig),
// and a -32601 refusal for elicitation, sampling and anything else; the
// answer is POSTed with the session id (Streamable), to the message
// endpoint (LegacySSE) or written on stdin (Stdio).
//
// Every request carries the W3C trace context (traceparent, tracestate) of
// Run's context in params._meta when that context holds a span.
//
// A chunk's ID is an opaque cursor. For Streamable it records the session id,
// the negotiated protocol version, the request id, the progress token, the
// last SSE event id, the last progress value and the task id, so that Run
// can go on with the call after a dropped connection or a host restart. The
// cursor holds no header values and no secret from Spec.HTTP.Header, but
// the session id or task id it carries lets its holder read the rest of the
// call, so it must be stored like any session state.
package mcp
