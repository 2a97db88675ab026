//go:build linux

package provider

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
)

// TestRecoveryEndsStaleGroup: the exec fixture, with a record of a process
// group its host left running (a shell and its child, started here in a
// group of their own): recovery ends that group before the stream goes on,
// and deletes the record. The same record naming a pid that now belongs to
// another process (its start time differs) ends nothing.
func TestRecoveryEndsStaleGroup(t *testing.T) {
	for _, recycled := range []bool{false, true} {
		t.Run(map[bool]string{false: "alive", true: "recycled"}[recycled], func(t *testing.T) {
			group := startGroup(t)
			c := group.id
			if recycled {
				c.Start-- // a later process got the recorded pid
			}
			store := loadFixture(t, fixtureExecV1)
			var b persistence.Batch
			b.Put(stream.StreamKey("fixture", stream.SuffixChild), (&stream.ChildRecord{Pid: int64(c.PID), Start: c.Start, Boot: c.Boot}).Encode())
			must(t, store.Commit(context.Background(), &b))

			reg, err := holdRegistry(nil)
			must(t, err)
			p := New(Options{Store: store, LookupEnv: noEnv, Capabilities: reg, Transports: procCatalog()})
			t.Cleanup(func() { p.Close() })
			for _, c := range p.Capabilities() {
				must(t, reg.Register(c))
			}
			must(t, p.Recover(context.Background()))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = p.Await(ctx, "fixture")
			if st, _ := p.Status(ctx, "fixture"); st.EndReason != "source-lost" {
				t.Fatalf("status %+v, want the stream ended with source-lost", st)
			}
			alive := group.alive()
			switch {
			case !recycled && alive > 0:
				t.Fatalf("%d processes of the stale group still run after recovery", alive)
			case recycled && alive != 2:
				t.Fatalf("%d of the 2 processes of a group whose pid was recorded with another start time still run: recovery killed a process it did not start", alive)
			}
			if _, err := store.Get(context.Background(), stream.StreamKey("fixture", stream.SuffixChild)); !errors.Is(err, persistence.ErrNotFound) {
				t.Errorf("the process group record after recovery: %v, want it deleted", err)
			}
		})
	}
}

// aGroup is a process group this test started: a shell that became a
// sleep, and a sleep it started in the background.
type aGroup struct {
	id     transport.ChildProcess
	reaped chan struct{}
}

func startGroup(t *testing.T) *aGroup {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 100 & exec sleep 100")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &aGroup{reaped: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(g.reaped) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-g.reaped
	})
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	g.id = transport.ChildProcess{PID: cmd.Process.Pid, Boot: strings.TrimSpace(string(boot))}
	deadline := time.Now().Add(10 * time.Second)
	for g.alive() < 2 { // the background sleep started
		if time.Now().After(deadline) {
			t.Fatal("the test's process group did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var ok bool
	if g.id.Start, ok = statOf(cmd.Process.Pid); !ok {
		t.Fatal("no start time for the test's process group")
	}
	return g
}

// alive counts the live processes of the group.
func (g *aGroup) alive() int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	n := 0
	for _, d := range dirs {
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(g.id.PID) && f[0] != "Z" && f[0] != "X" {
			n++
		}
	}
	return n
}

// A running :exec stream's store holds the record of its program's process
// group, its leader alive and matching the recorded start time; once the
// stream is cancelled and the group gone, the record is deleted.
func TestChildRecordFollowsTheProgram(t *testing.T) {
	store := persistence.NewMemStore()
	f := newFixture(t, Options{Store: store, Transports: procCatalog()})
	g := compileGlobals(t, `(defn step [s c m] {:state (inc s)})`)
	id := f.start(StartRequest{StreamID: "prog", Transport: "exec", Processor: rtfs.Symbol("step"), Globals: g, InitialState: rtfs.Int(0),
		TransportKeys: map[string]json.RawMessage{"command": json.RawMessage(`"sh"`), "args": json.RawMessage(`["-c", "echo started; sleep 100"]`)}})
	f.processed(id, 1)
	key := stream.StreamKey(id, stream.SuffixChild)
	var rec stream.ChildRecord
	f.waitFor("the process group's record", func() bool {
		data, err := store.Get(context.Background(), key)
		return err == nil && rec.Decode(key, data) == nil
	})
	g2 := aGroup{id: rec.Process()}
	if n := g2.alive(); n < 2 {
		t.Fatalf("the recorded group %+v has %d live processes, want the keeper and sh (and sleep)", rec, n)
	}
	if st, ok := statOf(int(rec.Pid)); !ok || st != rec.Start {
		t.Fatalf("the recorded start time %d is not the leader's (%d, %v)", rec.Start, st, ok)
	}
	_, err := f.p.Cancel(t.Context(), id)
	must(t, err)
	f.waitFor("the record's deletion", func() bool {
		_, err := store.Get(context.Background(), key)
		return errors.Is(err, persistence.ErrNotFound)
	})
	if n := g2.alive(); n != 0 {
		t.Fatalf("%d processes of the cancelled stream's group still run", n)
	}
}

// statOf reads the start time of process pid.
func statOf(pid int) (uint64, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+1:])
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}
