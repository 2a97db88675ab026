package mcp

import (
	"io"

	"github.com/rtfshost/rtfshost/transport/internal/sseread"
)

// newEventReader reads the SSE body of one response (a POST's stream, the
// standalone GET, the legacy GET stream) with the transports' shared reader,
// bounding one event to max bytes (0: transport.DefaultMaxEventBytes).
// Retries wait through the shared policy, transport/internal/retry.
func newEventReader(body io.Reader, max int) *sseread.Reader {
	rd := sseread.New(max, 0)
	rd.Reset(body)
	return rd
}
