package provider

import (
	"github.com/rtfshost/rtfshost/transport"
)

// The process groups of a stream's transport (:exec, :stdio): the stream
// records the one that runs (transport.ChildObserver) with its other
// records, and a stream recovered after a crash hands the recorded one to
// its transport (transport.Spec.Stale), which ends it if it still runs
// before starting the program again. docs/durability.md says what this
// guarantees.

var _ transport.ChildObserver = (*stream)(nil)

// ChildStarted implements transport.ChildObserver: the group's record is
// submitted to the store (not waited for: a crash before it commits leaves
// the group to its keeper alone). A stream that has ended records no more.
func (s *stream) ChildStarted(c transport.ChildProcess) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ps == nil || s.exited || s.st.Terminal() {
		return
	}
	s.ps.childLocked(c, true)
}

// ChildExited implements transport.ChildObserver: the group's record is
// deleted.
func (s *stream) ChildExited(c transport.ChildProcess) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ps != nil {
		s.ps.childLocked(c, false)
	}
}
