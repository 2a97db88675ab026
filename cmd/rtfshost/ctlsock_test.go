package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
)

// foreignHolderEnv, set to a socket path, makes the test binary a fake
// holder of a control socket (foreignHolder) instead of running tests.
const foreignHolderEnv = "RTFSHOST_TEST_FOREIGN_HOLDER"

func TestMain(m *testing.M) {
	if path := os.Getenv(foreignHolderEnv); path != "" {
		os.Exit(foreignHolder(path))
	}
	os.Exit(m.Run())
}

// foreignHolder listens on path as another user would, says "listening",
// counts the bytes every connection sends it until its stdin ends, then
// prints "received N" and exits.
func foreignHolder(path string) int {
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	_ = os.Chmod(path, 0o777)
	var got atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				n, _ := io.Copy(io.Discard, c)
				got.Add(n)
				c.Close()
			}()
		}
	}()
	fmt.Println("listening")
	_, _ = io.Copy(io.Discard, os.Stdin)
	ln.Close()
	time.Sleep(100 * time.Millisecond) // let the last reads count
	fmt.Println("received", got.Load())
	return 0
}

// otherUID is the user a foreign holder runs as when the tests run as root.
const otherUID = 65534

// startForeignHolder serves a fake holder at path: as otherUID in a
// process of its own when the tests run as root, else (where no other user
// can be had) in this process. It returns a function that stops it and
// returns how many bytes it was sent.
func startForeignHolder(t *testing.T, path string) (received func() int64) {
	t.Helper()
	if os.Getuid() != 0 {
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		var got atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				n, _ := io.Copy(io.Discard, c)
				got.Add(n)
				c.Close()
			}
		}()
		return func() int64 { ln.Close(); <-done; return got.Load() }
	}
	// The test binary, copied where otherUID may run it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	binDir, err := os.MkdirTemp("", "rtfshost-foreign-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "holder.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), foreignHolderEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID, NoSetGroups: true}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting a holder as uid %d: %v", otherUID, err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "listening" {
		stdin.Close()
		_ = cmd.Wait()
		t.Fatalf("the foreign holder did not listen: %q", lines.Text())
	}
	stopped := false
	stop := func() int64 {
		if stopped {
			return -1
		}
		stopped = true
		stdin.Close()
		var n int64 = -1
		if lines.Scan() {
			_, _ = fmt.Sscanf(lines.Text(), "received %d", &n)
		}
		_ = cmd.Wait()
		return n
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestControlSocketDirectory: the socket of a data directory whose path is
// too long goes to $XDG_RUNTIME_DIR/rtfshost when that directory is the
// user's alone, else to rtfshost-<uid> in the temporary directory; a
// directory made there is 0700, and one already there is refused when it
// is a link, another user's, or open to others.
func TestControlSocketDirectory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	long := filepath.Join(tmp, strings.Repeat("d", 120))
	if p, runDir, err := sockPath(filepath.Join(tmp, "short")); err != nil || runDir != "" || p != filepath.Join(tmp, "short", "rtfshost.sock") {
		t.Errorf("a short data directory's socket: %s in %q, %v", p, runDir, err)
	}
	xdg := filepath.Join(tmp, "xdg")
	if err := os.Mkdir(xdg, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	if p, runDir, err := sockPath(long); err != nil || runDir != filepath.Join(xdg, "rtfshost") || filepath.Dir(p) != runDir {
		t.Errorf("with XDG_RUNTIME_DIR: %s in %q, %v", p, runDir, err)
	}
	if err := os.Chmod(xdg, 0o755); err != nil {
		t.Fatal(err)
	}
	fallback := filepath.Join(tmp, fmt.Sprintf("rtfshost-%d", os.Getuid()))
	if _, runDir, err := sockPath(long); err != nil || runDir != fallback {
		t.Errorf("with an XDG_RUNTIME_DIR open to others: socket in %q, %v; want %s", runDir, err, fallback)
	}

	if err := makeOwnDir(fallback); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(fallback); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the directory made: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if err := makeOwnDir(fallback); err != nil {
		t.Errorf("the user's own directory refused: %v", err)
	}
	if err := os.Chmod(fallback, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := makeOwnDir(fallback); err == nil || !strings.Contains(err.Error(), "mode 0777") {
		t.Errorf("a directory of mode 0777: %v", err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(xdg, link); err != nil {
		t.Fatal(err)
	}
	if err := checkOwnDir(link); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a symbolic link: %v", err)
	}
	other, owner := filepath.Join(tmp, "other"), 0
	if os.Getuid() == 0 {
		// As root, a directory that another user made.
		owner = otherUID
		if err := os.Mkdir(other, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, otherUID, otherUID); err != nil {
			t.Fatal(err)
		}
	} else {
		other = "/" // root's: not this user's
	}
	if err := checkOwnDir(other); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("belongs to uid %d", owner)) {
		t.Errorf("another user's directory: %v", err)
	}
}

// TestControlSocketTakeover: another user who made the fallback directory
// first, or who put a socket in a data directory open to others, gets
// nothing: streams and a second run stop with an error that says so, and
// not a byte reaches that user's socket. As root the other user is a real
// one (a process of uid 65534); otherwise the peer check is exercised
// against this user with another uid expected.
func TestControlSocketTakeover(t *testing.T) {
	tmp := t.TempDir()
	// The other user must reach its socket (and its program) in here.
	for _, d := range []string{tmp, filepath.Dir(tmp)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_RUNTIME_DIR", "")
	prog := filepath.Join(tmp, "secret.rtfs")
	if err := os.WriteFile(prog, []byte(`(def secret "hunter2") (println secret)`), 0o644); err != nil {
		t.Fatal(err)
	}
	execute := func(args ...string) (int, string) {
		var stderr strings.Builder
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		code := newApp(strings.NewReader(""), io.Discard, &stderr).execute(ctx, args)
		return code, stderr.String()
	}

	t.Run("fallback directory", func(t *testing.T) {
		data := filepath.Join(tmp, strings.Repeat("l", 110))
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		path, runDir, err := sockPath(data)
		if err != nil || runDir == "" {
			t.Fatalf("sockPath: %s in %q, %v", path, runDir, err)
		}
		// The other user was first.
		if err := os.Mkdir(runDir, 0o777); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(runDir, 0o777)
		if os.Getuid() == 0 {
			if err := os.Chown(runDir, otherUID, otherUID); err != nil {
				t.Fatal(err)
			}
		}
		received := startForeignHolder(t, path)
		code, stderr := execute("streams", "--data", data)
		if code == 0 || !strings.Contains(stderr, "the control socket's directory "+runDir) {
			t.Errorf("streams beside a directory another user made: exit %d, %s", code, stderr)
		}
		// The holder's own side refuses the directory as well.
		if err := makeOwnDir(runDir); err == nil {
			t.Error("a holder would serve its socket in the other user's directory")
		}
		if n := received(); n != 0 {
			t.Errorf("the other user's socket received %d bytes", n)
		}
	})

	t.Run("peer", func(t *testing.T) {
		data := filepath.Join(tmp, "shared")
		if err := os.Mkdir(data, 0o777); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(data, 0o777) // a data directory anyone may write in
		st, err := persistence.OpenBadger(data, persistence.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close() // a live holder has the directory
		path := filepath.Join(data, "rtfshost.sock")
		received := startForeignHolder(t, path)
		if os.Getuid() != 0 {
			// No other user: the check itself, expecting another uid.
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkPeer(c, os.Getuid()+1); !errors.Is(err, errForeignPeer) {
				t.Errorf("a peer of uid %d, expecting %d: %v", os.Getuid(), os.Getuid()+1, err)
			}
			c.Close()
			if err := checkPeer(mustDial(t, path), os.Getuid()); err != nil {
				t.Errorf("a peer of this user: %v", err)
			}
		} else {
			code, stderr := execute("streams", "--data", data)
			if code == 0 || !strings.Contains(stderr, "served by another user (uid 65534") || !strings.Contains(stderr, "nothing was sent") {
				t.Errorf("streams with another user's socket: exit %d, %s", code, stderr)
			}
			code, stderr = execute("run", prog, "--data", data)
			if code == 0 || !strings.Contains(stderr, "served by another user") {
				t.Errorf("a second run with another user's socket: exit %d, %s", code, stderr)
			}
		}
		if n := received(); n != 0 {
			t.Errorf("the other user's socket received %d bytes", n)
		}
	})
}

func mustDial(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
