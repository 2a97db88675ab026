package proc

import (
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// On Linux the keeper also holds the program's descendants that leave its
// process group (setsid, a daemon's double fork): it is a child subreaper,
// so a descendant whose parent exits becomes the keeper's child rather
// than init's, and when the host dies it kills every descendant it finds
// under itself in /proc before it kills its group.

// becomeSubreaper makes the keeper the subreaper of the program's
// descendants (prctl PR_SET_CHILD_SUBREAPER).
func becomeSubreaper() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// reapOrphans reaps, as they end, the descendants the keeper inherited as
// their subreaper, so that none stays a zombie while the program runs; the
// program itself (pid program) is left to its Wait. It returns at once
// and runs until the keeper exits.
func reapOrphans(program int) {
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	go func() {
		for range chld {
			// The keeper's children (/proc/self/task/*/children) other than
			// the program: each is waited for without blocking.
			files, _ := filepath.Glob("/proc/self/task/*/children")
			for _, f := range files {
				b, _ := os.ReadFile(f)
				for _, field := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(field); err == nil && pid != program {
						var ws unix.WaitStatus
						_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
					}
				}
			}
		}
	}()
}

// killDescendants kills with SIGKILL every process under the keeper,
// whatever its group or session. A descendant that forks while it runs is
// found by the next of a few rounds. Cost: a read of /proc/PID/stat for
// every process of the machine per round.
func killDescendants() {
	self := os.Getpid()
	for range 4 {
		children := map[int][]int{}
		for pid, st := range processes() {
			if st.state != 'Z' {
				children[st.ppid] = append(children[st.ppid], pid)
			}
		}
		// Stopped as they are found, so that none forks while the tree
		// is walked; then killed.
		var found []int
		for i, parent := 0, self; ; i++ {
			for _, pid := range children[parent] {
				_ = syscall.Kill(pid, syscall.SIGSTOP)
				found = append(found, pid)
			}
			if i == len(found) {
				break
			}
			parent = found[i]
		}
		if len(found) == 0 {
			return
		}
		for _, pid := range found {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// On Linux, when the host may (as root, or with CAP_SYS_ADMIN), the keeper
// is also the init of a PID namespace of its own, with the program and
// all its descendants inside. A descendant then cannot kill the keeper
// (init takes no signal from inside its namespace that it does not
// handle, and the keeper's pid outside is not visible inside), nor
// escape it by setsid or double fork: when the keeper exits, or is killed
// from outside (the host ending the stream, SIGKILL to the group), the
// kernel kills every process of the namespace. Without the namespace a
// descendant that left the group and killed the keeper would outlive the
// stream and the host, unless the keeper's cgroup leaf (cgroup_linux.go)
// holds it. pidNamespaces says whether to try: as root, unless
// RTFSHOST_CHILD_PIDNS is "off" (for a program that must see the host's
// pids); a start refused for want of privilege clears it and the keeper
// runs as before.
var pidNamespaces atomic.Bool

// pidnsEnv set to "off" turns the keepers' PID namespaces off.
const pidnsEnv = "RTFSHOST_CHILD_PIDNS"

func init() { pidNamespaces.Store(os.Geteuid() == 0 && os.Getenv(pidnsEnv) != "off") }

// nsInit reports whether the keeper is the init of its own PID namespace.
func nsInit() bool { return os.Getpid() == 1 }
