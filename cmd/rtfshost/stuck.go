package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/provider"
)

// errStuck ends a run or resume whose every live stream is paused for good.
var errStuck = errors.New("every live stream is paused and nothing can resume it")

// stuckWatch ends a run or resume that would otherwise wait forever: when
// every stream still alive is paused with no timer and no source activity
// can resume it (provider.Stuck), and no program is computing (the program
// has finished, or it is parked on an await), it cancels the run with
// errStuck and keeps the list for the report. With --wait-paused it does
// nothing. It polls every 200 ms; stop ends it.
type stuckWatch struct {
	mu      sync.Mutex
	stuck   []provider.StuckStream
	stop    func()
	done    chan struct{}
	running atomic.Bool // a program of run is computing (not parked)
}

func (a *app) watchStuck(ctx context.Context, cancel context.CancelCauseFunc, h *host.Host, o runOptions) *stuckWatch {
	w := &stuckWatch{done: make(chan struct{})}
	wctx, stop := context.WithCancel(ctx)
	w.stop = func() { stop(); <-w.done }
	go func() {
		defer close(w.done)
		if o.waitPaused {
			return
		}
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			if w.running.Load() && h.Parked() == 0 {
				continue // the program may still resume a stream itself
			}
			p := h.Provider()
			live, stuck := p.Live(), p.Stuck()
			if len(live) == 0 || len(stuck) < len(live) {
				continue
			}
			w.mu.Lock()
			w.stuck = stuck
			w.mu.Unlock()
			cancel(errStuck)
			return
		}
	}()
	return w
}

// report prints the stuck streams and returns the exit error, or nil when
// the watch did not end the run.
func (w *stuckWatch) report(a *app, asJSON bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stuck == nil {
		return nil
	}
	if asJSON {
		for _, s := range w.stuck {
			newJSONReporter(a.stdout).write(jsonLine{Type: "error", Stream: s.StreamID, Message: "stuck: " + s.Reason})
		}
	}
	var b strings.Builder
	b.WriteString("rtfshost: stopped waiting: every live stream is paused, and nothing can resume it:\n")
	for _, s := range w.stuck {
		fmt.Fprintf(&b, "  %s: %s\n", s.StreamID, s.Reason)
	}
	fmt.Fprintf(&b, "rtfshost: they stay paused in %s; resume them with \"rtfshost resume --data %s ID...\", cancel them with \"rtfshost cancel --data %s ID...\", or run with --wait-paused to wait for another client to resume them.\n",
		a.flags.dataDir, a.flags.dataDir, a.flags.dataDir)
	fmt.Fprint(a.stderr, b.String())
	return printedWithCode(exitStreamFailed)
}
