package proc

import (
	"bufio"
	"bytes"
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
}

// A Process is a started program in a process group of its own. Its owner
// (one transport Run) reads Stdout, writes Stdin, and calls Stop before it
// returns; Stop returns when the program and every process of its group
// are gone and the Process's goroutines have exited. Stdout and Stdin are
// for one goroutine at a time; Stop (also from a context.AfterFunc), Done,
// ExitError, Ended and Tail are safe for concurrent use.
type Process struct {
	cfg    *Config
	opts   Options
	cmd    *exec.Cmd
	Stdin  *os.File // the program's standard input (a pipe: SetWriteDeadline works)
	Stdout *os.File // the program's standard output; EOF once the group is gone
	stderr *os.File
	tail   *Tail

	done       chan struct{} // closed when the program has exited and its group is killed
	waitErr    error         // the program's exit, valid after done
	stderrDone chan struct{}
	stopOnce   sync.Once
}

// Start starts cfg's program with a minimal environment (see Keys), its
// stdin and stdout as pipes, and its stderr read line by line into a tail
// of the last lines and the log (or opts.Stderr). The program runs in a new
// process group, so that Stop reaches its children too. The error names
// the command.
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
	if err := cmd.Start(); err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, p.startError(err)
	}
	p.Stdin, p.Stdout, p.stderr = inW, outR, errR
	go p.readStderr()
	go p.wait()
	return p, nil
}

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
// that kept running would hold the output pipes open).
func (p *Process) wait() {
	p.waitErr = p.cmd.Wait()
	p.killGroup(syscall.SIGKILL)
	close(p.done)
}

func (p *Process) killGroup(sig syscall.Signal) {
	if pid := p.cmd.Process.Pid; pid > 0 {
		_ = syscall.Kill(-pid, sig)
	}
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

// Done is closed when the program has exited and its group was killed.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitError describes how the program ended, after Done: nil for exit
// status 0, else an error naming the command, the status (or signal) and
// the last lines of its stderr.
func (p *Process) ExitError() error {
	<-p.done
	<-p.stderrDone
	if p.waitErr == nil {
		return nil
	}
	return fmt.Errorf("%s %s%s", p.describe(), exitStatus(p.waitErr), p.tail.Suffix())
}

// Ended returns an error for a program that ended before it should have:
// its exit status (0 included) and its stderr tail. It waits for Done.
func (p *Process) Ended(what string) error {
	<-p.done
	<-p.stderrDone
	status := "exited with status 0"
	if p.waitErr != nil {
		status = exitStatus(p.waitErr)
	}
	return fmt.Errorf("%s %s %s%s", p.describe(), status, what, p.tail.Suffix())
}

func exitStatus(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "was killed by signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	return "failed: " + err.Error()
}

// stdinGrace is how long Stop waits for a program to exit after its stdin
// closed, before SIGTERM.
const stdinGrace = 50 * time.Millisecond

// Stop ends the program: it closes stdin (a well-behaved MCP server exits
// on that), waits up to 50 ms unless stdin was closed already, sends
// SIGTERM to the process group, waits
// up to the grace period, then sends SIGKILL to the group. It returns when
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
				p.killGroup(syscall.SIGKILL)
				<-p.done
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
