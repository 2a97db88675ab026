package main

// The process that holds a data directory (a run, a resume or a serve that
// opened it) serves a control socket in it, so that other commands on the
// same directory work while it runs: streams, inspect, dead-letters, pause,
// cancel, rm, upgrade and resume ID (--skip too) see and act on its live
// streams, and a second run hands its
// program to it, which runs it on its own host as a job of its own while
// the second run prints that job's lines in its own terminal
// (docs/runs-side-by-side.md has the design and why).
//
// The socket speaks HTTP/1.1 (net/http, over a unix socket that only the
// directory's owner can open):
//
//	GET    /v1/hello                the holder: its process, command, profile
//	GET    /v1/streams              every stream's snapshot (live and stored)
//	GET    /v1/streams/{id}         one stream's
//	POST   /v1/streams/{id}/{verb}  pause, resume, skip or cancel it: {"state": S}
//	POST   /v1/streams/{id}/upgrade give it a new processor (upgradeRequest)
//	GET    /v1/streams/{id}/dead-letters  the chunks it set aside
//	DELETE /v1/streams/{id}         remove it
//	POST   /v1/run                  run a program as a job of the holder
//
// A run's request body is the request (joinRequest, JSON) and then nothing
// until the joining run ends it (its Ctrl-C): the holder then stops the
// job's streams where they are. The response is the job's wire lines
// (wireLine, one JSON object per line), the last one its exit code.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rtfshost/rtfshost/host"
	"github.com/rtfshost/rtfshost/provider"
	"github.com/rtfshost/rtfshost/rtfs"
)

// A profile is what decides how a program's streams run in a process,
// beyond the program: a run joins the holder of its data directory only
// when their profiles are the same, so that its program runs there as it
// would have run on its own.
type profile struct {
	Dir         string `json:"dir"`          // the working directory (relative paths of :exec, :stdio)
	Server      string `json:"server"`       // the resolved server URL
	MaxSteps    int64  `json:"max-steps"`    // the budgets
	MaxMemory   int64  `json:"max-memory"`   //
	CallTimeout int64  `json:"call-timeout"` // ns
	Idle        int64  `json:"idle"`         // ns: provider.Options.IdleTimeout
	Sync        bool   `json:"sync"`
	Env         string `json:"env"` // a digest of the environment streams read: CCOS_*, RTFSHOST_*, PATH
}

// profile is this process's profile.
func (a *app) profile() profile {
	wd, _ := os.Getwd()
	l := a.rt.limits()
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CCOS_") || strings.HasPrefix(kv, "RTFSHOST_") || strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	sort.Strings(env)
	sum := sha256.Sum256([]byte(strings.Join(env, "\x00")))
	return profile{Dir: wd, Server: provider.ResolveServerURL(a.flags.serverURL), MaxSteps: l.MaxSteps, MaxMemory: l.MaxMemory,
		CallTimeout: int64(l.MaxDuration), Idle: int64(a.rt.idle()), Sync: a.flags.sync, Env: hex.EncodeToString(sum[:])}
}

// differs names what differs between a joining run's profile p and the
// holder's h, each thing with both values and what to do about it; ""
// when nothing does.
func (p profile) differs(h profile) string {
	var d []string
	add := func(what, here, there, fix string) {
		d = append(d, fmt.Sprintf("%s differs (%s here, %s there): %s, or use another --data", what, here, there, fix))
	}
	if p.Dir != h.Dir {
		add("the working directory", p.Dir, h.Dir, "run from "+h.Dir)
	}
	if p.Server != h.Server {
		add("the server URL", p.Server, h.Server, "pass --server-url "+h.Server)
	}
	// A budget of 0 is the flag's default.
	budget := func(flag string, here, there int64, show func(int64) string) {
		if here == there {
			return
		}
		v := func(n int64) string {
			if n == 0 {
				return "the default"
			}
			return show(n)
		}
		fix := "leave " + flag + " out"
		if there != 0 {
			fix = "pass " + flag + " " + show(there)
		}
		add(flag, v(here), v(there), fix)
	}
	budget("--max-steps", p.MaxSteps, h.MaxSteps, func(n int64) string { return fmt.Sprint(n) })
	budget("--max-memory", p.MaxMemory, h.MaxMemory, func(n int64) string { return fmt.Sprint(n) })
	budget("--call-timeout", p.CallTimeout, h.CallTimeout, func(n int64) string { return time.Duration(n).String() })
	budget("--idle-timeout", p.Idle, h.Idle, func(n int64) string { return time.Duration(n).String() })
	if p.Sync != h.Sync {
		onOff := map[bool]string{true: "on", false: "off"}
		add("--sync", onOff[p.Sync], onOff[h.Sync], map[bool]string{true: "pass --sync", false: "leave --sync out"}[h.Sync])
	}
	if p.Env != h.Env {
		d = append(d, "the environment streams read differs (CCOS_*, RTFSHOST_*, PATH): run with the same, or use another --data")
	}
	return strings.Join(d, "; ")
}

// helloInfo is what GET /v1/hello answers.
type helloInfo struct {
	PID     int     `json:"pid"`
	Command string  `json:"command"`
	Version string  `json:"version"`
	Profile profile `json:"profile"`
}

func (i helloInfo) String() string { return fmt.Sprintf("process %d (%s)", i.PID, i.Command) }

// A holder serves the control socket of the data directory its process
// holds. Its jobs run on the process's host; close waits for them.
type holder struct {
	a      *app
	h      *host.Host
	owners *owners
	hello  helloInfo
	path   string
	ln     net.Listener
	srv    *http.Server
	served chan error

	// jobsCtx bounds the jobs of joining runs; stopJobs interrupts them.
	jobsCtx  context.Context
	stopJobs context.CancelFunc

	mu      sync.Mutex
	jobs    map[*joined]struct{}
	closing bool
	idle    chan struct{} // closed when the last job ends while closing
}

// joined is a run that joined the holder, while its job runs.
type joined struct{ file string }

// serveHolder serves the control socket of the data directory that h's
// store lives in. A socket file already there is a dead holder's: this
// process holds the directory's lock.
func (a *app) serveHolder(h *host.Host, o *owners) (*holder, error) {
	path, runDir, err := sockPath(a.flags.dataDir)
	if err != nil {
		return nil, err
	}
	if runDir != "" {
		if err := makeOwnDir(runDir); err != nil {
			return nil, err
		}
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("the control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("the control socket %s: %w", path, err)
	}
	hd := &holder{a: a, h: h, owners: o, path: path, ln: ln, served: make(chan error, 1), jobs: map[*joined]struct{}{},
		hello: helloInfo{PID: os.Getpid(), Command: clip(strings.Join(append([]string{"rtfshost"}, os.Args[1:]...), " "), 200), Version: version, Profile: a.profile()}}
	hd.jobsCtx, hd.stopJobs = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/hello", func(w http.ResponseWriter, _ *http.Request) { replyJSON(w, http.StatusOK, hd.hello) })
	mux.HandleFunc("GET /v1/streams", hd.listStreams)
	mux.HandleFunc("GET /v1/streams/{id}", hd.oneStream)
	mux.HandleFunc("POST /v1/streams/{id}/{verb}", hd.applyStream)
	mux.HandleFunc("POST /v1/streams/{id}/upgrade", hd.upgradeStream)
	mux.HandleFunc("GET /v1/streams/{id}/dead-letters", hd.deadLettersOf)
	mux.HandleFunc("DELETE /v1/streams/{id}", hd.removeStream)
	mux.HandleFunc("POST /v1/run", hd.run)
	hd.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { hd.served <- hd.srv.Serve(ownListener{Listener: ln, self: os.Getuid()}) }()
	return hd, nil
}

// waitJobs waits until the jobs of joined runs have ended, saying so on w
// when some run, and refuses new ones meanwhile. A Ctrl-C (ctx) changes
// nothing but what it says: the runs that joined go on; after the first
// Ctrl-C the next one ends the process at once, with them (their progress
// is kept).
func (hd *holder) waitJobs(ctx context.Context, w io.Writer) {
	if hd == nil {
		return
	}
	hd.mu.Lock()
	hd.closing = true
	n := len(hd.jobs)
	if n == 0 {
		hd.mu.Unlock()
		return
	}
	hd.idle = make(chan struct{})
	idle := hd.idle
	var files []string
	for j := range hd.jobs {
		files = append(files, j.file)
	}
	hd.mu.Unlock()
	sort.Strings(files)
	fmt.Fprintf(w, "rtfshost: %d other run(s) joined %s and run here (%s): waiting for them to end\n", n, hd.a.flags.dataDir, strings.Join(files, ", "))
	select {
	case <-idle:
		return
	case <-ctx.Done():
	}
	fmt.Fprintln(w, "rtfshost: the runs that joined go on here until they end; Ctrl-C again stops them too (their progress is kept)")
	<-idle
}

// close stops serving and removes the socket; the jobs of joined runs
// still running are interrupted first (their streams stop where they are).
func (hd *holder) close() {
	if hd == nil {
		return
	}
	hd.mu.Lock()
	hd.closing = true
	hd.mu.Unlock()
	hd.stopJobs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = hd.srv.Shutdown(ctx) // waits for the jobs' handlers
	<-hd.served
	_ = os.Remove(hd.path)
}

// replyJSON writes v as the JSON answer with code.
func replyJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// replyError answers err: 404 for an unknown stream, 409 otherwise.
func replyError(w http.ResponseWriter, err error) {
	code := http.StatusConflict
	if errors.Is(err, errNoStream) {
		code = http.StatusNotFound
	}
	replyJSON(w, code, map[string]string{"error": err.Error()})
}

// opts reads the inspect options of a request (?state=0&queue=0).
func inspectOpts(r *http.Request) provider.InspectOptions {
	q := r.URL.Query()
	return provider.InspectOptions{OmitState: q.Get("state") == "0", OmitInitialState: q.Get("state") == "0", OmitQueue: q.Get("queue") == "0"}
}

// stored loads the streams of the holder's store that its host does not
// run, for reading (the caller closes the view): streams of earlier runs,
// and those stopped where they were (interrupted).
func (hd *holder) stored(ctx context.Context) (*provider.Provider, error) {
	logger, _ := hd.a.logger()
	view, err := storedView(ctx, hd.h.Store(), logger)
	if err != nil && len(view.StreamIDs()) == 0 {
		view.Close()
		return nil, err
	}
	return view, nil
}

func (hd *holder) listStreams(w http.ResponseWriter, r *http.Request) {
	opts := inspectOpts(r)
	p := hd.h.Provider()
	infos := p.Infos(opts)
	view, err := hd.stored(r.Context())
	if err != nil {
		replyError(w, err)
		return
	}
	defer view.Close()
	for _, in := range interrupted(view.Infos(opts)) {
		if _, err := p.Status(r.Context(), in.StreamID); err != nil {
			infos = append(infos, in)
		}
	}
	replyJSON(w, http.StatusOK, infos)
}

func (hd *holder) oneStream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if in, err := hd.h.Provider().Info(id, inspectOpts(r)); err == nil {
		replyJSON(w, http.StatusOK, in)
		return
	}
	view, err := hd.stored(r.Context())
	if err != nil {
		replyError(w, err)
		return
	}
	defer view.Close()
	in, err := view.Info(id, inspectOpts(r))
	if err != nil {
		replyError(w, fmt.Errorf("stream %q: %w", id, errNoStream))
		return
	}
	replyJSON(w, http.StatusOK, interrupted([]provider.StreamInfo{in})[0])
}

func (hd *holder) applyStream(w http.ResponseWriter, r *http.Request) {
	id, verb := r.PathValue("id"), r.PathValue("verb")
	if verb == "resume" || verb == "skip" {
		st, err := hd.resume(r.Context(), id, verb == "skip")
		if err != nil {
			replyError(w, err)
			return
		}
		replyJSON(w, http.StatusOK, map[string]provider.State{"state": st})
		return
	}
	p := hd.h.Provider()
	op := map[string]func(context.Context, string) (provider.Status, error){"pause": p.Pause, "resume": p.Resume, "cancel": p.Cancel}[verb]
	to := map[string]provider.State{"pause": provider.StatePaused, "resume": provider.StateActive, "cancel": provider.StateCancelled}[verb]
	if op == nil {
		replyJSON(w, http.StatusNotFound, map[string]string{"error": "unknown operation " + verb + "; use pause, resume, skip or cancel"})
		return
	}
	if _, err := p.Status(r.Context(), id); err == nil {
		st, err := op(r.Context(), id)
		if err != nil {
			replyError(w, err)
			return
		}
		replyJSON(w, http.StatusOK, map[string]provider.State{"state": st.State})
		return
	}
	if _, err := provider.SetStoredState(r.Context(), hd.h.Store(), id, to); err != nil {
		replyError(w, storedErr(id, err))
		return
	}
	if to == provider.StateActive {
		to = StateInterrupted // un-paused; it runs on at the next resume
	}
	replyJSON(w, http.StatusOK, map[string]provider.State{"state": to})
}

func (hd *holder) removeStream(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p := hd.h.Provider()
	var err error
	if _, serr := p.Status(r.Context(), id); serr == nil {
		_, err = p.Remove(r.Context(), id, true)
	} else {
		_, err = provider.RemoveStored(r.Context(), hd.h.Store(), id, true)
		err = storedErr(id, err)
	}
	if err != nil {
		replyError(w, err)
		return
	}
	replyJSON(w, http.StatusOK, map[string]bool{"removed": true})
}

// storedErr marks the store's "no such stream" as errNoStream.
func storedErr(id string, err error) error {
	if errors.Is(err, provider.ErrNoStoredStream) {
		return fmt.Errorf("stream %q: %w", id, errNoStream)
	}
	return err
}

// joinRequest is what a joining run sends: its program and how to run it.
type joinRequest struct {
	File       string  `json:"file"`
	Source     string  `json:"source"`
	Live       bool    `json:"live"`
	TimeoutNs  int64   `json:"timeout-ns"`
	WaitPaused bool    `json:"wait-paused"`
	Profile    profile `json:"profile"`
}

// run runs the program of a joining run as a job of the holder, its lines
// on the response, until the job ends, or the run ends its request (its
// Ctrl-C: the job's streams stop where they are).
func (hd *holder) run(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if err := rc.EnableFullDuplex(); err != nil {
		replyJSON(w, http.StatusInternalServerError, map[string]string{"error": "the control socket cannot stream: " + err.Error()})
		return
	}
	var req joinRequest
	body := bufio.NewReader(r.Body)
	if err := json.NewDecoder(io.LimitReader(body, 64<<20)).Decode(&req); err != nil {
		replyJSON(w, http.StatusBadRequest, map[string]string{"error": "a run request: " + err.Error()})
		return
	}
	if d := req.Profile.differs(hd.hello.Profile); d != "" {
		replyJSON(w, http.StatusConflict, map[string]string{"error": "its programs would not run there as here: " + d})
		return
	}
	prog, err := rtfs.Compile(req.File, []byte(req.Source))
	if err != nil {
		replyJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	me := &joined{file: req.File}
	hd.mu.Lock()
	if hd.closing {
		hd.mu.Unlock()
		replyJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "it is ending"})
		return
	}
	hd.jobs[me] = struct{}{}
	hd.mu.Unlock()
	defer hd.leave(me)

	ctx, cancel := context.WithCancel(hd.jobsCtx)
	defer cancel()
	stop := context.AfterFunc(r.Context(), cancel)
	defer stop()
	go func() {
		// The run ends its request body when it is interrupted.
		_, _ = io.Copy(io.Discard, r.Body)
		cancel()
	}()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	wr := &wireReporter{w: w, rc: rc}
	wr.flush()
	j, err := newJob(hd.h, hd.owners, wr, jobOptions{timeout: time.Duration(req.TimeoutNs), waitPaused: req.WaitPaused, live: req.Live,
		maxOutput: hd.a.rt.limits().OutputLimit(), hints: hints{dataDir: hd.a.flags.dataDir}})
	if err != nil {
		wr.fail(failure{Kind: failOther, Message: err.Error()})
		wr.exit(exitStreamFailed)
		return
	}
	wr.exit(j.run(ctx, req.File, prog))
}

func (hd *holder) leave(me *joined) {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	delete(hd.jobs, me)
	if len(hd.jobs) == 0 && hd.idle != nil {
		close(hd.idle)
		hd.idle = nil
	}
}

// wireLine is one line from a holder to the run whose job it runs: a call
// of the job's reporter, replayed by the run into its own.
type wireLine struct {
	Type    string        `json:"type"` // output, dropped, progress, end, log, result, stats, fail, exit
	Stream  string        `json:"stream,omitempty"`
	Seq     int64         `json:"seq,omitempty"`
	Count   int64         `json:"count,omitempty"` // dropped: how many
	Value   *shown        `json:"value,omitempty"`
	End     *ending       `json:"end,omitempty"`
	Line    string        `json:"line,omitempty"`
	Stats   []streamStats `json:"stats,omitempty"`
	Failure *failure      `json:"failure,omitempty"`
	Code    int           `json:"code,omitempty"`
	// Progress is a progress line's :progress.
	Progress *provider.ProgressInfo `json:"progress,omitempty"`
}

// wireReporter is the reporter of a joined run's job: it writes each call
// as a wireLine to the run. A run that went away gets nothing more.
type wireReporter struct {
	mu  sync.Mutex
	w   io.Writer
	rc  *http.ResponseController
	err error
}

func (r *wireReporter) send(l wireLine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	b, err := json.Marshal(l)
	if err == nil {
		_, err = r.w.Write(append(b, '\n'))
	}
	if err == nil {
		err = r.rc.Flush()
	}
	r.err = err
}

func (r *wireReporter) flush() { _ = r.rc.Flush() }

func (r *wireReporter) output(stream string, seq int64, v shown) {
	r.send(wireLine{Type: "output", Stream: stream, Seq: seq, Value: &v})
}
func (r *wireReporter) dropped(stream string, n int64) {
	r.send(wireLine{Type: "dropped", Stream: stream, Count: n})
}
func (r *wireReporter) progress(stream string, p provider.ProgressInfo) {
	r.send(wireLine{Type: "progress", Stream: stream, Progress: &p})
}
func (r *wireReporter) end(e ending) { r.send(wireLine{Type: "end", End: &e}) }
func (r *wireReporter) log(stream, line string) {
	r.send(wireLine{Type: "log", Stream: stream, Line: line})
}
func (r *wireReporter) result(v shown)           { r.send(wireLine{Type: "result", Value: &v}) }
func (r *wireReporter) stats(list []streamStats) { r.send(wireLine{Type: "stats", Stats: list}) }
func (r *wireReporter) fail(f failure)           { r.send(wireLine{Type: "fail", Failure: &f}) }
func (r *wireReporter) close()                   {}
func (r *wireReporter) exit(code int)            { r.send(wireLine{Type: "exit", Code: code}) }

// holderClient talks to the control socket at path.
type holderClient struct {
	path string
	http *http.Client
}

func newHolderClient(path string) *holderClient {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialSocket(ctx, path, os.Getuid()) // nothing goes to another user's socket
		},
		DisableCompression: true,
	}
	return &holderClient{path: path, http: &http.Client{Transport: tr}}
}

// call sends a request and decodes the JSON answer into out; an answer
// other than 200 is an error with the holder's message, wrapping
// errNoStream for 404.
func (c *holderClient) call(ctx context.Context, method, path string, out any) error {
	return c.send(ctx, method, path, nil, out)
}

func decodeAnswer(resp *http.Response, out any) error {
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e)
		if e.Error == "" {
			e.Error = resp.Status
		}
		if resp.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%s: %w", e.Error, errNoStream)
		}
		return errors.New(e.Error)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (c *holderClient) closeIdle() { c.http.CloseIdleConnections() }

// dialHolder connects to the process that holds the data directory, if
// one answers on its control socket.
func (a *app) dialHolder(ctx context.Context) (*holderDesk, error) {
	path, runDir, err := sockPath(a.flags.dataDir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	if runDir != "" {
		if err := checkOwnDir(runDir); err != nil {
			return nil, &untrustedSocket{err}
		}
	}
	c := newHolderClient(path)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var hello helloInfo
	if err := c.call(ctx, http.MethodGet, "/v1/hello", &hello); err != nil {
		c.closeIdle()
		if errors.Is(err, errForeignPeer) {
			return nil, &untrustedSocket{err}
		}
		return nil, err
	}
	return &holderDesk{c: c, hello: hello, dir: a.flags.dataDir}, nil
}

// holderDesk is the process that holds the data directory, reached
// through its control socket: its live streams, and the stored ones.
type holderDesk struct {
	c     *holderClient
	hello helloInfo
	dir   string
}

func (d *holderDesk) where() string {
	return fmt.Sprintf("the data directory %s (held by %s)", d.dir, d.hello)
}

func query(opts provider.InspectOptions) string {
	q := "?state=1&queue=1"
	if opts.OmitState {
		q = "?state=0&queue=1"
	}
	if opts.OmitQueue {
		q = q[:len(q)-1] + "0"
	}
	return q
}

func (d *holderDesk) infos(ctx context.Context, opts provider.InspectOptions) ([]provider.StreamInfo, error) {
	var infos []provider.StreamInfo
	err := d.c.call(ctx, http.MethodGet, "/v1/streams"+query(opts), &infos)
	return infos, err
}

func (d *holderDesk) info(ctx context.Context, id string, opts provider.InspectOptions) (provider.StreamInfo, error) {
	var in provider.StreamInfo
	err := d.c.call(ctx, http.MethodGet, "/v1/streams/"+url.PathEscape(id)+query(opts), &in)
	if errors.Is(err, errNoStream) {
		return in, noStream(d, id)
	}
	return in, err
}

func (d *holderDesk) apply(ctx context.Context, verb, id string) (provider.State, error) {
	var st struct {
		State provider.State `json:"state"`
	}
	err := d.c.call(ctx, http.MethodPost, "/v1/streams/"+url.PathEscape(id)+"/"+verb, &st)
	return st.State, err
}

func (d *holderDesk) remove(ctx context.Context, id string) error {
	var out map[string]bool
	return d.c.call(ctx, http.MethodDelete, "/v1/streams/"+url.PathEscape(id), &out)
}

func (d *holderDesk) close() { d.c.closeIdle() }

// errHolderEnding is join's error when the holder refuses the run because
// it is ending: the directory is about to be free.
var errHolderEnding = errors.New("the process that holds the data directory is ending")

// join runs the program as a job of the holder of the data directory and
// replays its lines into rep; it returns the job's exit code. The first
// Ctrl-C (ctx) ends the request: the holder stops the job's streams where
// they are and sends the last lines. A holder that goes away ends the run
// as interrupted.
func (a *app) join(ctx context.Context, d *holderDesk, file string, src []byte, o runOptions, live bool, rep reporter) (int, error) {
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, "http://rtfshost/v1/run", pr)
	if err != nil {
		return 0, err
	}
	body, err := json.Marshal(joinRequest{File: file, Source: string(src), Live: live, TimeoutNs: int64(o.timeout), WaitPaused: o.waitPaused, Profile: a.profile()})
	if err != nil {
		return 0, err
	}
	go func() {
		if _, err := pw.Write(body); err != nil {
			return
		}
		<-ctx.Done() // Ctrl-C: end the request body, so the holder interrupts the job
		pw.Close()
	}()
	defer pw.Close()
	resp, err := d.c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("joining %s: %w", d.where(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		return 0, errHolderEnding
	}
	if resp.StatusCode != http.StatusOK {
		var out struct{}
		return 0, decodeAnswer(resp, &out)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 64<<10), 64<<20)
	for lines.Scan() {
		var l wireLine
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			return 0, fmt.Errorf("%s sent a line that is not one: %w", d.where(), err)
		}
		switch l.Type {
		case "output":
			rep.output(l.Stream, l.Seq, deref(l.Value))
		case "dropped":
			rep.dropped(l.Stream, l.Count)
		case "progress":
			if l.Progress != nil {
				rep.progress(l.Stream, *l.Progress)
			}
		case "end":
			if l.End != nil {
				rep.end(*l.End)
			}
		case "log":
			rep.log(l.Stream, l.Line)
		case "result":
			rep.result(deref(l.Value))
		case "stats":
			rep.stats(l.Stats)
		case "fail":
			if l.Failure != nil {
				rep.fail(*l.Failure)
			}
		case "exit":
			return l.Code, nil
		}
	}
	rep.fail(failure{Kind: failInterrupted, Message: fmt.Sprintf("interrupted: %s stopped", d.hello)})
	return exitInterrupted, nil
}

func deref(v *shown) shown {
	if v == nil {
		return show(rtfs.Nil, 0, "nil")
	}
	return *v
}
