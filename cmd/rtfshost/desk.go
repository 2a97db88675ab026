package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
)

// A desk is where the stream-management commands (streams, inspect,
// pause, cancel, resume ID, resume ID --skip, rm, dead-letters) find the
// streams: the data directory
// itself when no process holds it (storeDesk), the process that holds it,
// through its control socket (holderDesk, holder.go), or a running serve,
// through its MCP tools (serverDesk). The commands apply one policy on
// top of every desk (manageStreams), so that they print the same and exit
// with the same code wherever the streams are.
type desk interface {
	// where names the place in messages: "the data directory .rtfshost".
	where() string
	// infos returns every stream's snapshot; info one stream's, or an
	// error wrapping errNoStream.
	infos(ctx context.Context, opts provider.InspectOptions) ([]provider.StreamInfo, error)
	info(ctx context.Context, id string, opts provider.InspectOptions) (provider.StreamInfo, error)
	// apply pauses, resumes or cancels stream id (verb), which has not
	// ended, or sets aside the chunk a failed one is held on (skip), and
	// returns its state after.
	apply(ctx context.Context, verb, id string) (provider.State, error)
	// deadLetters returns the chunks stream id set aside, oldest first
	// (deadletters.go), or an error wrapping errNoStream.
	deadLetters(ctx context.Context, id string) ([]provider.DeadLetter, error)
	// remove deletes every record of stream id, ended or not.
	remove(ctx context.Context, id string) error
	close()
}

// errNoStream is wrapped by a desk's error for an unknown stream id.
var errNoStream = errors.New("no such stream")

// noStream is the error of every desk for an unknown stream id.
func noStream(d desk, id string) error {
	return fmt.Errorf("stream %q: %w in %s (rtfshost streams lists them)", id, errNoStream, d.where())
}

// StateInterrupted is how the commands show a stream that its data
// directory holds as running while no process runs it: it was interrupted
// (Ctrl-C, a crash, a full disk) and "rtfshost resume" carries it on. It is
// never stored: the store says active.
const StateInterrupted provider.State = "interrupted"

// interrupted shows the stored streams that nothing runs: active becomes
// StateInterrupted.
func interrupted(infos []provider.StreamInfo) []provider.StreamInfo {
	for i := range infos {
		if infos[i].Status.State == provider.StateActive {
			infos[i].Status.State = StateInterrupted
		}
	}
	return infos
}

// storedView loads the streams of st for reading only (a provider with
// manual connect: nothing runs, nothing is written). A stream whose records
// cannot be read is left out; recErr names it, and the others are there.
func storedView(ctx context.Context, st persistence.Store, logger *slog.Logger) (p *provider.Provider, recErr error) {
	// Loaded streams must not run: hide the variable that would turn
	// auto-connect back on.
	lookupEnv := func(name string) (string, bool) {
		if name == provider.EnvStreamAutoConnect {
			return "", false
		}
		return os.LookupEnv(name)
	}
	p = provider.New(provider.Options{Store: st, ManualConnect: true, LookupEnv: lookupEnv, Logger: logger})
	return p, p.Recover(ctx)
}

// storeDesk is the data directory, opened by the command itself (no other
// process holds it): every stream is stored, none runs.
type storeDesk struct {
	dir    string
	st     *persistence.BadgerStore
	view   *provider.Provider
	recErr error // records that could not be read (the view lacks them)
}

func (a *app) openStoreDesk(ctx context.Context, st *persistence.BadgerStore, logger *slog.Logger) (*storeDesk, error) {
	view, recErr := storedView(ctx, st, logger)
	if recErr != nil && len(view.StreamIDs()) == 0 {
		view.Close()
		return nil, fmt.Errorf("reading %s: %w", a.flags.dataDir, recErr)
	}
	return &storeDesk{dir: a.flags.dataDir, st: st, view: view, recErr: recErr}, nil
}

func (d *storeDesk) where() string { return "the data directory " + d.dir }

func (d *storeDesk) infos(_ context.Context, opts provider.InspectOptions) ([]provider.StreamInfo, error) {
	return interrupted(d.view.Infos(opts)), nil
}

func (d *storeDesk) info(_ context.Context, id string, opts provider.InspectOptions) (provider.StreamInfo, error) {
	in, err := d.view.Info(id, opts)
	if err != nil {
		return in, noStream(d, id)
	}
	return interrupted([]provider.StreamInfo{in})[0], nil
}

func (d *storeDesk) apply(ctx context.Context, verb, id string) (provider.State, error) {
	if verb == "skip" {
		// A stored stream's held chunk is set aside by the stream once
		// it is loaded: resume ID --skip recovers it, then skips.
		return "", fmt.Errorf("stream %q: rtfshost resume %s --skip sets its chunk aside", id, id)
	}
	to := map[string]provider.State{"pause": provider.StatePaused, "resume": provider.StateActive, "cancel": provider.StateCancelled}[verb]
	if _, err := provider.SetStoredState(ctx, d.st, id, to); err != nil {
		return "", err
	}
	if to == provider.StateActive {
		return StateInterrupted, nil // un-paused; it runs on at the next resume
	}
	return to, nil
}

func (d *storeDesk) remove(ctx context.Context, id string) error {
	_, err := provider.RemoveStored(ctx, d.st, id, true)
	return err
}

func (d *storeDesk) close() {
	d.view.Close()
	d.st.Close()
}

// serverDesk is a running "rtfshost serve", reached through its MCP tools
// (its token in $RTFSHOST_TOKEN).
type serverDesk struct{ url string }

func (d serverDesk) where() string { return "the serve at " + d.url }

func (d serverDesk) infos(ctx context.Context, _ provider.InspectOptions) ([]provider.StreamInfo, error) {
	return infosLive(ctx, d.url)
}

func (d serverDesk) info(ctx context.Context, id string, opts provider.InspectOptions) (provider.StreamInfo, error) {
	in, err := infoLive(ctx, d.url, id, opts)
	if err != nil {
		if list, lerr := d.infos(ctx, opts); lerr == nil && !hasStream(list, id) {
			return in, noStream(d, id)
		}
	}
	return in, err
}

func (d serverDesk) apply(ctx context.Context, verb, id string) (provider.State, error) {
	st, err := statusLive(ctx, d.url, verb, id)
	return st.State, err
}

func (d serverDesk) remove(ctx context.Context, id string) error {
	_, err := callServer(ctx, d.url, toolRemove, map[string]any{"stream-id": id, "force": true})
	return err
}

func (d serverDesk) close() {}

func hasStream(list []provider.StreamInfo, id string) bool {
	for _, in := range list {
		if in.StreamID == id {
			return true
		}
	}
	return false
}
