package provider

import (
	"errors"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"
)

// registerUnrecoverable lists s, a stream that could not be restored
// (unrecoverableStream), in StateUnrecoverable: inspectable with what its
// records say (its definition, stats, cursor and, when they hold no
// function, its states), never running, never written. A stream already
// listed, or a closed registry, is left alone.
func (r *registry) registerUnrecoverable(s *stream.Stream) {
	close(s.Done)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.streams[s.Id]; dup || r.closed {
		return
	}
	r.streams[s.Id] = s
	r.order = append(r.order, s)
}

// unrecoverableStream makes the stream of l, which could not be restored
// because of cause, for registerUnrecoverable (its done channel still
// open).
func unrecoverableStream(env *stream.StreamEnv, l *stream.Loaded, cause error) *stream.Stream {
	if inner := errors.Unwrap(cause); inner != nil {
		cause = inner // without "provider: recover stream ...": the stream is named already
	}
	var def stream.Definition
	c := stream.Codec{} // functions cannot be trusted here: plain data only
	if d := l.Def; d != nil {
		def = stream.Definition{Endpoint: d.Endpoint, Transport: d.Transport, ServerURL: d.ServerURL, ProcName: d.ProcName, Capacity: int(d.Capacity)}
		def.Initial, _ = c.UnmarshalOpt(d.Initial)
	}
	s := stream.NewStream(env, l.Id, def, nil)
	if l.Def != nil {
		if l.Def.Order > 0 {
			s.Started = time.Unix(0, l.Def.Order)
		}
		s.History = (*stream.OriginRecord)(nil).HistoryOf(l.Def, "")
	}
	if r := l.Progress; r != nil {
		s.State, _ = c.UnmarshalOpt(r.State)
		s.LastOut, _ = c.UnmarshalOpt(r.LastOut)
		s.Cursor = r.Cursor
		s.Stats = stream.Stats{Processed: r.Processed, Dropped: r.Dropped, Reconnects: r.Reconnects, Bytes: r.Bytes, Outputs: r.Outputs}
	}
	s.St, s.Msg = StateUnrecoverable, cause.Error()
	s.Dormant, s.Exited = true, true
	s.Cancel()
	return s
}
