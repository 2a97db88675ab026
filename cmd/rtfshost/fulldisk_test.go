//go:build linux

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fullDiskChildEnv, set in the environment of this test binary, makes
// TestFullDiskRun run its scenario in the user and mount namespace it was
// started in (where it may mount a tmpfs) with the binary the variable
// names, instead of building one.
const fullDiskChildEnv = "RTFSHOST_FULLDISK_BIN"

// TestFullDiskRun fills a 200 MB tmpfs through a run whose :exec source
// prints 10 KB lines as fast as it can: the run never dies of SIGBUS (the
// fault of Badger's memory-mapped files on a full disk); the stream stops
// with "no space left" while the reserve is still free; inspect answers on
// the full filesystem; resume on a filesystem with no room refuses with a
// clear error instead of dying. As root it mounts the tmpfs itself; as
// another user it runs itself again in a user and mount namespace of its
// own, where it may (variant "userns").
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
	// 20 MB that the test frees later.
	filler := filepath.Join(fs, "filler")
	if err := os.WriteFile(filler, make([]byte, 20<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(work, "fill.rtfs")
	src := `(defn step [state chunk meta] {:state (+ state 1)})
(call :mcp.stream.start {:transport :exec :command "sh" :args ["-c" "l=$(head -c 10000 /dev/zero | tr '\\0' x); while :; do echo $l; done"] :processor step :initial-state 0 :stream-id "fill"})
(call :mcp.stream.await {:stream-id "fill"})
`
	if err := os.WriteFile(prog, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(fs, "data")
	noFault := func(r result) {
		t.Helper()
		if r.code < 0 || r.code == 2 || strings.Contains(r.stderr, "fatal error") || strings.Contains(r.stderr, "SIGBUS") {
			t.Fatalf("rtfshost died of the full disk:\n%s", r)
		}
	}

	r := c.runIn(t, work, "run", "--data", data, prog)
	noFault(r)
	if r.code != exitStreamFailed || !strings.Contains(r.stderr, "no space left") {
		t.Fatalf("run on a filling disk: want the stream stopped with \"no space left\"\n%s", r)
	}
	if free := freeBytes(t, fs); free < 100<<20 {
		t.Fatalf("the store went on writing past its reserve: %d MiB free", free>>20)
	}

	r = c.runIn(t, work, "inspect", "--data", data)
	noFault(r)
	if r.code != exitOK || !strings.Contains(r.stdout, "fill") {
		t.Fatalf("inspect on the filled disk\n%s", r)
	}

	// Now fill the filesystem to the last block: reads still answer, a
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
