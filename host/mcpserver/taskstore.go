package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/provider"
)

// The task table: the MCP Tasks this server knows, their records in the
// host's store, and how they are looked up, listed and awaited. They are
// created and driven in taskrun.go; the methods that reach them are in
// taskwire.go.
//
// A task of mcp.stream.start is its stream: the task id is the stream id,
// its status follows the stream's, tasks/cancel cancels the stream, and
// since the stream is durable, so is the task: its record (created before
// the CreateTaskResult is sent, updated with the final result) is kept in
// the host's store, and after serve restarts, tasks/get still answers and
// the result is still delivered. A task of rtfs.eval runs the program; its
// result is stored when it ends, but a restart while it runs ends it as
// failed. Which tools run as tasks, and how, is their spec's task field
// (tools.go).

// The task statuses.
const (
	taskWorking   = "working"
	taskCompleted = "completed"
	taskFailed    = "failed"
	taskCancelled = "cancelled"
)

// Task timing: the default and the longest time-to-live, and the suggested
// polling interval.
const (
	defaultTaskTTL = time.Hour
	maxTaskTTL     = 7 * 24 * time.Hour
	taskPoll       = time.Second
	taskPageSize   = 50
)

// The store record of a task.
const (
	kindTask    persistence.RecordKind = 32
	taskVersion                        = 1
	taskPrefix                         = "mcp/task/"
)

// taskRecord is what is stored of a task.
type taskRecord struct {
	ID       string          `json:"id"`
	Tool     string          `json:"tool"`
	StreamID string          `json:"stream,omitempty"`
	Created  time.Time       `json:"created"`
	Updated  time.Time       `json:"updated"`
	TTL      time.Duration   `json:"ttl"`
	Status   string          `json:"status"`
	Message  string          `json:"message,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"` // the CallToolResult, once terminal
}

func (r *taskRecord) terminal() bool {
	return r.Status == taskCompleted || r.Status == taskFailed || r.Status == taskCancelled
}

// taskEntry is a task this server knows: its record and, while it runs in
// this process, how to stop it.
type taskEntry struct {
	rec     taskRecord
	done    chan struct{}      // closed when rec becomes terminal
	running bool               // a goroutine of this process drives it
	cancel  context.CancelFunc // stops that goroutine's work
	peer    *taskPeer          // where its work's notifications go; nil: nowhere
}

// tasks is the Server's task table. Its methods are safe for concurrent
// use; the goroutines it starts are counted in Server.calls.
type tasks struct {
	s     *Server
	store persistence.Store      // nil: tasks live as long as the process
	com   *persistence.Committer // writes the tasks' outputs behind (taskout.go); nil without a store

	// stopLoads stops the provider's calls of streamLoaded (a cluster's
	// tasks only).
	stopLoads func()

	mu   sync.Mutex
	byID map[string]*taskEntry
}

func newTasks(s *Server, store persistence.Store) *tasks {
	t := &tasks{s: s, store: store, byID: make(map[string]*taskEntry)}
	if store != nil {
		t.com = persistence.NewCommitter(store, persistence.CommitterOptions{})
	}
	if store != nil && t.clustered() {
		t.stopLoads = s.prov.WatchLoads(t.streamLoaded)
	}
	return t
}

// stop ends the tasks' look at the streams the host loads; call it before
// waiting for the followers to end.
func (t *tasks) stop() {
	if t.stopLoads != nil {
		t.stopLoads()
	}
}

// close stores the outputs still written behind; call it once no follower
// runs.
func (t *tasks) close() {
	if t.com != nil {
		_ = t.com.Close()
	}
}

// loaded makes sure the stored tasks are read (load), as the first look at
// the table after the host recovered its streams: the server's followers
// of what an earlier process left are started once (Server.followRestored),
// Server.Recover's before the host recovers, or else here.
func (t *tasks) loaded(ctx context.Context) { t.s.followRestored(ctx, recoveredAlready) }

// load reads the stored tasks; Server.followRestored calls it once. A
// stream task that has not ended is followed from here: its follower
// subscribes to its stream at once, so when load runs before the host
// recovers the streams, as Server.Recover has it, no output of a recovered
// stream escapes the task; the follower looks at the stream once recovered
// is closed. An expired task goes, and so do the stored outputs of tasks
// that have ended (their results hold them) or that no record names.
func (t *tasks) load(ctx context.Context, recovered <-chan struct{}) {
	if t.store == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var expired [][]byte
	err := t.store.Scan(ctx, []byte(taskPrefix), func(k, v []byte) error {
		rec, err := decodeTask(k, v)
		if err != nil {
			return err
		}
		if rec.terminal() && time.Since(rec.Created) > rec.TTL {
			expired = append(expired, bytes.Clone(k)) // its ttl is over: forget it
			return nil
		}
		if t.byID[rec.ID] != nil {
			return nil // taken with its stream (streamLoaded) before this load
		}
		e := &taskEntry{rec: rec, done: make(chan struct{})}
		if rec.terminal() {
			close(e.done)
		}
		t.byID[rec.ID] = e
		return nil
	})
	if len(expired) > 0 {
		var b persistence.Batch
		for _, k := range expired {
			b.Delete(k)
		}
		if cerr := t.store.Commit(ctx, &b); cerr != nil {
			t.s.log.Error("mcp tasks: deleting expired tasks", "err", cerr)
		}
	}
	if err != nil {
		t.s.log.Error("mcp tasks: reading the stored tasks", "err", err)
	}
	if !t.clustered() { // in a cluster another host may be writing them
		t.deleteKeys(ctx, []byte(taskOutPrefix), func(k []byte) bool {
			id, _, _ := parseTaskOutKey(k)
			e := t.byID[id]
			return e == nil || e.rec.terminal()
		})
	}
	for _, e := range t.byID {
		if !e.rec.terminal() {
			t.resumeLocked(e, recovered)
		}
	}
}

// In a cluster (docs/cluster.md) the task records are shared by every host,
// and a stream task is driven by the host that runs its stream. The other
// hosts answer for it from its record, read again from the store at each
// look, and take it over when its stream comes to them: the provider tells
// streamLoaded of every stream it loads (a takeover, after the host that
// ran it left or died), before the stream processes anything here, and the
// task's follower starts there, so that it sees every output the stream
// gives here.

// clustered reports whether the server's host shares its store with other
// hosts.
func (t *tasks) clustered() bool { return t.s.host.Cluster() != nil }

// runsHere reports whether this host runs stream id.
func (t *tasks) runsHere(id string) bool { return slices.Contains(t.s.prov.Live(), id) }

// loadedHere reports whether this host's provider has stream id, running
// or ended.
func (t *tasks) loadedHere(id string) bool { return slices.Contains(t.s.prov.StreamIDs(), id) }

// streamLoaded is the provider's LoadFunc: when the host loads stream id
// (it runs here from now on, or has ended and is loaded to be inspected)
// and a task of that stream that has not ended is driven by no goroutine
// here, it starts the task's follower, subscribed to the stream before
// the stream gives anything here; the follower looks at the stream once
// the provider says it is loaded. Cost: one read of the task's record for
// each stream taken over; none for an ended stream that no task here
// names.
func (t *tasks) streamLoaded(ctx context.Context, id string, ended bool) func(error) {
	if !t.s.hold() {
		return nil // closed
	}
	defer t.s.calls.Done()
	t.mu.Lock()
	e := t.byID[id]
	t.mu.Unlock()
	if e == nil && ended {
		return nil
	}
	// The record, as whichever host last drove the task stored it.
	rec, err := t.stored(ctx, id)
	if err != nil {
		if !errors.Is(err, persistence.ErrNotFound) {
			t.s.log.Error("mcp tasks: reading the task of a stream taken over", "stream", id, "err", err)
		}
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e = t.byID[id]; e == nil {
		e = &taskEntry{rec: rec, done: make(chan struct{})}
		t.byID[id] = e
	}
	if e.running || e.rec.terminal() {
		return nil
	}
	e.rec = rec
	if rec.terminal() {
		close(e.done)
		return nil
	}
	if rec.StreamID != id {
		return nil
	}
	loaded := make(chan struct{})
	t.followLocked(e, nil, loaded)
	return func(error) { close(loaded) }
}

// refreshLocked reads task id's record from the store when this host does
// not drive it (another host of the cluster may have created or changed
// it), and drives it once its stream runs here. It returns the entry, nil
// when the store has no such task.
func (t *tasks) refreshLocked(ctx context.Context, id string) *taskEntry {
	e := t.byID[id]
	if e != nil && (e.running || e.rec.terminal()) {
		return e
	}
	rec, err := t.stored(ctx, id)
	if err != nil {
		return e
	}
	if e == nil {
		e = &taskEntry{done: make(chan struct{})}
		t.byID[id] = e
	}
	e.rec = rec
	if rec.terminal() {
		close(e.done)
		return e
	}
	t.resumeLocked(e, recoveredAlready)
	return e
}

// decodeTask reads the stored record of a task (key k, value v).
func decodeTask(k, v []byte) (taskRecord, error) {
	var rec taskRecord
	_, payload, err := persistence.DecodeRecord(k, v, kindTask, taskVersion)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(payload, &rec); err != nil {
		return rec, &persistence.CorruptRecordError{Key: bytes.Clone(k), Reason: err.Error()}
	}
	return rec, nil
}

// stored reads task id's record from the store.
func (t *tasks) stored(ctx context.Context, id string) (taskRecord, error) {
	k := []byte(taskPrefix + id)
	v, err := t.store.Get(ctx, k)
	if err != nil {
		return taskRecord{}, err
	}
	return decodeTask(k, v)
}

// save stores rec; without a store it does nothing.
func (t *tasks) save(ctx context.Context, rec taskRecord) error {
	if t.store == nil {
		return nil
	}
	payload, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	var b persistence.Batch
	b.Put([]byte(taskPrefix+rec.ID), persistence.EncodeRecord(kindTask, taskVersion, payload))
	return t.store.Commit(ctx, &b)
}

// lookup returns the task id, or an invalid-params failure for an unknown
// or expired one.
func (t *tasks) lookup(ctx context.Context, id string) (*taskEntry, error) {
	t.loaded(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.store != nil && t.clustered() {
		t.refreshLocked(ctx, id)
	}
	e, ok := t.byID[id]
	if ok && time.Since(e.rec.Created) > e.rec.TTL && e.rec.terminal() {
		delete(t.byID, id)
		if t.store != nil {
			var b persistence.Batch
			b.Delete([]byte(taskPrefix + id))
			_ = t.store.Commit(ctx, &b)
		}
		ok = false
	}
	if !ok {
		return nil, &rpcFailure{code: codeInvalidParams, msg: fmt.Sprintf("no task %q (unknown, or expired after its ttl)", id)}
	}
	return e, nil
}

// wait blocks until the task ends or ctx does. In a cluster, a task that
// another host drives is read again from the store every clusterPoll, and
// its stream's status asked.
func (t *tasks) wait(ctx context.Context, e *taskEntry) (taskRecord, error) {
	for done := false; !done; {
		var tick <-chan time.Time
		if t.store != nil && t.clustered() {
			tick = time.After(clusterPoll)
		}
		select {
		case <-e.done:
			done = true
		case <-tick:
			t.mu.Lock()
			t.refreshLocked(ctx, e.rec.ID)
			idle, stream := !e.running && !e.rec.terminal(), e.rec.StreamID
			t.mu.Unlock()
			if idle && stream != "" {
				// No goroutine here drives it: its stream's status is
				// asked of its host, or, when no live host runs it (it
				// ended after its host's server closed, or its host
				// died), the stream is loaded here, and with it the task
				// is driven here (streamLoaded).
				_, _ = t.s.prov.Status(ctx, stream)
			}
		case <-ctx.Done():
			return taskRecord{}, ctx.Err()
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return e.rec, nil
}

// clusterPoll is how often a task another host drives is read again while
// tasks/result waits for it.
const clusterPoll = 500 * time.Millisecond

// snapshot returns e's record, its message refreshed from its stream.
func (t *tasks) snapshot(ctx context.Context, e *taskEntry) taskRecord {
	t.mu.Lock()
	rec := e.rec
	t.mu.Unlock()
	if !rec.terminal() && rec.StreamID != "" {
		if st, err := t.s.prov.Status(ctx, rec.StreamID); err == nil && st.State == provider.StatePaused {
			rec.Message = "the stream is paused"
		}
	}
	return rec
}

// list returns the tasks after cursor, oldest first, and the next cursor.
func (t *tasks) list(ctx context.Context, cursor string) ([]taskRecord, string, error) {
	t.loaded(ctx)
	start := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 {
			return nil, "", &rpcFailure{code: codeInvalidParams, msg: fmt.Sprintf("bad cursor %q", cursor)}
		}
		start = n
	}
	var ids []string
	if t.store != nil && t.clustered() {
		// Tasks other hosts made since this one loaded its table.
		err := t.store.Scan(ctx, []byte(taskPrefix), func(k, _ []byte) error {
			ids = append(ids, strings.TrimPrefix(string(k), taskPrefix))
			return nil
		})
		if err != nil {
			return nil, "", fmt.Errorf("reading the stored tasks: %w", err)
		}
	}
	t.mu.Lock()
	for _, id := range ids {
		t.refreshLocked(ctx, id)
	}
	recs := make([]taskRecord, 0, len(t.byID))
	for _, e := range t.byID {
		recs = append(recs, e.rec)
	}
	t.mu.Unlock()
	sort.Slice(recs, func(i, j int) bool {
		if !recs[i].Created.Equal(recs[j].Created) {
			return recs[i].Created.Before(recs[j].Created)
		}
		return recs[i].ID < recs[j].ID
	})
	if start >= len(recs) {
		return nil, "", nil
	}
	end := min(start+taskPageSize, len(recs))
	next := ""
	if end < len(recs) {
		next = strconv.Itoa(end)
	}
	return recs[start:end], next, nil
}
