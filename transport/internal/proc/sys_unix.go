//go:build unix && !linux

package proc

import (
	"os"
	"syscall"
)

// keeperAttr starts the keeper as the leader of a new process group. This
// OS has no parent-death signal: the keeper sees the host's death by the
// end of file on its socket only.
func keeperAttr(bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// selfExecutable is the file the keeper is started from: the host's
// executable, as the OS names it.
func selfExecutable() (string, error) { return os.Executable() }
