package provider

import (
	"context"
	"fmt"

	"github.com/rtfshost/rtfshost/persistence"
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

// childLocked submits the record of the stream's process group c, or its
// deletion once the group is gone. A store error fails the stream.
func (st *streamStore) childLocked(c transport.ChildProcess, running bool) {
	if st.err() != nil {
		return
	}
	var b persistence.Batch
	key := streamKey(st.s.id, suffixChild)
	if running {
		b.Put(key, (&childRecord{pid: int64(c.PID), start: c.Start, boot: c.Boot}).encode())
	} else {
		b.Delete(key)
	}
	if err := st.ps.com.Submit(context.Background(), &b, st.cdone); err != nil {
		st.fail(fmt.Errorf("record the process group of stream %q: %w", st.s.id, err))
	}
}

// process is the group a child record names.
func (r *childRecord) process() transport.ChildProcess {
	return transport.ChildProcess{PID: int(r.pid), Start: r.start, Boot: r.boot}
}

// leftover reports whether l holds nothing but a child record: one written
// as its stream was removed (the stream's transport can still start a
// program while the stream ends), which recovery ignores.
func (l *loaded) leftover() bool {
	return l.err == nil && l.def == nil && l.progress == nil && len(l.journal) == 0 && l.child != nil
}
