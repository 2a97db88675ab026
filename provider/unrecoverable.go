package provider

import (
	"github.com/rtfshost/rtfshost/provider/internal/stream"
)

// registerUnrecoverable lists s, a stream that could not be restored
// (stream.Unrecoverable), in StateUnrecoverable: inspectable with what its
// records say (its definition, stats, cursor and, when they hold no
// function, its states), never running, never written. A stream already
// listed, or a closed registry, is left alone.
func (r *registry) registerUnrecoverable(s *stream.Stream) {
	close(s.Done)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.streams[s.ID]; dup || r.closed {
		return
	}
	r.streams[s.ID] = s
	r.order = append(r.order, s)
}
