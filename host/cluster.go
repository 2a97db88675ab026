package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// A host in a cluster (OpenOptions.Cluster, docs/cluster.md): its records
// live in JetStream (cluster.Store), it runs the streams and parked
// programs it owns, answers other hosts' requests on them, takes over those
// of hosts that died, and hands its own over when it closes.

// runOwner is the ownership id of a parked program: a NUL (which no stream
// id holds) and its run id.
func runOwner(runID string) string { return "\x00run/" + runID }

// keyOwner maps a record's key to the stream or parked program it belongs
// to, for fencing: the provider's stream records, and the host's parked
// and resumed-program records.
func keyOwner(key []byte) (string, bool) {
	if id, ok := provider.KeyOwner(key); ok {
		return id, true
	}
	for _, prefix := range []string{parkedPrefix, resumedPrefix, journalPrefix} {
		if rest, ok := bytes.CutPrefix(key, []byte(prefix)); ok {
			return runOwner(string(rest)), true
		}
	}
	return "", false
}

// peers is the provider's view of the cluster (provider.Cluster).
type peers struct {
	cl    *cluster.Cluster
	local func() []string // the streams this host runs (Provider.Live)
	grace *shutdownGrace  // the host's: bounds Release once the host closes

	mu     sync.Mutex
	load   map[string]int // streams per live incarnation, for Place
	loadAt time.Time
}

// loadTTL is how long Place trusts the load it read.
const loadTTL = 500 * time.Millisecond

// Place offers a stream just started here to the least loaded live host
// when this host runs more than one stream more than it (cluster.Options
// Balanced). This host's load is what it runs now; the others' is read at
// most every loadTTL, plus the streams offered to them since.
func (p *peers) Place(ctx context.Context, id string) (string, error) {
	if !p.cl.Balanced() {
		return "", nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.load == nil || time.Since(p.loadAt) > loadTTL {
		load, err := p.cl.Load(ctx)
		if err != nil {
			return "", err
		}
		p.load, p.loadAt = load, time.Now()
	}
	me := p.cl.Incarnation()
	p.load[me] = len(p.local())
	best, least := "", p.load[me]
	for inc, n := range p.load {
		if inc != me && (n < least || n == least && best != "" && inc < best) {
			best, least = inc, n
		}
	}
	if best == "" || p.load[me]-least <= 1 {
		return "", nil
	}
	p.load[best]++
	return best, nil
}

func (p *peers) Offer(ctx context.Context, id, to string) error { return p.cl.Offer(ctx, id, to) }

func (p *peers) Claim(ctx context.Context, id string) error {
	err := p.cl.Claim(ctx, id)
	var owned *cluster.OwnedError
	switch {
	case errors.As(err, &owned):
		owner := owned.Node
		if owner == "" {
			owner = owned.Incarnation
		}
		return &provider.OwnedError{Owner: owner, Heartbeat: owned.Heartbeat, Err: fmt.Errorf("%w: %w", provider.ErrOwned, err)}
	case errors.Is(err, cluster.ErrOwned):
		return fmt.Errorf("%w: %w", provider.ErrOwned, err)
	}
	return err
}

// Release gives stream id up; once the host is closing, by the end of its
// shutdown grace at the latest.
func (p *peers) Release(ctx context.Context, id string, ended bool) error {
	if end, ok := p.grace.deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, end)
		defer cancel()
	}
	return p.cl.Release(ctx, id, ended)
}

func (p *peers) Forget(id string) { p.cl.Forget(id) }

func (p *peers) Forward(ctx context.Context, req provider.Request) (provider.Answer, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return provider.Answer{}, err
	}
	reply, err := p.cl.Ask(ctx, req.StreamID, body)
	if errors.Is(err, cluster.ErrNoOwner) {
		return provider.Answer{}, fmt.Errorf("%w: %w", provider.ErrNotRunning, err)
	}
	if err != nil {
		return provider.Answer{}, err
	}
	return decodeAnswer(reply, req)
}

// wireAnswer is the encoded form of an Answer: values in rtfs's binary
// encoding.
type wireAnswer struct {
	ID      string               `json:"id"`
	State   provider.State       `json:"state"`
	Message string               `json:"message,omitempty"`
	Reason  string               `json:"reason,omitempty"`
	Result  []byte               `json:"result,omitempty"`
	Inspect []byte               `json:"inspect,omitempty"`
	Info    *provider.StreamInfo `json:"info,omitempty"`
	// Upgraded is what an "upgrade" did.
	Upgraded *provider.UpgradeResult `json:"upgraded,omitempty"`
	Err      string                  `json:"err,omitempty"`
	// NotRunning: the host asked does not run the stream (it stopped
	// between the asker's look at the owner and the answer).
	NotRunning bool `json:"not-running,omitempty"`
	// Ended: the error is a *provider.EndedError of a stream in this
	// state (its id and verb are the request's).
	Ended provider.State `json:"ended,omitempty"`
}

// encodeAnswer encodes a's answer, or err, for the wire. Values that cannot
// be encoded (closures) become an error answer.
func encodeAnswer(a provider.Answer, err error) []byte {
	w := wireAnswer{ID: a.Status.StreamID, State: a.Status.State, Message: a.Status.Message, Reason: a.Status.EndReason, Info: a.Info, Upgraded: a.Upgraded}
	if err == nil && a.Status.Result != nil {
		w.Result, err = rtfs.MarshalValue(a.Status.Result)
	}
	if err == nil && a.Inspect != nil {
		w.Inspect, err = rtfs.MarshalValue(a.Inspect)
	}
	if err != nil {
		w = wireAnswer{Err: err.Error(), NotRunning: errors.Is(err, provider.ErrNotRunning)}
		var ended *provider.EndedError
		if errors.As(err, &ended) {
			w.Ended = ended.State
		}
	}
	out, _ := json.Marshal(w)
	return out
}

// decodeAnswer decodes what encodeAnswer made of the answer to req; an
// error answer becomes the error.
func decodeAnswer(data []byte, req provider.Request) (provider.Answer, error) {
	var w wireAnswer
	if err := json.Unmarshal(data, &w); err != nil {
		return provider.Answer{}, fmt.Errorf("decode a host's answer: %w", err)
	}
	switch {
	case w.NotRunning:
		return provider.Answer{}, fmt.Errorf("%w: %s", provider.ErrNotRunning, w.Err)
	case w.Ended != "":
		return provider.Answer{}, &provider.EndedError{StreamID: req.StreamID, Verb: req.Verb, State: w.Ended}
	case w.Err != "":
		return provider.Answer{}, errors.New(w.Err)
	}
	a := provider.Answer{Status: provider.Status{StreamID: w.ID, State: w.State, Message: w.Message, EndReason: w.Reason}, Info: w.Info, Upgraded: w.Upgraded}
	var err error
	if len(w.Result) > 0 {
		if a.Status.Result, err = rtfs.UnmarshalValue(w.Result); err != nil {
			return provider.Answer{}, fmt.Errorf("decode a host's answer: result: %w", err)
		}
	}
	if len(w.Inspect) > 0 {
		if a.Inspect, err = rtfs.UnmarshalValue(w.Inspect); err != nil {
			return provider.Answer{}, fmt.Errorf("decode a host's answer: inspect: %w", err)
		}
	}
	return a, nil
}

// answer serves another host's request on a stream this host runs.
func (h *Host) answer(ctx context.Context, body []byte) []byte {
	var req provider.Request
	if err := json.Unmarshal(body, &req); err != nil {
		return encodeAnswer(provider.Answer{}, fmt.Errorf("decode the request: %w", err))
	}
	return encodeAnswer(h.prov.Answer(ctx, req))
}

// clusterLoop takes over the streams and parked programs of hosts that
// died (or handed them over), every third of the lease TTL, until the host
// closes.
type clusterLoop struct {
	h      *Host
	cl     *cluster.Cluster
	wg     sync.WaitGroup
	stop   chan struct{}
	ctx    context.Context // ends at stopLoop: bounds a round of takeOver
	cancel context.CancelFunc
	seen   map[string]int // orphans left to other hosts, by rounds (takeOver's goroutine only)
}

func (h *Host) startCluster(cl *cluster.Cluster) error {
	if err := cl.Serve(h.answer); err != nil {
		return err
	}
	l := &clusterLoop{h: h, cl: cl, stop: make(chan struct{}), seen: map[string]int{}}
	l.ctx, l.cancel = context.WithCancel(h.ctx)
	h.clusterLoop = l
	l.wg.Add(1)
	go l.run()
	return nil
}

func (l *clusterLoop) run() {
	defer l.wg.Done()
	t := time.NewTicker(l.cl.LeaseTTL() / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.takeOver()
	}
}

// takeOver claims and runs what no live host runs: up to this host's fair
// share (the streams of the live hosts and the orphans, divided by the
// live hosts), in random order, so that the hosts left spread the streams
// of one that died; an orphan left to the others for maxLeft rounds is
// taken anyway.
func (l *clusterLoop) takeOver() {
	ctx, cancel := context.WithTimeout(l.ctx, l.cl.LeaseTTL())
	defer cancel()
	orphans, err := l.cl.Orphans(ctx)
	if err != nil {
		l.h.log.Warn("cluster: looking for streams without a host", "err", err)
		return
	}
	if len(orphans) == 0 {
		clear(l.seen)
		return
	}
	load, err := l.cl.Load(ctx)
	if err != nil {
		l.h.log.Warn("cluster: reading the hosts' load", "err", err)
		return
	}
	total := len(orphans)
	for _, n := range load {
		total += n
	}
	hosts := max(len(load), 1)
	room := (total+hosts-1)/hosts - load[l.cl.Incarnation()]
	rand.Shuffle(len(orphans), func(i, j int) { orphans[i], orphans[j] = orphans[j], orphans[i] })
	left := map[string]int{}
	for _, id := range orphans {
		if ctx.Err() != nil {
			return
		}
		if room <= 0 && l.seen[id] < maxLeft {
			left[id] = l.seen[id] + 1
			continue
		}
		room--
		if run, ok := strings.CutPrefix(id, runOwner("")); ok {
			if err := l.h.resumeOrphan(ctx, run); err != nil && !errors.Is(err, cluster.ErrOwned) {
				l.h.log.Warn("cluster: parked program not taken over", "run", run, "err", err)
			}
			continue
		}
		err := l.h.prov.RecoverStream(ctx, id)
		switch {
		case err == nil:
			l.h.log.Info("cluster: stream taken over", "stream", id)
		case errors.Is(err, provider.ErrOwned), slices.Contains(l.h.prov.StreamIDs(), id):
		case errors.Is(err, provider.ErrNotPersisted):
			// An ownership record whose stream was never stored (a start
			// that failed): drop it.
			_ = l.cl.Claim(ctx, id)
			_ = l.cl.Release(ctx, id, true)
		default:
			l.h.log.Warn("cluster: stream not taken over", "stream", id, "err", err)
		}
	}
	l.seen = left
}

// maxLeft is how many rounds a host leaves an orphan to hosts with more
// room before it takes it itself.
const maxLeft = 3

// resumeOrphan claims the parked program run and resumes it here.
func (h *Host) resumeOrphan(ctx context.Context, run string) error {
	if err := h.cl.Claim(ctx, runOwner(run)); err != nil {
		return err
	}
	value, err := h.store.Get(ctx, []byte(parkedPrefix+run))
	if err != nil {
		// It finished meanwhile; nothing to resume.
		return h.cl.Release(ctx, runOwner(run), true)
	}
	return h.resumeRecord(map[string]*rtfs.Program{}, []byte(parkedPrefix+run), value)
}

// stopLoop stops taking over, after which the host closes its provider;
// leaveCluster then hands every stream and parked program over and leaves.
func (l *clusterLoop) stopLoop() {
	close(l.stop)
	l.cancel()
	l.wg.Wait()
}

// leaveCluster hands this host's streams and parked programs over, by the
// end of the shutdown grace, and leaves the cluster. When NATS did not
// answer within the grace (gaveUp) nothing is handed over: the other hosts
// take the streams when this host's lease expires.
func (h *Host) leaveCluster(by time.Time, gaveUp bool) error {
	var err error
	if gaveUp {
		h.log.Warn("cluster: leaving without handing the streams over; the other hosts take them when this host's lease expires",
			"streams", len(h.cl.Owned()), "lease-ttl", h.cl.LeaseTTL())
	} else {
		ctx, cancel := context.WithDeadline(context.Background(), by)
		err = h.cl.ReleaseAll(ctx)
		cancel()
	}
	if cerr := h.cl.Close(); err == nil {
		err = cerr
	}
	return err
}

// Cluster returns the cluster this host belongs to, nil for a host alone
// with its store.
func (h *Host) Cluster() *cluster.Cluster { return h.cl }
