package provider

import (
	"github.com/rtfshost/rtfshost/provider/internal/stream"
	"github.com/rtfshost/rtfshost/transport"
)

// The process groups of a stream's transport (:exec, :stdio): the stream
// records the one that runs (transport.ChildObserver) with its other
// records, and a stream recovered after a crash hands the recorded one to
// its transport (transport.Spec.Stale), which ends it if it still runs
// before starting the program again. docs/durability.md says what this
// guarantees.

var _ transport.ChildObserver = (*stream.Stream)(nil)
