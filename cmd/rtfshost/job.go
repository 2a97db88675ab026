package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// errStuck ends a job whose every live stream is paused for good.
var errStuck = errors.New("every live stream is paused and nothing can resume it")

// A job is one program run, or one resume, on a host, and what it reports:
// the outputs and ends of its streams (only those: the process that holds
// a data directory runs the jobs of the runs that joined it on one host),
// the lines its program and their processors print, the program's value,
// and the errors that end it, each told once (report.go). A job owns the
// streams its program starts; the catch-all job of the process that holds
// the host owns every other stream (streams a resume recovers, streams
// processors start). It ends when its program has finished and its
// streams have ended, when they are all paused for good (stuck), or when
// its context ends: then its streams stop where they are (Detach), to be
// resumed later, and the host's other jobs go on.
type job struct {
	h     *host.Host
	p     *provider.Provider
	rep   reporter
	opts  jobOptions
	owner *owners

	computing atomic.Bool  // the program runs (it is not waiting on an await)
	awaiting  atomic.Int32 // awaits of the program in progress

	mu     sync.Mutex
	order  []string        // the streams the job adopted, in start order
	routes []func()        // their log routes
	told   map[string]bool // the streams the job said it waits for (keepSources)

	sub    *provider.Subscription
	pumped chan struct{}
}

// jobOptions are what a run's flags say about its job.
type jobOptions struct {
	timeout    time.Duration
	waitPaused bool
	limits     rtfs.Limits // the program's budgets; zero: the host's
	maxOutput  int64       // the bound on each value reported (rtfs.Limits.OutputLimit; 0: none)
	live       bool        // the reporter shows live lines: send it stats
	catchAll   bool        // the job owns every stream no other job owns
	hints      hints       // the data directory, for the commands a waiting job names
}

// owners says which job owns which stream of a host: a stream that no job
// adopted belongs to the catch-all job. A job owns its streams for the
// host's life (one entry per stream). Safe for concurrent use.
type owners struct {
	mu sync.Mutex
	of map[string]*job
}

func (o *owners) get(id string) *job {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.of[id]
}

// take makes j the owner of id unless another job owns it.
func (o *owners) take(id string, j *job) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.of == nil {
		o.of = make(map[string]*job)
	}
	if cur := o.of[id]; cur != nil && cur != j {
		return false
	}
	o.of[id] = j
	return true
}

// setAside owns the streams that a resume loaded without resuming them
// (paused, failed, ended): no job reports or waits for them. A stream
// resumed later, from another shell through the control socket, is given
// back (release) to the catch-all job.
var setAside = &job{}

// release gives stream id back to the catch-all job when it was set aside.
func (o *owners) release(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.of[id] == setAside {
		delete(o.of, id)
	}
}

// newJob starts reporting the events of the job's streams to rep; the
// caller runs it (run or resume), which ends the reporting.
func newJob(h *host.Host, o *owners, rep reporter, opts jobOptions) (*job, error) {
	j := &job{h: h, p: h.Provider(), rep: rep, opts: opts, owner: o, pumped: make(chan struct{})}
	sub, err := j.p.Subscribe("", provider.SubscribeOptions{Lossless: true, Buffer: 256, Streams: j.has})
	if err != nil {
		return nil, err
	}
	j.sub = sub
	go func() {
		defer close(j.pumped)
		j.pump(sub.C())
	}()
	return j, nil
}

// pump reports the events of the job's streams as an Outbox delivers them
// (docs/streams.md, "Delivery": immediate outputs at once, normal and low
// ones in batches, coalesced by :kind, the oldest low ones dropped when
// more wait than a batch holds) until events closes, then everything held.
// The subscription is lossless: a reporter slower than the streams holds
// them up, so the Outbox is never cut off.
func (j *job) pump(events <-chan provider.Event) {
	box := provider.NewOutbox(provider.OutboxOptions{})
	var batches []provider.Batch
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
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
		for i := range batches {
			j.report(&batches[i])
		}
	}
}

// report hands one delivered batch to the job's reporter.
func (j *job) report(b *provider.Batch) {
	if b.Dropped > 0 {
		j.rep.dropped(b.StreamID, b.Dropped)
	}
	for _, o := range b.Outputs {
		v := show(o.Value, j.opts.maxOutput, "the output")
		if o.Count > 1 {
			v.Count, v.Kind = o.Count, o.Kind
		}
		j.rep.output(b.StreamID, o.Seq, v)
	}
	if b.Progress != nil {
		j.rep.progress(b.StreamID, *b.Progress)
	}
	if b.End != nil && b.End.State.Terminal() {
		e := endingOf(*b.End, j.opts.maxOutput)
		if in, err := j.p.Info(b.StreamID, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true}); err == nil {
			e.Progress = in.Progress
		}
		j.rep.end(e)
	}
}

// has reports whether stream id is the job's.
func (j *job) has(id string) bool {
	owner := j.owner.get(id)
	return owner == j || (owner == nil && j.opts.catchAll)
}

// adopt makes a stream the program is about to start the job's, with its
// processor's lines routed to the job's reporter. A stream id another job
// runs is left to the start call to refuse.
func (j *job) adopt(ctx context.Context, id string) {
	if _, err := j.p.Status(ctx, id); err == nil {
		return // a duplicate: the start fails
	}
	if !j.owner.take(id, j) {
		return
	}
	stop := j.h.RouteLog(id, func(line string) { j.rep.log(id, line) })
	j.mu.Lock()
	j.order = append(j.order, id)
	j.routes = append(j.routes, stop)
	j.mu.Unlock()
}

// before sees each host call of the job's program: a start gets its
// stream id first, and the job adopts that stream before it starts; an
// await counts as waiting (the program does not compute meanwhile).
func (j *job) before(ctx context.Context, c *capabilities.Call) (func(error), error) {
	switch strings.TrimPrefix(c.ID, ":") {
	case provider.CapStart:
		var id string
		c.Args, id = j.p.WithStreamID(c.Args)
		if id != "" {
			j.adopt(ctx, id)
		}
	case provider.CapAwait:
		j.awaiting.Add(1)
		return func(error) { j.awaiting.Add(-1) }, nil
	}
	return nil, nil
}

// streams returns the ids of the job's streams, in start order.
func (j *job) streams() []string {
	if j.opts.catchAll {
		var ids []string
		for _, id := range j.p.StreamIDs() {
			if j.has(id) {
				ids = append(ids, id)
			}
		}
		return ids
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.order...)
}

// run runs prog as the job's program, waits for its streams, and reports
// how it went. It returns the exit code.
func (j *job) run(ctx context.Context, file string, prog *rtfs.Program) int {
	ctx, cancel := withTimeout(ctx, j.opts.timeout)
	defer cancel()
	ctx, stuck := context.WithCancelCause(ctx)
	defer stuck(nil)
	watch := j.watch(ctx, stuck)
	j.computing.Store(true)
	val, _, runErr := j.h.RunWith(ctx, prog, host.RunOptions{
		Limits: j.opts.limits,
		Before: j.before,
		Log:    func(line string) { j.rep.log("", line) },
	})
	j.computing.Store(false)
	var failed []error
	if runErr == nil {
		failed = j.wait(ctx)
	}
	return j.conclude(ctx, watch, func() int {
		code := exitOK
		if runErr != nil {
			f := failureOf(runErr, file)
			j.rep.fail(f)
			return f.exitCode()
		}
		j.rep.result(show(val, j.opts.maxOutput, "the program's value"))
		for _, err := range failed {
			j.rep.fail(failureOf(err, file))
			code = exitStreamFailed
		}
		return code
	})
}

// conclude stops the job's watch and its streams if ctx ended, ends the
// reporting, and reports how the job ended: stuck, out of time,
// interrupted, or as outcome says (which reports it and returns its exit
// code).
func (j *job) conclude(ctx context.Context, watch *stuckWatch, outcome func() int) int {
	stuck := watch.stop()
	var sourceEnds []string
	if ctx.Err() != nil {
		sourceEnds = j.comesBackNot(context.WithoutCancel(ctx))
		j.detach()
	}
	j.finish()
	switch {
	case stuck != nil:
		j.rep.fail(failure{Kind: failStuck, Message: errStuck.Error(), Stuck: stuck})
		return exitStreamFailed
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		j.rep.fail(failure{Kind: failTimeout, Message: "--timeout reached before every stream ended", SourceEnds: sourceEnds})
		return exitStreamFailed
	case ctx.Err() != nil:
		j.rep.fail(failure{Kind: failInterrupted, Message: "interrupted", SourceEnds: sourceEnds})
		return exitInterrupted
	}
	return outcome()
}

// wait waits until every stream of the job has ended, those it starts
// meanwhile included, or ctx ends (then it returns nil), and returns the
// errors of those that failed (*provider.StreamError).
func (j *job) wait(ctx context.Context) []error {
	seen := map[string]bool{}
	for {
		ids := j.streams()
		fresh := false
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id], fresh = true, true
			done, err := j.p.Done(id)
			if err != nil {
				continue // detached or removed meanwhile
			}
			select {
			case <-done:
			case <-ctx.Done():
				return nil
			}
		}
		if !fresh {
			break
		}
	}
	var errs []error
	for _, id := range j.streams() {
		if _, err := j.p.Await(ctx, id); err != nil {
			var se *provider.StreamError
			if errors.As(err, &se) && se.State == provider.StateCancelled {
				continue // cancelled on purpose: not a failure
			}
			errs = append(errs, err)
		}
	}
	return errs
}

// detach stops the job's streams that have not ended, each where it is,
// to be resumed later (rtfshost resume); the host's other streams go on.
func (j *job) detach() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	j.sendStats()
	for _, id := range j.streams() {
		if st, err := j.p.Status(ctx, id); err == nil && !st.State.Terminal() {
			_ = j.p.Detach(ctx, id) // at worst its last chunks are processed again on resume
		}
	}
}

// finish ends the reporting of events once the job's streams have ended
// or stopped: their last events are out when their Done channels close.
func (j *job) finish() {
	j.sendStats()
	j.sub.Close()
	<-j.pumped
	j.mu.Lock()
	routes := j.routes
	j.routes = nil
	j.mu.Unlock()
	for _, stop := range routes {
		stop()
	}
	// The job keeps its streams: ended, they are no other job's (the
	// catch-all job would report their failures as its own).
}

// sendStats sends the live numbers of the job's streams to a live
// reporter.
func (j *job) sendStats() {
	if !j.opts.live {
		return
	}
	var list []streamStats
	for _, id := range j.streams() {
		in, err := j.p.Info(id, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
		if err != nil || in.Status.State.Terminal() {
			continue
		}
		list = append(list, streamStats{Stream: id, State: string(in.Status.State), Processed: in.Stats.ProcessedChunks,
			Queued: in.Stats.QueuedChunks, Capacity: int64(in.QueueCapacity), Progress: in.Progress})
	}
	if len(list) > 0 {
		j.rep.stats(list)
	}
}

// A stuckWatch ends a job that would otherwise wait forever: when every
// stream of the job still alive is paused with no timer and nothing can
// resume it (provider.Stuck), and its program does not compute (it has
// finished, or it waits on an await), it cancels the job with errStuck and
// keeps the list. With --wait-paused it does nothing. Every liveRefresh it
// also sends the live numbers of the job's streams to a live reporter.
type stuckWatch struct {
	stuck []provider.StuckStream
	end   context.CancelFunc
	done  chan struct{}
}

func (j *job) watch(ctx context.Context, cancel context.CancelCauseFunc) *stuckWatch {
	w := &stuckWatch{done: make(chan struct{})}
	wctx, end := context.WithCancel(ctx)
	w.end = end
	go func() {
		defer close(w.done)
		every := 200 * time.Millisecond
		if j.opts.live {
			every = liveRefresh
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			j.sendStats()
			if j.opts.waitPaused || (j.computing.Load() && j.awaiting.Load() == 0) {
				continue // the program may still resume a stream itself
			}
			live := 0
			for _, id := range j.streams() {
				if st, err := j.p.Status(wctx, id); err == nil && !st.State.Terminal() {
					live++
				}
			}
			var stuck []provider.StuckStream
			for _, s := range j.p.Stuck() {
				if j.has(s.StreamID) {
					stuck = append(stuck, s)
				}
			}
			if live == 0 || len(stuck) < live {
				continue
			}
			if j.keepSources(wctx, stuck) {
				continue
			}
			w.stuck = stuck
			cancel(errStuck)
			return
		}
	}()
	return w
}

// keepSources reports whether the job must go on waiting although every
// live stream of it is stuck, because the source of one of them would not
// come back once the job ends (a program's output, provider.SourceComesBack):
// ending would lose what that program has not printed yet, so the job
// waits for the stream to be moved on from another shell (through the
// control socket), and says so once per stream.
func (j *job) keepSources(ctx context.Context, stuck []provider.StuckStream) bool {
	keep := false
	for _, s := range stuck {
		if back, err := j.p.SourceComesBack(s.StreamID); err != nil || back {
			continue
		}
		keep = true
		j.mu.Lock()
		if j.told == nil {
			j.told = map[string]bool{}
		}
		told := j.told[s.StreamID]
		j.told[s.StreamID] = true
		j.mu.Unlock()
		if !told {
			j.rep.log("", fmt.Sprintf("waiting: stream %s is %s; its source %s would end with this run, so the run keeps it and waits (Ctrl-C stops it). From another shell: %s",
				s.StreamID, strings.TrimSuffix(s.Reason, "."), j.sourceName(s.StreamID), j.opts.hints.repairs(s.StreamID, j.failure(ctx, s.StreamID))))
		}
	}
	return keep
}

// sourceName names stream id's source for a message: "(:exec)".
func (j *job) sourceName(id string) string {
	in, err := j.p.Info(id, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
	if err != nil || in.Transport.Kind == "" {
		return "(a program)"
	}
	return "(:" + in.Transport.Kind + ")"
}

// failure is the failure stream id is held by; nil when it is not failed.
func (j *job) failure(ctx context.Context, id string) *provider.Failure {
	st, err := j.p.Status(ctx, id)
	if err != nil {
		return nil
	}
	return failureOfState(st.State, st.Failure)
}

// liveCount counts the job's streams that have not ended.
func (j *job) liveCount(ctx context.Context) int {
	n := 0
	for _, id := range j.streams() {
		if st, err := j.p.Status(ctx, id); err == nil && !st.State.Terminal() {
			n++
		}
	}
	return n
}

// comesBackNot returns the job's streams that have not ended and whose
// source would not come back once the job ends.
func (j *job) comesBackNot(ctx context.Context) []string {
	var ids []string
	for _, id := range j.streams() {
		st, err := j.p.Status(ctx, id)
		if err != nil || st.State.Terminal() {
			continue
		}
		if back, err := j.p.SourceComesBack(id); err == nil && !back {
			ids = append(ids, id)
		}
	}
	return ids
}

// stop ends the watch and returns the stuck streams if it ended the job.
func (w *stuckWatch) stop() []provider.StuckStream {
	w.end()
	<-w.done
	return w.stuck
}

// failureOf describes an error that ends a run: a stream's failure (with
// the failing form of its processor, and the await the program saw it
// through), or the program's own error, with its position in file when it
// has one.
func failureOf(err error, file string) failure {
	var se *provider.StreamError
	if errors.As(err, &se) {
		f := failure{Kind: failStream, Stream: se.StreamID, Message: se.Message}
		if se.State != provider.StateError {
			f.Message = se.Error()
		}
		if awaited, ok := awaitPos(err); ok {
			f.AwaitedAt = awaited
		}
		var pe *provider.ProcessorError
		if errors.As(se, &pe) {
			f.Processor, f.Chunk = pe.Processor, pe.Chunk
			f.Message = pe.Err.Error()
			var pee *rtfs.EvalError
			if errors.As(pe.Err, &pee) && pee.Pos.IsValid() {
				f.File, f.Line, f.Col, f.Message = pee.Pos.Filename(), int(pee.Pos.Line), int(pee.Pos.Col), pee.Msg
			}
		}
		return f
	}
	f := failure{Kind: failProgram, Message: err.Error()}
	if line, col, ok := errorLineCol(err, file); ok && file != "" {
		f.File, f.Line, f.Col = file, line, col
		f.Message = errorMessage(err)
	}
	return f
}

// awaitPos returns the position, as "file:line:col", of the program's
// await through which err, a stream's failure, reached the program: the
// RTFS error that wraps the stream's (not the processor's own, inside it).
func awaitPos(err error) (string, bool) {
	var ee *rtfs.EvalError
	if !errors.As(err, &ee) || !ee.Pos.IsValid() || !errors.As(ee, new(*provider.StreamError)) {
		return "", false
	}
	return ee.Pos.String(), true
}
