package provider

import (
	"errors"
	"time"
)

// registerUnrecoverable lists s, a stream that could not be restored
// (unrecoverableStream), in StateUnrecoverable: inspectable with what its
// records say (its definition, stats, cursor and, when they hold no
// function, its states), never running, never written. A stream already
// listed, or a closed registry, is left alone.
func (r *registry) registerUnrecoverable(s *stream) {
	close(s.done)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.streams[s.id]; dup || r.closed {
		return
	}
	r.streams[s.id] = s
	r.order = append(r.order, s)
}

// unrecoverableStream makes the stream of l, which could not be restored
// because of cause, for registerUnrecoverable (its done channel still
// open).
func unrecoverableStream(env *streamEnv, l *loaded, cause error) *stream {
	if inner := errors.Unwrap(cause); inner != nil {
		cause = inner // without "provider: recover stream ...": the stream is named already
	}
	var def definition
	c := codec{} // functions cannot be trusted here: plain data only
	if d := l.def; d != nil {
		def = definition{endpoint: d.endpoint, transport: d.transport, serverURL: d.serverURL, procName: d.procName, capacity: int(d.capacity)}
		def.initial, _ = c.unmarshalOpt(d.initial)
	}
	s := newStream(env, l.id, def, nil)
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
