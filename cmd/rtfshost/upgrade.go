package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/host/mcpserver"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

type upgradeOptions struct {
	program   string
	processor string
	server    string
	json      bool
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
				return a.upgradeEach(cmd.Context(), ids, o.json, func(ctx context.Context, id string) (provider.UpgradeResult, error) {
					args := map[string]any{"stream-id": id, "program": string(src), "filename": filepath.Base(o.program)}
					if o.processor != "" {
						args["processor"] = o.processor
					}
					return upgradeOnServer(ctx, o.server, args)
				})
			}
			prog, err := a.loadProgram(o.program)
			if err != nil {
				return err
			}
			if err := a.rt.resolve(cmd); err != nil {
				return withCode(exitProgramError, err)
			}
			return a.upgradeStreams(cmd.Context(), ids, prog, o.processor, o.json)
		},
	}
	cmd.Flags().StringVar(&o.program, "program", "", "the RTFS file that defines the new processor")
	cmd.Flags().StringVar(&o.processor, "processor", "", "the new processor's name in the program (default: the stream's processor's name)")
	cmd.Flags().StringVar(&o.server, "server", "", "swap the processors of live streams of the rtfshost serve at this URL instead of the data directory")
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object per stream (docs/cli.md has the format)")
	a.addRuntimeFlags(cmd, false)
	return cmd
}

// upgradeStreams swaps the processor of each stream where it is: in the
// data directory (one commit of its records), or, when a process holds the
// directory, through its control socket in that process (between two
// chunks of a stream it runs, in the records of one it only stores).
func (a *app) upgradeStreams(ctx context.Context, ids []string, prog *rtfs.Program, processor string, asJSON bool) error {
	d, err := a.openDesk(ctx, "")
	if err != nil {
		return err
	}
	defer d.close()
	return a.upgradeEach(ctx, ids, asJSON, func(ctx context.Context, id string) (provider.UpgradeResult, error) {
		switch d := d.(type) {
		case *holderDesk:
			return d.upgrade(ctx, id, prog.Name(), prog.Source(), processor)
		case *storeDesk:
			return upgradeStored(ctx, d.st, provider.Upgrade{StreamID: id, Program: prog, Processor: processor, Limits: a.rt.limits()})
		default:
			return provider.UpgradeResult{}, fmt.Errorf("upgrade: %s cannot be reached", d.where())
		}
	})
}

// upgradeStored swaps the processor of a stream that st only stores
// (provider.UpgradeStored); its state is told as the management commands
// tell a stored stream's, active being StateInterrupted.
func upgradeStored(ctx context.Context, st persistence.Store, u provider.Upgrade) (provider.UpgradeResult, error) {
	res, err := provider.UpgradeStored(ctx, st, u)
	if err == nil && res.State == provider.StateActive {
		res.State = StateInterrupted // it runs on at the next resume
	}
	return res, err
}

// upgradeOnServer has the serve at server swap a live stream's processor
// (mcp.stream.upgrade, whose result is a provider.UpgradeResult as JSON).
func upgradeOnServer(ctx context.Context, server string, args map[string]any) (provider.UpgradeResult, error) {
	var res provider.UpgradeResult
	text, err := callServer(ctx, server, mcpserver.ToolUpgrade, args)
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal([]byte(text), &res); err != nil || res.StreamID == "" {
		return res, fmt.Errorf("%s on %s answered what is not an upgrade's result (%v): %.200s", mcpserver.ToolUpgrade, server, err, text)
	}
	return res, nil
}

// upgradeEach runs the swap op on each id and prints what it did, the
// same wherever the stream is: "ID: <upgradeOutcome>", or with --json an
// "upgraded" line with the result's fields and that sentence; an error as
// the management commands tell theirs. The exit code is 1 if any id
// failed.
func (a *app) upgradeEach(ctx context.Context, ids []string, asJSON bool, op func(ctx context.Context, id string) (provider.UpgradeResult, error)) error {
	failed := false
	for _, id := range ids {
		res, err := op(ctx, id)
		switch {
		case err != nil:
			failed = true
			a.tellManageErr(asJSON, id, err)
		case asJSON:
			from := &res.From
			if from.Hash == "" {
				from = nil
			}
			writeJSONLine(a.stdout, jsonLine{Type: "upgraded", Stream: id, State: string(res.State), From: from, To: &res.To, Message: upgradeOutcome(res)})
		default:
			fmt.Fprintf(a.stdout, "%s: %s\n", id, upgradeOutcome(res))
		}
	}
	if failed {
		return printedWithCode(exitStreamFailed)
	}
	return nil
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
