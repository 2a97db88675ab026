package provider

import (
	"errors"
	"time"
)

// registerUnrecoverable lists stream l, which could not be restored
// because of cause, in StateUnrecoverable: inspectable with what its
// records say (its definition, stats, cursor and, when they hold no
// function, its states), never running, never written. A stream already
// listed, or a closed provider, is left alone.
func (p *Provider) registerUnrecoverable(l *loaded, cause error) {
	s := p.unrecoverableStream(l, cause)
	close(s.done)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, dup := p.streams[s.id]; dup || p.closed {
		return
	}
	p.streams[s.id] = s
	p.order = append(p.order, s)
}

// unrecoverableStream makes the stream registerUnrecoverable lists (its
// done channel still open).
func (p *Provider) unrecoverableStream(l *loaded, cause error) *stream {
	if inner := errors.Unwrap(cause); inner != nil {
		cause = inner // without "provider: recover stream ...": the stream is named already
	}
	var def definition
	c := codec{} // functions cannot be trusted here: plain data only
	if d := l.def; d != nil {
		def = definition{endpoint: d.endpoint, transport: d.transport, serverURL: d.serverURL, procName: d.procName, capacity: int(d.capacity)}
		def.initial, _ = c.unmarshalOpt(d.initial)
	}
	s := newStream(p, l.id, def, nil)
	if l.def != nil {
		if l.def.order > 0 {
			s.started = time.Unix(0, l.def.order)
		}
		s.history = (*originRecord)(nil).historyOf(l.def, "")
	}
	if r := l.progress; r != nil {
		s.state, _ = c.unmarshalOpt(r.state)
		s.lastOut, _ = c.unmarshalOpt(r.lastOut)
		s.cursor = r.cursor
		s.stats = stats{processed: r.processed, dropped: r.dropped, reconnects: r.reconnects, bytes: r.bytes, outputs: r.outputs}
	}
	s.st, s.msg = StateUnrecoverable, cause.Error()
	s.dormant, s.exited = true, true
	s.cancel()
	return s
}
