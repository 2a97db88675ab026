package main

import (
	"context"
	"fmt"
	"github.com/rtfshost/rtfshost/host/mcpserver"
	"github.com/rtfshost/rtfshost/provider"

	"github.com/spf13/cobra"
)

func (a *app) resumeCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "resume [ID...]",
		Short: "Resume every unfinished stream persisted in the data directory",
		Long: `resume reloads every stream of the data directory that had not ended when its
host stopped (Ctrl-C, a crash, kill -9), reconnects each to its source from
the last committed cursor, and carries on until they all end. Each chunk's
effect on the state happens once: the state and the cursor are committed
together. Programs that were parked on :mcp.stream.await continue when their
stream ends; their values are printed as log lines ("program F (awaiting S)
finished: VALUE").

Given stream ids, resume first un-pauses those streams (a stream paused with
"rtfshost pause", or paused for good by its processor), then carries on with
every unfinished stream. With --server it resumes the given live streams of a
running serve instead.

Output and exit codes are those of run.`,
		Example: `  rtfshost run examples/backpressure.rtfs   # press Ctrl-C midway
  rtfshost resume
  rtfshost resume stuck-1
  rtfshost resume --data /var/lib/rtfshost --json
  rtfshost resume --server http://127.0.0.1:7070 s1`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, ids []string) error {
			if err := a.rt.resolve(cmd); err != nil {
				return withCode(exitProgramError, err)
			}
			if o.server != "" {
				if len(ids) == 0 {
					return withCode(exitProgramError, fmt.Errorf("resume --server needs the ids of the streams to resume"))
				}
				return a.control(cmd.Context(), ids, func(ctx context.Context, id string) (string, error) {
					return callServer(ctx, o.server, mcpserver.ToolResume, map[string]any{"stream-id": id})
				})
			}
			o.unpause = ids
			return a.resumeStreams(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.server, "server", "", "resume the given live streams of the rtfshost serve at this URL instead")
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object per line (see the README for the format)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "stop after this long (0: no limit)")
	cmd.Flags().BoolVar(&o.waitPaused, "wait-paused", false, "keep waiting when every live stream is paused for good (by default resume reports them and exits 1)")
	a.addRuntimeFlags(cmd, false)
	addObsFlags(cmd, &o.obs, true)
	return cmd
}

// resumeStreams is the resume command.
// liveStreams counts the streams of ids that have not ended.
func liveStreams(p *provider.Provider, ids []string) int {
	n := 0
	for _, id := range ids {
		if st, err := p.Status(id); err == nil && !st.State.Terminal() {
			n++
		}
	}
	return n
}

func (a *app) resumeStreams(ctx context.Context, o runOptions) (err error) {
	if o.json {
		defer func() { a.jsonError("", err) }()
	}
	ctx, cancel := withTimeout(ctx, o.timeout)
	defer cancel()
	s, err := a.openSession(o, true)
	if err != nil {
		return err
	}
	defer s.close()
	for _, id := range o.unpause {
		from, err := provider.SetStoredState(ctx, s.h.Store(), id, provider.StateActive)
		if err != nil {
			s.rep.close()
			return withCode(exitStreamFailed, err)
		}
		if from == provider.StatePaused {
			s.rep.log(fmt.Sprintf("resuming the paused stream %s", id))
		}
	}
	before, err := s.h.ResumedPrograms(ctx)
	if err != nil {
		return withCode(exitStreamFailed, err)
	}
	ctx, cancelStuck := context.WithCancelCause(ctx)
	defer cancelStuck(nil)
	// Streams and parked programs that cannot be recovered do not hold the
	// others back: they are listed as unrecoverable (rtfshost inspect),
	// named at the end, and make the exit code 1.
	recErr := s.h.Recover(ctx)
	watch := a.watchStuck(ctx, cancelStuck, s.h, o)
	if ids := s.h.Provider().StreamIDs(); recErr == nil && len(ids) > 0 && liveStreams(s.h.Provider(), ids) == 0 && len(before) == 0 {
		s.rep.log(fmt.Sprintf("nothing to resume in %s: all %d streams have ended (rtfshost inspect --data %s shows them)", a.flags.dataDir, len(ids), a.flags.dataDir))
	}
	waitErr := s.h.Wait(ctx)
	watch.stop()
	if err := watch.report(a, o.json); err != nil {
		s.rep.close()
		return err
	}
	after, err := s.h.ResumedPrograms(ctx)
	if finishErr := s.finish(); finishErr != nil && waitErr == nil {
		waitErr = finishErr
	}
	if err == nil {
		for _, rp := range after[min(len(before), len(after)):] {
			if rp.Err != "" {
				s.rep.log(fmt.Sprintf("program %s (awaiting %s) failed: %s", rp.Program, rp.StreamID, rp.Err))
				continue
			}
			s.rep.log(fmt.Sprintf("program %s (awaiting %s) finished: %s", rp.Program, rp.StreamID, rp.Value))
		}
	}
	s.rep.close()
	if recErr != nil {
		fmt.Fprintln(a.stderr, "rtfshost: not recovered (the others ran):", recErr)
		return printedWithCode(exitStreamFailed)
	}
	if len(s.h.Provider().StreamIDs()) == 0 {
		fmt.Fprintf(a.stderr, "rtfshost: no streams in %s\n", a.flags.dataDir)
	}
	return a.streamsOutcome(ctx, waitErr)
}
