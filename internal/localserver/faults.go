package localserver

import (
	"sync"
	"time"
)

// Faults makes the server misbehave on purpose, for tests of the clients'
// retry and resume logic. The zero value misbehaves in no way.
//
// Options.Faults applies to every stream request; a request can override any
// field with the query parameter (SSE) or tool argument (MCP) named after it
// (fail, fail_times, drop_after, drop_times, stall_ms, stall_after,
// stall_times, oversized).
//
// Each *Times field, when positive, limits its fault to the first that many
// requests with the same endpoint and parameters (Last-Event-ID and other
// headers do not count), after which those requests are served normally. So
// "drop once after 3 events, then serve normally" is drop_after=3&drop_times=1:
// the client's reconnect, which repeats the URL, gets the rest of the stream.
// Zero means every request misbehaves. A request counts against a fault's
// budget only if it reaches that fault: a request answered by Fail does not
// use up the Drop budget.
//
// MCP tool calls honour Fail (as an isError result), Stall and Oversized from
// Options.Faults and their arguments. Drop and HTTP-level Fail on the MCP
// routes come only from the endpoint URL's query (/mcp?drop_after=3), where
// drop_after counts progress events.
type Faults struct {
	// Fail, when non-zero, answers the request with this HTTP status (400..599)
	// and a short text body naming the fault; for MCP the tool returns an
	// isError result carrying that text instead.
	Fail int
	// FailTimes limits Fail to the first FailTimes requests.
	FailTimes int

	// Drop closes the connection abruptly (no terminal event, no final chunk of
	// the chunked encoding) after DropAfter chunk events of the response;
	// DropAfter 0 drops right after the response headers. If the stream has
	// fewer chunks left, the drop replaces the terminal status event.
	Drop      bool
	DropAfter int
	// DropTimes limits Drop to the first DropTimes requests.
	DropTimes int

	// Stall, when positive, pauses the response for this long (after flushing)
	// once StallAfter chunk events of the response have been sent.
	Stall      time.Duration
	StallAfter int
	// StallTimes limits Stall to the first StallTimes requests.
	StallTimes int

	// Oversized, when positive, pads the first chunk event of the response so
	// that its data is exactly Oversized bytes (or its natural size if that is
	// larger). The padding is a top-level "oversized_pad" string field.
	Oversized int
}

// faultBudget counts how many requests each limited fault has hit. It is safe
// for concurrent use.
type faultBudget struct {
	mu   sync.Mutex
	used map[string]int
}

// take reports whether a fault limited to times requests still fires for
// key, and if so uses up one of them. times <= 0 means unlimited.
func (b *faultBudget) take(fault, key string, times int) bool {
	if times <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used == nil {
		b.used = make(map[string]int)
	}
	k := fault + " " + key
	if b.used[k] >= times {
		return false
	}
	b.used[k]++
	return true
}

// failFires reports whether the Fail fault applies to this request.
func (b *faultBudget) failFires(f Faults, key string) bool {
	return f.Fail != 0 && b.take("fail", key, f.FailTimes)
}
