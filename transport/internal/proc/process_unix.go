//go:build unix

package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// keeperLink is the host's end of the socket it shares with a program's
// keeper (keeper_unix.go): the keeper reports on it whether the program
// started and how it ended, and reads end of file on it once the host has
// died.
type keeperLink struct {
	f *os.File
	r *bufio.Reader
}

// start starts p.cmd's program under a keeper: it runs this executable
// again as the leader of a new process group (on Linux, when it may, as
// the init of a PID namespace, and in a cgroup leaf of its own), with the
// command line of the program (whose path p.cmd resolved with the host's
// PATH) and its end of a socket; the keeper starts the program in its
// group and reports "ok", or why it could not. The error is then the
// program's start error. A keeper that the kernel refuses to start in a
// PID namespace, or into its leaf, is started without it, and the host
// goes on without it from then on.
func (p *Process) start() error {
	if p.cmd.Err != nil { // the program was not found
		return p.cmd.Err
	}
	self, err := selfExecutable()
	if err != nil {
		return fmt.Errorf("the process keeper: %w", err)
	}
	ns := pidNamespaces.Load()
	l := childLeaf(p.opts.Logger)
	type try struct {
		ns bool
		l  *leaf
	}
	tries := []try{{ns, l}}
	if l != nil {
		tries = append(tries, try{ns, nil})
	}
	if ns {
		tries = append(tries, try{false, l})
		if l != nil {
			tries = append(tries, try{false, nil})
		}
	}
	var first error
	for _, t := range tries {
		var retry bool
		retry, err = p.launch(self, t.ns, t.l)
		if first == nil {
			first = err
		}
		if err == nil {
			if ns && !t.ns {
				pidNamespaces.Store(false) // no PID namespace for this process: the keeper alone, from now on
			}
			if l != nil && t.l == nil {
				dropCgroups(p.opts.Logger, first)
			}
			break
		}
		if !retry {
			break
		}
	}
	if l != nil && (err != nil || p.leaf == nil) {
		_ = l.remove()
	}
	return err
}

// launch starts the keeper, in a PID namespace of its own if ns and in the
// leaf l if not nil, and waits for its report. retry says that the error
// may come from the namespace or the leaf: the kernel refused the start,
// or the keeper could not move itself into its leaf.
func (p *Process) launch(self string, ns bool, l *leaf) (retry bool, err error) {
	prog := p.cmd
	host, child, err := socketPair()
	if err != nil {
		return false, fmt.Errorf("the process keeper's socket: %w", err)
	}
	cmd := &exec.Cmd{
		Path:       self,
		Args:       append([]string{keeperArg0, strconv.Itoa(os.Getpid()), l.keeperArg(), prog.Path}, prog.Args...),
		Env:        prog.Env,
		Dir:        prog.Dir,
		Stdin:      prog.Stdin,
		Stdout:     prog.Stdout,
		Stderr:     prog.Stderr,
		ExtraFiles: []*os.File{child}, // fd 3 in the keeper
	}
	cmd.SysProcAttr = keeperAttr(ns)
	dirFile, err := intoLeaf(cmd.SysProcAttr, l)
	if err == nil {
		err = cmd.Start()
	}
	if dirFile != nil {
		dirFile.Close()
	}
	child.Close()
	if err != nil {
		host.Close()
		return refused(err), err
	}
	link := keeperLink{f: host, r: bufio.NewReader(host)}
	line, err := link.r.ReadString('\n')
	if line == "ok\n" {
		p.cmd, p.keeper, p.leaf = cmd, link, l
		return false, nil
	}
	// The keeper could not start the program, or died: reap it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	werr := cmd.Wait()
	host.Close()
	if msg, ok := strings.CutPrefix(line, "err "); ok {
		msg = strings.TrimSuffix(msg, "\n")
		return strings.HasPrefix(msg, keeperCgroupErr), errors.New(msg)
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("it %s", exitStatus(werr))
	}
	return false, fmt.Errorf("the process keeper ended before starting the program: %w", err)
}

// refused reports whether a start error is the kernel's refusal of
// something a keeper is started with (a PID namespace, a cgroup), rather
// than of the start itself.
func refused(err error) bool {
	for _, e := range []error{syscall.EPERM, syscall.EINVAL, syscall.EACCES, syscall.EBUSY, syscall.EBADF,
		syscall.ENOSYS, syscall.EOPNOTSUPP, syscall.ENOENT, syscall.EROFS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// reap waits for the keeper and returns how the program ended, as the
// keeper reported it; if the keeper died first (the group was killed), how
// the keeper ended.
func (p *Process) reap() string {
	werr := p.cmd.Wait()
	line, _ := p.keeper.r.ReadString('\n')
	p.keeper.f.Close()
	if s, ok := strings.CutPrefix(line, "exit "); ok {
		if ws, err := strconv.ParseUint(strings.TrimSuffix(s, "\n"), 10, 32); err == nil {
			return waitStatus(syscall.WaitStatus(ws))
		}
	}
	if werr == nil {
		return "" // cannot happen: the keeper exits 0 only after its report
	}
	return exitStatus(werr)
}

// hangUp shuts down the host's side of the link to the keeper, which
// then reads end of file as if the host had died: it kills every process
// it holds, those that left the group included, and itself.
func (p *Process) hangUp() {
	if rc, err := p.keeper.f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_WR) })
	}
}

// killGroup sends sig to every process of the group.
func (p *Process) killGroup(sig syscall.Signal) {
	if pid := p.cmd.Process.Pid; pid > 0 {
		_ = syscall.Kill(-pid, sig)
	}
}

// socketPair returns the two ends of a Unix stream socket, both closed on
// exec (under syscall.ForkLock, so that no other child started meanwhile
// inherits them).
func socketPair() (*os.File, *os.File, error) {
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, os.NewSyscallError("socketpair", err)
	}
	return os.NewFile(uintptr(fds[0]), "keeper-link"), os.NewFile(uintptr(fds[1]), "keeper-link"), nil
}
