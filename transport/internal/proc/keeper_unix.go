//go:build unix

package proc

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The keeper ties a program's life to its host's. Start runs this
// executable again, with keeperArg0 as its argv[0], as the leader of a new
// process group; package initialization sees that argv[0] and runs keep
// instead of the executable's main. The keeper starts the program in its
// group, with the stdin, stdout and stderr the host gave it, and waits for
// it, reporting to the host on a socket (fd 3): "ok" once the program
// runs, or "err <why>"; "exit <wait status>" when it ends. It then exits.
//
// The host dying is seen two ways, and either kills the whole group (the
// keeper, the program and the program's children) with SIGKILL: end of file
// on the socket, whose other end only the host holds (the kernel closes it
// whatever kills the host), and, on Linux, the parent-death signal
// (SIGTERM), taken for the host's death only when the keeper's parent has
// changed, since Linux sends it when the host's thread that started the
// keeper exits, which may be while the host lives. Any other SIGTERM,
// SIGINT or SIGHUP reaches the keeper with its group (Stop signals the
// group) and is left to the program.
//
// The host's executable serves as the keeper so that no other file needs to
// be installed; on Linux it is started as /proc/self/exe, which stays the
// running host's even if its file is replaced. The cost is one more process
// per program (its memory is the Go runtime's and what the executable's
// package initialization allocates).

// keeperArg0 is the keeper's argv[0]. Its command line is then the host's
// pid, its cgroup leaf ("-" for none, "v2:<dir>", "v1:<dir>"), the
// program's resolved path and the program's argv.
const keeperArg0 = "rtfshost-keeper"

// keeperCgroupErr begins the report of a keeper that could not move
// itself into its cgroup leaf: the host then starts it again without one.
const keeperCgroupErr = "cgroup "

func init() {
	if len(os.Args) >= 5 && os.Args[0] == keeperArg0 {
		// syscall.Exit rather than os.Exit: the keeper has nothing to
		// flush, and os.Exit(0) in a -race build sleeps a second first.
		syscall.Exit(keep(os.Args[1:]))
	}
}

// keep is the keeper's main; it returns its exit status.
func keep(args []string) int {
	hostPid, err := strconv.Atoi(args[0])
	link := os.NewFile(3, "keeper-link")
	report := func(s string) { _, _ = io.WriteString(link, s+"\n") }
	if err != nil || link == nil {
		report("err the keeper's command line is not the host's")
		return 2
	}
	syscall.CloseOnExec(3)
	// In a cgroup v1 leaf, the keeper moves itself in before it starts the
	// program, which inherits it; a cgroup2 leaf it was started into.
	leafDir, err := joinLeaf(args[1])
	if err != nil {
		report("err " + keeperCgroupErr + strings.ReplaceAll(err.Error(), "\n", " "))
		return 2
	}
	// dying is closed when the keeper starts killing: the program's end
	// then must not let the keeper exit before the killing is done.
	dying := make(chan struct{})
	var dyingOnce sync.Once
	// As the init of its own PID namespace (keeper_linux.go), the keeper's
	// exit kills every process of the namespace, and its parent is outside
	// it (getppid says 0): the host's death is seen on the socket alone.
	ns := nsInit()
	killGroup := func() {
		dyingOnce.Do(func() { close(dying) })
		// In a cgroup2 leaf, every process of the leaf is killed, the
		// keeper included: the program, its group and what left it.
		if !killLeaf(leafDir) && !ns {
			killDescendants() // those that left the group (Linux); /proc is the host's
		}
		_ = syscall.Kill(0, syscall.SIGKILL) // the keeper's own group, the keeper included (not as init)
		syscall.Exit(1)                      // as init: the kernel kills the namespace
	}
	orphaned := func() bool { return !ns && os.Getppid() != hostPid }
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if orphaned() {
		killGroup() // the host died before the program started
	}
	if !ns {
		becomeSubreaper() // init is the namespace's reaper already
	}
	proc, err := os.StartProcess(args[2], args[3:], &os.ProcAttr{
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
	})
	if err != nil {
		report("err " + strings.ReplaceAll(err.Error(), "\n", " "))
		return 127
	}
	if !ns {
		reapOrphans(proc.Pid) // as init, orphans that end stay zombies until the keeper exits
	}
	report("ok")
	// The program holds the pipes now; the keeper lets go of them, so that
	// the host sees end of file on the program's stdout when the program
	// closes it, as if no keeper were there.
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		for fd := 0; fd <= 2; fd++ {
			_ = unix.Dup2(int(null.Fd()), fd)
		}
		null.Close()
	}
	go func() {
		_, _ = io.Copy(io.Discard, link) // returns at end of file: the host is gone
		killGroup()
	}()
	go func() {
		for range sigs {
			if orphaned() {
				killGroup()
			}
		}
	}()
	st, err := proc.Wait()
	select {
	case <-dying:
		select {} // killGroup ends the keeper
	default:
	}
	if !ns && leafDir == "" {
		// The program is gone: what it left running outside its group
		// (setsid, a double fork) dies with what is left of the group, as
		// it would hold the program's output open. (A PID namespace
		// ends with the keeper; the host kills a cgroup leaf.)
		killDescendants()
	}
	if err != nil {
		report("err " + fmt.Sprint(err))
		return 1
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	report("exit " + strconv.FormatUint(uint64(ws), 10))
	return 0
}
