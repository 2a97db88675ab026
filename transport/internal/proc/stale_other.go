//go:build !linux

package proc

import (
	"context"

	"github.com/rtfshost/rtfshost/transport"
)

// identify returns the identity of process pid: its pid only, since this
// OS offers no start time the host reads; a later host never touches the
// group (endGroup).
func identify(pid int) transport.ChildProcess { return transport.ChildProcess{PID: pid} }

// endGroup does nothing here: without a start time, a pid recorded by a
// previous host cannot be told from a later process that got the same pid.
// The keeper (keeper_unix.go) ends the group when its host dies.
func endGroup(context.Context, transport.ChildProcess) error { return nil }
