package proc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// The log takes at most maxLoggedLines stderr lines of a process, each cut
// to maxLoggedWidth bytes: a chatty program cannot flood the host's log.
const (
	maxLoggedLines = 1000
	maxLoggedWidth = 4096
)

// DefaultGrace is how long Stop waits after SIGTERM before SIGKILL.
const DefaultGrace = 2 * time.Second

// Options configure Start.
type Options struct {
	StreamID string       // for logs and errors
	Logger   *slog.Logger // receives stderr lines (Info) unless Stderr takes them; nil: none
	// Stderr, when set, receives each stderr line (without its newline;
	// the slice is valid during the call) instead of the log. It runs on
	// the Process's stderr goroutine; while it blocks, stderr is not read.
	// An error from it stops the reading of stderr.
	Stderr func(line []byte) error
	// MaxLine bounds one stderr line handed to Stderr (longer lines are
	// cut; default transport.DefaultMaxEventBytes).
	MaxLine int
	// Grace is the wait between SIGTERM and SIGKILL (default DefaultGrace).
	Grace time.Duration
	// Observer, when set, is told when the process group runs and when no
	// process of it is left (transport.ChildObserver): the host records the
	// group with its stream. ObserverOf gives the sink's, if it has one.
	Observer transport.ChildObserver
}

// ObserverOf returns sink as a transport.ChildObserver, or nil.
func ObserverOf(sink transport.Sink) transport.ChildObserver {
	o, _ := sink.(transport.ChildObserver)
	return o
}

// A Process is a started program in a process group of its own, whose
// life is tied to its host's (see Start). Its owner (one transport Run)
// reads Stdout, writes Stdin, and calls Stop before it returns; Stop
// returns when the program and every process of its group are gone and the
// Process's goroutines have exited. Stdout and Stdin are for one goroutine
// at a time; Stop (also from a context.AfterFunc), Done, ExitError, Ended,
// Tail and ID are safe for concurrent use.
type Process struct {
	cfg    *Config
	opts   Options
	cmd    *exec.Cmd
	Stdin  *os.File // the program's standard input (a pipe: SetWriteDeadline works)
	Stdout *os.File // the program's standard output; EOF once the group is gone
	stderr *os.File
	tail   *Tail
	id     transport.ChildProcess
	keeper keeperLink // the link to the program's keeper (process_unix.go)
	leaf   *leaf      // the keeper's cgroup, nil if none (cgroup_linux.go)

	done       chan struct{} // closed when the program has exited and its group is killed
	exit       string        // how the program ended ("" for status 0), valid after done
	stderrDone chan struct{}
	stopOnce   sync.Once
}

// Start starts cfg's program with a minimal environment (see Keys), its
// stdin and stdout as pipes, and its stderr read line by line into a tail
// of the last lines and the log (or opts.Stderr). The program runs in a new
// process group, so that Stop reaches its children too.
//
// On Unix the group's leader is a keeper, this executable started again
// (keeper_unix.go), which starts the program and waits for it: when the
// host dies, even by SIGKILL, the keeper kills the whole group, the
// program's own children included, so nothing the stream started outlives
// its host. Elsewhere the program is started directly and only Stop ends
// it. The error names the command.
func Start(cfg *Config, opts Options) (*Process, error) {
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.MaxLine <= 0 {
		opts.MaxLine = transport.DefaultMaxEventBytes
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = cfg.environ()
	cmd.Dir = cfg.Dir
	p := &Process{cfg: cfg, opts: opts, cmd: cmd, tail: NewTail(20, 4096),
		done: make(chan struct{}), stderrDone: make(chan struct{})}
	var files []*os.File // the parent's copies of the child's ends, closed after Start
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, p.startError(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, p.startError(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, p.startError(err)
	}
	files = append(files, inR, outW, errW)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := p.start(); err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, p.startError(err)
	}
	p.Stdin, p.Stdout, p.stderr = inW, outR, errR
	p.id = identify(p.cmd.Process.Pid) // the keeper's, before wait reaps it
	if opts.Observer != nil {
		opts.Observer.ChildStarted(p.id)
	}
	go p.readStderr()
	go p.wait()
	return p, nil
}

// ID identifies the process group, as the host records it.
func (p *Process) ID() transport.ChildProcess { return p.id }

func (p *Process) startError(err error) error {
	return &transport.Error{StreamID: p.opts.StreamID, Op: "start", Permanent: true,
		Err: fmt.Errorf("starting %s: %w", p.describe(), err)}
}

// describe is the command line as errors show it: the program and its
// arguments, cut at 200 bytes.
func (p *Process) describe() string {
	s := strings.Join(append([]string{p.cfg.Command}, p.cfg.Args...), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// wait reaps the program, then kills what is left of its group (a child
// that kept running would hold the output pipes open) and tells the
// observer that the group is gone.
func (p *Process) wait() {
	p.exit = p.reap()
	p.killGroup(syscall.SIGKILL)
	if p.leaf != nil {
		// What left the group (setsid) and outlived the keeper, the
		// keeper's own killing included, is still in the leaf.
		if err := p.leaf.end(); err != nil && p.opts.Logger != nil {
			p.opts.Logger.Warn("process cgroup", "stream", p.opts.StreamID, "command", p.cfg.Name(), "err", err)
		}
	}
	if p.opts.Observer != nil {
		p.opts.Observer.ChildExited(p.id)
	}
	close(p.done)
}

// readStderr reads stderr lines into the tail and the log or opts.Stderr.
func (p *Process) readStderr() {
	defer close(p.stderrDone)
	defer p.stderr.Close()
	lr := NewLineReader(p.stderr, p.opts.MaxLine)
	logged := 0
	for {
		line, err := lr.Next()
		if len(line) > 0 || err == nil {
			p.tail.Add(line)
			if p.opts.Stderr != nil {
				if p.opts.Stderr(line) != nil {
					_, _ = io.Copy(io.Discard, p.stderr) // keep the child from blocking on a full pipe
					return
				}
			} else if p.opts.Logger != nil && logged <= maxLoggedLines {
				logged++
				if logged > maxLoggedLines {
					p.opts.Logger.Info("process stderr: further lines are not logged", "stream", p.opts.StreamID, "command", p.cfg.Name(), "lines", maxLoggedLines)
				} else {
					p.opts.Logger.Info("process stderr", "stream", p.opts.StreamID, "command", p.cfg.Name(), "line", string(line[:min(len(line), maxLoggedWidth)]))
				}
			}
		}
		if errors.Is(err, ErrLineTooLong) {
			continue // the rest of the line was dropped; the tail keeps its start
		}
		if err != nil {
			return
		}
	}
}

// Done is closed when the program has exited and its group was killed
// (and its cgroup leaf, if it has one, killed and removed).
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitError describes how the program ended, after Done: nil for exit
// status 0, else an error naming the command, the status (or signal) and
// the last lines of its stderr.
func (p *Process) ExitError() error {
	<-p.done
	<-p.stderrDone
	if p.exit == "" {
		return nil
	}
	return fmt.Errorf("%s %s%s", p.describe(), p.exit, p.tail.Suffix())
}

// Ended returns an error for a program that ended before it should have:
// its exit status (0 included) and its stderr tail. It waits for Done.
func (p *Process) Ended(what string) error {
	<-p.done
	<-p.stderrDone
	status := "exited with status 0"
	if p.exit != "" {
		status = p.exit
	}
	return fmt.Errorf("%s %s %s%s", p.describe(), status, what, p.tail.Suffix())
}

// exitStatus describes how a process ended, from the error of its Wait:
// "" for status 0.
func exitStatus(err error) string {
	if err == nil {
		return ""
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
			return waitStatus(ws)
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	return "failed: " + err.Error()
}

// waitStatus describes a wait status: "" for status 0.
func waitStatus(ws syscall.WaitStatus) string {
	switch {
	case ws.Signaled():
		return "was killed by signal " + ws.Signal().String()
	case ws.ExitStatus() == 0:
		return ""
	}
	return fmt.Sprintf("exited with status %d", ws.ExitStatus())
}

// hangUpWait is how long Stop waits for the keeper to kill what it holds
// before it sends SIGKILL to the group.
const hangUpWait = time.Second

// stdinGrace is how long Stop waits for a program to exit after its stdin
// closed, before SIGTERM.
const stdinGrace = 50 * time.Millisecond

// Stop ends the program: it closes stdin (a well-behaved MCP server exits
// on that), waits up to 50 ms unless stdin was closed already, sends
// SIGTERM to the process group, waits
// up to the grace period, then has the keeper kill everything it holds
// (Unix), and sends SIGKILL to the group if that takes more than a second. It returns when
// the program is reaped and the Process's goroutines have exited. A second
// call, from any goroutine, waits for the first to finish.
func (p *Process) Stop() {
	p.stopOnce.Do(func() {
		// A program whose stdin was open gets a moment to exit on its own.
		wait := stdinGrace
		if p.Stdin.Close() != nil {
			wait = 0 // the owner closed it before: straight to SIGTERM
		}
		if !p.waitFor(wait) {
			p.killGroup(syscall.SIGTERM)
			if !p.waitFor(p.opts.Grace) {
				// The keeper kills what it holds, what left the group
				// included; SIGKILL to the group if it does not.
				p.hangUp()
				if !p.waitFor(hangUpWait) {
					p.killGroup(syscall.SIGKILL)
					<-p.done
				}
			}
		}
		p.Stdout.Close()
		<-p.stderrDone
	})
}

func (p *Process) waitFor(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-p.done:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// Tail returns the last lines of the program's stderr, joined with "\n".
func (p *Process) Tail() string { return p.tail.String() }

// ErrLineTooLong is returned by LineReader.Next for a line over its limit.
var ErrLineTooLong = errors.New("line longer than the configured limit")

// A LineReader splits a stream into lines of at most max bytes without
// buffering more than one line. It is used by one goroutine.
type LineReader struct {
	r    *bufio.Reader
	max  int
	line []byte
}

// NewLineReader returns a LineReader over r for lines of at most max bytes.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next line without its "\n" (and "\r"); the slice is
// valid until the next call. A last line without a newline is returned
// with io.EOF. A line over the limit returns its first max bytes and an
// error wrapping ErrLineTooLong (and transport.ErrEventTooLarge); the rest
// of it is skipped, so the next call returns the line after it.
func (lr *LineReader) Next() ([]byte, error) {
	lr.line = lr.line[:0]
	for {
		frag, err := lr.r.ReadSlice('\n')
		if len(lr.line)+len(frag) > lr.max+1 { // +1: the newline
			room := max(lr.max-len(lr.line), 0)
			lr.line = append(lr.line, frag[:min(room, len(frag))]...)
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = lr.r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return lr.line, err
			}
			return lr.line, fmt.Errorf("%w (%d bytes): %w", ErrLineTooLong, lr.max, transport.ErrEventTooLarge)
		}
		if len(lr.line) == 0 && err == nil {
			return trimEOL(frag), nil // the common case: no copy
		}
		lr.line = append(lr.line, frag...)
		switch {
		case err == nil:
			return trimEOL(lr.line), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return lr.line, err
		}
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}

// A Tail keeps the last lines written to it, bounded in count and length.
// It is safe for concurrent use.
type Tail struct {
	mu    sync.Mutex
	lines []string
	n     int
	width int
}

// NewTail keeps up to n lines of up to width bytes each.
func NewTail(n, width int) *Tail { return &Tail{n: n, width: width} }

// Add appends a line (cut to the width).
func (t *Tail) Add(line []byte) {
	if len(line) > t.width {
		line = line[:t.width]
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == t.n {
		t.lines = append(t.lines[:0], t.lines[1:]...)
	}
	t.lines = append(t.lines, string(line))
}

// String returns the kept lines joined with "\n".
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// Suffix is "; stderr: ..." with the last lines (at most 5), or "".
func (t *Tail) Suffix() string {
	t.mu.Lock()
	lines := t.lines[max(len(t.lines)-5, 0):]
	s := strings.TrimSpace(strings.Join(lines, "\n"))
	t.mu.Unlock()
	if s == "" {
		return ""
	}
	return "; stderr: " + s
}

// EndStale ends spec.Stale, the process group a previous host of the
// stream started (transport.Spec), if it still runs, and reports its end to
// sink's observer. A transport that starts processes calls it first in Run.
// On Linux it kills, with SIGKILL, every process of that group, checked by
// its start time so that a process that got a recorded pid again is never
// touched, and waits until none is left (at most a few seconds); elsewhere
// it does nothing, since a pid cannot be told from a later one there (the
// keeper ends the group when its host dies). The error, a permanent
// *transport.Error, says that the group could not be ended.
func EndStale(ctx context.Context, spec *transport.Spec, sink transport.Sink) error {
	c := spec.Stale
	if c.PID == 0 {
		return nil
	}
	if err := endGroup(ctx, c); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &transport.Error{StreamID: spec.StreamID, Op: "resume", Permanent: true,
			Err: fmt.Errorf("the process group %d that the stream's previous host started could not be ended: %w", c.PID, err)}
	}
	if o := ObserverOf(sink); o != nil {
		o.ChildExited(c)
	}
	return nil
}
