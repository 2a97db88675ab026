//go:build unix && !linux

package proc

import "sync/atomic"

// becomeSubreaper does nothing on this OS, which has no subreapers: a
// descendant that leaves the keeper's group escapes it.
func becomeSubreaper() {}

// reapOrphans does nothing on this OS: the keeper inherits no orphans.
func reapOrphans(int) {}

// killDescendants does nothing on this OS: the keeper's group is what it
// kills.
func killDescendants() {}

// pidNamespaces is false on this OS, which has no PID namespaces.
var pidNamespaces atomic.Bool

// nsInit is false on this OS.
func nsInit() bool { return false }
