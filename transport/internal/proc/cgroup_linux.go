package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// On Linux, when the host can make one, each program's keeper starts in a
// cgroup of its own, a leaf, and so do the program and every descendant,
// whatever they do (setsid, double fork, killing the keeper): a process
// leaves its process group at will, but its cgroup only by writing to
// another cgroup's cgroup.procs, which needs write access there. When the
// keeper exits, for whatever reason, the host kills every process of the
// leaf and removes it (Process.wait); when the host dies, the keeper kills
// its leaf (keeper_unix.go). Where the keeper is also the init of a PID
// namespace (keeper_linux.go) both hold the program; without the namespace
// (no privilege, or RTFSHOST_CHILD_PIDNS=off) the leaf alone holds a
// descendant that killed its keeper, killed by the host when it sees the
// keeper die.
//
// cgroup v2 is preferred: the host makes a leaf under its own cgroup2
// directory (or under the directory RTFSHOST_CHILD_CGROUP names) and starts
// the keeper directly into it (clone3 with CLONE_INTO_CGROUP, through
// SysProcAttr.UseCgroupFD), and the leaf is killed by writing 1 to its
// cgroup.kill (Linux 5.14). Without a usable cgroup2, the leaf is made in
// cgroup v1's freezer hierarchy, else its pids hierarchy: v1 has no
// clone-into-cgroup, so the keeper moves itself into the leaf (writing 0
// to its cgroup.procs) before it starts the program; a freezer leaf is
// killed by freezing it, killing every member and thawing it (a frozen
// process takes its SIGKILL only once thawed), a pids leaf by setting
// pids.max to 0, so that no member forks, and killing every member until
// none is left.
//
// A leaf is named rtfshost-<pid namespace>-<host pid>-<host start>-<n>:
// the host's pid namespace (the inode of /proc/self/ns/pid), pid and start
// time (clock ticks since boot) say whose it is. A host killed with SIGKILL
// leaves its leaves behind (its keepers kill their programs, but nothing
// removes the directories); the first host of the machine to start a
// process after it removes each leaf whose owner is gone, killing what is
// left in it, and never touches a leaf of a host that lives or of another
// pid namespace (sweep).
//
// Where no leaf can be made (not root and no delegated cgroup, a
// read-only cgroupfs, no cgroup.kill, a start refused with EBUSY...), the
// host logs why, once, and the keeper holds the program alone, as
// docs/security.md describes. No stream fails for want of a cgroup.

// cgroupEnv names the directory under which the host makes its leaves, or
// "off" to make none.
const cgroupEnv = "RTFSHOST_CHILD_CGROUP"

// cgroupKind is the kind of hierarchy a leaf is in.
type cgroupKind int

const (
	cgroupV2      cgroupKind = iota + 1 // cgroup2: cgroup.kill, clone into
	cgroupFreezer                       // v1 freezer: freeze, kill, thaw
	cgroupPids                          // v1 pids: pids.max 0, kill until empty
)

func (k cgroupKind) String() string {
	return map[cgroupKind]string{cgroupV2: "cgroup2", cgroupFreezer: "cgroup v1 freezer", cgroupPids: "cgroup v1 pids"}[k]
}

// A cgroupHome is the directory where the host makes its leaves. It is
// read-only once found.
type cgroupHome struct {
	kind   cgroupKind
	dir    string // the parent of the leaves
	prefix string // rtfshost-<pidns>-<pid>-<start>-
}

// cgroups is the host's cgroup home, found once per process (a property
// of the process: its privileges and its place in the hierarchy).
var cgroups struct {
	once   sync.Once
	home   atomic.Pointer[cgroupHome] // nil: no cgroups
	mu     sync.Mutex
	why    string // why there are none
	swept  string // what the sweep did, for the log
	logged bool   // the host said whether it uses them
	seq    atomic.Uint64
}

// hostCgroups returns the host's cgroup home, or nil when leaves cannot be
// made. The first call finds it and sweeps leftover leaves; the first
// call with a logger logs, once, whether children run in leaves and, if
// not, why.
func hostCgroups(log *slog.Logger) *cgroupHome {
	cgroups.once.Do(func() {
		home, err := findCgroupHome(os.Getenv(cgroupEnv))
		if err != nil {
			cgroups.why = err.Error()
			return
		}
		cgroups.home.Store(home)
		if n, err := sweep(home); n > 0 || err != nil {
			cgroups.swept = fmt.Sprintf("%d leaves of hosts that are gone removed", n)
			if err != nil {
				cgroups.swept += fmt.Sprintf(" (%v)", err)
			}
		}
	})
	home := cgroups.home.Load()
	if log != nil {
		cgroups.mu.Lock()
		if !cgroups.logged {
			cgroups.logged = true
			logCgroups(log, home, cgroups.why, cgroups.swept)
		}
		cgroups.mu.Unlock()
	}
	return home
}

// logCgroups logs the one line that says whether the host runs its
// children in cgroups: where, or why not.
func logCgroups(log *slog.Logger, home *cgroupHome, why, swept string) {
	if home == nil {
		log.Warn("children run without a cgroup of their own: their keeper alone holds them (docs/security.md)", "why", why)
		return
	}
	args := []any{"kind", home.kind.String(), "under", home.dir}
	if swept != "" {
		args = append(args, "sweep", swept)
	}
	log.Info("children run in a cgroup of their own", args...)
}

// dropCgroups stops the use of cgroups for the rest of the process, after
// making or starting into a leaf failed with err, and says why (now, or
// in the line the first logger logs).
func dropCgroups(log *slog.Logger, err error) {
	if cgroups.home.Swap(nil) == nil {
		return
	}
	why := "starting a program into its cgroup failed: " + err.Error()
	cgroups.mu.Lock()
	defer cgroups.mu.Unlock()
	cgroups.why = why
	if log != nil {
		cgroups.logged = true
		logCgroups(log, nil, why, "")
	}
}

// findCgroupHome finds where the host can make leaves: under dir when set
// (a cgroup2 or v1 freezer or pids directory), else under the host's own
// cgroup2 directory, else its v1 freezer, else its v1 pids directory. It
// makes and removes a leaf there to be sure. The error says why none will
// do.
func findCgroupHome(dir string) (*cgroupHome, error) {
	if dir == "off" {
		return nil, fmt.Errorf("%s=off", cgroupEnv)
	}
	prefix, err := leafPrefix()
	if err != nil {
		return nil, err
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	var tries []*cgroupHome
	if dir != "" {
		h, err := homeAt(dir, mounts)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", cgroupEnv, dir, err)
		}
		tries = append(tries, h)
	} else {
		own, err := ownCgroups()
		if err != nil {
			return nil, err
		}
		for _, kind := range []cgroupKind{cgroupV2, cgroupFreezer, cgroupPids} {
			for _, m := range mounts {
				if m.kind != kind {
					continue
				}
				if path, ok := own[kind]; ok {
					if rel, ok := strings.CutPrefix(path, m.root); ok {
						tries = append(tries, &cgroupHome{kind: kind, dir: filepath.Join(m.point, rel)})
					}
				}
			}
		}
		if len(tries) == 0 {
			return nil, errors.New("no cgroup2, v1 freezer or v1 pids hierarchy of this process is mounted")
		}
	}
	var whys []string
	for _, h := range tries {
		h.prefix = prefix
		if err := h.check(); err != nil {
			whys = append(whys, fmt.Sprintf("%s: %v", h.kind, err))
			continue
		}
		return h, nil
	}
	return nil, errors.New(strings.Join(whys, "; "))
}

// check makes a leaf in h and removes it.
func (h *cgroupHome) check() error {
	l, err := h.newLeaf("probe")
	if err != nil {
		return err
	}
	defer l.remove()
	need := map[cgroupKind]string{cgroupV2: "cgroup.kill", cgroupFreezer: "freezer.state", cgroupPids: "pids.max"}[h.kind]
	if _, err := os.Stat(filepath.Join(l.dir, need)); err != nil {
		return fmt.Errorf("a leaf has no %s (cgroup.kill needs Linux 5.14)", need)
	}
	return nil
}

// leafPrefix is the prefix of this host's leaves.
func leafPrefix() (string, error) {
	ns, err := pidNamespace()
	if err != nil {
		return "", err
	}
	st, ok := readStat(os.Getpid())
	if !ok {
		return "", errors.New("/proc/self/stat cannot be read")
	}
	return fmt.Sprintf("rtfshost-%d-%d-%d-", ns, os.Getpid(), st.start), nil
}

// pidNamespace is the inode of the host's pid namespace.
func pidNamespace() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0, fmt.Errorf("the host's pid namespace: %w", err)
	}
	return st.Ino, nil
}

// A cgroupMount is a mounted cgroup hierarchy of a kind the host uses.
type cgroupMount struct {
	kind  cgroupKind
	point string // where it is mounted
	root  string // the hierarchy's directory mounted there
}

// cgroupMounts lists the cgroup2, v1 freezer and v1 pids mounts of
// /proc/self/mountinfo.
func cgroupMounts() ([]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("the mounts: %w", err)
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo reads the cgroup mounts of a mountinfo file.
func parseMountinfo(r io.Reader) ([]cgroupMount, error) {
	var out []cgroupMount
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// id parent dev root point options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 5 || len(b) < 3 {
			continue
		}
		m := cgroupMount{point: unescapeMount(a[4]), root: unescapeMount(a[3])}
		switch opts := "," + b[2] + ","; {
		case b[0] == "cgroup2":
			m.kind = cgroupV2
		case b[0] == "cgroup" && strings.Contains(opts, ",freezer,"):
			m.kind = cgroupFreezer
		case b[0] == "cgroup" && strings.Contains(opts, ",pids,"):
			m.kind = cgroupPids
		default:
			continue
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroups reads the host's cgroups of each kind from /proc/self/cgroup.
func ownCgroups() (map[cgroupKind]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("the host's cgroups: %w", err)
	}
	own := map[cgroupKind]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			own[cgroupV2] = parts[2]
		case slices.Contains(strings.Split(parts[1], ","), "freezer"):
			own[cgroupFreezer] = parts[2]
		case slices.Contains(strings.Split(parts[1], ","), "pids"):
			own[cgroupPids] = parts[2]
		}
	}
	return own, nil
}

// homeAt is the home at dir, whose kind is that of the mount it is under.
func homeAt(dir string, mounts []cgroupMount) (*cgroupHome, error) {
	if !filepath.IsAbs(dir) {
		return nil, errors.New("not an absolute path")
	}
	dir = filepath.Clean(dir)
	var best *cgroupMount
	for i, m := range mounts {
		if (dir == m.point || strings.HasPrefix(dir, m.point+"/")) && (best == nil || len(m.point) > len(best.point)) {
			best = &mounts[i]
		}
	}
	if best == nil {
		return nil, errors.New("not in a mounted cgroup2, v1 freezer or v1 pids hierarchy")
	}
	return &cgroupHome{kind: best.kind, dir: dir}, nil
}

// A leaf is the cgroup of one keeper and its program.
type leaf struct {
	kind cgroupKind
	dir  string
}

// newLeaf makes a leaf named prefix+name.
func (h *cgroupHome) newLeaf(name string) (*leaf, error) {
	dir := filepath.Join(h.dir, h.prefix+name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	return &leaf{kind: h.kind, dir: dir}, nil
}

// next makes the leaf of the next program.
func (h *cgroupHome) next() (*leaf, error) {
	return h.newLeaf(strconv.FormatUint(cgroups.seq.Add(1), 10))
}

// open opens a cgroup2 leaf for SysProcAttr.CgroupFD.
func (l *leaf) open() (*os.File, error) {
	return os.OpenFile(l.dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
}

// keeperArg is the leaf as the keeper's command line gives it.
func (l *leaf) keeperArg() string {
	if l == nil {
		return "-"
	}
	if l.kind == cgroupV2 {
		return "v2:" + l.dir
	}
	return "v1:" + l.dir
}

// leafWait bounds how long end waits for a leaf to empty.
const leafWait = 5 * time.Second

// end kills every process of the leaf, waits until none is left and
// removes it. The error says what is left.
func (l *leaf) end() error {
	var err error
	switch l.kind {
	case cgroupV2:
		err = writeCgroup(l.dir, "cgroup.kill", "1")
	case cgroupFreezer:
		err = l.freezeKillThaw()
	case cgroupPids:
		_ = writeCgroup(l.dir, "pids.max", "0") // no member forks now
		err = l.killMembers()
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("killing the processes of cgroup %s: %w", l.dir, err)
	}
	return l.removeWhenEmpty()
}

// removeWhenEmpty removes the leaf once no process is left in it, waiting
// at most leafWait (sending SIGKILL again to what is left in a v1 leaf).
func (l *leaf) removeWhenEmpty() error {
	deadline := time.Now().Add(leafWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		err := l.remove()
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s still holds processes %v after %v: %w", l.dir, l.members(), leafWait, err)
		}
		if l.kind != cgroupV2 {
			_ = l.killMembers()
		}
		time.Sleep(pause)
	}
}

// remove removes the leaf's directory (rmdir: a cgroup's control files are
// not removed one by one). It fails with EBUSY while a process is in it.
func (l *leaf) remove() error { return syscall.Rmdir(l.dir) }

// freezeKillThaw freezes a v1 freezer leaf, sends SIGKILL to every
// member, and thaws it, so that no member forks between the listing and
// the kill.
func (l *leaf) freezeKillThaw() error {
	if err := writeCgroup(l.dir, "freezer.state", "FROZEN"); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(l.dir, "freezer.state")); err != nil || strings.TrimSpace(string(b)) == "FROZEN" {
			break
		}
	}
	_ = l.killMembers()
	return writeCgroup(l.dir, "freezer.state", "THAWED")
}

// killMembers sends SIGKILL to every process the leaf lists.
func (l *leaf) killMembers() error {
	for _, pid := range l.members() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return nil
}

// members lists the pids in the leaf's cgroup.procs.
func (l *leaf) members() []int {
	b, err := os.ReadFile(filepath.Join(l.dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// writeCgroup writes value to the control file name of cgroup dir.
func writeCgroup(dir, name, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// leafName matches the leaves' names: rtfshost-<pidns>-<pid>-<start>-<n>.
var leafName = regexp.MustCompile(`^rtfshost-([0-9]+)-([0-9]+)-([0-9]+)-[0-9a-z]+$`)

// sweep removes the leaves in h's directory that a host of this pid
// namespace left behind when it died: a leaf whose owner (its pid and
// start time) still runs, or of another pid namespace, whose pids mean
// nothing here, is never touched. What is left in a removed leaf is
// killed. It returns how many leaves it removed.
func sweep(h *cgroupHome) (int, error) {
	entries, err := os.ReadDir(h.dir)
	if err != nil {
		return 0, err
	}
	ns, err := pidNamespace()
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, e := range entries {
		m := leafName.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		owner, _ := strconv.Atoi(m[2])
		start, _ := strconv.ParseUint(m[3], 10, 64)
		if m[1] != strconv.FormatUint(ns, 10) || ownerAlive(owner, start) {
			continue
		}
		if err := (&leaf{kind: h.kind, dir: filepath.Join(h.dir, e.Name())}).end(); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// ownerAlive reports whether process pid, started at start, runs (a
// zombie does not).
func ownerAlive(pid int, start uint64) bool {
	st, ok := readStat(pid)
	return ok && st.start == start && st.state != 'Z' && st.state != 'X'
}

// childLeaf makes the leaf of the next keeper, or returns nil when the
// host uses no cgroups. A leaf that cannot be made ends their use.
func childLeaf(log *slog.Logger) *leaf {
	home := hostCgroups(log)
	if home == nil {
		return nil
	}
	l, err := home.next()
	if err != nil {
		dropCgroups(log, err)
		return nil
	}
	return l
}

// intoLeaf sets a to start the keeper into the cgroup2 leaf l, returning
// the leaf's directory, which the caller closes once the keeper started.
// A v1 leaf the keeper joins itself (keeper_unix.go).
func intoLeaf(a *syscall.SysProcAttr, l *leaf) (*os.File, error) {
	if l == nil || l.kind != cgroupV2 {
		return nil, nil
	}
	f, err := l.open()
	if err != nil {
		return nil, err
	}
	a.UseCgroupFD, a.CgroupFD = true, int(f.Fd())
	return f, nil
}

// joinLeaf moves the calling process into the cgroup the keeper's command
// line names (arg, from leaf.keeperArg), when it is a v1 leaf, before the
// keeper starts its program; it returns the leaf's directory when it is a
// cgroup2 leaf, which the keeper kills when the host dies.
func joinLeaf(arg string) (v2 string, err error) {
	if dir, ok := strings.CutPrefix(arg, "v1:"); ok {
		return "", writeCgroup(dir, "cgroup.procs", "0")
	}
	if dir, ok := strings.CutPrefix(arg, "v2:"); ok {
		return dir, nil
	}
	return "", nil
}

// killLeaf kills every process of the cgroup2 leaf dir, the caller
// included. It returns false when it could not.
func killLeaf(dir string) bool { return dir != "" && writeCgroup(dir, "cgroup.kill", "1") == nil }
