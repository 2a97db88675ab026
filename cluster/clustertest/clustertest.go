// Package clustertest starts the embedded NATS servers that the tests and
// benchmarks of a cluster need: nats-server with JetStream on 127.0.0.1,
// its files in a temporary directory, stopped by the test.
//
// The main function is Server; Options choose the port, the directory and
// whether every write is synced (as rtfshost natsd does). Cluster starts
// several servers routed together, each in a child process that a test can
// kill as a crash would; a package that uses it calls Main from its
// TestMain.
package clustertest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options configure Server. The zero value is a server on a free port with
// its files in t.TempDir(), not syncing each write.
type Options struct {
	Port int    // 0: a free port
	Dir  string // "": t.TempDir()
	Sync bool   // sync every write to disk before acknowledging it
	// User and Password, when set, are required of every client.
	User, Password string
}

// Server starts a nats-server with JetStream as opts say and stops it when
// the test ends (Shutdown may be called earlier: stopping twice is safe).
// It fails the test when the server does not start within 10 s.
func Server(t testing.TB, opts Options) *server.Server {
	t.Helper()
	port := opts.Port
	if port == 0 {
		port = -1
	}
	dir := opts.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir,
		SyncAlways: opts.Sync, NoSigs: true, Username: opts.User, Password: opts.Password})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}
