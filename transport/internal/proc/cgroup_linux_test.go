package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// requireCgroups returns the host's cgroup home. As root it must exist:
// the test fails, naming why, when no leaf can be made. Otherwise it
// returns nil after checking that the host says why it runs its children
// without cgroups.
func requireCgroups(t *testing.T) *cgroupHome {
	t.Helper()
	home := hostCgroups(nil)
	if os.Geteuid() == 0 {
		if home == nil {
			t.Fatalf("running as root, the host cannot make a cgroup leaf for its children: %s", cgroups.why)
		}
		return home
	}
	if home != nil {
		return home // a delegated cgroup
	}
	_, err := findCgroupHome("")
	var buf bytes.Buffer
	logCgroups(slog.New(slog.NewTextHandler(&buf, nil)), nil, err.Error(), "")
	if !strings.Contains(buf.String(), "children run without a cgroup of their own") || !strings.Contains(buf.String(), err.Error()) {
		t.Errorf("the fallback line %q does not say why: %v", buf.String(), err)
	}
	return nil
}

// The host says once, in one line, whether its children run in cgroups,
// and why not: RTFSHOST_CHILD_CGROUP=off, a directory that is no cgroup,
// or (not root) no leaf that can be made.
func TestCgroupHomeAndItsLogLine(t *testing.T) {
	home := requireCgroups(t)
	for dir, want := range map[string]string{
		"off":       cgroupEnv + "=off",
		t.TempDir(): "not in a mounted cgroup2, v1 freezer or v1 pids hierarchy",
		"relative":  "not an absolute path",
	} {
		h, err := findCgroupHome(dir)
		if h != nil || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%s: home %v, error %v; want %q", cgroupEnv, dir, h, err, want)
			continue
		}
		var buf bytes.Buffer
		logCgroups(slog.New(slog.NewTextHandler(&buf, nil)), nil, err.Error(), "")
		if lines := strings.Count(buf.String(), "\n"); lines != 1 || !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), want) {
			t.Errorf("%s=%s: logged %q, want one warning naming %q", cgroupEnv, dir, buf.String(), want)
		}
	}
	if home == nil {
		return
	}
	// A documented parent: the host's own directory named explicitly.
	h, err := findCgroupHome(home.dir)
	if err != nil || h.dir != home.dir || h.kind != home.kind {
		t.Errorf("%s=%s: %+v, %v; want %+v", cgroupEnv, home.dir, h, err, home)
	}
	var buf bytes.Buffer
	logCgroups(slog.New(slog.NewTextHandler(&buf, nil)), home, "", "")
	if !strings.Contains(buf.String(), "children run in a cgroup of their own") || !strings.Contains(buf.String(), home.dir) {
		t.Errorf("logged %q", buf.String())
	}
}

// withoutPIDNamespaces turns the keepers' PID namespaces off for the test:
// what holds a descendant then is the cgroup alone.
func withoutPIDNamespaces(t *testing.T) {
	was := pidNamespaces.Swap(false)
	t.Cleanup(func() { pidNamespaces.Store(was) })
}

// inLeaf reports whether process pid is in the cgroup leaf l.
func inLeaf(l *leaf, pid int) bool { return slices.Contains(l.members(), pid) }

// Without a PID namespace, a descendant that calls setsid and kills its
// keeper is held by the keeper's cgroup leaf: the host kills the leaf when
// it sees the keeper die, and removes it, so that the descendant is dead
// when the program's end is reported, nothing is left 2 s after the
// stream ends, and no leaf is left behind. (The descendant writes its pid
// to a file first, so that the test knows it was in the leaf.)
func TestCgroupHoldsTheEscaper(t *testing.T) {
	if requireCgroups(t) == nil {
		return
	}
	withoutPIDNamespaces(t)
	mark := 37000 + os.Getpid()%1000
	pidFile := filepath.Join(t.TempDir(), "escaper")
	script := fmt.Sprintf("setsid sh -c 'echo $$ > %s; sleep 1; kill -9 $0; exec sleep %d' $PPID & exec sleep %d", pidFile, mark, mark+1)
	p, err := Start(&Config{Command: "sh", Args: []string{"-c", script}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if p.leaf == nil {
		t.Fatalf("the keeper runs in no cgroup: %s", cgroups.why)
	}
	var escaper int
	for deadline := time.Now().Add(10 * time.Second); escaper == 0; time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(pidFile)
		escaper, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if time.Now().After(deadline) {
			t.Fatal("the escaper never wrote its pid")
		}
	}
	st, _ := readStat(escaper)
	if !inLeaf(p.leaf, escaper) {
		t.Errorf("the escaper %d is not in the keeper's leaf %s: %v", escaper, p.leaf.dir, p.leaf.members())
	}
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the keeper was not killed")
	}
	if ownerAlive(escaper, st.start) {
		t.Errorf("the escaper %d, which killed its keeper, runs after the program's end was reported", escaper)
		_ = syscall.Kill(escaper, syscall.SIGKILL)
	}
	if err := p.ExitError(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("ExitError %v, want the keeper's death", err)
	}
	p.Stop()
	noSurvivor(t, mark, "the stream ended")
	if pathExists(p.leaf.dir) {
		t.Errorf("the leaf %s is left after the stream ended", p.leaf.dir)
	}
}

// A program that ends normally leaves no leaf behind, and its exit status
// is reported as without a cgroup.
func TestNoLeafAfterANormalEnd(t *testing.T) {
	if requireCgroups(t) == nil {
		return
	}
	p, err := Start(&Config{Command: "sh", Args: []string{"-c", "echo hi; exit 4"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	p.Stop()
	if p.leaf == nil {
		t.Fatalf("the keeper ran in no cgroup: %s", cgroups.why)
	}
	if err := p.ExitError(); err == nil || !strings.Contains(err.Error(), "exited with status 4") {
		t.Errorf("ExitError %v", err)
	}
	if pathExists(p.leaf.dir) {
		t.Errorf("the leaf %s is left after the program ended", p.leaf.dir)
	}
}

// Without a PID namespace, when its host is killed with SIGKILL, the
// keeper kills its whole leaf: a descendant that left its session is gone
// 2 s later (the keeper kills no descendant one by one when it has a
// leaf). The leaf itself is left, empty, for the next host to remove.
func TestCgroupKillOnHostDeath(t *testing.T) {
	home := requireCgroups(t)
	if home == nil {
		return
	}
	mark := 38000 + os.Getpid()%1000
	script := fmt.Sprintf("setsid sh -c 'exec sleep %d' & exec sleep %d", mark, mark+1)
	cmd, leafDir := startTestHost(t, script, pidnsEnv+"=off")
	waitSleeper(t, mark)
	if home.kind == cgroupV2 && !inLeaf(&leaf{kind: home.kind, dir: leafDir}, sleepers(mark)[0]) {
		t.Errorf("the escaper is not in the leaf %s", leafDir)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	noSurvivor(t, mark, "the host was killed")
	if !pathExists(leafDir) {
		t.Fatalf("the leaf %s of the killed host is gone: nothing is left to sweep", leafDir)
	}
	n, err := sweep(home)
	if err != nil || n < 1 || pathExists(leafDir) {
		t.Errorf("sweep removed %d leaves (%v); the killed host's %s is left: %v", n, err, leafDir, pathExists(leafDir))
	}
}

// startTestHost starts this test binary as a host (hostMain) that runs
// script under a keeper, with env added, and returns it and its keeper's
// leaf directory.
func startTestHost(t *testing.T, script string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), hostEnv+"=escaper", "RTFSHOST_PROC_TEST_SCRIPT="+script), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "group" {
		t.Fatalf("the host said %q", line)
	}
	_, dir, ok := strings.Cut(f[2], ":")
	if !ok && hostCgroups(nil) != nil {
		t.Fatalf("the host's keeper runs in no cgroup: %q", line)
	}
	return cmd, dir
}

// The sweep removes the leaves of hosts that are gone, killing what they
// hold, and never touches a leaf of a live host, of another pid
// namespace, or of another naming.
func TestSweep(t *testing.T) {
	home := requireCgroups(t)
	if home == nil {
		return
	}
	ns, err := pidNamespace()
	if err != nil {
		t.Fatal(err)
	}
	self, _ := readStat(os.Getpid())
	// A live owner: a process of this test.
	owner := exec.Command("sleep", "300")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = owner.Process.Kill()
		_ = owner.Wait()
	})
	ownerStat, _ := readStat(owner.Process.Pid)
	names := map[string]string{
		// This host's pid, another start time: a host that is gone.
		"gone": fmt.Sprintf("rtfshost-%d-%d-%d-1", ns, os.Getpid(), self.start-1),
		"live": fmt.Sprintf("rtfshost-%d-%d-%d-1", ns, owner.Process.Pid, ownerStat.start),
		"ns":   fmt.Sprintf("rtfshost-%d-%d-%d-1", ns+1, os.Getpid(), self.start-1),
		"else": "rtfshost-sweep-test-" + strconv.Itoa(os.Getpid()),
	}
	leaves := map[string]*leaf{}
	for k, name := range names {
		l := &leaf{kind: home.kind, dir: filepath.Join(home.dir, name)}
		if err := os.Mkdir(l.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		leaves[k] = l
		t.Cleanup(func() { _ = l.end() })
	}
	// Each of the gone and the live host's leaves holds a process.
	held := map[string]*exec.Cmd{}
	for _, k := range []string{"gone", "live"} {
		c := exec.Command("sleep", "301")
		c.SysProcAttr = &syscall.SysProcAttr{}
		f, err := intoLeaf(c.SysProcAttr, leaves[k])
		if err != nil {
			t.Fatal(err)
		}
		err = c.Start()
		if f != nil {
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		if home.kind != cgroupV2 {
			if err := writeCgroup(leaves[k].dir, "cgroup.procs", strconv.Itoa(c.Process.Pid)); err != nil {
				t.Fatal(err)
			}
		}
		held[k] = c
		t.Cleanup(func() {
			_ = c.Process.Kill()
			_ = c.Wait()
		})
	}
	gone := make(chan error, 1)
	go func() { gone <- held["gone"].Wait() }()
	n, err := sweep(home)
	if err != nil || n < 1 {
		t.Errorf("sweep: %d leaves removed, %v", n, err)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Error("the process in the gone host's leaf still runs after the sweep")
	}
	for k, l := range leaves {
		if exists := pathExists(l.dir); exists != (k != "gone") {
			t.Errorf("after the sweep, the %s leaf %s exists: %v", k, l.dir, exists)
		}
	}
	if !inLeaf(leaves["live"], held["live"].Process.Pid) {
		t.Errorf("the live host's leaf lost its process: %v", leaves["live"].members())
	}
}

// The v1 fallbacks: a freezer or pids leaf that the keeper joins before it
// starts its program holds a descendant that left its session and killed
// the keeper, and is killed and removed when the keeper dies. Where the
// machine mounts no such hierarchy (a cgroup2-only system), the test
// mounts one itself, as root, for its run (v1Home).
func TestCgroupV1Fallback(t *testing.T) {
	if requireCgroups(t) == nil {
		return
	}
	withoutPIDNamespaces(t)
	for i, kind := range []cgroupKind{cgroupFreezer, cgroupPids} {
		t.Run(kind.String(), func(t *testing.T) {
			home := v1Home(t, kind)
			l, err := home.next()
			if err != nil {
				t.Fatal(err)
			}
			mark := 39000 + 2*i + os.Getpid()%1000*4
			cfg := &Config{Command: "sh", Args: []string{"-c", escaperScript(mark)}}
			p := &Process{cfg: cfg, opts: Options{Grace: DefaultGrace}, cmd: exec.Command("sh", "-c", escaperScript(mark)),
				tail: NewTail(20, 4096), done: make(chan struct{}), stderrDone: make(chan struct{})}
			p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = nil, nil, nil
			self, err := selfExecutable()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.launch(self, false, l); err != nil {
				_ = l.remove()
				t.Fatal(err)
			}
			if !inLeaf(l, p.cmd.Process.Pid) {
				t.Errorf("the keeper %d is not in its leaf %s: %v", p.cmd.Process.Pid, l.dir, l.members())
			}
			waitSleeper(t, mark)
			if s := sleepers(mark); len(s) != 1 || !inLeaf(l, s[0]) {
				t.Errorf("the escaper %v is not in the leaf %s: %v", s, l.dir, l.members())
			}
			p.stderr, _ = os.Open(os.DevNull)
			go p.readStderr()
			p.wait()
			noSurvivor(t, mark, "the keeper died")
			if pathExists(l.dir) {
				t.Errorf("the leaf %s is left", l.dir)
			}
		})
	}
}

// v1Home returns a home in the cgroup v1 hierarchy of kind (freezer or
// pids) that this process is in. When none is mounted, or the mounted one
// takes no leaf (read-only), the test mounts one on a temporary directory,
// as root, and unmounts it when it ends: a cgroup2-only system still has
// the v1 controllers that cgroup2 does not use (the v1 freezer always:
// cgroup2 freezes without a controller). When that mount fails the test
// fails, saying what is missing.
func v1Home(t *testing.T, kind cgroupKind) *cgroupHome {
	t.Helper()
	home, err := mountedV1Home(kind)
	if home != nil {
		return home
	}
	mounted := fmt.Sprintf("no %s hierarchy is mounted", kind)
	if err != nil {
		mounted = fmt.Sprintf("the mounted %s hierarchy takes no leaf (%v)", kind, err)
	}
	name := map[cgroupKind]string{cgroupFreezer: "freezer", cgroupPids: "pids"}[kind]
	if os.Geteuid() != 0 {
		t.Fatalf("%s, and only root can mount one for the test", mounted)
	}
	dir := t.TempDir()
	if err := unix.Mount("cgroup", dir, "cgroup", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, name); err != nil {
		var why string
		switch {
		case errors.Is(err, unix.EPERM):
			why = "this root may not mount (no CAP_SYS_ADMIN, as in an unprivileged container)"
		case errors.Is(err, unix.EBUSY):
			why = "the controller is bound to another hierarchy: cgroup2 uses it (see cgroup.subtree_control at its root)"
		default:
			why = fmt.Sprintf("the kernel has no v1 %s controller to mount: it needs CONFIG_CGROUP_%s and no cgroup_no_v1= on its command line", name, strings.ToUpper(name))
		}
		t.Fatalf("%s, and none can be mounted on %s: %v: %s (/proc/cgroups: %s)", mounted, dir, err, why, procCgroupsLine(name))
	}
	t.Logf("%s: the test mounted one on %s", mounted, dir)
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting the test's %s hierarchy at %s: %v", kind, dir, err)
		}
	})
	home, err = mountedV1Home(kind)
	if home == nil {
		t.Fatalf("the %s hierarchy mounted on %s gives no home (%v)", kind, dir, err)
	}
	return home
}

// mountedV1Home is the home in this process's cgroup of the mounted v1
// hierarchy of kind; nil and no error when none is mounted.
func mountedV1Home(kind cgroupKind) (*cgroupHome, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, m := range mounts {
		if rel, ok := strings.CutPrefix(own[kind], m.root); m.kind == kind && ok {
			home, err := findCgroupHome(filepath.Join(m.point, rel))
			if err == nil {
				return home, nil
			}
			errs = append(errs, err)
		}
	}
	return nil, errors.Join(errs...)
}

// procCgroupsLine is the line of /proc/cgroups for the v1 controller name
// (its hierarchy, number of cgroups, enabled), or why there is none.
func procCgroupsLine(name string) string {
	b, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return err.Error()
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == name {
			return fmt.Sprintf("%s hierarchy %s, %s cgroups, enabled %s", f[0], f[1], f[2], f[3])
		}
	}
	return "no " + name + " controller"
}

// withoutCgroups starts the test's programs without cgroup leaves: the
// keeper alone then holds them.
func withoutCgroups(t *testing.T) {
	hostCgroups(nil) // found, so that it is not found again
	was := cgroups.home.Swap(nil)
	t.Cleanup(func() { cgroups.home.Store(was) })
}

// With neither a PID namespace nor a cgroup, the keeper alone ends what
// left the program's group: when the program ends by itself, and when
// Stop ends a program that ignores SIGTERM (the keeper, told that the
// host lets go, kills what it holds). Neither leaves a descendant that
// would hold the program's stderr open, so Stop returns.
func TestKeeperAloneEndsWhatLeftTheGroup(t *testing.T) {
	withoutPIDNamespaces(t)
	withoutCgroups(t)
	for i, script := range []string{
		"setsid sh -c 'exec sleep %d' & sleep 0.3",
		"trap '' TERM; setsid sh -c 'exec sleep %d' & while :; do sleep 0.05; done",
	} {
		mark := 40000 + 2*i + os.Getpid()%1000*4
		p, err := Start(&Config{Command: "sh", Args: []string{"-c", fmt.Sprintf(script, mark)}}, Options{Grace: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		waitSleeper(t, mark)
		if p.leaf != nil {
			t.Errorf("%s: the keeper runs in the cgroup %s", script, p.leaf.dir)
		}
		if i == 0 {
			<-p.Done()
			if left := sleepers(mark); len(left) > 0 {
				t.Errorf("%s: the descendant %v that left the group runs after the program's end was reported", script, left)
			}
		}
		stopped := make(chan struct{})
		go func() { p.Stop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			for _, pid := range sleepers(mark) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			<-stopped
			t.Errorf("%s: Stop did not return while the descendant that left the group ran", script)
		}
		noSurvivor(t, mark, "the stream ended")
	}
}

// The hierarchies are found in mountinfo by filesystem type and, for v1,
// super options, with optional fields and escaped paths.
func TestParseMountinfo(t *testing.T) {
	in := `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime shared:11 - cgroup cgroup rw,freezer
39 31 0:36 /ctr /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,nsdelegate,pids
41 31 0:38 /a\040b /sys/fs/cgroup/uni\040fied rw,relatime shared:15 master:2 - cgroup2 cgroup2 rw
42 31 0:39 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
`
	got, err := parseMountinfo(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []cgroupMount{
		{kind: cgroupFreezer, point: "/sys/fs/cgroup/freezer", root: "/"},
		{kind: cgroupPids, point: "/sys/fs/cgroup/pids", root: "/ctr"},
		{kind: cgroupV2, point: "/sys/fs/cgroup/uni fied", root: "/a b"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func pathExists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}
