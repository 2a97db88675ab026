package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/provider"
)

type runOptions struct {
	json       bool
	timeout    time.Duration
	waitPaused bool
	server     string   // resume --server
	unpause    []string // resume ID...: the stored streams to un-pause first
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

Exit codes: 0 when every stream completed, 1 when a stream failed, 2 for a
program error (printed as file:line:col: message with the source line).`,
		Example: `  rtfshost run examples/weather.rtfs
  rtfshost run --json examples/multiplex.rtfs
  rtfshost run --timeout 30s --server-url http://127.0.0.1:2025/sse examples/await.rtfs`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.rt.resolve(cmd); err != nil {
				return withCode(exitProgramError, err)
			}
			return a.runProgram(cmd.Context(), args[0], o)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object per line (see the README for the format)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "stop the run after this long (0: no limit)")
	cmd.Flags().BoolVar(&o.waitPaused, "wait-paused", false, "keep waiting when every live stream is paused for good (by default run reports them and exits 1)")
	a.addRuntimeFlags(cmd, false)
	addObsFlags(cmd, &o.obs, true)
	return cmd
}

// runProgram is the run command. Under --json an error that ends it is
// also a JSON line on stdout (see jsonError).
func (a *app) runProgram(ctx context.Context, path string, o runOptions) (err error) {
	if o.json {
		defer func() { a.jsonError(path, err) }()
	}
	prog, err := a.loadProgram(path)
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx, o.timeout)
	defer cancel()
	s, err := a.openSession(o, false)
	if err != nil {
		return err
	}
	defer s.close()
	ctx, cancelStuck := context.WithCancelCause(ctx)
	defer cancelStuck(nil)
	watch := a.watchStuck(ctx, cancelStuck, s.h, o)
	watch.running.Store(true)
	val, runErr := s.h.Run(ctx, prog)
	watch.running.Store(false)
	var waitErr error
	if runErr == nil {
		waitErr = s.h.Wait(ctx)
	}
	watch.stop()
	if err := s.finish(); err != nil && runErr == nil && waitErr == nil {
		waitErr = err
	}
	if err := watch.report(a, o.json); err != nil {
		s.rep.close()
		return err
	}
	if runErr == nil && ctx.Err() == nil {
		s.rep.result(val)
	}
	s.rep.close()
	if ctx.Err() == nil && runErr != nil {
		a.progErr = runErr
		reportProgramError(a.stderr, path, prog.Source(), runErr)
		// A stream that failed under an await the program did not catch is
		// a stream failure (exit 1), not a fault of the program (exit 2).
		if errors.As(runErr, new(*provider.StreamError)) {
			return printedWithCode(exitStreamFailed)
		}
		return printedWithCode(exitProgramError)
	}
	return a.streamsOutcome(ctx, waitErr)
}

// withTimeout bounds ctx by d when d > 0.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// session is what run and resume share: the host with its transports, the
// embedded reference server when needed, and the reporter fed by every
// stream's events.
type session struct {
	h        *host.Host
	srv      *embedded
	rep      reporter
	logs     *lineWriter
	pumpDone <-chan struct{}
	ob       *observability
}

// openSession opens the data directory (which must exist already when
// existing is set), builds the host and starts reporting. The caller calls
// finish, then close.
func (a *app) openSession(o runOptions, existing bool) (*session, error) {
	logger, err := a.logger()
	if err != nil {
		return nil, err
	}
	s := &session{logs: &lineWriter{}}
	if existing {
		if err := a.checkDataDir(); err != nil {
			return nil, err
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
			Breaker:     a.rt.breaker(),
			HTTPClient:  s.srv.client(),
			Observer:    s.ob.observer(),
		},
		Limits: a.rt.limits(),
		Stdout: s.logs,
		Logger: logger,
	})
	if err != nil {
		s.ob.close()
		s.srv.Close()
		return nil, err
	}
	if err := s.ob.serveMetrics(s.h.Provider(), o.obs.metricsListen, os.Getenv(tokenEnv), a.stderr); err != nil {
		s.close()
		return nil, err
	}
	s.rep = a.newReporter(o, s.h.Provider())
	s.logs.setSink(s.rep.log)
	s.pumpDone, err = pumpEvents(s.h.Provider(), s.rep)
	if err != nil {
		s.rep.close()
		s.close()
		return nil, withCode(exitProgramError, err)
	}
	return s, nil
}

// finish closes the host, which stops intake and closes the event
// subscription once its last events are out, and waits until they are
// reported. A processor call still in flight is abandoned: its chunk stays
// after the committed cursor and is processed again on resume.
func (s *session) finish() error {
	err := s.h.Close()
	<-s.pumpDone
	s.logs.flush()
	return err
}

// close releases what finish leaves: the host (and with it the store) and
// the embedded server.
func (s *session) close() {
	s.h.Close()
	s.ob.close()
	s.srv.Close()
}

// streamsOutcome turns the end of the streams into the exit code and its
// message.
func (a *app) streamsOutcome(ctx context.Context, waitErr error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		fmt.Fprintf(a.stderr, "rtfshost: --timeout reached before every stream ended.\n%s", a.resumeHint())
		return printedWithCode(exitStreamFailed)
	case ctx.Err() != nil:
		fmt.Fprintf(a.stderr, "rtfshost: interrupted.\n%s", a.resumeHint())
		return printedWithCode(exitInterrupted)
	case waitErr != nil:
		fmt.Fprintln(a.stderr, "rtfshost:", waitErr)
		return printedWithCode(exitStreamFailed)
	}
	return nil
}

// resumeHint says how to carry on after an interruption.
func (a *app) resumeHint() string {
	return fmt.Sprintf("rtfshost: the streams' progress is kept in %s; run \"rtfshost resume --data %s\" to carry on.\n", a.flags.dataDir, a.flags.dataDir)
}

// newReporter picks the output format: --json, live lines on a terminal, or
// plain lines.
func (a *app) newReporter(o runOptions, prov *provider.Provider) reporter {
	if o.json {
		return newJSONReporter(a.stdout)
	}
	if f, ok := a.stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		// A terminal that reports no size (a bare pseudo-terminal) cannot
		// lay out live lines: it gets the plain ones (issue 14 item 11).
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return newLiveReporter(f, prov)
		}
	}
	return &textReporter{w: a.stdout}
}

// pumpEvents forwards every stream event to rep as an Outbox delivers
// them (docs/streams.md, "Delivery": immediate outputs at once, normal and
// low ones in batches, coalesced by :kind, the oldest low ones dropped when
// more wait than a batch holds) until the subscription closes (the
// provider closes), then everything held. The subscription is lossless:
// a reporter slower than the streams holds them up, so it is never cut
// off.
func pumpEvents(prov *provider.Provider, rep reporter) (<-chan struct{}, error) {
	sub, err := prov.Subscribe("", provider.SubscribeOptions{Lossless: true, Buffer: 256})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		box := provider.NewOutbox(provider.OutboxOptions{})
		var batches []provider.Batch
		timer := time.NewTimer(time.Hour)
		defer timer.Stop()
		events := sub.C()
		for events != nil {
			timer.Stop()
			var tick <-chan time.Time
			if at, ok := box.Next(); ok {
				timer.Reset(time.Until(at))
				tick = timer.C
			}
			select {
			case ev, ok := <-events:
				if !ok {
					events = nil
					break
				}
				box.Add(ev)
			case <-tick:
			}
			if events == nil {
				batches = box.Drain(batches[:0])
			} else {
				batches = box.Take(time.Now(), batches[:0])
			}
			for _, b := range batches {
				report(rep, &b)
			}
		}
	}()
	return done, nil
}

// report hands one delivered batch to rep.
func report(rep reporter, b *provider.Batch) {
	if b.Dropped > 0 {
		rep.dropped(b.StreamID, b.Dropped)
	}
	for _, o := range b.Outputs {
		rep.output(b.StreamID, o)
	}
	if b.End != nil {
		rep.end(*b.End)
	}
}

// lineWriter turns what println and log write into whole lines for the
// reporter; lines written before the reporter exists are buffered.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	sink func(string)
}

var _ io.Writer = (*lineWriter)(nil)

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.drain(false)
	return len(p), nil
}

func (w *lineWriter) setSink(f func(string)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sink = f
	w.drain(false)
}

func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drain(true)
}

// drain sends complete lines (and with all, the rest) to the sink. w.mu is held.
func (w *lineWriter) drain(all bool) {
	if w.sink == nil {
		return
	}
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			if all && line != "" {
				w.sink(line)
			} else {
				w.buf.WriteString(line)
			}
			return
		}
		w.sink(line[:len(line)-1])
	}
}
