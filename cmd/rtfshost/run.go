package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

type runOptions struct {
	json       bool
	timeout    time.Duration
	waitPaused bool
	server     string // resume --server
	record     string // run --record DIR: each stream's chunks to DIR/<id>.ndjson
	obs        obsFlags
}

func (a *app) runCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run FILE.rtfs",
		Short: "Run an RTFS program and every stream it starts",
		Long: `run compiles and runs the program, serves its host calls, and then waits until
every stream it started has ended. It prints each processor output, each
stream's end and the program's result: live lines on a terminal, plain lines
on a pipe, or one JSON object per line with --json.

When the resolved server URL is the default local one (127.0.0.1:2025) and
nothing listens there, run starts the embedded reference server for the time
of the run.

When another rtfshost holds the data directory (a run, a resume or a serve
started earlier), run hands its program to it: the program and its streams
run there, and this run prints their lines as its own, and ends when they
do; its Ctrl-C stops its own streams only. That process then ends after
the runs that joined it (docs/runs-side-by-side.md).

Exit codes: 0 when every stream completed, 1 when a stream failed, 2 for a
program error (printed as file:line:col: message with the source line).`,
		Example: `  rtfshost run examples/weather.rtfs
  rtfshost run --json examples/multiplex.rtfs
  rtfshost run --timeout 30s --server-url http://127.0.0.1:2025/sse examples/await.rtfs
  rtfshost run --record recordings examples/weather.rtfs`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.rt.resolve(cmd); err != nil {
				return withCode(exitProgramError, err)
			}
			return a.runProgram(cmd.Context(), args[0], o)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object per line (docs/cli.md has the format)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "stop the run after this long (0: no limit)")
	cmd.Flags().BoolVar(&o.waitPaused, "wait-paused", false, "keep waiting when every live stream is paused for good (by default run reports them and exits 1)")
	cmd.Flags().StringVar(&o.record, "record", "", "write every chunk each stream receives to DIR/<stream id>.ndjson (created if needed), for :transport :replay and rtfshost test")
	a.addRuntimeFlags(cmd, false)
	addObsFlags(cmd, &o.obs, true)
	return cmd
}

// runProgram is the run command: the program runs as the one job of a
// host of its own, or, when another process holds the data directory, as
// a job of that process (join).
func (a *app) runProgram(ctx context.Context, path string, o runOptions) error {
	src, err := a.readProgram(path)
	if err != nil {
		return err
	}
	rep, live := a.newReporter(o, map[string][]byte{path: src})
	defer rep.close()
	prog, err := rtfs.Compile(path, src)
	if err != nil {
		rep.fail(failureOf(err, path))
		return printedWithCode(exitProgramError)
	}
	// Hold the directory, or join the process that holds it. A holder
	// serves its socket a moment after it opened the directory, and one
	// that is ending frees the directory a moment after it closed it.
	var s *session
	deadline := time.Now().Add(holderWait)
	for {
		s, err = a.openSession(o, false, rep)
		var held *persistence.LockedError
		if !errors.As(err, &held) {
			break
		}
		if d, derr := a.dialHolder(ctx); derr == nil {
			if o.record != "" {
				d.close()
				return a.reportErr(rep, withCode(exitProgramError, fmt.Errorf("--record: %w (a run that joins it cannot record; run with another --data)", held)))
			}
			err = a.runJoined(ctx, d, held, path, src, o, live, rep)
			if !errors.Is(err, errHolderEnding) {
				return err
			}
			deadline = time.Now().Add(holderWait)
		} else if errors.As(derr, new(*untrustedSocket)) {
			return a.reportErr(rep, withCode(exitStreamFailed, derr))
		} else if time.Now().After(deadline) {
			return a.reportErr(rep, withCode(exitStreamFailed, fmt.Errorf("%w (it answers on no control socket, so this run cannot join it)", held)))
		}
		select {
		case <-ctx.Done():
			return a.reportErr(rep, withCode(exitInterrupted, ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err != nil {
		return a.reportErr(rep, err)
	}
	j, err := newJob(s.h, s.owners, rep, jobOptions{timeout: o.timeout, waitPaused: o.waitPaused, live: live, catchAll: true,
		maxOutput: a.rt.limits().OutputLimit(), hints: hints{dataDir: a.flags.dataDir}})
	if err != nil {
		s.close()
		return a.reportErr(rep, withCode(exitProgramError, err))
	}
	return a.endSession(ctx, s, rep, j.run(ctx, path, prog), o.json)
}

// endSession ends a run or resume whose job ended with code: it closes the
// reporter, waits for the runs that joined the session, closes it, and
// returns the command's error (a session that fails to close turns a clean
// run into exit 1).
func (a *app) endSession(ctx context.Context, s *session, rep reporter, code int, asJSON bool) error {
	rep.close()
	s.hold.waitJobs(ctx, a.stderr)
	if err := s.close(); err != nil && code == exitOK {
		code = exitStreamFailed
		a.printErr(asJSON, err)
	}
	return codeErr(code)
}

// runJoined runs the program as a job of d, the process that holds the
// data directory (held says which it is). It returns errHolderEnding when
// that process is ending.
func (a *app) runJoined(ctx context.Context, d *holderDesk, held *persistence.LockedError, path string, src []byte, o runOptions, live bool, rep reporter) error {
	defer d.close()
	if o.obs.metricsListen != "" || o.obs.otlpEndpoint != "" || o.obs.perStream {
		return a.reportErr(rep, withCode(exitStreamFailed, fmt.Errorf("%w; a run that joins it cannot serve metrics or traces of its own (--metrics-listen, --otlp-endpoint, --metrics-per-stream)", held)))
	}
	code, err := a.join(ctx, d, path, src, o, live, rep)
	if errors.Is(err, errHolderEnding) {
		return err
	}
	if err != nil {
		return a.reportErr(rep, withCode(exitStreamFailed, fmt.Errorf("data directory %s is in use by %s, and this run cannot join it: %w", a.flags.dataDir, d.hello, err)))
	}
	return codeErr(code)
}

// readProgram reads a program's file.
func (a *app) readProgram(path string) ([]byte, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, withCode(exitProgramError, fmt.Errorf("%s is a directory: name the .rtfs files in it (e.g. %s/*.rtfs)", path, strings.TrimRight(path, "/")))
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, withCode(exitProgramError, fmt.Errorf("reading program: %w", err))
	}
	return src, nil
}

// reportErr tells err through rep, once, and returns its exit code as
// printed.
func (a *app) reportErr(rep reporter, err error) error {
	rep.fail(failure{Kind: failOther, Message: err.Error()})
	return printedWithCode(exitCodeOf(err))
}

// printErr prints an error after the reporter closed: a JSON line with
// --json, else on stderr.
func (a *app) printErr(asJSON bool, err error) {
	if asJSON {
		writeJSONLine(a.stdout, jsonLine{Type: "error", Message: err.Error()})
		return
	}
	fmt.Fprintln(a.stderr, "rtfshost:", err)
}

// codeErr turns an exit code whose cause is reported into cobra's error.
func codeErr(code int) error {
	if code == exitOK {
		return nil
	}
	return printedWithCode(code)
}

// withTimeout bounds ctx by d when d > 0.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// session is what run and resume share when they hold the data directory:
// the host with its transports, the embedded reference server when
// needed, the observability, and the control socket (holder.go) that lets
// other commands and runs on the directory reach the host.
type session struct {
	h      *host.Host
	srv    *embedded
	ob     *observability
	owners *owners
	hold   *holder
}

// openSession opens the data directory (which must exist already when
// existing is set) and builds the host; the lines no job takes go to rep.
// When another process holds the directory it fails with that
// *persistence.LockedError.
func (a *app) openSession(o runOptions, existing bool, rep reporter) (*session, error) {
	logger, err := a.logger()
	if err != nil {
		return nil, err
	}
	s := &session{owners: &owners{}}
	if existing {
		if err := a.checkDataDir(); err != nil {
			return nil, err
		}
	}
	if o.record != "" {
		if err := os.MkdirAll(o.record, 0o755); err != nil {
			return nil, withCode(exitProgramError, fmt.Errorf("--record: %w", err))
		}
	}
	if s.srv, err = startEmbedded(provider.ResolveServerURL(a.flags.serverURL)); err != nil {
		return nil, withCode(exitStreamFailed, err)
	}
	if s.ob, err = a.newObservability(context.Background(), o.obs); err != nil {
		s.srv.Close()
		return nil, err
	}
	s.h, err = a.openHost(host.Options{
		Streams: provider.Options{
			ServerURL:   a.flags.serverURL,
			Logger:      logger,
			Limits:      a.rt.limits(),
			IdleTimeout: a.rt.idle(),
			HTTPClient:  s.srv.client(),
			Observer:    s.ob.observer(),
			RecordDir:   o.record,
		},
		Limits: a.rt.limits(),
		Log:    rep.log,
		Logger: logger,
	})
	if err != nil {
		s.ob.close()
		s.srv.Close()
		var le *persistence.LockedError
		if errors.As(err, &le) {
			return nil, le
		}
		return nil, err
	}
	if err := s.ob.serveMetrics(s.h.Provider(), o.obs.metricsListen, os.Getenv(tokenEnv), a.stderr); err != nil {
		s.close()
		return nil, err
	}
	if s.hold, err = a.serveHolder(s.h, s.owners); err != nil {
		// Without its socket the directory is held as before: other
		// commands say it is in use.
		logger.Warn("the data directory's control socket is not served", "err", err)
	}
	return s, nil
}

// close stops the control socket, then closes the host (its streams stop,
// with their progress committed, and the store closes), the
// observability and the embedded server.
func (s *session) close() error {
	s.hold.close()
	err := s.h.Close()
	s.ob.close()
	s.srv.Close()
	return err
}

// newReporter picks the output format: --json, live lines on a terminal, or
// plain lines; live says it is the live one.
func (a *app) newReporter(o runOptions, sources map[string][]byte) (rep reporter, live bool) {
	h := hints{dataDir: a.flags.dataDir}
	if o.json {
		return newJSONReporter(a.stdout, h), false
	}
	if f, ok := a.stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		// A terminal that reports no size (a bare pseudo-terminal) cannot
		// lay out live lines: it gets the plain ones.
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return newLiveReporter(f, a.stderr, h, sources), true
		}
	}
	return &textReporter{out: a.stdout, errw: a.stderr, hints: h, sources: sources}, false
}

// loadProgram reads and compiles a program, telling a compile error as
// run does (file:line:col: message and the source line, on stderr).
func (a *app) loadProgram(path string) (*rtfs.Program, error) {
	src, err := a.readProgram(path)
	if err != nil {
		return nil, err
	}
	prog, err := rtfs.Compile(path, src)
	if err != nil {
		tellFailure(a.stderr, failureOf(err, path), map[string][]byte{path: src}, hints{dataDir: a.flags.dataDir})
		return nil, printedWithCode(exitProgramError)
	}
	return prog, nil
}
