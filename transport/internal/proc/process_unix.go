//go:build unix

package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
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
// again as the leader of a new process group, with the command line of the
// program (whose path p.cmd resolved with the host's PATH) and its end of a
// socket; the keeper starts the program in its group and reports "ok", or
// why it could not. The error is then the program's start error.
func (p *Process) start() error {
	cmd := p.cmd
	if cmd.Err != nil { // the program was not found
		return cmd.Err
	}
	self, err := selfExecutable()
	if err != nil {
		return fmt.Errorf("the process keeper: %w", err)
	}
	host, child, err := socketPair()
	if err != nil {
		return fmt.Errorf("the process keeper's socket: %w", err)
	}
	args := append([]string{keeperArg0, strconv.Itoa(os.Getpid()), cmd.Path}, cmd.Args...)
	cmd.Path, cmd.Args = self, args
	cmd.ExtraFiles = []*os.File{child} // fd 3 in the keeper
	ns := pidNamespaces.Load()
	cmd.SysProcAttr = keeperAttr(ns)
	err = cmd.Start()
	if err != nil && ns && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL)) {
		// No PID namespace for this process: the keeper alone, from now on.
		pidNamespaces.Store(false)
		cmd.SysProcAttr = keeperAttr(false)
		cmd.Process, err = nil, cmd.Start()
	}
	child.Close()
	if err != nil {
		host.Close()
		return err
	}
	p.keeper = keeperLink{f: host, r: bufio.NewReader(host)}
	line, err := p.keeper.r.ReadString('\n')
	if line == "ok\n" {
		return nil
	}
	// The keeper could not start the program, or died: reap it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	werr := cmd.Wait()
	host.Close()
	if msg, ok := strings.CutPrefix(line, "err "); ok {
		return errors.New(strings.TrimSuffix(msg, "\n"))
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("it %s", exitStatus(werr))
	}
	return fmt.Errorf("the process keeper ended before starting the program: %w", err)
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
