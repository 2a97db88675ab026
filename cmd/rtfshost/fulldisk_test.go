//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fullDiskChildEnv, set in the environment of this test binary, makes
// TestFullDiskRun run its scenario in the user and mount namespace it was
// started in (where it may mount a tmpfs) with the binary the variable
// names, instead of building one.
const fullDiskChildEnv = "RTFSHOST_FULLDISK_BIN"

// TestFullDiskRun fills a 200 MB tmpfs through a run whose :exec source
// prints 1,500 numbered lines of 10 KB as fast as it can. The run never
// dies of SIGBUS (the fault of Badger's memory-mapped files on a full
// disk): the stream is held as failed with "no space left" while the
// reserve is still free, the process stays up and answers, and once space
// is freed "rtfshost resume fill" carries it on exactly (every line
// processed once). Then, the filesystem full to its last block, reading
// commands still answer and resume refuses with a clear error. As root the
// test mounts the tmpfs itself; as another user it runs itself again in a
// user and mount namespace of its own, where it may (variant "userns").
func TestFullDiskRun(t *testing.T) {
	bin := os.Getenv(fullDiskChildEnv)
	if bin == "" && os.Geteuid() != 0 {
		t.Run("userns", fullDiskInNamespace)
		return
	}
	if bin == "" {
		bin = buildCLI(t).bin
	}
	c := &cli{bin: bin}
	work := t.TempDir()
	fs := filepath.Join(work, "fs")
	if err := os.Mkdir(fs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", fs, "tmpfs", 0, "size=200m"); err != nil {
		t.Fatalf("mount a 200 MB tmpfs on %s: %v", fs, err)
	}
	defer func() {
		if err := syscall.Unmount(fs, 0); err != nil {
			t.Errorf("unmount %s: %v", fs, err)
		}
	}()
	// 20 MB that the test frees later: without them the stream's 15 MB do
	// not fit beside the store's reserve.
	filler := filepath.Join(fs, "filler")
	if err := os.WriteFile(filler, make([]byte, 20<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(work, "fill.rtfs")
	src := `(defn step [state chunk meta] {:state {:n (inc (:n state)) :sum (+ (:sum state) (:seq meta))}})
(call :mcp.stream.start {:transport :exec :command "sh" :args ["-c" "l=$(head -c 10000 /dev/zero | tr '\\0' x); i=1; while [ $i -le 1500 ]; do echo \"$i $l\"; i=$((i+1)); done"] :processor step :initial-state {:n 0 :sum 0} :stream-id "fill"})
(call :mcp.stream.await {:stream-id "fill"})
`
	if err := os.WriteFile(prog, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(fs, "data")
	noFault := func(r result) {
		t.Helper()
		if r.code < 0 || strings.Contains(r.stderr, "fatal error") || strings.Contains(r.stderr, "SIGBUS") {
			t.Fatalf("rtfshost died of the full disk:\n%s", r)
		}
	}

	// The run, waiting for its held stream to be resumed.
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	run := exec.CommandContext(ctx, c.bin, "run", "--wait-paused", "--data", data, prog)
	run.Dir, run.Env = work, childEnv()
	var runOut, runErr bytes.Buffer
	run.Stdout, run.Stderr = &runOut, &runErr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	defer func() {
		if run.ProcessState == nil {
			_ = run.Process.Kill()
			<-exited
		}
	}()
	for {
		r := c.runIn(t, work, "streams", "--data", data)
		if strings.Contains(r.stdout, "failed") {
			if !strings.Contains(r.stdout, "no space left") {
				t.Fatalf("the held stream does not say why\n%s", r)
			}
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the run ended (%v) instead of holding its stream:\n%s\n%s", err, runOut.String(), runErr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if free := freeBytes(t, fs); free < 100<<20 {
		t.Fatalf("the store went on writing past its reserve: %d MiB free", free>>20)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r := c.runIn(t, work, "resume", "fill", "--data", data)
	noFault(r)
	wantCode(t, r, exitOK)
	select {
	case err := <-exited:
		if err != nil || strings.Contains(runErr.String(), "fatal error") {
			t.Fatalf("run after resume: %v\n%s\n%s", err, runOut.String(), runErr.String())
		}
	case <-ctx.Done():
		t.Fatalf("the run did not finish after resume:\n%s\n%s", runOut.String(), runErr.String())
	}
	r = c.runIn(t, work, "inspect", "--data", data, "--stream", "fill", "--json")
	wantCode(t, r, exitOK)
	var in struct {
		Status  struct{ State string }
		Current struct{ N, Sum int } `json:"current-state"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, r)
	}
	if in.Status.State != "completed" || in.Current.N != 1500 || in.Current.Sum != 1500*1501/2 {
		t.Fatalf("after resume: %s with %d lines summing to %d, want completed with 1500 lines summing to %d, each once",
			in.Status.State, in.Current.N, in.Current.Sum, 1500*1501/2)
	}

	// The filesystem full to its last block: reading commands answer, a
	// command that must write says why it cannot.
	fillUp(t, filepath.Join(fs, "rest"))
	r = c.runIn(t, work, "resume", "--data", data)
	noFault(r)
	if r.code == exitOK || !strings.Contains(r.stderr, "no space left") {
		t.Fatalf("resume on a full disk: want a clear refusal\n%s", r)
	}
	r = c.runIn(t, work, "streams", "--data", data)
	noFault(r)
	if r.code != exitOK || !strings.Contains(r.stdout, "fill") {
		t.Fatalf("streams on a full disk\n%s", r)
	}
}

// fullDiskInNamespace runs TestFullDiskRun again in a new user namespace
// (this user mapped to root) with a mount namespace of its own.
func fullDiskInNamespace(t *testing.T) {
	c := buildCLI(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDiskRun$", "-test.v")
	cmd.Env = append(childEnv(), fullDiskChildEnv+"="+c.bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	t.Logf("in a user and mount namespace of its own:\n%s", out)
	if err != nil {
		t.Fatalf("the full-disk scenario failed in its namespace (or the namespace could not be made): %v", err)
	}
}

// freeBytes returns the bytes free on the filesystem of dir.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// fillUp writes the file path until its filesystem is full.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	if free := freeBytes(t, filepath.Dir(path)); free > 1<<20 {
		t.Fatalf("%d bytes still free after filling", free)
	}
}
