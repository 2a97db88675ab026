package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/host/mcpserver"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

type upgradeOptions struct {
	program   string
	processor string
	server    string
}

// upgradeCmd swaps the processor of streams, keeping their state
// (docs/upgrading.md).
func (a *app) upgradeCmd() *cobra.Command {
	var o upgradeOptions
	cmd := &cobra.Command{
		Use:   "upgrade ID... --program FILE",
		Short: "Give streams a new processor, keeping their state, cursor and journal",
		Long: `upgrade replaces the processor of each stream with the function of the same
name (or --processor NAME) that FILE defines. FILE must compile, and its top
level must only define things (no host calls). The stream keeps its state,
cursor, journaled chunks and statistics: the chunks it processed got the old
processor, the next ones get the new one. Its history of programs (hash and
time) shows in "rtfshost inspect --stream ID".

On the data directory, the streams must be paused or interrupted (not ended);
each is rewritten in one commit, and "rtfshost resume" runs it with the new
processor. With --server, a running serve swaps the processor of its live
stream between two chunks (mcp.stream.upgrade) and the stream goes on. A swap
that fails changes nothing.`,
		Example: `  rtfshost pause sensor-1
  rtfshost upgrade sensor-1 --program fixed.rtfs
  rtfshost resume sensor-1
  rtfshost upgrade --server http://127.0.0.1:7070 sensor-1 --program fixed.rtfs --processor by-city`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			if o.program == "" {
				return withCode(exitProgramError, fmt.Errorf("upgrade needs the new program: --program FILE"))
			}
			if o.server != "" {
				src, err := os.ReadFile(o.program)
				if err != nil {
					return withCode(exitProgramError, fmt.Errorf("reading program: %w", err))
				}
				return a.control(cmd.Context(), ids, func(ctx context.Context, id string) (string, error) {
					args := map[string]any{"stream-id": id, "program": string(src), "filename": filepath.Base(o.program)}
					if o.processor != "" {
						args["processor"] = o.processor
					}
					return callServer(ctx, o.server, mcpserver.ToolUpgrade, args)
				})
			}
			prog, err := a.loadProgram(o.program)
			if err != nil {
				return err
			}
			if err := a.rt.resolve(cmd); err != nil {
				return withCode(exitProgramError, err)
			}
			return a.upgradeStreams(cmd.Context(), ids, prog, o.processor)
		},
	}
	cmd.Flags().StringVar(&o.program, "program", "", "the RTFS file that defines the new processor")
	cmd.Flags().StringVar(&o.processor, "processor", "", "the new processor's name in the program (default: the stream's processor's name)")
	cmd.Flags().StringVar(&o.server, "server", "", "swap the processors of live streams of the rtfshost serve at this URL instead of the data directory")
	a.addRuntimeFlags(cmd, false)
	return cmd
}

// upgradeStreams swaps the processor of each stream where it is: in the
// data directory (one commit of its records), or, when a process holds the
// directory, through its control socket in that process (between two
// chunks of a stream it runs, in the records of one it only stores).
func (a *app) upgradeStreams(ctx context.Context, ids []string, prog *rtfs.Program, processor string) error {
	d, err := a.openDesk(ctx, "")
	if err != nil {
		return err
	}
	defer d.close()
	return a.control(ctx, ids, func(ctx context.Context, id string) (string, error) {
		var res provider.UpgradeResult
		switch d := d.(type) {
		case *holderDesk:
			res, err = d.upgrade(ctx, id, prog.Name(), prog.Source(), processor)
		case *storeDesk:
			res, err = provider.UpgradeStored(ctx, d.st, provider.Upgrade{StreamID: id, Program: prog, Processor: processor, Limits: a.rt.limits()})
		default:
			err = fmt.Errorf("upgrade: %s cannot be reached", d.where())
		}
		if err != nil {
			return "", err
		}
		return upgradeOutcome(res), nil
	})
}

// upgradeOutcome says what a swap did, on one line.
func upgradeOutcome(res provider.UpgradeResult) string {
	from := "its processor"
	if res.From.Hash != "" {
		from = fmt.Sprintf("%s of %s (%s)", res.From.Processor, res.From.File, shortHash(res.From.Hash))
	}
	return fmt.Sprintf("%s of %s (%s) replaces %s; state kept, stream %s", res.To.Processor, res.To.File, shortHash(res.To.Hash), from, res.State)
}

func shortHash(h string) string { return h[:min(len(h), 12)] }
