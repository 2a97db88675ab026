// Package mcp implements the MCP client transports of rtfshost: it calls one
// MCP tool and turns its progress notifications and its final result into
// transport.Chunk values.
//
// The main types are Streamable, the Streamable HTTP transport (protocol
// versions 2026-07-28, found by server/discover, else 2025-03-26,
// 2025-06-18 and 2025-11-25 by initialize), LegacySSE, the 2024-11-05
// HTTP+SSE transport, and Stdio, an MCP server as a child process. They
// implement transport.StreamTransport.
//
// Under 2026-07-28 there is no session and no resumability: a call whose
// response stream breaks is made again only for a tool annotated
// idempotentHint or a stream with :restart :on-failure (StreamableConfig);
// otherwise Run fails saying why. A tool call answered with a task (either
// revision's shape) is followed with tasks/get: each status change is a
// chunk with Event "task", the tool's result the last chunk, and the task
// id is in the cursor, so a restart polls the task instead of calling the
// tool again (modern.go).
//
// For both, Spec.HTTP.ServerURL is the MCP endpoint (for LegacySSE the SSE URL),
// Spec.Endpoint is the tool name and Spec.Arguments the tool's arguments (a
// JSON object, or empty for none). Every notifications/progress carrying the
// call's progress token becomes a chunk with Event "progress" whose Data is the
// notification's params; progress values only increase, so a regression or a
// replayed notification is dropped. The tool's CallToolResult becomes the last
// chunk, with Event "result" and Data the result object; for Streamable that
// holds also when the server answers in JSON-response mode and sends progress
// on the session's standalone GET stream, which Run opens before the call and
// reads, waiting boundedly for progress that trails the result. A result with
// isError true is not delivered: Run returns a permanent error wrapping
// ErrToolFailed with the tool's text.
//
// A chunk's ID is an opaque cursor. For Streamable it records the session id,
// the negotiated protocol version, the request id, the progress token, the
// last SSE event id and the last progress value, so that Run can resume a call
// after a dropped connection or a host restart by a GET with Last-Event-ID; it
// never sends tools/call again once the server may have started the tool. The cursor holds no header values and no
// secret from Spec.HTTP.Header, but the session id it carries lets its holder read
// the rest of the call's stream, so it must be stored like any session state.
package mcp
