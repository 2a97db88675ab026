package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/persistence"
)

// openStore opens (creating it if needed) the stream database in --data, with
// --sync deciding whether every commit is synced to disk. A data directory
// that another rtfshost holds is a clear error.
func (a *app) openStore(logger *slog.Logger) (*persistence.BadgerStore, error) {
	st, err := persistence.OpenBadger(a.flags.dataDir, persistence.Options{SyncWrites: a.flags.sync, Logger: logger})
	if err != nil {
		var le *persistence.LockedError
		if errors.As(err, &le) {
			return nil, withCode(exitStreamFailed, err) // it names the directory and what to do
		}
		return nil, withCode(exitStreamFailed, fmt.Errorf("opening the data directory: %w", err))
	}
	return st, nil
}

// openReadStore opens the stream database in --data for reading only: it
// creates, writes and deletes nothing there (persistence.OpenBadgerReadOnly).
// A directory that a crash left unclean is read from a copy in the
// temporary directory (resume opens it to write, and cleans it). A data
// directory that another rtfshost holds is a clear error; the commands
// reach that process through its control socket instead (findDesk).
func (a *app) openReadStore(logger *slog.Logger) (*persistence.BadgerStore, error) {
	st, err := persistence.OpenBadgerReadOnly(a.flags.dataDir, persistence.Options{Logger: logger})
	if err != nil {
		var le *persistence.LockedError
		if errors.As(err, &le) {
			return nil, withCode(exitStreamFailed, err)
		}
		return nil, withCode(exitStreamFailed, fmt.Errorf("reading the data directory: %w", err))
	}
	return st, nil
}

// openReadDesk is openDesk for the commands that only read the streams
// (inspect, streams, dead-letters): the data directory, when no process
// holds it, is opened with openReadStore and never changed.
func (a *app) openReadDesk(ctx context.Context, server string) (desk, error) {
	return a.findDesk(ctx, server, a.openReadStore)
}

// checkDataDir fails when --data does not exist.
func (a *app) checkDataDir() error {
	if _, err := os.Stat(a.flags.dataDir); errors.Is(err, fs.ErrNotExist) {
		return withCode(exitStreamFailed, fmt.Errorf("no data directory at %s: nothing was run with --data %s", a.flags.dataDir, a.flags.dataDir))
	}
	return nil
}

// openHost assembles the host of run, resume and serve with host.Open: the
// default transports (host.DefaultTransports) and the store in --data,
// which the host closes. A data directory that another rtfshost holds is
// a clear error.
func (a *app) openHost(opts host.Options) (*host.Host, error) {
	return a.openHostIn(nil, opts)
}

// openHostIn is openHost, or, with cl, a host in that cluster (serve
// --cluster), whose records live in JetStream instead of --data.
func (a *app) openHostIn(cl *cluster.Options, opts host.Options) (*host.Host, error) {
	oo := host.OpenOptions{Options: opts, DataDir: a.flags.dataDir, SyncWrites: a.flags.sync}
	if cl != nil {
		oo.DataDir, oo.Cluster = "", cl
	}
	h, err := host.Open(oo)
	if err != nil {
		var le *persistence.LockedError
		if errors.As(err, &le) {
			return nil, withCode(exitStreamFailed, le) // it names the directory and what to do
		}
		return nil, withCode(exitStreamFailed, err)
	}
	return h, nil
}
