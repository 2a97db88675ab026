// Package dashboard is the live web dashboard of `rtfshost serve` (/ui): a
// page listing the host's streams with their state, rate (with a sparkline
// of the last minutes), queue fill, reconnects, last output, age and end
// reason (a failed stream's error message in place of its last output; an
// ended stream's average rate, and an age that stops at its end), and a
// page per stream with its inspect map, its state, its recent outputs, its
// timeline (start, directives, reconnects, end, with their times) and
// pause / resume / cancel buttons; a failed stream's page shows its failure
// (the error with its position, the held chunk), its dead letters, and
// Retry / Skip buttons.
//
// The main type is Dashboard. Its page and script are embedded in the binary
// (no external asset). The data reaches the page over one Server-Sent Events
// response per tab (PathEvents): a snapshot of every row when it connects,
// then once per Interval the rows that changed, and, for the stream a tab
// shows, its inspect map when it changes and each processor output as the
// provider publishes it (the subscription the MCP progress notifications
// also come from). The page never polls.
//
// Access control is the MCP server's (mcpserver.Route): the page and script
// are public (they hold no data) and ask for the bearer token, kept in the
// tab's sessionStorage; every API request carries it. The buttons POST with
// a synchronizer token (X-CSRF-Token, from PathSession, which a foreign
// page cannot read) besides the bearer token.
package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

//go:embed static
var static embed.FS

// The paths the Dashboard serves. Prefix and everything under it but
// PathAPI are public; PathAPI and below need the token.
const (
	Prefix      = "/ui/"
	PathAPI     = "/ui/api/"
	PathSession = "/ui/api/session"  // GET: {"csrf": token}
	PathEvents  = "/ui/api/events"   // GET: text/event-stream; ?stream=ID adds that stream's details and outputs
	PathStreams = "/ui/api/streams/" // GET ID: inspect JSON; POST ID/pause|resume|skip|cancel
)

// PathPlaygroundPage is the playground's page (public, as the dashboard's).
const PathPlaygroundPage = "/ui/playground.html"

// Options configure a Dashboard. Provider is required.
type Options struct {
	// Provider holds the streams shown. The Dashboard does not close it.
	Provider *provider.Provider
	// Interval is how often the rows are sampled and changes pushed
	// (default 1 s).
	Interval time.Duration
	// History is how many samples of each stream's rate the sparklines
	// show (default 180: three minutes at the default interval).
	History int
	// Version is shown in the page's header.
	Version string
	// Delivery is how a stream's outputs reach a tab that shows it
	// (docs/streams.md, "Delivery"); a stream's :delivery overrides it.
	// Nil: provider.DefaultDelivery.
	Delivery *provider.Delivery
	// MaxPending bounds the immediate and normal outputs held for a tab
	// that reads more slowly than its stream outputs (default 1000); beyond
	// it the tab is told it fell behind and its events response ends (the
	// page reconnects).
	MaxPending int
	// Limits bound each program run and processor call of the playground
	// (playground.go), as serve's budgets bound a stream's.
	Limits rtfs.Limits
	// PlaygroundTimeout bounds one playground run (default 10 s).
	PlaygroundTimeout time.Duration
	// RecordingsDir holds the recordings (*.ndjson, transport/replay's
	// format) the playground may run a processor over; "" means none.
	RecordingsDir string
}

// A Dashboard serves the web dashboard. It is safe for concurrent use.
// It runs one sampling goroutine, which Close stops; the events responses
// run on the HTTP server's goroutines and end when their request does or at
// Close.
type Dashboard struct {
	opts Options
	p    *provider.Provider
	csrf string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	rows    map[string]*row // the last sample of each stream, by id
	order   []string        // stream ids in start order
	clients map[*client]struct{}
	seq     uint64 // sample number
}

// New returns a Dashboard and starts its sampling goroutine.
func New(opts Options) (*Dashboard, error) {
	if opts.Provider == nil {
		return nil, errors.New("dashboard: Options.Provider is nil")
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.History <= 0 {
		opts.History = 180
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = 1000
	}
	if opts.PlaygroundTimeout <= 0 {
		opts.PlaygroundTimeout = playgroundTimeout
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	d := &Dashboard{
		opts: opts, p: opts.Provider, csrf: hex.EncodeToString(b[:]),
		rows: make(map[string]*row), clients: make(map[*client]struct{}),
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.sample(time.Now())
	d.wg.Add(1)
	go d.run()
	return d, nil
}

// Close stops the sampling goroutine and ends every events response, and
// waits for them. It is idempotent.
func (d *Dashboard) Close() error {
	d.cancel()
	d.wg.Wait()
	return nil
}

// StaticHandler serves the page and its assets under Prefix (public).
func (d *Dashboard) StaticHandler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil { // the embedded tree always has static/
		return http.NotFoundHandler()
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		setSecurityHeaders(w)
		if r.URL.Path == "/ui" {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		http.StripPrefix(strings.TrimSuffix(Prefix, "/"), files).ServeHTTP(w, r)
	})
}

// setSecurityHeaders forbids framing, sniffing and any script or style not
// served by the dashboard itself.
func setSecurityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// APIHandler serves PathAPI and below (mount it behind the token check).
func (d *Dashboard) APIHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathSession, d.session)
	mux.HandleFunc("GET "+PathEvents, d.events)
	mux.HandleFunc("GET "+PathStreams+"{id}", d.inspect)
	mux.HandleFunc("POST "+PathStreams+"{id}/{op}", d.control)
	mux.HandleFunc("POST "+PathPlayground, d.playground)
	mux.HandleFunc("GET "+PathRecordings, d.recordings)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w)
		mux.ServeHTTP(w, r)
	})
}

func (d *Dashboard) session(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"csrf": d.csrf, "version": d.opts.Version})
}

// inspect answers a stream's inspect map (with its state, without its queue).
func (d *Dashboard) inspect(w http.ResponseWriter, r *http.Request) {
	in, err := d.p.Info(r.PathValue("id"), provider.InspectOptions{OmitQueue: true})
	if err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(in.JSON())
}

// control pauses, resumes or cancels a stream. It needs the CSRF token in
// X-CSRF-Token.
func (d *Dashboard) control(w http.ResponseWriter, r *http.Request) {
	got := []byte(r.Header.Get("X-CSRF-Token"))
	if subtle.ConstantTimeCompare(got, []byte(d.csrf)) != 1 {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "missing or wrong X-CSRF-Token: reload the dashboard"})
		return
	}
	id := r.PathValue("id")
	var op func(context.Context, string) (provider.Status, error)
	switch r.PathValue("op") {
	case "pause":
		op = d.p.Pause
	case "resume":
		op = d.p.Resume
	case "cancel":
		op = d.p.Cancel
	case "skip":
		op = d.p.Skip
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown operation " + r.PathValue("op") + "; use pause, resume, skip or cancel"})
		return
	}
	st, err := op(r.Context(), id)
	if err != nil {
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		return
	}
	d.poke()
	writeJSON(w, http.StatusOK, map[string]string{"stream-id": st.StreamID, "state": string(st.State), "end-reason": st.EndReason, "message": st.Message})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// A row is what the list shows of one stream.
type row struct {
	ID         string `json:"id"`
	Endpoint   string `json:"endpoint"`
	Processor  string `json:"processor"`
	Transport  string `json:"transport"`
	State      string `json:"state"`
	Reason     string `json:"reason,omitempty"`
	Message    string `json:"message,omitempty"`
	Processed  int64  `json:"processed"`
	Dropped    int64  `json:"dropped"`
	Queued     int64  `json:"queued"`
	Capacity   int    `json:"capacity"`
	Reconnects int64  `json:"reconnects"`
	Outputs    int64  `json:"outputs"`
	LastOutput string `json:"lastOutput,omitempty"`
	StartedMs  int64  `json:"startedMs"`
	EndedMs    int64  `json:"endedMs,omitempty"` // when it ended (its age stops there), if known
	LastMs     int64  `json:"lastMs,omitempty"`  // last chunk received
	// Rate is chunks/s over the last interval while the stream runs; once
	// it has ended, its average over its life (Lifetime).
	Rate     float64   `json:"rate"`
	Lifetime bool      `json:"lifetime,omitempty"`
	Rates    []float64 `json:"rates,omitempty"` // the sparkline: oldest first (snapshots only)
	// Progress is the stream's :progress fraction (0 to 1), EtaMs its
	// :eta-ms, Step its :message or else its :milestone; absent when not
	// known.
	Progress *float64 `json:"progress,omitempty"`
	EtaMs    *int64   `json:"etaMs,omitempty"`
	Step     string   `json:"step,omitempty"`

	history []float64 // ring of rates, History long
	at      time.Time // when Processed was sampled
	changed uint64    // sample number of the last change
}

// maxOutputText bounds the last output a row carries.
const maxOutputText = 160

// maxOutputJSON bounds the JSON of one output the dashboard sends to a
// browser: a value that shares structure is written in full, and a browser
// needs no more to show a row.
const maxOutputJSON = 64 << 10

// outputJSON is an output's JSON for the dashboard, or a JSON string that
// says it is too large to show.
func outputJSON(v rtfs.Value) json.RawMessage {
	b, err := rtfs.OutputJSON(v, maxOutputJSON)
	if err != nil {
		b, _ = json.Marshal("(not shown: " + err.Error() + ")")
	}
	return b
}

// sample reads every stream's snapshot and updates the rows. A row changes
// when anything it shows changed (its rate included).
func (d *Dashboard) sample(now time.Time) {
	infos := d.p.Infos(provider.InspectOptions{OmitState: true, OmitInitialState: true, OmitQueue: true})
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq++
	seen := make(map[string]bool, len(infos))
	order := make([]string, 0, len(infos))
	for i := range infos {
		in := &infos[i]
		seen[in.StreamID] = true
		order = append(order, in.StreamID)
		old := d.rows[in.StreamID]
		r := &row{
			ID: in.StreamID, Endpoint: in.Endpoint, Processor: in.Processor, Transport: in.Transport.Kind,
			State: string(in.Status.State), Reason: in.Status.EndReason, Message: cut(in.Status.Message, 300),
			Processed: in.Stats.ProcessedChunks, Dropped: in.DroppedChunks, Queued: in.Stats.QueuedChunks,
			Capacity: in.QueueCapacity, Reconnects: in.Reconnects, Outputs: in.Stats.Outputs,
			StartedMs: in.StartedAtEpochMs, at: now,
		}
		if in.Stats.LastEventEpochMs != nil {
			r.LastMs = *in.Stats.LastEventEpochMs
		}
		if p := in.Progress; p != nil {
			r.Progress, r.EtaMs, r.Step = p.Fraction, p.EtaMs, cut(p.Message, maxOutputText)
			if r.Step == "" {
				r.Step = p.Milestone
			}
		}
		ended := in.Status.State.Terminal()
		if ended {
			switch {
			case in.EndedAtEpochMs != nil:
				r.EndedMs = *in.EndedAtEpochMs
			case r.LastMs > 0:
				r.EndedMs = r.LastMs // loaded from the store: its last chunk is the best known
			default:
				r.EndedMs = r.StartedMs
			}
			r.Rate, r.Lifetime = roundRate(in.Stats.ChunksPerSecond), true
		}
		if in.LastOutput.V != nil && in.LastOutput.V != rtfs.Nil {
			r.LastOutput = cut(string(outputJSON(in.LastOutput.V)), maxOutputText)
		}
		if old == nil {
			r.history = make([]float64, 0, d.opts.History)
			r.changed = d.seq
		} else if ended {
			r.history = old.history // the sparkline stops with the stream
			r.changed = old.changed
			if !r.sameAs(old) {
				r.changed = d.seq
			}
		} else {
			if dt := now.Sub(old.at).Seconds(); dt > 0 {
				r.Rate = roundRate(float64(r.Processed-old.Processed) / dt)
			}
			r.history = append(old.history, r.Rate)
			if len(r.history) > d.opts.History {
				r.history = append(r.history[:0], r.history[len(r.history)-d.opts.History:]...)
			}
			r.changed = old.changed
			if !r.sameAs(old) {
				r.changed = d.seq
			}
		}
		d.rows[in.StreamID] = r
	}
	for id := range d.rows {
		if !seen[id] {
			delete(d.rows, id) // removed from the provider
		}
	}
	d.order = order
}

// sameAs reports whether r shows what o showed.
func (r *row) sameAs(o *row) bool {
	return r.State == o.State && r.Reason == o.Reason && r.Message == o.Message && r.Processed == o.Processed &&
		r.Dropped == o.Dropped && r.Queued == o.Queued && r.Reconnects == o.Reconnects &&
		r.Outputs == o.Outputs && r.LastOutput == o.LastOutput && r.Rate == o.Rate &&
		eqPtr(r.Progress, o.Progress) && eqPtr(r.EtaMs, o.EtaMs) && r.Step == o.Step
}

// eqPtr reports whether a and b are both nil or point to equal values.
func eqPtr[T comparable](a, b *T) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func roundRate(v float64) float64 {
	if v < 10 {
		return float64(int64(v*10+0.5)) / 10
	}
	return float64(int64(v + 0.5))
}

// cut shortens s to n bytes (at a rune boundary) with an ellipsis.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}

// run samples every Interval and pushes the changes to the clients.
func (d *Dashboard) run() {
	defer d.wg.Done()
	t := time.NewTicker(d.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case now := <-t.C:
			d.sample(now)
			d.broadcast()
		}
	}
}

// poke samples at once (after a button) and pushes the changes.
func (d *Dashboard) poke() {
	d.sample(time.Now())
	d.broadcast()
}

// broadcast wakes every client: each sends the rows changed since it last
// sent.
func (d *Dashboard) broadcast() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for c := range d.clients {
		select {
		case c.tick <- struct{}{}:
		default:
		}
	}
}

// A client is one open events response.
type client struct {
	tick chan struct{} // buffered 1
	sent uint64        // sample number of the last rows sent
	ids  map[string]bool
}

// delta returns the rows changed since c last sent and the ids of the rows
// gone; all returns every row with its sparkline.
func (d *Dashboard) delta(c *client, all bool) (rows []*row, gone []string, seq uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if all {
		c.ids = make(map[string]bool, len(d.order))
	}
	for _, id := range d.order {
		r := d.rows[id]
		if r == nil {
			continue
		}
		if all || r.changed > c.sent || !c.ids[id] {
			cp := *r
			if all || !c.ids[id] {
				cp.Rates = append([]float64(nil), r.history...)
			}
			rows = append(rows, &cp)
			c.ids[id] = true
		}
	}
	for id := range c.ids {
		if d.rows[id] == nil {
			gone = append(gone, id)
			delete(c.ids, id)
		}
	}
	c.sent = d.seq
	return rows, gone, d.seq
}

// events streams the rows (and one stream's details and outputs) as
// Server-Sent Events until the client goes or the Dashboard closes.
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	if d.ctx.Err() != nil {
		http.Error(w, "the dashboard is closed", http.StatusServiceUnavailable)
		return
	}
	c := &client{tick: make(chan struct{}, 1)}
	d.mu.Lock()
	d.clients[c] = struct{}{}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.clients, c)
		d.mu.Unlock()
	}()
	// The outputs of the stream the tab shows reach it through an
	// Outbox: the delivery policy of a subscriber (docs/streams.md).
	var box *provider.Outbox
	var boxWake <-chan struct{}
	watched := r.URL.Query().Get("stream")
	var lastDetail int64 = -1
	var lastState string
	var lastTimeline int64 = -1 // events sent of the watched stream's timeline
	if watched != "" {
		box = provider.NewOutbox(provider.OutboxOptions{Delivery: d.opts.Delivery, MaxPending: d.opts.MaxPending})
		if sub, err := d.p.Subscribe(watched, provider.SubscribeOptions{Receive: box.Add}); err == nil {
			defer sub.Close()
			boxWake = box.Wake()
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ew := &eventWriter{w: w}
	send := func(all bool) {
		rows, gone, seq := d.delta(c, all)
		kind := "rows"
		if all {
			kind = "snapshot"
		}
		ew.event(kind, map[string]any{"seq": seq, "now": time.Now().UnixMilli(), "interval": d.opts.Interval.Milliseconds(), "rows": rows, "gone": gone,
			"breakers": d.p.Breakers()})
		if watched != "" {
			lastDetail, lastState = d.detail(ew, watched, lastDetail, lastState)
			lastTimeline = d.timeline(ew, watched, lastTimeline)
		}
		fl.Flush()
	}
	send(true)
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	due := time.NewTimer(time.Hour)
	defer due.Stop()
	var batches []provider.Batch
	for ew.err == nil {
		due.Stop()
		var tick <-chan time.Time
		if box != nil {
			if at, ok := box.Next(); ok {
				due.Reset(time.Until(at))
				tick = due.C
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-d.ctx.Done():
			return
		case <-c.tick:
			send(false)
		case <-boxWake:
		case <-tick:
		case <-keepAlive.C:
			ew.comment()
			fl.Flush()
		}
		if box == nil {
			continue
		}
		batches = box.Take(time.Now(), batches[:0])
		if len(batches) > 0 {
			writeBatches(ew, batches)
			fl.Flush()
		}
		if err := box.Err(); err != nil {
			// The tab fell behind: it is told, and reconnects afresh.
			ew.event("cut", map[string]string{"stream": watched, "message": err.Error()})
			fl.Flush()
			return
		}
	}
}

// writeBatches sends the outputs of the batches an Outbox delivered: one
// "output" event each (a coalesced one with its count), and a "dropped"
// event when a batch reports low outputs dropped.
func writeBatches(ew *eventWriter, batches []provider.Batch) {
	now := time.Now().UnixMilli()
	for _, b := range batches {
		if b.Dropped > 0 {
			ew.event("dropped", map[string]any{"stream": b.StreamID, "count": b.Dropped})
		}
		for _, o := range b.Outputs {
			ev := map[string]any{"stream": b.StreamID, "seq": o.Seq, "at": now, "output": outputJSON(o.Value),
				"priority": b.Priority.String()}
			if o.Count > 1 {
				ev["count"] = o.Count
			}
			if o.Kind != "" {
				ev["kind"] = o.Kind
			}
			ew.event("output", ev)
		}
	}
}

// detail sends the inspect map of stream id when its processed count or
// state changed since the last one sent, and returns what it sent.
func (d *Dashboard) detail(ew *eventWriter, id string, last int64, lastState string) (int64, string) {
	in, err := d.p.Info(id, provider.InspectOptions{OmitQueue: true})
	if err != nil {
		if last != -2 {
			ew.event("detail-gone", map[string]string{"stream": id, "error": err.Error()})
		}
		return -2, ""
	}
	state := string(in.Status.State) + "/" + in.Status.EndReason
	if in.Stats.ProcessedChunks == last && state == lastState {
		return last, lastState
	}
	ew.raw("detail", in.JSON())
	return in.Stats.ProcessedChunks, state
}

// timeline sends the timeline of stream id when it has events the client
// has not had, and returns how many it has had (events ever noted).
func (d *Dashboard) timeline(ew *eventWriter, id string, had int64) int64 {
	events, dropped, err := d.p.Timeline(id)
	if err != nil {
		return had
	}
	total := dropped + int64(len(events))
	if total == had {
		return had
	}
	ew.event("timeline", map[string]any{"stream": id, "events": events, "dropped": dropped})
	return total
}

// An eventWriter writes Server-Sent Events and keeps the first error.
type eventWriter struct {
	w   http.ResponseWriter
	err error
}

func (e *eventWriter) event(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		e.err = fmt.Errorf("dashboard: encode %s event: %w", name, err)
		return
	}
	e.raw(name, b)
}

// raw writes one event whose data is b (JSON: one line).
func (e *eventWriter) raw(name string, b []byte) {
	if e.err != nil {
		return
	}
	_, e.err = fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b)
}

func (e *eventWriter) comment() {
	if e.err == nil {
		_, e.err = fmt.Fprint(e.w, ": keep-alive\n\n")
	}
}
