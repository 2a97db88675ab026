package proc

import (
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rtfshost/rtfshost/transport"
)

// identify returns the identity of process pid, which must not have been
// reaped yet: its start time (field 22 of /proc/PID/stat, clock ticks since
// boot) and the boot's id. Without /proc both are left unknown, and a later
// host will not touch the group.
func identify(pid int) transport.ChildProcess {
	c := transport.ChildProcess{PID: pid}
	if st, ok := readStat(pid); ok {
		c.Start, c.Boot = st.start, bootID()
	}
	if c.Boot == "" {
		c.Start = 0
	}
	return c
}

// bootID is the kernel's id of the running boot, "" if it cannot be read.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// procStat is what the host reads of /proc/PID/stat.
type procStat struct {
	state byte   // R, S, D, Z, X...
	ppid  int    // the parent
	pgrp  int    // the process group
	start uint64 // clock ticks since boot
}

// readStat reads /proc/PID/stat. The fields are counted after the last ')'
// since the command name before it may hold spaces and parentheses.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3, the state
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, false
	}
	ppid, err0 := strconv.Atoi(f[1])
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err0 != nil || err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp, start: start}, true
}

// staleWait bounds how long endGroup waits for a stale group to go.
const staleWait = 5 * time.Second

// endGroup kills, with SIGKILL, every live process of the group c that a
// previous host started, and waits until none is left. It touches nothing
// when c is of another boot (or machine), or when its leader's pid now
// belongs to a later process (the kernel hands out a pid again only once
// no group uses it as its id, so the old group is then empty). Each
// process is signalled through a pidfd opened before its membership is
// checked once more: the signal reaches only the process the pidfd was
// opened on, so a pid recycled meanwhile is never signalled.
func endGroup(ctx context.Context, c transport.ChildProcess) error {
	if c.PID <= 0 || c.Start == 0 || c.Boot == "" || c.Boot != bootID() {
		return nil
	}
	deadline := time.Now().Add(staleWait)
	for {
		members := groupMembers(c)
		if len(members) == 0 {
			return nil
		}
		for _, pid := range members {
			killMember(pid, c)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes of group %d are still alive after %v (pids %v)", len(members), c.PID, staleWait, members)
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// isMember reports whether a process of stat st belongs to the group c.
func isMember(pid int, st procStat, c transport.ChildProcess) bool {
	if st.pgrp != c.PID || st.state == 'Z' || st.state == 'X' || st.start < c.Start {
		return false
	}
	return pid != c.PID || st.start == c.Start
}

// groupMembers lists the live processes of group c.
func groupMembers(c transport.ChildProcess) []int {
	if st, ok := readStat(c.PID); ok && st.start != c.Start {
		return nil // the leader's pid was given to a later process: the group is gone
	}
	var pids []int
	for pid, st := range processes() {
		if isMember(pid, st, c) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processes yields every process of the machine that /proc shows, with
// what readStat reads of it. Cost: a read of /proc/PID/stat per process.
func processes() iter.Seq2[int, procStat] {
	return func(yield func(int, procStat) bool) {
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			pid, err := strconv.Atoi(filepath.Base(d))
			if err != nil {
				continue
			}
			if st, ok := readStat(pid); ok && !yield(pid, st) {
				return
			}
		}
	}
}

// killMember sends SIGKILL to pid if it is (still) a member of group c.
func killMember(pid int, c transport.ChildProcess) {
	p, err := os.FindProcess(pid) // a pidfd: it names this process, whatever becomes of the pid
	if err != nil {
		return
	}
	defer p.Release()
	if st, ok := readStat(pid); ok && isMember(pid, st, c) {
		_ = p.Signal(syscall.SIGKILL)
	}
}
