// Package localserver is the reference streaming server: it serves a few
// deterministic datasets over raw SSE and as MCP tools, for the demo
// (rtfshost run, rtfshost localserver) and for the transports' tests and
// benchmarks. It can also misbehave on purpose (see Faults).
//
// The main types are Server, made by New and configured by Options; Faults,
// its misbehaviour knobs; and Stats, a snapshot of its counters. A Server listens only on loopback addresses and answers 403 to any
// request whose Origin header is present and not a loopback origin.
//
// # Routes
//
//   - GET /sse/<endpoint>?limit=&interval_ms=&size=: the endpoint's chunks as
//     raw SSE. Each chunk is an event with "id: <seq>" (seq counts from 1),
//     "event: chunk" and data
//     {"endpoint":..,"seq":..,"chunk":{..},"generated_at":..,"trace":{..}}.
//     After the last chunk comes an id-less "event: status" with data
//     {"endpoint":..,"status":"complete","chunks_sent":<limit>} (plus
//     "resumed_after":<n> on a resumed request), then the response ends. A
//     Last-Event-ID header n resumes with chunk n+1. retry_ms=<ms> sends a
//     "retry:" field first.
//   - POST/GET/DELETE /mcp: MCP Streamable HTTP (go-sdk, with an in-memory
//     event store, so a broken response stream resumes with GET and
//     Last-Event-ID). GET /mcp-sse: the legacy HTTP+SSE transport. Each
//     dataset is a tool named after its endpoint, with the same parameters as
//     arguments; each chunk is a notifications/progress to the call's progress
//     token with the chunk's data as message, progress = seq and total =
//     limit, and the result is a text content holding the status object.
//   - GET /datasets: the endpoints as a JSON list; GET /datasets/<endpoint>:
//     the chunks as one JSON array; GET /healthz.
//
// Unknown endpoints and routes get 404 with a message listing what exists.
//
// # Datasets
//
// weather.monitor.v1 (readings with city, temperature_c, humidity_pct and
// conditions, cycling through six cities), docs.search.v1, news.digest.v1
// and counter.v1 ({"n": seq}, for load tests; interval 0 by default). The
// chunk for a given endpoint, seq and size is always the same bytes; only
// generated_at changes (see Options.Now). The datasets' default interval is
// 150 ms, so a demo shows live progress; interval_ms=0 streams as fast as the
// client reads, writing in 32 KiB batches whose events carry one
// generated_at.
package localserver
