package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
)

// The stream-management commands: cancel, pause, rm (and resume ID, in
// resume.go) act on the streams wherever they are (openDesk): the data
// directory, the process that holds it, or, with --server, a running
// serve. One policy (manageStreams) decides what each does and prints, so
// that the places agree.

type controlOptions struct {
	server string
	force  bool
	json   bool
}

func (a *app) cancelCmd() *cobra.Command {
	return a.controlCmd("cancel ID...", "Cancel streams: their sources are closed and their queued chunks dropped",
		`cancel ends each stream with :cancelled (end reason "request"): a live one at
once, a stored one so that "rtfshost resume" leaves it alone (its journaled
chunks are dropped). Cancelling a stream that has ended changes nothing and
says how it ended.`,
		"  rtfshost cancel weather.monitor.v1-3fa1c2d0\n  rtfshost cancel --server http://127.0.0.1:7070 s1 s2",
		"cancel")
}

func (a *app) pauseCmd() *cobra.Command {
	return a.controlCmd("pause ID...", "Pause streams: their processors stop taking chunks",
		`pause holds each stream: its processor takes no chunk until it is resumed
("rtfshost resume ID"). A stored stream stays paused when the directory is
resumed.`,
		"  rtfshost pause weather.monitor.v1-3fa1c2d0",
		"pause")
}

const whereDoc = `

The streams are found where they are: the data directory (--data) when no
process holds it; the live streams of the rtfshost run, resume or serve
that holds it, through its control socket; or, with --server, the streams
of a running serve.`

func (a *app) controlCmd(use, short, long, example, verb string) *cobra.Command {
	var o controlOptions
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long + whereDoc, Example: example,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			return a.manageStreams(cmd.Context(), o, verb, ids)
		},
	}
	cmd.Flags().StringVar(&o.server, "server", "", "act on the live streams of the rtfshost serve at this URL")
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object per line")
	return cmd
}

func (a *app) rmCmd() *cobra.Command {
	var o controlOptions
	cmd := &cobra.Command{
		Use:   "rm ID...",
		Short: "Delete the records of ended streams",
		Long: `rm deletes every record of each stream, so that its id can be used again. A
stream that has not ended is refused unless --force is given (it is then
cancelled, and its progress is lost).` + whereDoc,
		Example: "  rtfshost rm weather.monitor.v1-3fa1c2d0\n  rtfshost rm --force stuck-1\n  rtfshost rm --server http://127.0.0.1:7070 s1",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			return a.manageStreams(cmd.Context(), o, "rm", ids)
		},
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "also remove a stream that has not ended")
	cmd.Flags().StringVar(&o.server, "server", "", "remove streams of the rtfshost serve at this URL")
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object per line")
	return cmd
}

// manageStreams applies verb (pause, resume, cancel or rm) to each id on
// the desk where the streams are, and prints "ID: STATE (was STATE)" or
// "ID: removed (was STATE)" per id (--json: a status line, or a removed
// line, with "was"), or the error. Pausing or resuming an ended stream is
// an error; cancelling one changes nothing. Removing a stream that has not
// ended needs force. The exit code is 1 if any id failed.
func (a *app) manageStreams(ctx context.Context, o controlOptions, verb string, ids []string) error {
	d, err := a.openDesk(ctx, o.server)
	if err != nil {
		return err
	}
	defer d.close()
	return a.manageOn(ctx, d, o, verb, ids)
}

// manageOn is manageStreams on the desk d.
func (a *app) manageOn(ctx context.Context, d desk, o controlOptions, verb string, ids []string) error {
	failed := false
	for _, id := range ids {
		in, now, err := a.manageOne(ctx, d, verb, id, o.force)
		was := in.Status.State
		switch {
		case err != nil:
			failed = true
			a.tellManageErr(o.json, id, err)
		case o.json && verb == "rm":
			writeJSONLine(a.stdout, jsonLine{Type: "removed", Stream: id, Was: string(was)})
		case o.json && verb == "skip":
			seq := in.Failure.Seq
			writeJSONLine(a.stdout, jsonLine{Type: "status", Stream: id, State: string(now), Was: string(was), Seq: &seq, Message: skipNote(in)})
		case o.json:
			writeJSONLine(a.stdout, jsonLine{Type: "status", Stream: id, State: string(now), Was: string(was)})
		case verb == "rm":
			fmt.Fprintf(a.stdout, "%s: removed (was %s)\n", id, was)
		case verb == "skip":
			fmt.Fprintf(a.stdout, "%s: %s (was %s); %s\n", id, now, was, skipNote(in))
		default:
			fmt.Fprintf(a.stdout, "%s: %s (was %s)\n", id, now, was)
		}
	}
	if failed {
		return printedWithCode(exitStreamFailed)
	}
	return nil
}

// tellManageErr prints the error of a management command on stream id.
func (a *app) tellManageErr(asJSON bool, id string, err error) {
	if asJSON {
		writeJSONLine(a.stdout, jsonLine{Type: "error", Stream: id, Message: err.Error()})
		return
	}
	if msg := err.Error(); strings.Contains(msg, strconv.Quote(id)) {
		fmt.Fprintf(a.stderr, "rtfshost: %s\n", msg) // it names the stream already
		return
	}
	fmt.Fprintf(a.stderr, "rtfshost: %s: %v\n", id, err)
}

// manageOne is manageStreams for one id: it returns the stream as it was
// before, and its state after.
func (a *app) manageOne(ctx context.Context, d desk, verb, id string, force bool) (in provider.StreamInfo, now provider.State, err error) {
	in, err = d.info(ctx, id, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
	if err != nil {
		return in, "", err
	}
	was := in.Status.State
	ended := was.Terminal()
	switch {
	case verb == "rm":
		if !ended && !force {
			return in, "", fmt.Errorf("stream %q is %s, not ended: cancel it first, or remove it with --force (its progress is lost)", id, was)
		}
		return in, "", d.remove(ctx, id)
	case verb == "skip":
		if err := skippable(id, in); err != nil {
			return in, "", err
		}
	case verb == "resume":
		if err := resumable(id, in); err != nil {
			return in, "", err
		}
	case was == provider.StateUnrecoverable:
		return in, "", fmt.Errorf("stream %q is unrecoverable (%s): rtfshost upgrade gives it a processor again, rtfshost rm --force removes it", id, in.Status.Message)
	case ended && verb == "cancel":
		return in, was, nil // nothing to cancel
	case ended:
		return in, "", fmt.Errorf("stream %q has ended (%s): it cannot be %s; rtfshost rm removes it", id, was, pastOf[verb])
	}
	now, err = d.apply(ctx, verb, id)
	return in, now, err
}

var pastOf = map[string]string{"pause": "paused", "resume": "resumed", "cancel": "cancelled"}

// openDesk finds the streams: the serve at server when it is given, else
// the process that holds the data directory (through its control socket),
// else the data directory itself, which must exist, opened to change it.
// Commands that only read open it with openReadDesk (store.go).
func (a *app) openDesk(ctx context.Context, server string) (desk, error) {
	return a.findDesk(ctx, server, a.openStore)
}

// findDesk is openDesk, opening the data directory with open.
func (a *app) findDesk(ctx context.Context, server string, open func(*slog.Logger) (*persistence.BadgerStore, error)) (desk, error) {
	if server != "" {
		return serverDesk{url: server}, nil
	}
	logger, err := a.logger()
	if err != nil {
		return nil, err
	}
	if err := a.checkDataDir(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(holderWait)
	for {
		d, err := a.dialHolder(ctx)
		if err == nil {
			return d, nil
		}
		if errors.As(err, new(*untrustedSocket)) {
			return nil, withCode(exitStreamFailed, err)
		}
		st, err := open(logger)
		if err == nil {
			d, err := a.openStoreDesk(ctx, st, logger)
			if err != nil {
				st.Close()
				return nil, withCode(exitStreamFailed, err)
			}
			return d, nil
		}
		// Another process holds the directory: it serves its control
		// socket a moment after it opened the directory.
		if !errors.As(err, new(*persistence.LockedError)) || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, withCode(exitInterrupted, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// holderWait is how long a command waits for the process that holds the
// data directory to answer on its control socket.
const holderWait = 5 * time.Second
