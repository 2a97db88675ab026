package proc

import (
	"fmt"
	"os"
	"syscall"
)

// keeperAttr starts the keeper as the leader of a new process group, with
// SIGTERM as its parent-death signal (keeper_unix.go says how the keeper
// tells the host's death from the death of the thread that started it);
// with ns, also as the init of a new PID namespace (keeper_linux.go).
func keeperAttr(ns bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if ns {
		a.Cloneflags = syscall.CLONE_NEWPID
	}
	return a
}

// selfExe names the running host's executable, even if its file was
// replaced or removed since it started.
const selfExe = "/proc/self/exe"

// selfExecutable is the file the keeper is started from.
func selfExecutable() (string, error) {
	if _, err := os.Stat(selfExe); err != nil {
		return "", fmt.Errorf("it is started from %s, which this system lacks (is /proc mounted?): %w", selfExe, err)
	}
	return selfExe, nil
}
