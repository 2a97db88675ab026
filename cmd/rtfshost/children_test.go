//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The children of a process-transport stream die with their host: a host
// killed with SIGKILL (run, or serve) leaves none of them running, neither
// the program it started, nor that program's children, nor a program that
// ignores SIGPIPE (which the closed pipe would not stop), nor, on Linux,
// a descendant that left the program's process group: one that called
// setsid, and a daemon's double fork (whose parent is gone before the host
// dies). The test finds the
// host's descendants in /proc by their parent, remembers each by pid and
// start time, kills the host, and checks that 2 s later none of them is
// alive; whatever is left, it kills itself.

// hostChildren are the programs the test's streams run: the program alone,
// a shell that waits for its own child, and a shell that ignores SIGPIPE.
var hostChildren = []struct {
	command string
	args    []string
}{
	{"sleep", []string{"100"}},
	{"sh", []string{"-c", "sleep 100; echo done"}},
	{"sh", []string{"-c", "trap '' PIPE; while :; do echo tick; sleep 1; done"}},
}

// escapers are programs whose descendants leave their process group: a
// shell that runs sleep 102 in a session of its own (setsid), and one whose
// subshell starts sleep 103 in its own session and exits at once (a
// daemon's double fork), each then waiting in sleep 104.
var escapers = []struct {
	command string
	args    []string
}{
	{"sh", []string{"-c", "setsid sleep 102 & sleep 104"}},
	{"sh", []string{"-c", "(setsid sleep 103 &); sleep 104"}},
}

// TestChildrenDieWithHost runs the check for "rtfshost run" and for
// "rtfshost serve" (this test binary as rtfshost, see serveChild).
func TestChildrenDieWithHost(t *testing.T) {
	if args := os.Getenv(serveChildEnv); args != "" {
		serveChild(args)
		return
	}
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Run("run", func(t *testing.T) {
		dir := t.TempDir()
		file := childrenProgram(t, dir, "", true)
		host := startHost(t, dir, "run", "--data", filepath.Join(dir, "data"), file)
		host.escapers = true
		checkChildrenDie(t, host, nil)
	})
	t.Run("resume", testResumeEndsStaleChildren)
	t.Run("cgroup", testCgroupLeaves)
	t.Run("serve", func(t *testing.T) {
		dir := t.TempDir()
		host := startHost(t, dir, "serve", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"),
			"--allow-command", "sh", "--allow-command", "sleep")
		host.escapers = true
		checkChildrenDie(t, host, func() {
			base := host.serveURL(t)
			sid := rawInitialize(t, base)
			for i, c := range append(hostChildren[:len(hostChildren):len(hostChildren)], escapers...) {
				_, body := post(t, base, sid, map[string]any{"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": map[string]any{
					"name": "mcp.stream.start", "arguments": map[string]any{
						"program": `(defn step [s c m] {:state s})`, "processor": "step", "initial-state": 0, "detach": true,
						"transport": "exec", "command": c.command, "args": c.args,
					}}})
				if strings.Contains(body, `"isError":true`) {
					t.Fatalf("starting %s: %s", c.command, body)
				}
			}
		})
	})
}

// childrenProgram writes a program that starts a stream for each of
// hostChildren (and of escapers, if withEscapers), with the extra start
// keys (RTFS) given.
func childrenProgram(t *testing.T, dir, extra string, withEscapers bool) string {
	t.Helper()
	var prog strings.Builder
	prog.WriteString("(defn step [s c m] {:state s})\n")
	children := hostChildren[:len(hostChildren):len(hostChildren)]
	if withEscapers {
		children = append(children, escapers...)
	}
	for _, c := range children {
		args, _ := json.Marshal(c.args)
		fmt.Fprintf(&prog, "(call :mcp.stream.start {:transport :exec :command %q :args %s :processor step :initial-state 0 %s})\n", c.command, args, extra)
	}
	file := filepath.Join(dir, "children.rtfs")
	if err := os.WriteFile(file, []byte(prog.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// testResumeEndsStaleChildren: a host dies with its streams' programs
// still running (the test kills their keepers while the host is stopped,
// then the host, so that nothing ends the programs); resume, with
// :restart :on-failure, ends those programs before it starts each again,
// so that one copy of each runs, never two.
func testResumeEndsStaleChildren(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	file := childrenProgram(t, dir, ":restart :on-failure", false)
	host := startHost(t, dir, "run", "--data", data, file)
	old := waitForChildren(t, host)
	time.Sleep(100 * time.Millisecond) // the streams' records of their programs commit
	// The host is stopped, so that it does not see its keepers die (it
	// would kill their groups), then the keepers and the host are killed.
	// (A keeper stopped instead would make its group an orphaned group with
	// a stopped member when the host died, which the kernel hangs up.)
	var keepers []int
	for _, p := range old {
		if strings.HasPrefix(p.cmdline, "rtfshost-keeper ") {
			keepers = append(keepers, p.pid)
		}
	}
	if len(keepers) != len(hostChildren) {
		t.Fatalf("want a keeper per program, the host's descendants are %v", old)
	}
	hostPid := host.cmd.Process.Pid
	_ = syscall.Kill(hostPid, syscall.SIGSTOP)
	waitState(t, hostPid, "T")
	for _, pid := range keepers {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitState(t, pid, "Z")
	}
	_ = host.cmd.Process.Kill()
	_ = host.cmd.Wait()
	var orphans []procID
	for _, p := range old {
		if p.alive() && !slices.Contains(keepers, p.pid) {
			orphans = append(orphans, p)
		}
	}
	if os.Geteuid() == 0 && runtime.GOOS == "linux" {
		// As root each keeper is the init of its program's PID namespace:
		// killing it ends the program, so none is left for resume to end.
		// The kernel kills the namespace's processes when the keeper's
		// last thread exits, which can be after its first thread shows Z:
		// they are given the 2 s the other checks give.
		for deadline := time.Now().Add(2 * time.Second); len(orphans) > 0 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			orphans = slices.DeleteFunc(orphans, func(p procID) bool { return !p.alive() })
		}
		if len(orphans) != 0 {
			t.Fatalf("programs outlived their keepers' PID namespaces: %v", orphans)
		}
		return
	}
	if !runsHostChildren(orphans) {
		t.Fatalf("the programs did not outlive their host and keepers, the test cannot check resume: %v", orphans)
	}

	resumed := startHost(t, dir, "resume", "--data", data)
	now := waitForChildren(t, resumed)
	var left []procID
	for _, p := range orphans {
		if p.alive() {
			left = append(left, p)
		}
	}
	if len(left) > 0 {
		t.Fatalf("resume runs %v while its previous host's %v still run", now, left)
	}
	time.Sleep(200 * time.Millisecond) // a second copy would be starting by now
	if again := descendants(resumed.cmd.Process.Pid); !runsHostChildren(again) {
		t.Fatalf("resume runs %v, want one copy of each program", again)
	}
	checkChildrenDie(t, resumed, nil)
}

// testCgroupLeaves: with the PID namespaces turned off, the keepers'
// cgroup leaves alone hold the descendants that left their group: none
// survives a SIGKILL of the host by 2 s. The killed host's leaves are
// left, empty, and the next host to start a program removes them; a
// program that ends normally leaves no leaf. Not as root, the host runs
// without cgroups and says why once.
func testCgroupLeaves(t *testing.T) {
	dir := t.TempDir()
	file := childrenProgram(t, dir, "", true)
	noNamespace := []string{"RTFSHOST_CHILD_PIDNS=off"}
	host := startHostEnv(t, dir, noNamespace, "run", "--data", filepath.Join(dir, "data"), file)
	host.escapers = true
	var leaves []string
	for _, p := range waitForChildren(t, host) {
		if f := strings.Fields(p.cmdline); len(f) > 3 && f[0] == "rtfshost-keeper" {
			if _, leaf, ok := strings.Cut(f[2], ":"); ok {
				leaves = append(leaves, leaf)
			}
		}
	}
	if os.Geteuid() != 0 && len(leaves) == 0 {
		checkChildrenDie(t, host, nil)
		if n := strings.Count(host.errs.String(), "children run without a cgroup of their own"); n != 1 || !strings.Contains(host.errs.String(), "why=") {
			t.Fatalf("not root, the host said %d times that it runs its children without cgroups, want once with why:\n%s", n, host.errs)
		}
		return
	}
	if want := len(hostChildren) + len(escapers); len(leaves) != want {
		t.Fatalf("%d keepers run in a cgroup leaf, want %d: %v", len(leaves), want, leaves)
	}
	checkChildrenDie(t, host, nil)
	if strings.Contains(host.errs.String(), "without a cgroup") { // read once the host is reaped
		t.Errorf("the host runs its children without cgroups:\n%s", host.errs)
	}
	// A process the keeper started after the host's descendants were
	// listed (the ticking shell's next sleep) was killed with its leaf,
	// and may still be exiting: each leaf has 2 s to empty.
	for _, leaf := range leaves {
		var procs []byte
		var err error
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			procs, err = os.ReadFile(filepath.Join(leaf, "cgroup.procs"))
			if err != nil || len(bytes.TrimSpace(procs)) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || len(bytes.TrimSpace(procs)) != 0 {
			t.Errorf("the killed host's leaf %s: processes %q, %v; want it left, empty", leaf, procs, err)
		}
	}

	// The next host sweeps them; its own program's leaf goes when the
	// program ends.
	next := filepath.Join(dir, "next.rtfs")
	if err := os.WriteFile(next, []byte(`(defn step [s c m] {:state s})
(call :mcp.stream.start {:transport :exec :command "echo" :args ["hi"] :processor step :initial-state 0})
`), 0o600); err != nil {
		t.Fatal(err)
	}
	h2 := startHostEnv(t, dir, noNamespace, "run", "--data", filepath.Join(dir, "data2"), next)
	done := make(chan error, 1)
	go func() { done <- h2.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the next host: %v\n%s", err, h2.errs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the next host did not end")
	}
	for _, leaf := range leaves {
		if _, err := os.Stat(leaf); err == nil {
			t.Errorf("the killed host's leaf %s is left after the next host started a program", leaf)
		}
	}
	ownLeaves, _ := filepath.Glob(filepath.Join(filepath.Dir(leaves[0]), fmt.Sprintf("rtfshost-*-%d-*", h2.cmd.Process.Pid)))
	if len(ownLeaves) != 0 {
		t.Errorf("the next host left its leaves %v", ownLeaves)
	}
}

// waitState waits until process pid is in state (a letter of
// /proc/PID/stat).
func waitState(t *testing.T, pid int, state string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, _, st, _, _ := readStat(pid); st == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not reach state %s", pid, state)
		}
		time.Sleep(time.Millisecond)
	}
}

// aHost is a host process under test and its stdout's lines.
type aHost struct {
	cmd   *exec.Cmd
	lines chan string
	errs  *bytes.Buffer
	// escapers says the host runs the escapers too.
	escapers bool
}

// startHost starts this test binary as "rtfshost <args>" in dir.
func startHost(t *testing.T, dir string, args ...string) *aHost {
	t.Helper()
	return startHostEnv(t, dir, nil, args...)
}

// startHostEnv starts this test binary as "rtfshost <args>" in dir, with
// the environment variables env added.
func startHostEnv(t *testing.T, dir string, env []string, args ...string) *aHost {
	t.Helper()
	argsJSON, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildrenDieWithHost$")
	cmd.Dir = dir
	cmd.Env = append(append(childEnv(), serveChildEnv+"="+string(argsJSON)), env...)
	h := &aHost{cmd: cmd, lines: make(chan string, 64), errs: new(bytes.Buffer)}
	cmd.Stderr = h.errs
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(h.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case h.lines <- sc.Text():
			default: // nobody reads: drop
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return h
}

// serveURL waits for serve's first line and returns its MCP endpoint.
func (h *aHost) serveURL(t *testing.T) string {
	t.Helper()
	select {
	case line := <-h.lines:
		m := regexp.MustCompile(`listening on (http://[^ ]+)/mcp `).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("serve's first line %q\n%s", line, h.errs)
		}
		return m[1] + "/mcp"
	case <-time.After(30 * time.Second):
		t.Fatalf("serve printed nothing\n%s", h.errs)
	}
	return ""
}

// checkChildrenDie calls start (if any), waits until the host runs the
// hostChildren, kills the host with SIGKILL and checks that none of its
// descendants survives it by 2 s.
func checkChildrenDie(t *testing.T, h *aHost, start func()) {
	t.Helper()
	if start != nil {
		start()
	}
	procs := waitForChildren(t, h)
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
	killed := time.Now()
	var left []procID
	for {
		left = left[:0]
		for _, p := range procs {
			if p.alive() {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Since(killed) > 2*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Fatalf("2 s after the host's SIGKILL, %d of its %d descendants still run: %v", len(left), len(procs), left)
	}
	t.Logf("the host's %d descendants %v were gone %v after its SIGKILL", len(procs), procs, time.Since(killed).Round(time.Millisecond))
}

// waitForChildren waits until the host runs the hostChildren and returns
// its descendants, which the test's cleanup kills if they still run.
func waitForChildren(t *testing.T, h *aHost) []procID {
	t.Helper()
	var procs []procID
	deadline := time.Now().Add(30 * time.Second)
	for {
		procs = descendants(h.cmd.Process.Pid)
		if runsHostChildren(procs) && (!h.escapers || runsEscapers(procs)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the host does not run the test's children; its descendants: %v\n%s", procs, h.errs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() { // whatever the outcome, nothing is left behind
		for _, p := range procs {
			if p.alive() {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
	})
	return procs
}

// runsEscapers reports whether procs hold the escapers' descendants that
// left their group (sleep 102 and sleep 103) and the escapers themselves
// (two sleep 104).
func runsEscapers(procs []procID) bool {
	n := map[string]int{}
	for _, p := range procs {
		n[p.cmdline]++
	}
	return n["sleep 102"] == 1 && n["sleep 103"] == 1 && n["sleep 104"] == 2
}

// runsHostChildren reports whether procs hold every program of hostChildren
// (the two sleep 100 and the shell that ignores SIGPIPE).
func runsHostChildren(procs []procID) bool {
	sleeps, loops := 0, 0
	for _, p := range procs {
		switch {
		case p.cmdline == "sleep 100":
			sleeps++
		case strings.HasPrefix(p.cmdline, "sh -c trap '' PIPE"):
			loops++
		}
	}
	return sleeps == 2 && loops == 1
}

// procID is a process, told from a later one with the same pid by its start
// time.
type procID struct {
	pid     int
	start   string // field 22 of /proc/PID/stat
	cmdline string
}

func (p procID) String() string { return fmt.Sprintf("%d(%s)", p.pid, p.cmdline) }

// alive reports whether the process still runs (a zombie does not).
func (p procID) alive() bool {
	_, _, state, start, ok := readStat(p.pid)
	return ok && start == p.start && state != "Z" && state != "X"
}

// readStat reads a process's parent, group, state and start time.
func readStat(pid int) (ppid, pgrp int, state, start string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, "", "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, "", "", false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return 0, 0, "", "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	pgrp, _ = strconv.Atoi(f[2])
	return ppid, pgrp, f[0], f[19], true
}

// descendants lists the live descendants of pid.
func descendants(pid int) []procID {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	children := map[int][]int{}
	for _, d := range dirs {
		p, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if ppid, _, _, _, ok := readStat(p); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []procID
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			_, _, state, start, ok := readStat(c)
			if !ok || state == "Z" {
				continue
			}
			cl, _ := os.ReadFile("/proc/" + strconv.Itoa(c) + "/cmdline")
			out = append(out, procID{pid: c, start: start, cmdline: strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))})
			queue = append(queue, c)
		}
		queue = queue[1:]
	}
	return out
}
