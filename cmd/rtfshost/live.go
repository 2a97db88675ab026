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
)

// liveReporter shows one live line per stream on a terminal (state, chunks,
// rate, queue depth), with outputs and logs printed above the lines. The
// numbers come from stats, every liveRefresh; the program's result and the
// failures are printed under the lines once they stop (close), so that
// nothing is drawn over them.
type liveReporter struct {
	text   textReporter // prints through the progress container
	out    io.Writer    // the terminal itself, for what is printed after the live lines
	errw   io.Writer
	p      *mpb.Progress
	cancel context.CancelFunc

	mu     sync.Mutex
	lines  map[string]*streamLine
	res    *shown    // the program's result, printed by close
	fails  []failure // printed by close
	closed bool
}

// streamLine is one stream's live line.
type streamLine struct {
	bar       *mpb.Bar
	text      atomic.Pointer[string] // read by mpb's render goroutine without r.mu
	done      bool
	state     string
	queue     string // "  queue depth/capacity", from the last stats
	progress  string // the stream's progress, from the last stats (progressText)
	processed int64
	lastN     int64
	lastT     time.Time
	rate      float64
}

const liveRefresh = 150 * time.Millisecond

func newLiveReporter(w, errw io.Writer, h hints, sources map[string][]byte) *liveReporter {
	ctx, cancel := context.WithCancel(context.Background())
	p := mpb.NewWithContext(ctx, mpb.WithOutput(w), mpb.WithWidth(1), mpb.WithRefreshRate(liveRefresh))
	r := &liveReporter{p: p, cancel: cancel, lines: map[string]*streamLine{}, out: w, errw: errw}
	r.text = textReporter{out: lineStart{p}, errw: errw, hints: h, sources: sources}
	return r
}

// lineStart writes each line (a Write) from the start of the terminal's
// line: a Ctrl-C the terminal echoes as ^C moves the cursor, and the
// progress display redraws from the column it is left at; a line that
// began there would keep the echo's columns of the line under it ("co"
// of "counter...") in front of it.
type lineStart struct{ w io.Writer }

func (l lineStart) Write(p []byte) (int, error) {
	if _, err := l.w.Write(append([]byte{'\r'}, p...)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// output prints the output above the lines; its chunk has been processed,
// so the stream's line counts at least that many chunks.
func (r *liveReporter) output(stream string, seq int64, v shown) {
	r.text.output(stream, seq, v)
	r.mu.Lock()
	if l := r.line(stream); !l.done && seq > l.processed {
		l.processed = seq
		if l.state == "starting" {
			l.state = "active" // it processes chunks
		}
		r.draw(stream, l)
	}
	r.mu.Unlock()
}

func (r *liveReporter) log(stream, line string) { r.text.log(stream, line) }

func (r *liveReporter) dropped(stream string, n int64) { r.text.dropped(stream, n) }

// progress is drawn from stats, on the stream's line.
func (r *liveReporter) progress(string, provider.ProgressInfo) {}

// result keeps the program's result for close, which prints it under the
// streams' final lines rather than above them.
func (r *liveReporter) result(v shown) {
	r.mu.Lock()
	r.res = &v
	r.mu.Unlock()
}

// fail keeps the failure for close, which tells it under the lines.
func (r *liveReporter) fail(f failure) {
	r.mu.Lock()
	r.fails = append(r.fails, f)
	r.mu.Unlock()
}

// stats updates the lines of the streams that have not ended.
func (r *liveReporter) stats(list []streamStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for _, st := range list {
		l := r.line(st.Stream)
		if l.done {
			continue
		}
		if dt := now.Sub(l.lastT).Seconds(); dt >= 0.5 {
			l.rate = float64(st.Processed-l.lastN) / dt
			l.lastN, l.lastT = st.Processed, now
		}
		l.processed = max(l.processed, st.Processed)
		l.state = st.State
		l.queue = fmt.Sprintf("  queue %d/%d", st.Queued, st.Capacity)
		l.progress = progressText(st.Progress)
		r.draw(st.Stream, l)
	}
}

// draw sets the text of a line that has not ended. r.mu is held.
func (r *liveReporter) draw(id string, l *streamLine) {
	text := liveText(id, l, l.state) + l.queue + l.progress
	l.text.Store(&text)
}

func (r *liveReporter) end(e ending) {
	r.mu.Lock()
	l := r.line(e.Stream)
	text := liveText(e.Stream, l, e.State) + progressText(e.Progress)
	if why := strings.TrimPrefix(endText(e), e.State); why != "" {
		text += why // " (end reason): message"
	}
	if e.Result != nil {
		text += "  result " + clip(e.Result.Text, 60)
	}
	l.text.Store(&text)
	l.done = true
	r.mu.Unlock()
	l.bar.SetTotal(-1, true)
}

// line returns the stream's line, adding it on first sight. r.mu is held.
func (r *liveReporter) line(id string) *streamLine {
	l, ok := r.lines[id]
	if ok {
		return l
	}
	l = &streamLine{lastT: time.Now(), state: "starting"}
	text := id + "  starting"
	l.text.Store(&text)
	l.bar = r.p.New(0, mpb.NopStyle(), mpb.PrependDecorators(decor.Any(func(decor.Statistics) string {
		return "\r" + *l.text.Load() // from the line's start, as lineStart
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

// close draws every line one last time and stops the display, then prints
// the result and the failures under the lines. A stream that has not ended
// (an interrupted run) keeps its last numbers and state.
func (r *liveReporter) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
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
	r.text.out = r.out
	if r.res != nil {
		r.text.result(*r.res)
	}
	for _, f := range r.fails {
		r.text.fail(f)
	}
}
