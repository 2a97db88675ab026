package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// liveReporter shows one live line per stream on a terminal (chunks, rate,
// queue depth, status), with outputs, logs and the result printed above the
// lines. It polls the provider's inspect maps every refresh.
type liveReporter struct {
	text   textReporter // prints through the progress container
	out    io.Writer    // the terminal itself, for what is printed after the live lines
	p      *mpb.Progress
	prov   *provider.Provider
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	lines  map[string]*streamLine
	res    rtfs.Value // the program's result, printed by close
	hasRes bool
}

// streamLine is one stream's live line.
type streamLine struct {
	bar       *mpb.Bar
	text      atomic.Pointer[string] // read by mpb's render goroutine without r.mu
	done      bool
	processed int64
	lastN     int64
	lastT     time.Time
	rate      float64
	progress  string // the stream's progress as the last refresh drew it
}

const liveRefresh = 150 * time.Millisecond

func newLiveReporter(w io.Writer, prov *provider.Provider) *liveReporter {
	ctx, cancel := context.WithCancel(context.Background())
	p := mpb.NewWithContext(ctx, mpb.WithOutput(w), mpb.WithWidth(1), mpb.WithRefreshRate(liveRefresh))
	r := &liveReporter{p: p, prov: prov, cancel: cancel, done: make(chan struct{}), lines: map[string]*streamLine{}, out: w}
	r.text.w = p
	go r.poll(ctx)
	return r
}

func (r *liveReporter) output(stream string, o provider.Output) { r.text.output(stream, o) }
func (r *liveReporter) dropped(stream string, n int64)          { r.text.dropped(stream, n) }
func (r *liveReporter) log(line string)                         { r.text.log(line) }

// result keeps the program's result for close, which prints it under the
// streams' final lines rather than above them.
func (r *liveReporter) result(v rtfs.Value) {
	r.mu.Lock()
	r.res, r.hasRes = v, true
	r.mu.Unlock()
}

func (r *liveReporter) end(st provider.Status) {
	r.refresh()
	r.mu.Lock()
	l := r.line(st.StreamID)
	text := liveText(st.StreamID, l, string(st.State)) + l.progress
	if st.EndReason != "" {
		text += " (" + st.EndReason + ")"
	}
	if st.Message != "" {
		text += ": " + st.Message
	}
	if st.State == provider.StateCompleted && st.Result != nil {
		text += "  result " + clip(st.Result.String(), 60)
	}
	l.text.Store(&text)
	l.done = true
	r.mu.Unlock()
	l.bar.SetTotal(-1, true)
}

// poll refreshes every line until close.
func (r *liveReporter) poll(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(liveRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.refresh()
		}
	}
}

// refresh reads every stream's stats and updates its line.
func (r *liveReporter) refresh() {
	for _, id := range r.prov.StreamIDs() {
		in, err := r.prov.Info(id, provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
		if err != nil {
			continue
		}
		st := liveStats{processed: in.Stats.ProcessedChunks, queued: in.Stats.QueuedChunks,
			capacity: int64(in.QueueCapacity), state: string(in.Status.State)}
		r.mu.Lock()
		l := r.line(id)
		if !l.done {
			now := time.Now()
			if dt := now.Sub(l.lastT).Seconds(); dt >= 0.5 {
				l.rate = float64(st.processed-l.lastN) / dt
				l.lastN, l.lastT = st.processed, now
			}
			l.processed = st.processed
			l.progress = progressText(in.Progress)
			text := liveText(id, l, st.state) + fmt.Sprintf("  queue %d/%d", st.queued, st.capacity) + l.progress
			l.text.Store(&text)
		}
		r.mu.Unlock()
	}
}

// line returns the stream's line, adding it on first sight. r.mu is held.
func (r *liveReporter) line(id string) *streamLine {
	l, ok := r.lines[id]
	if ok {
		return l
	}
	l = &streamLine{lastT: time.Now()}
	text := id + "  starting"
	l.text.Store(&text)
	l.bar = r.p.New(0, mpb.NopStyle(), mpb.PrependDecorators(decor.Any(func(decor.Statistics) string {
		return *l.text.Load()
	})))
	r.lines[id] = l
	return l
}

// progressText draws a stream's :progress after its live line: a bar of
// the fraction done, the percentage, the ETA and the step; "" without one.
func progressText(p *provider.ProgressInfo) string {
	if p == nil {
		return ""
	}
	var b strings.Builder
	if p.Fraction != nil {
		const width = 20
		n := int(*p.Fraction*width + 0.5)
		fmt.Fprintf(&b, "  [%s%s] %3.0f%%", strings.Repeat("#", n), strings.Repeat(".", width-n), *p.Fraction*100)
	} else {
		fmt.Fprintf(&b, "  done %g", p.Done)
	}
	if p.EtaMs != nil {
		fmt.Fprintf(&b, " eta %s", (time.Duration(*p.EtaMs) * time.Millisecond).Round(time.Second))
	}
	if step := p.Message; step != "" || p.Milestone != "" {
		if step == "" {
			step = p.Milestone
		}
		b.WriteString("  " + clip(step, 40))
	}
	return b.String()
}

func liveText(id string, l *streamLine, state string) string {
	return fmt.Sprintf("%-28s %-9s %8d chunks %9.1f/s", id, state, l.processed, l.rate)
}

func (r *liveReporter) close() {
	r.refresh()
	r.mu.Lock()
	var open []*mpb.Bar
	for _, l := range r.lines {
		if !l.done {
			l.done = true
			open = append(open, l.bar)
		}
	}
	r.mu.Unlock()
	for _, b := range open { // outside r.mu: SetTotal waits for the bar's goroutine
		b.SetTotal(-1, true)
	}
	r.p.Wait()
	r.cancel()
	<-r.done
	if r.hasRes {
		r.text.w = r.out
		r.text.result(r.res)
	}
}

// liveStats are the numbers a live line shows.
type liveStats struct {
	processed, queued, capacity int64
	state                       string
}
