package proc

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// The host's death kills the program's whole group (a shell, its child, a
// child that ignores SIGTERM), even when the host's thread that started it
// exited long before; the thread's exit alone kills nothing. (Linux: the
// parent-death signal is Linux's, and /proc tells a zombie, which the
// group's new parent reaps when it gets to it, from a live process.)
func TestHostDeathKillsTheGroup(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hostEnv+"=thread")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	var pgid int
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatal("the host said nothing")
	}
	if _, err := fmt.Sscanf(sc.Text(), "group %d", &pgid); err != nil {
		t.Fatalf("host: %q", sc.Text())
	}
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	if !sc.Scan() || sc.Text() != "thread gone" {
		t.Fatalf("host: %q", sc.Text())
	}
	time.Sleep(200 * time.Millisecond) // time for a parent-death signal to act
	if n := len(liveInGroup(pgid)); n < 4 {
		t.Fatalf("%d processes of the group run, want the keeper, the shell, its sleep and the shell ignoring SIGTERM: the group died with the thread that started it, its host alive", n)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	for len(liveInGroup(pgid)) > 0 {
		if time.Since(killed) > 2*time.Second {
			t.Fatalf("group %d still has processes 2 s after its host's SIGKILL", pgid)
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("the group was gone %v after its host's SIGKILL", time.Since(killed))
}

// liveInGroup lists the live processes (zombies excluded) of group pgid.
func liveInGroup(pgid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.pgrp == pgid && st.state != 'Z' && st.state != 'X' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// endGroup ends a stale group: all of it when its leader still runs, the
// rest of it when its leader is gone; it touches nothing of a group
// recorded with another start time (the pid went to a later process) or
// another boot.
func TestEndGroup(t *testing.T) {
	cases := []struct {
		name       string
		leaderGone bool
		change     func(*transport.ChildProcess)
		ended      bool
	}{
		{name: "alive", ended: true},
		{name: "leader gone", leaderGone: true, ended: true},
		{name: "recycled pid", change: func(c *transport.ChildProcess) { c.Start++ }},
		{name: "other boot", change: func(c *transport.ChildProcess) { c.Boot = "another-boot" }},
		{name: "start unknown", change: func(c *transport.ChildProcess) { c.Start = 0 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A shell that starts a background sleep, then becomes a sleep.
			cmd := exec.Command("sh", "-c", "sleep 100 & exec sleep 100")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pgid := cmd.Process.Pid
			c := identify(pgid)
			reaped := make(chan struct{})
			go func() { _ = cmd.Wait(); close(reaped) }()
			t.Cleanup(func() {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				<-reaped
			})
			for deadline := time.Now().Add(5 * time.Second); len(liveInGroup(pgid)) < 2; {
				if time.Now().After(deadline) {
					t.Fatal("the group did not start")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if c.Start == 0 || c.Boot == "" {
				t.Fatalf("identify(%d) = %+v", pgid, c)
			}
			want := 0
			if tc.leaderGone {
				_ = syscall.Kill(pgid, syscall.SIGKILL)
				<-reaped
				want = 1
			}
			if tc.change != nil {
				tc.change(&c)
			}
			if err := endGroup(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			n := len(liveInGroup(pgid))
			switch {
			case tc.ended && n != 0:
				t.Fatalf("%d processes of the group still run", n)
			case !tc.ended && n != 2-want:
				t.Fatalf("%d processes of the group run, want 2: endGroup killed what it did not start", n)
			}
		})
	}
}
