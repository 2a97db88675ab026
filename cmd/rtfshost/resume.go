package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/persistence"
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
				return a.manageStreams(cmd.Context(), controlOptions{server: o.server, json: o.json}, "resume", ids)
			}
			o.unpause = ids
			return a.resumeStreams(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.server, "server", "", "resume the given live streams of the rtfshost serve at this URL instead")
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object per line (docs/cli.md has the format)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "stop after this long (0: no limit)")
	cmd.Flags().BoolVar(&o.waitPaused, "wait-paused", false, "keep waiting when every live stream is paused for good (by default resume reports them and exits 1)")
	a.addRuntimeFlags(cmd, false)
	addObsFlags(cmd, &o.obs, true)
	return cmd
}

// resumeStreams is the resume command: one job on a host of its own that
// recovers every unfinished stream of the data directory and the programs
// parked on them. When another process holds the directory, its streams
// run there already: resume ID un-pauses them there, and a bare resume
// says what holds it.
func (a *app) resumeStreams(ctx context.Context, o runOptions) error {
	if len(o.unpause) > 0 {
		// Un-pause them first, with the policy and the messages of the
		// other commands (on the process that holds the directory, if
		// one does: its streams run there).
		heldBy, err := a.unpause(ctx, o)
		if err != nil || heldBy {
			return err
		}
	}
	rep, live := a.newReporter(o, nil)
	defer rep.close()
	s, err := a.openSession(o, true, rep)
	var held *persistence.LockedError
	if errors.As(err, &held) {
		return a.reportErr(rep, withCode(exitStreamFailed, fmt.Errorf("%w; the streams it runs go on there, and those it does not (rtfshost streams shows them as interrupted) can be resumed once it has ended", held)))
	}
	if err != nil {
		return a.reportErr(rep, err)
	}
	for _, id := range o.unpause {
		rep.log("", fmt.Sprintf("resuming the paused stream %s", id))
	}
	before, err := s.h.ResumedPrograms(ctx)
	if err != nil {
		s.close()
		return a.reportErr(rep, withCode(exitStreamFailed, err))
	}
	j, err := newJob(s.h, s.owners, rep, jobOptions{timeout: o.timeout, waitPaused: o.waitPaused, live: live, catchAll: true,
		maxOutput: a.rt.limits().OutputLimit()})
	if err != nil {
		s.close()
		return a.reportErr(rep, withCode(exitProgramError, err))
	}
	ctx, cancel := withTimeout(ctx, o.timeout)
	defer cancel()
	ctx, stuck := context.WithCancelCause(ctx)
	defer stuck(nil)
	// Streams and parked programs that cannot be recovered do not hold the
	// others back: they are listed as unrecoverable (rtfshost inspect),
	// named at the end, and make the exit code 1.
	recErr := s.h.Recover(ctx)
	watch := j.watch(ctx, stuck)
	p := s.h.Provider()
	if ids := p.StreamIDs(); recErr == nil && len(ids) > 0 && len(p.Live()) == 0 && len(before) == 0 {
		rep.log("", fmt.Sprintf("nothing to resume in %s: all %d streams have ended (rtfshost streams --data %s shows them)", a.flags.dataDir, len(ids), a.flags.dataDir))
	}
	waitErr := s.h.Wait(ctx)
	code := j.conclude(ctx, watch, func() int {
		if after, err := s.h.ResumedPrograms(ctx); err == nil {
			for _, rp := range after[min(len(before), len(after)):] {
				if rp.Err != "" {
					rep.log("", fmt.Sprintf("program %s (awaiting %s) failed: %s", rp.Program, rp.StreamID, rp.Err))
					continue
				}
				rep.log("", fmt.Sprintf("program %s (awaiting %s) finished: %s", rp.Program, rp.StreamID, rp.Value))
			}
		}
		if recErr != nil {
			rep.fail(failure{Kind: failOther, Message: "not recovered (the others ran): " + recErr.Error()})
			return exitStreamFailed
		}
		if len(s.h.Provider().StreamIDs()) == 0 {
			rep.fail(failure{Kind: failOther, Message: "no streams in " + a.flags.dataDir})
			return exitOK
		}
		code := exitOK
		for _, err := range joinedErrs(waitErr) {
			rep.fail(failureOf(err, ""))
			code = exitStreamFailed
		}
		return code
	})
	return a.endSession(ctx, s, rep, code, o.json)
}

// joinedErrs returns the errors errors.Join joined in err (err itself when it
// joins none).
func joinedErrs(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// unpause un-pauses the streams of resume ID... where they are: on the
// process that holds the data directory (heldBy: nothing is left to
// resume here), or in the directory. Each error is told as the other
// commands tell it, and ends the command.
func (a *app) unpause(ctx context.Context, o runOptions) (heldBy bool, err error) {
	d, err := a.openDesk(ctx, "")
	if err != nil {
		return false, err
	}
	_, heldBy = d.(*holderDesk)
	if heldBy {
		d.close()
		return true, a.manageStreams(ctx, controlOptions{json: o.json}, "resume", o.unpause)
	}
	defer d.close()
	failed := false
	for _, id := range o.unpause {
		if _, _, err := a.manageOne(ctx, d, "resume", id, false); err != nil {
			failed = true
			a.tellManageErr(o.json, id, err)
		}
	}
	if failed {
		return false, printedWithCode(exitStreamFailed)
	}
	return false, nil
}
