package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// Where the control socket lives, and who may stand at either end of it.
//
// The socket is rtfshost.sock in the data directory when that path fits in
// a unix socket address. When it does not, it goes to a directory of the
// user's own: $XDG_RUNTIME_DIR/rtfshost when $XDG_RUNTIME_DIR is a
// directory the user owns that no one else may enter (the XDG Base
// Directory rules), else rtfshost-<uid> in the system's temporary
// directory. A directory there is made with mode 0700, and one that is
// already there is used only when it is a real directory (not a link)
// owned by the user with no permission for anyone else: under a shared
// /tmp another user could have made it first and would then replace the
// socket with their own. os.MkdirAll would trust whatever is there.
//
// The directory guards the socket's path; the peer's credentials guard the
// connection. A client talks to a socket only when the process serving it
// runs as the client's own user, or as root (SO_PEERCRED on Linux,
// LOCAL_PEERCRED on the BSDs and macOS), and checks before it sends a
// byte: a run sends its program's source. The holder likewise closes a
// connection from another user (root excepted) before reading it.

// sockPathMax is the longest socket path used: sun_path holds 104 bytes on
// BSD and macOS, 108 on Linux, NUL included.
const sockPathMax = 100

// sockPath is where the process that holds data directory dir serves its
// control socket, and the directory of the user's own it is in ("" when
// the socket is in the data directory).
func sockPath(dir string) (path, runDir string, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", fmt.Errorf("the control socket of %s: %w", dir, err)
	}
	p := filepath.Join(abs, "rtfshost.sock")
	if len(p) < sockPathMax {
		return p, "", nil
	}
	sum := sha256.Sum256([]byte(abs))
	name := hex.EncodeToString(sum[:8]) + ".sock"
	if xdg := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(xdg) && checkOwnDir(xdg) == nil {
		runDir = filepath.Join(xdg, "rtfshost")
		if p := filepath.Join(runDir, name); len(p) < sockPathMax {
			return p, runDir, nil
		}
	}
	runDir = filepath.Join(os.TempDir(), fmt.Sprintf("rtfshost-%d", os.Getuid()))
	return filepath.Join(runDir, name), runDir, nil
}

// makeOwnDir makes dir with mode 0700, or accepts it when it is there
// already and checkOwnDir finds it the user's alone.
func makeOwnDir(dir string) error {
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		return os.Chmod(dir, 0o700) // whatever the umask
	}
	if !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("the control socket's directory: %w", err)
	}
	return checkOwnDir(dir)
}

// checkOwnDir returns an error unless dir is a directory, not a symbolic
// link, owned by this process's user, that no one else may enter.
func checkOwnDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("the control socket's directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("the control socket's directory %s is not a directory (%s); remove it", dir, fi.Mode().Type())
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Getuid() {
		return fmt.Errorf("the control socket's directory %s belongs to uid %d, not to this user (uid %d): another user may have made it to take the socket's place; remove it, or set XDG_RUNTIME_DIR", dir, uid, os.Getuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("the control socket's directory %s has mode %04o: others may enter it and replace the socket; it must be 0700 (chmod 700 %s)", dir, perm, dir)
	}
	return nil
}

// errForeignPeer is wrapped by the error of a connection whose other end
// runs as another user than this process's (and not as root).
var errForeignPeer = errors.New("the control socket is served by another user")

// An untrustedSocket is dialHolder's refusal of a control socket another
// user could have put in place: a command stops with it rather than going
// on as if no process held the directory.
type untrustedSocket struct{ err error }

func (e *untrustedSocket) Error() string { return e.err.Error() }
func (e *untrustedSocket) Unwrap() error { return e.err }

// peerAllowed reports whether a process of uid may stand at the other end
// of a control socket of a process of uid self: the same user, or root.
func peerAllowed(uid, self int) bool { return uid == self || uid == 0 }

// checkPeer returns an error wrapping errForeignPeer unless the process at
// the other end of c runs as self or root.
func checkPeer(c net.Conn, self int) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("the control socket: not a unix socket (%T)", c)
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return fmt.Errorf("the control socket: %w", err)
	}
	var uid, pid int
	var perr error
	if err := rc.Control(func(fd uintptr) { uid, pid, perr = peerCred(int(fd)) }); err != nil {
		return fmt.Errorf("the control socket: %w", err)
	}
	if perr != nil {
		return fmt.Errorf("the control socket: reading the peer's credentials: %w", perr)
	}
	if !peerAllowed(uid, self) {
		who := fmt.Sprintf("uid %d", uid)
		if pid > 0 {
			who += fmt.Sprintf(", process %d", pid)
		}
		return fmt.Errorf("%w (%s; this user is uid %d): nothing was sent to it; remove %s if it is not yours", errForeignPeer, who, self, c.RemoteAddr())
	}
	return nil
}

// dialSocket connects to the control socket at path and checks the peer
// (checkPeer) before returning the connection: nothing is sent to a
// socket of another user.
func dialSocket(ctx context.Context, path string, self int) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	if err := checkPeer(c, self); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ownListener is a control socket's listener that closes, unread, every
// connection from a process of another user than self (root excepted).
type ownListener struct {
	net.Listener
	self int
}

func (l ownListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if checkPeer(c, l.self) == nil {
			return c, nil
		}
		c.Close()
	}
}
