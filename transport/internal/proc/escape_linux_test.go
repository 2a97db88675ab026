package proc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// escaperScript is a program whose descendant leaves its session (setsid),
// kills the program's keeper ($PPID of the shell: the keeper) a second
// later, and then waits in sleep <mark>; the program itself waits in
// sleep <mark+1>. Without root (no PID namespace), the descendant does not
// kill the keeper: the keeper alone, a subreaper, must hold it.
func escaperScript(mark int) string {
	kill := "kill -9 $0; "
	if os.Geteuid() != 0 {
		kill = ""
	}
	return fmt.Sprintf("setsid sh -c 'sleep 1; %sexec sleep %d' $PPID & exec sleep %d", kill, mark, mark+1)
}

// sleepers returns the pids of the processes running sleep <mark>.
func sleepers(mark int) []int {
	want := []byte("sleep\x00" + strconv.Itoa(mark) + "\x00")
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err == nil && bytes.Equal(b, want) {
			if st, err := os.ReadFile(d + "/stat"); err == nil && !bytes.Contains(st, []byte(") Z ")) {
				pid, _ := strconv.Atoi(filepath.Base(d))
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// waitSleeper waits until sleep <mark> runs (the descendant has done what
// it does before it).
func waitSleeper(t *testing.T, mark int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); len(sleepers(mark)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sleep %d never ran", mark)
		}
	}
}

// noSurvivor fails the test when sleep <mark> still runs 2 s after now,
// and kills what it finds.
func noSurvivor(t *testing.T, mark int, after string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for len(sleepers(mark)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := sleepers(mark); len(left) > 0 {
		t.Errorf("2 s after %s, the descendant that left the group still runs: %v", after, left)
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestEscaperDiesWithStream: a descendant that calls setsid and kills the
// keeper is gone 2 s after the stream ends (Stop). As root the keeper is
// the init of a PID namespace, which must be available there: the test
// fails if it is not.
func TestEscaperDiesWithStream(t *testing.T) {
	mark := 35000 + os.Getpid()%1000
	p, err := Start(&Config{Command: "sh", Args: []string{"-c", escaperScript(mark)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 && !pidNamespaces.Load() {
		t.Error("running as root, the keeper could not be started in a PID namespace")
	}
	waitSleeper(t, mark)
	p.Stop()
	noSurvivor(t, mark, "the stream ended")
}

// TestEscaperDiesWithHost: the same descendant is gone 2 s after its host
// is killed with SIGKILL; the keeper's leaf, left behind empty, is removed
// by the next host's sweep.
func TestEscaperDiesWithHost(t *testing.T) {
	home := requireCgroups(t)
	mark := 36000 + os.Getpid()%1000
	cmd, leafDir := startTestHost(t, escaperScript(mark))
	waitSleeper(t, mark)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	noSurvivor(t, mark, "the host was killed")
	if home == nil {
		return
	}
	if n, err := sweep(home); err != nil || n < 1 || pathExists(leafDir) {
		t.Errorf("sweep removed %d leaves (%v); the killed host's %s exists: %v", n, err, leafDir, pathExists(leafDir))
	}
}
