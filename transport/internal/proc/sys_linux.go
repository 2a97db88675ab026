package proc

import "syscall"

// keeperAttr starts the keeper as the leader of a new process group, with
// SIGTERM as its parent-death signal (keeper_unix.go says how the keeper
// tells the host's death from the death of the thread that started it).
func keeperAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// selfExecutable is the file the keeper is started from: the running
// host's executable, even if its file was replaced or removed since.
func selfExecutable() (string, error) { return "/proc/self/exe", nil }
