package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/host/mcpserver"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
)

// The stream-management commands: cancel, pause and rm act on the streams
// of the data directory (which no other rtfshost may hold), or, with
// --server, on the live streams of a running "rtfshost serve" through its
// MCP tools. resume ID... is in resume.go.

type controlOptions struct {
	server string
	force  bool
}

func (a *app) cancelCmd() *cobra.Command {
	return a.controlCmd("cancel ID...", "Cancel streams: their sources are closed and their queued chunks dropped",
		`cancel ends each stream with :cancelled (end reason "request"). On the data
directory it marks the stored stream cancelled and drops its journaled chunks,
so that "rtfshost resume" leaves it alone; with --server it cancels the live
stream of a running serve.`,
		"  rtfshost cancel weather.monitor.v1-3fa1c2d0\n  rtfshost cancel --server http://127.0.0.1:7070 s1 s2",
		provider.StateCancelled, mcpserver.ToolCancel)
}

func (a *app) pauseCmd() *cobra.Command {
	return a.controlCmd("pause ID...", "Pause streams: their processors stop taking chunks",
		`pause holds each stream: its processor takes no chunk until it is resumed
("rtfshost resume ID"). On the data directory the stored stream stays paused
when the directory is resumed; with --server it pauses a live stream.`,
		"  rtfshost pause weather.monitor.v1-3fa1c2d0",
		provider.StatePaused, mcpserver.ToolPause)
}

func (a *app) controlCmd(use, short, long, example string, to provider.State, tool string) *cobra.Command {
	var o controlOptions
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Example: example,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			if o.server != "" {
				return a.control(cmd.Context(), ids, func(ctx context.Context, id string) (string, error) {
					return callServer(ctx, o.server, tool, map[string]any{"stream-id": id})
				})
			}
			return a.onStore(cmd.Context(), ids, func(ctx context.Context, st persistence.Store, id string) (string, error) {
				from, err := provider.SetStoredState(ctx, st, id, to)
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("%s (was %s)", to, from), nil
			})
		},
	}
	cmd.Flags().StringVar(&o.server, "server", "", "act on the live streams of the rtfshost serve at this URL instead of the data directory")
	return cmd
}

func (a *app) rmCmd() *cobra.Command {
	var o controlOptions
	cmd := &cobra.Command{
		Use:   "rm ID...",
		Short: "Delete the records of ended streams from the data directory",
		Long: `rm deletes every record of each stream from the data directory, so that its
id can be used again. A stream that has not ended is refused unless --force is
given (its progress is then lost). With --server it removes streams of a
running serve (mcp.stream.remove).`,
		Example: "  rtfshost rm weather.monitor.v1-3fa1c2d0\n  rtfshost rm --force stuck-1\n  rtfshost rm --server http://127.0.0.1:7070 s1",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			if o.server != "" {
				return a.control(cmd.Context(), ids, func(ctx context.Context, id string) (string, error) {
					return callServer(ctx, o.server, mcpserver.ToolRemove, map[string]any{"stream-id": id, "force": o.force})
				})
			}
			return a.onStore(cmd.Context(), ids, func(ctx context.Context, st persistence.Store, id string) (string, error) {
				from, err := provider.RemoveStored(ctx, st, id, o.force)
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("removed (was %s)", from), nil
			})
		},
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "also remove a stream that has not ended")
	cmd.Flags().StringVar(&o.server, "server", "", "remove streams of the rtfshost serve at this URL instead of the data directory")
	return cmd
}

// control runs op on each id, printing "ID: outcome" or the error; the exit
// code is 1 if any failed.
func (a *app) control(ctx context.Context, ids []string, op func(ctx context.Context, id string) (string, error)) error {
	failed := false
	for _, id := range ids {
		out, err := op(ctx, id)
		if err != nil {
			fmt.Fprintf(a.stderr, "rtfshost: %s: %v\n", id, err)
			failed = true
			continue
		}
		fmt.Fprintf(a.stdout, "%s: %s\n", id, out)
	}
	if failed {
		return printedWithCode(exitStreamFailed)
	}
	return nil
}

// onStore opens the data directory (which must exist) once and runs op on
// each id, as control does.
func (a *app) onStore(ctx context.Context, ids []string, op func(ctx context.Context, st persistence.Store, id string) (string, error)) error {
	logger, err := a.logger()
	if err != nil {
		return err
	}
	st, err := a.openExistingStore(logger)
	if err != nil {
		return err
	}
	defer st.Close()
	return a.control(ctx, ids, func(ctx context.Context, id string) (string, error) { return op(ctx, st, id) })
}
