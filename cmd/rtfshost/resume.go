package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
)

func (a *app) resumeCmd() *cobra.Command {
	var o runOptions
	var skip bool
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

Without ids, resume carries on with the streams that were interrupted, and
says which; it leaves paused and failed streams as they are and lists them
with the commands that move them on; streams that have ended are not
reported again. When nothing needed resuming it says so and exits 0.

Given stream ids, resume resumes exactly those: an interrupted stream carries
on, a paused one (paused with "rtfshost pause", or for good by its
processor) is un-paused, a failed one retries the chunk it is held on (with
the processor it has then: "rtfshost upgrade" it first to fix a bug), and
it runs them until they end. With --skip, each failed stream sets the chunk
it is held on aside as a dead letter instead ("rtfshost dead-letters ID"
lists them) and goes on with the next; --skip on a stream that is not
failed on a chunk is an error. Programs parked on other streams stay parked
until a resume without ids.

When another process holds the data directory, resume acts there through its
control socket: resume ID resumes the stream in that process (which then
runs it), and resume without ids resumes there the interrupted streams it
does not run. With --server it resumes the given live streams of a running
serve instead.

Output and exit codes are those of run.`,
		Example: `  rtfshost run examples/backpressure.rtfs   # press Ctrl-C midway
  rtfshost resume
  rtfshost resume stuck-1
  rtfshost resume sensor-1 --skip
  rtfshost resume --data /var/lib/rtfshost --json
  rtfshost resume --server http://127.0.0.1:7070 s1`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, ids []string) error {
			if err := a.rt.resolve(cmd); err != nil {
				return withCode(exitProgramError, err)
			}
			verb := "resume"
			if skip {
				verb = "skip"
				if len(ids) == 0 {
					return withCode(exitProgramError, fmt.Errorf("resume --skip needs the ids of the failed streams whose held chunk to set aside (rtfshost streams lists them)"))
				}
			}
			if o.server != "" {
				if len(ids) == 0 {
					return withCode(exitProgramError, fmt.Errorf("resume --server needs the ids of the streams to resume"))
				}
				return a.manageStreams(cmd.Context(), controlOptions{server: o.server, json: o.json}, verb, ids)
			}
			return a.resumeStreams(cmd.Context(), o, ids, verb)
		},
	}
	cmd.Flags().StringVar(&o.server, "server", "", "resume the given live streams of the rtfshost serve at this URL instead")
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object per line (docs/cli.md has the format)")
	cmd.Flags().BoolVar(&skip, "skip", false, "set aside the chunk each failed stream ID is held on, as a dead letter, and go on with the next")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "stop after this long (0: no limit)")
	cmd.Flags().BoolVar(&o.waitPaused, "wait-paused", false, "keep waiting when every live stream is paused for good (by default resume reports them and exits 1)")
	a.addRuntimeFlags(cmd, false)
	addObsFlags(cmd, &o.obs, true)
	return cmd
}

// resumeStreams is the resume command: the streams of the data directory
// to resume (all the interrupted ones, or exactly those named) run as one
// job on a host of its own until they end, with the programs parked on
// them. When another process holds the directory, they are resumed there
// instead, through its control socket. verb is "skip" for resume ID
// --skip: the failed streams named set their held chunk aside.
func (a *app) resumeStreams(ctx context.Context, o runOptions, ids []string, verb string) error {
	d, err := a.openDesk(ctx, "")
	if err != nil {
		return err
	}
	if hd, ok := d.(*holderDesk); ok {
		defer d.close()
		if len(ids) > 0 {
			return a.manageOn(ctx, hd, controlOptions{json: o.json}, verb, ids)
		}
		return a.resumeThere(ctx, hd, o)
	}
	// Take stock of the directory before anything runs.
	infos, err := d.infos(ctx, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
	var stock resumeStock
	var picked []string         // resume ID: the ids that can be resumed
	var holding map[string]bool // those held as failed
	failed := false
	if err == nil {
		if len(ids) > 0 {
			picked, holding, failed = a.pickResumed(ctx, d, ids, o.json, verb)
		}
		stock = stockOf(infos, picked)
	}
	d.close()
	if err != nil {
		return withCode(exitStreamFailed, err)
	}
	if len(ids) > 0 && len(picked) == 0 {
		return printedWithCode(exitStreamFailed)
	}

	rep, live := a.newReporter(o, nil)
	defer rep.close()
	s, err := a.openSession(o, true, rep)
	var held *persistence.LockedError
	if errors.As(err, &held) {
		return a.reportErr(rep, withCode(exitStreamFailed, fmt.Errorf("%w; it took the directory while this resume looked at it: run rtfshost resume again", held)))
	}
	if err != nil {
		return a.reportErr(rep, err)
	}
	h := hints{dataDir: a.flags.dataDir}
	j, err := newJob(s.h, s.owners, rep, jobOptions{timeout: o.timeout, waitPaused: o.waitPaused, live: live, catchAll: true,
		maxOutput: a.rt.limits().OutputLimit(), hints: h})
	if err != nil {
		s.close()
		return a.reportErr(rep, withCode(exitProgramError, err))
	}
	ctx, cancel := withTimeout(ctx, o.timeout)
	defer cancel()
	ctx, stuck := context.WithCancelCause(ctx)
	defer stuck(nil)
	before, err := s.h.ResumedPrograms(ctx)
	if err != nil {
		s.close()
		return a.reportErr(rep, withCode(exitStreamFailed, err))
	}
	// The streams not resumed are set aside before they load: no job
	// reports them or waits for them.
	for _, id := range stock.asideIDs() {
		s.owners.take(id, setAside)
	}
	// Said before anything runs: a resumed stream's first outputs come
	// after the line that names it.
	stock.tell(rep, h, len(ids) > 0)
	var recErr error
	if len(ids) > 0 {
		// Exactly those: the programs parked on them stay parked.
		var errs []error
		p := s.h.Provider()
		for _, id := range picked {
			if err := p.RecoverStream(ctx, id); err != nil {
				errs = append(errs, err)
				continue
			}
			if !holding[id] {
				continue
			}
			// A failed stream is loaded held again: it retries its chunk,
			// or sets it aside, as it would live.
			op := p.Resume
			if verb == "skip" {
				op = p.Skip
			}
			if _, err := op(ctx, id); err != nil {
				errs = append(errs, err)
			}
		}
		recErr = errors.Join(errs...)
	} else {
		// Streams and parked programs that cannot be recovered do not
		// hold the others back: they are listed as unrecoverable
		// (rtfshost inspect), named at the end, and make the exit code 1.
		recErr = s.h.Recover(ctx)
	}
	watch := j.watch(ctx, stuck)
	waitErrs := a.awaitResumed(ctx, s, j, stock.asideIDs())
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
		if n := s.h.ResumedRunning(); n > 0 {
			rep.log("", fmt.Sprintf("%d resumed program(s) stay parked on streams that were not resumed; they carry on when those streams are", n))
		}
		code := exitOK
		if failed {
			code = exitStreamFailed
		}
		if recErr != nil {
			rep.fail(failure{Kind: failOther, Message: "not recovered (the others ran): " + recErr.Error()})
			code = exitStreamFailed
		}
		for _, err := range waitErrs {
			rep.fail(failureOf(err, ""))
			code = exitStreamFailed
		}
		return code
	})
	return a.endSession(ctx, s, rep, code, o.json)
}

// pickResumed checks each id of resume ID... (verb "resume") or resume
// ID... --skip ("skip") on the data directory d, as the other commands
// check theirs, prints "ID: active (was STATE)" for each that can be
// resumed (a paused one is un-paused in its records) and the error of each
// that cannot, and returns the first, with those held as failed (the
// session resumes or skips them once loaded).
func (a *app) pickResumed(ctx context.Context, d desk, ids []string, asJSON bool, verb string) (picked []string, held map[string]bool, failed bool) {
	held = map[string]bool{}
	for _, id := range ids {
		in, err := d.info(ctx, id, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
		switch {
		case err == nil && verb == "skip":
			err = skippable(id, in)
		case err == nil:
			err = resumable(id, in)
		}
		if err == nil && in.Status.State == provider.StatePaused {
			_, err = d.apply(ctx, "resume", id)
		}
		if err != nil {
			failed = true
			a.tellManageErr(asJSON, id, err)
			continue
		}
		picked = append(picked, id)
		held[id] = in.Status.State == stateFailed
		l := jsonLine{Type: "status", Stream: id, State: string(provider.StateActive), Was: string(in.Status.State)}
		if verb == "skip" {
			seq := in.Failure.Seq
			l.Seq, l.Message = &seq, skipNote(in)
		}
		switch {
		case asJSON:
			writeJSONLine(a.stdout, l)
		case verb == "skip":
			fmt.Fprintf(a.stdout, "%s: %s (was %s); %s\n", id, provider.StateActive, in.Status.State, l.Message)
		default:
			fmt.Fprintf(a.stdout, "%s: %s (was %s)\n", id, provider.StateActive, in.Status.State)
		}
	}
	return picked, held, failed
}

// resumable says why stream id, as in shows it, cannot be resumed (nil
// when it can): it has ended, or it is unrecoverable. One policy for
// every desk (manageOne uses it).
func resumable(id string, in provider.StreamInfo) error {
	was := in.Status.State
	switch {
	case was == provider.StateUnrecoverable:
		return fmt.Errorf("stream %q is unrecoverable (%s): rtfshost upgrade gives it a processor again, rtfshost rm --force removes it", id, in.Status.Message)
	case was.Terminal():
		return fmt.Errorf("stream %q has ended (%s): it cannot be resumed; rtfshost rm removes it", id, was)
	}
	return nil
}

// resumeStock is what a resume found in the data directory before it
// ran anything.
type resumeStock struct {
	interrupted []string              // to resume, in start order
	paused      []string              // left paused
	failed      []provider.StreamInfo // left failed
	ended       []string              // ended before: not reported again
	running     int                   // run by the process that holds the directory
	// unrecoverable ones are told by the recovery's error.
	unrecoverable []string
}

// stockOf sorts infos; with picked (resume ID...), only those are
// resumed and every other stream is set aside.
func stockOf(infos []provider.StreamInfo, picked []string) resumeStock {
	var st resumeStock
	pick := map[string]bool{}
	for _, id := range picked {
		pick[id] = true
	}
	for _, in := range infos {
		id := in.StreamID
		switch state := in.Status.State; {
		case len(picked) > 0 && pick[id]:
			st.interrupted = append(st.interrupted, id)
		case len(picked) > 0:
			st.ended = append(st.ended, id) // not asked for: left alone
		case state == provider.StateActive:
			st.running++
		case state == StateInterrupted:
			st.interrupted = append(st.interrupted, id)
		case state == provider.StatePaused:
			st.paused = append(st.paused, id)
		case state == stateFailed:
			st.failed = append(st.failed, in)
		case state == provider.StateUnrecoverable:
			st.unrecoverable = append(st.unrecoverable, id) // told by Recover's error
		default:
			st.ended = append(st.ended, id)
		}
	}
	return st
}

// asideIDs are the streams a resume loads and leaves as they are.
func (st resumeStock) asideIDs() []string {
	ids := append(append(append([]string(nil), st.paused...), st.ended...), st.unrecoverable...)
	for _, in := range st.failed {
		ids = append(ids, in.StreamID)
	}
	return ids
}

// tell says what the resume does: which interrupted streams it resumes,
// which paused and failed ones it leaves, with the commands that move
// them on, or that nothing needed resuming. With ids it said it per id.
func (st resumeStock) tell(rep reporter, h hints, byID bool) {
	if byID {
		return
	}
	if n := len(st.interrupted); n > 0 {
		rep.log("", fmt.Sprintf("resuming %d interrupted stream%s: %s", n, plural(n), strings.Join(st.interrupted, ", ")))
	}
	for _, id := range st.paused {
		rep.log("", fmt.Sprintf("stream %s is paused, and stays so: %s", id, h.repairs(id, nil)))
	}
	for _, in := range st.failed {
		rep.log("", fmt.Sprintf("stream %s has failed (%s), and stays so until it is repaired: %s", in.StreamID, in.Status.Message, h.repairs(in.StreamID, failureOfState(in.Status.State, in.Failure))))
	}
	if len(st.interrupted) == 0 {
		rep.log("", fmt.Sprintf("nothing to resume in %s: no stream was interrupted (%s)", h.dataDir, st.counts()))
	}
}

// counts sums up the streams not resumed: "3 ended, 1 paused".
func (st resumeStock) counts() string {
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{st.running, "running"}, {len(st.ended), "ended"}, {len(st.paused), "paused"}, {len(st.failed), "failed"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(parts) == 0 {
		return "it holds no stream"
	}
	return strings.Join(parts, ", ") + "; rtfshost streams lists them"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// awaitResumed waits until the resumed streams (the job's) have ended and
// the resumed programs have finished, or wait only on the streams aside
// (not resumed), or ctx ends; it returns the failures of the job's
// streams, each once. A program whose resumed stream has just ended
// still awaits it for a moment: it is waited for, not told as parked.
func (a *app) awaitResumed(ctx context.Context, s *session, j *job, aside []string) []error {
	told := map[string]bool{}
	var errs []error
	for {
		for _, err := range j.wait(ctx) {
			var se *provider.StreamError
			if errors.As(err, &se) {
				if told[se.StreamID] {
					continue
				}
				told[se.StreamID] = true
			}
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			return nil
		}
		if running := s.h.ResumedRunning(); j.liveCount(ctx) == 0 && (running == 0 || s.h.ParkedOn(aside) >= running) {
			return errs
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// resumeThere is resume without ids on a data directory another process
// holds: the interrupted streams it does not run are resumed there,
// through its control socket, with the lines of a resume here.
func (a *app) resumeThere(ctx context.Context, d *holderDesk, o runOptions) error {
	infos, err := d.infos(ctx, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
	if err != nil {
		return withCode(exitStreamFailed, err)
	}
	rep, _ := a.newReporter(runOptions{json: o.json}, nil)
	defer rep.close()
	st := stockOf(infos, nil)
	h := hints{dataDir: a.flags.dataDir}
	st.tell(rep, h, false)
	code := exitOK
	for _, id := range st.interrupted {
		if _, err := d.apply(ctx, "resume", id); err != nil {
			rep.fail(failure{Kind: failOther, Stream: id, Message: fmt.Sprintf("%s: %v", id, err)})
			code = exitStreamFailed
		}
	}
	if len(st.interrupted) > 0 {
		rep.log("", fmt.Sprintf("they run in %s; rtfshost streams --data %s shows them", d.hello, a.flags.dataDir))
	}
	return codeErr(code)
}
