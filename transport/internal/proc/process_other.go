//go:build !unix

package proc

import "syscall"

// keeperLink is empty here: there is no keeper outside Unix.
type keeperLink struct{}

// start starts the program directly. Outside Unix there is no process
// group and no keeper: the program's life is not tied to the host's (a
// host that dies leaves it running), and Stop ends the program only, not
// processes it started.
func (p *Process) start() error { return p.cmd.Start() }

// reap waits for the program and returns how it ended.
func (p *Process) reap() string { return exitStatus(p.cmd.Wait()) }

// hangUp does nothing: there is no keeper.
func (p *Process) hangUp() {}

// killGroup ends the program: this OS cannot send it SIGTERM, so any
// signal kills it.
func (p *Process) killGroup(syscall.Signal) { _ = p.cmd.Process.Kill() }
