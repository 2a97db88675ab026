package provider

import "github.com/rtfshost/rtfshost/provider/internal/stream"

// Stuck returns the streams that are paused with no :resume-after-ms timer
// and whose source cannot resume them either, whatever their queue holds:
// it has ended; or it sends no control chunks (it has sent none in this
// stream), the only chunks that reach a paused processor; or the queue is
// full, so the transport is held back and reads no control chunk (a
// control chunk jumps the queue only until it is full). Only a call of
// pause/resume/cancel from RTFS, Go, the CLI or MCP can move such a stream.
// A stream that such a call paused is not stuck: it waits for whoever
// paused it. Hosts use it to report a run that would otherwise wait forever. Safe for
// concurrent use; it takes each stream's lock briefly.
func (p *Provider) Stuck() []StuckStream {
	p.mu.Lock()
	order := append([]*stream.Stream(nil), p.order...)
	p.mu.Unlock()
	var out []StuckStream
	for _, s := range order {
		if st, ok := s.Stuck(); ok {
			out = append(out, st)
		}
	}
	return out
}

// Live returns the ids of the streams that have not ended, in start order.
func (p *Provider) Live() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.liveLocked()
}
