//go:build unix

package proc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// recorder is a transport.ChildObserver that records what it is told.
type recorder struct {
	started, exited chan transport.ChildProcess
}

func newRecorder() *recorder {
	return &recorder{started: make(chan transport.ChildProcess, 4), exited: make(chan transport.ChildProcess, 4)}
}

func (r *recorder) ChildStarted(c transport.ChildProcess) { r.started <- c }
func (r *recorder) ChildExited(c transport.ChildProcess)  { r.exited <- c }

// The keeper passes on how the program ended: its exit status, the signal
// that killed it, and its output; the observer hears of the group's start
// and end, with the group's id.
func TestKeeperReportsTheProgramsEnd(t *testing.T) {
	cases := []struct {
		script, exit string
	}{
		{"echo hello", ""},
		{"echo hello; exit 3", "exited with status 3"},
		{"echo hello; kill -TERM $$", "was killed by signal terminated"},
		{"echo hello; kill -USR1 $$", "was killed by signal user defined signal 1"},
	}
	for _, tc := range cases {
		obs := newRecorder()
		p, err := Start(&Config{Command: "sh", Args: []string{"-c", tc.script}}, Options{Observer: obs})
		if err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(p.Stdout).ReadString('\n')
		<-p.Done()
		err = p.ExitError()
		p.Stop()
		switch {
		case line != "hello\n":
			t.Errorf("%s: stdout %q", tc.script, line)
		case tc.exit == "" && err != nil, tc.exit != "" && (err == nil || !strings.Contains(err.Error(), tc.exit)):
			t.Errorf("%s: ExitError %v, want %q", tc.script, err, tc.exit)
		}
		if s, e := <-obs.started, <-obs.exited; s != p.ID() || e != p.ID() || s.PID <= 0 {
			t.Errorf("%s: observed start %+v and end %+v of group %+v", tc.script, s, e, p.ID())
		}
	}
}

// A program that cannot be started is a start error naming the command and
// the cause, whether the host finds that out (not in PATH) or the keeper
// does (not executable).
func TestStartErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(file, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]string{
		"no-such-program-here": "executable file not found",
		file:                   "permission denied",
	} {
		_, err := Start(&Config{Command: cmd}, Options{StreamID: "s"})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), cmd) || !transport.IsPermanent(err) {
			t.Errorf("Start(%s): %v, want a permanent error naming it and %q", cmd, err, want)
		}
	}
}

// A program whose stdout closes before it ends gives end of file at once:
// the keeper does not hold the pipe.
func TestKeeperLetsGoOfThePipes(t *testing.T) {
	p, err := Start(&Config{Command: "sh", Args: []string{"-c", "exec >&-; sleep 100"}}, Options{Grace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	eof := make(chan error, 1)
	go func() {
		_, err := p.Stdout.Read(make([]byte, 1))
		eof <- err
	}()
	select {
	case err := <-eof:
		if err == nil {
			t.Fatal("read a byte from a closed stdout")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no end of file on the program's closed stdout: someone else holds the pipe")
	}
}

// hostMain is the host of TestHostDeathKillsTheGroup: on a goroutine that
// locks its thread and ends without unlocking it (Go then ends the thread),
// it starts a shell that starts a sleep and a shell ignoring SIGTERM; it
// prints "group <pgid>", then "thread gone", and waits to be killed.
func hostMain(mode string) int {
	if mode == "escaper" { // TestEscaperDiesWithHost
		p, err := Start(&Config{Command: "sh", Args: []string{"-c", os.Getenv("RTFSHOST_PROC_TEST_SCRIPT")}}, Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("group %d %s\n", p.ID().PID, p.leaf.keeperArg())
		select {}
	}
	if mode != "thread" {
		fmt.Fprintln(os.Stderr, "unknown host mode", mode)
		return 2
	}
	started := make(chan *Process)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		p, err := Start(&Config{Command: "sh", Args: []string{"-c", "sleep 100 & sh -c 'trap \"\" TERM; sleep 100' & wait"}}, Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		started <- p
	}()
	p := <-started
	fmt.Printf("group %d\n", p.ID().PID)
	time.Sleep(100 * time.Millisecond) // the locked thread has ended
	fmt.Println("thread gone")
	select {}
}

// BenchmarkStart is the cost of running a program that does nothing (true)
// under its keeper, against starting it directly with os/exec as before
// the keeper: the keeper is one more process start and Go runtime start.
func BenchmarkStart(b *testing.B) {
	b.Run("keeper", func(b *testing.B) {
		for b.Loop() {
			p, err := Start(&Config{Command: "true"}, Options{})
			if err != nil {
				b.Fatal(err)
			}
			<-p.Done()
			p.Stop()
		}
	})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
