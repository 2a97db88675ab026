package cluster

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
	"github.com/synadia-io/orbit.go/natsext"

	"github.com/rtfshost/rtfshost/persistence"
)

// A Store is a persistence.Store on the cluster's JetStream stream: one
// subject per key (rtfshost.kv.<key>), keeping its last value. It is what a
// host of the cluster gives its provider, MCP server and parked programs
// instead of a Badger store. It is safe for concurrent use. It does not own
// the Cluster: Close the Store, then the Cluster.
//
// Commit is one JetStream atomic batch (all of it or none is stored, and
// readers see all of it or none), acknowledged once the server has stored
// it as its storage settings say (docs/cluster.md: with sync_interval
// always, on disk). A write to a stream's records (Options.KeyOwner) is
// fenced by the stream's ownership: refused by the server, with
// persistence.ErrFenced, unless this host still owns the stream. While NATS
// cannot be reached Commit waits and retries with backoff, so a stream
// stops taking chunks instead of failing, until ctx ends or Close.
//
// Scan reads the last value of every matching key; a scan of at most 1024
// keys is one isolated read (a snapshot), a larger one is made of several
// such reads (each key as it was at one of them). Get and Scan read from
// the stream's leader or a current replica (JetStream direct get).
type Store struct {
	c      *Cluster
	closed atomic.Bool
	stop   chan struct{}
}

// Store returns the cluster's record store. Every call returns a new Store
// over the same records.
func (c *Cluster) Store() *Store { return &Store{c: c, stop: make(chan struct{})} }

var _ persistence.Store = (*Store)(nil)
var _ persistence.Limited = (*Store)(nil)

// maxBatch is what one atomic batch may hold: nats-server's default limit
// is 1000 messages; one is kept spare.
const maxBatch = 999

// BatchLimits bounds a group commit to what one atomic batch holds: 999
// messages and 4 MiB (a message may be up to the server's max_payload, 1 MiB
// by default).
func (s *Store) BatchLimits() (ops, bytes int) { return maxBatch, 4 << 20 }

// Key encoding: a key is split after every '/' and NUL byte; each piece is
// a subject token made of the separator before it ('k' for the first piece,
// 's' after '/', 'z' after NUL) and the piece in hex. The mapping is one to
// one, keeps pieces that a prefix ends on as whole tokens (so a prefix scan
// is a subject filter), and makes any byte string a valid subject.
const kvRoot = "rtfshost.kv"

func keySubject(key []byte) string {
	var sb strings.Builder
	sb.Grow(len(kvRoot) + 2*len(key) + 8)
	sb.WriteString(kvRoot)
	sb.WriteString(".k")
	start := 0
	for i, b := range key {
		if b != '/' && b != 0 {
			continue
		}
		sb.WriteString(hex.EncodeToString(key[start:i]))
		sb.WriteByte('.')
		if b == '/' {
			sb.WriteByte('s')
		} else {
			sb.WriteByte('z')
		}
		start = i + 1
	}
	sb.WriteString(hex.EncodeToString(key[start:]))
	return sb.String()
}

func subjectKey(subj string) ([]byte, bool) {
	rest, ok := strings.CutPrefix(subj, kvRoot+".")
	if !ok {
		return nil, false
	}
	var key []byte
	for i, tok := range strings.Split(rest, ".") {
		if tok == "" {
			return nil, false
		}
		switch {
		case i == 0 && tok[0] == 'k':
		case i > 0 && tok[0] == 's':
			key = append(key, '/')
		case i > 0 && tok[0] == 'z':
			key = append(key, 0)
		default:
			return nil, false
		}
		piece, err := hex.DecodeString(tok[1:])
		if err != nil {
			return nil, false
		}
		key = append(key, piece...)
	}
	return key, true
}

// prefixFilter returns a subject filter that matches every key starting
// with prefix (and maybe others, which Scan drops): the tokens of the whole
// pieces of prefix, then '>'.
func prefixFilter(prefix []byte) string {
	i := bytes.LastIndexAny(prefix, "/\x00")
	if i < 0 {
		return kvRoot + ".>"
	}
	subj := keySubject(prefix[:i+1]) // ends with the token of an empty last piece
	return subj[:strings.LastIndexByte(subj, '.')] + ".>"
}

// Headers of the record messages.
const (
	opHeader  = "Rtfs-Op" // "del" on a deletion marker
	tombstone = "del"
)

// Commit stores b atomically (see Store). It fails with an error wrapping
// persistence.ErrFenced when b writes records of a stream this host does
// not own, persistence.ErrBatchTooLarge beyond BatchLimits, ErrClosed after
// Close. Cost: an atomic batch, two round trips to the stream's leader.
func (s *Store) Commit(ctx context.Context, b *persistence.Batch) error {
	if s.closed.Load() {
		return fmt.Errorf("cluster: commit: %w", persistence.ErrClosed)
	}
	w, err := s.prepare(b)
	if err != nil || len(w.msgs) == 0 {
		return err
	}
	return s.retry(ctx, "commit", func(ctx context.Context) error {
		return s.fenced(ctx, w, w.publish(ctx, s.c.js))
	})
}

// A write is a batch made into messages: one per key, each fenced by the
// ownership of the stream the key belongs to.
type write struct {
	msgs   []*nats.Msg
	fences map[string]uint64 // stream id → token
}

// prepare makes b into a write, or fails with ErrFenced when b writes a
// stream this host does not own.
func (s *Store) prepare(b *persistence.Batch) (write, error) {
	ops := lastPerKey(b.Ops())
	if len(ops) > maxBatch {
		return write{}, fmt.Errorf("cluster: commit of %d operations: %w (at most %d)", len(ops), persistence.ErrBatchTooLarge, maxBatch)
	}
	w := write{msgs: make([]*nats.Msg, len(ops))}
	for i, op := range ops {
		if len(op.Key) == 0 {
			return write{}, fmt.Errorf("cluster: commit: operation %d has an empty key", i)
		}
		m := nats.NewMsg(keySubject(op.Key))
		if op.Delete {
			m.Header.Set(opHeader, tombstone)
			m.Header.Set(jetstream.MsgTTLHeader, "60s")
		} else {
			m.Data = op.Value
		}
		if owner := s.c.opts.KeyOwner; owner != nil {
			if id, ok := owner(op.Key); ok {
				tok, mine := s.c.token(id)
				if !mine {
					return write{}, fmt.Errorf("cluster: commit to stream %q: this host does not own it: %w", id, persistence.ErrFenced)
				}
				if w.fences == nil {
					w.fences = map[string]uint64{}
				}
				w.fences[id] = tok
				m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(tok, 10))
				m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, ownSubject(id))
			}
		}
		w.msgs[i] = m
	}
	return w, nil
}

// publish stores w and waits for the acknowledgement: one message by a
// plain publish (atomic by itself, without the staging of a batch on the
// server), more as an atomic batch.
func (w write) publish(ctx context.Context, js jetstream.JetStream) error {
	if len(w.msgs) == 1 {
		_, err := js.PublishMsg(ctx, w.msgs[0], jetstream.WithRetryAttempts(0))
		return err
	}
	_, err := jetstreamext.PublishMsgBatch(ctx, js, w.msgs, jetstreamext.BatchFlowControl{AckFirst: false})
	return err
}

// fenced turns err, a failed expected-sequence check of w, into a
// permanent ErrFenced once the ownership record confirms that another
// host took one of w's streams over (the check also fails while another
// batch on the same ownership subject is in process on a clustered
// stream: that is retried). Other errors are returned as they are.
func (s *Store) fenced(ctx context.Context, w write, err error) error {
	if err == nil || !isWrongLastSequence(err) {
		return err
	}
	if id, ok := s.c.fencedAmong(ctx, w.fences); ok {
		s.c.Forget(id)
		s.c.fenced.Add(1)
		return backoff.Permanent(fmt.Errorf("cluster: commit to stream %q: another host owns it now: %w", id, persistence.ErrFenced))
	}
	return err
}

// lastPerKey returns ops with only the last operation on each key, in the
// order of those last operations.
func lastPerKey(ops []persistence.Op) []persistence.Op {
	if len(ops) < 2 {
		return ops
	}
	last := make(map[string]int, len(ops))
	for i, op := range ops {
		last[string(op.Key)] = i
	}
	if len(last) == len(ops) {
		return ops
	}
	out := make([]persistence.Op, 0, len(last))
	for i, op := range ops {
		if last[string(op.Key)] == i {
			out = append(out, op)
		}
	}
	return out
}

// fencedAmong returns a stream of fences whose ownership record is no longer
// at its token.
func (c *Cluster) fencedAmong(ctx context.Context, fences map[string]uint64) (string, bool) {
	for id, tok := range fences {
		m, err := c.st.GetLastMsgForSubject(ctx, ownSubject(id))
		if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && m.Sequence != tok) {
			return id, true
		}
	}
	return "", false
}

// retry runs op until it succeeds, fails permanently, ctx ends or the store
// closes, waiting with backoff between attempts. Errors of the server that
// retrying cannot change are permanent; losing NATS is not.
func (s *Store) retry(ctx context.Context, what string, op func(context.Context) error) error {
	var bo *backoff.ExponentialBackOff // made at the first failure: most calls need none
	logged := false
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := op(actx)
		cancel()
		var perm *backoff.PermanentError
		switch {
		case err == nil:
			if logged {
				s.c.log.Info("cluster: the store answers again", "op", what)
			}
			return nil
		case errors.As(err, &perm):
			return perm.Err
		case !transient(err):
			return fmt.Errorf("cluster: %s: %w", what, err)
		}
		if !logged {
			s.c.log.Warn("cluster: the store does not answer; retrying", "op", what, "err", err)
			logged = true
			bo = backoff.NewExponentialBackOff()
			bo.InitialInterval, bo.MaxInterval, bo.MaxElapsedTime = 50*time.Millisecond, 2*time.Second, 0
		}
		select {
		case <-time.After(bo.NextBackOff()):
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s: %w (last error: %w)", what, ctx.Err(), err)
		case <-s.stop:
			return fmt.Errorf("cluster: %s: %w (last error: %w)", what, persistence.ErrClosed, err)
		}
	}
}

// transient reports an error that retrying may cure: NATS or the stream's
// leader not reachable now, a request timed out, a batch cut, a read's
// answer cut (errCut).
func transient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequenceConstant,
			jetstreamext.JSErrCodeBatchPublishIncomplete,
			jetstreamext.JSErrCodeAtomicPublishTooManyInflight,
			jetstreamext.JSErrCodeBatchPublishTooManyInflight,
			jetstream.JSErrCodeStreamWrongLastSequence:
			return true
		}
		return apiErr.Code == 503 || apiErr.Code == 408
	}
	for _, t := range []error{nats.ErrTimeout, context.DeadlineExceeded, nats.ErrNoResponders,
		jetstream.ErrNoStreamResponse, nats.ErrDisconnected, nats.ErrConnectionReconnecting,
		jetstreamext.ErrInvalidBatchAck, errCut} {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// Get returns the value of key, or an error wrapping ErrNotFound. Cost: one
// round trip.
func (s *Store) Get(ctx context.Context, key []byte) ([]byte, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("cluster: get: %w", persistence.ErrClosed)
	}
	if len(key) == 0 {
		return nil, errors.New("cluster: get: empty key")
	}
	var val []byte
	err := s.retry(ctx, "get", func(ctx context.Context) error {
		m, err := s.c.st.GetLastMsgForSubject(ctx, keySubject(key))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return backoff.Permanent(fmt.Errorf("cluster: get %q: %w", key, persistence.ErrNotFound))
		case err != nil:
			return err
		case m.Header.Get(opHeader) == tombstone:
			return backoff.Permanent(fmt.Errorf("cluster: get %q: %w", key, persistence.ErrNotFound))
		}
		val = append([]byte{}, m.Data...)
		return nil
	})
	return val, err
}

// Scan calls fn for every key starting with prefix, in key order (see
// Store for what it sees). Cost: one read per 1024 matching keys, plus one
// listing of the matching subjects when there are more.
func (s *Store) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	if s.closed.Load() {
		return fmt.Errorf("cluster: scan: %w", persistence.ErrClosed)
	}
	type kv struct{ k, v []byte }
	var all []kv
	err := s.retry(ctx, "scan", func(ctx context.Context) error {
		all = all[:0]
		return s.c.lastPerSubject(ctx, prefixFilter(prefix), func(m *jetstream.RawStreamMsg) error {
			k, ok := subjectKey(m.Subject)
			if !ok || !bytes.HasPrefix(k, prefix) || m.Header.Get(opHeader) == tombstone {
				return nil
			}
			all = append(all, kv{k, m.Data})
			return nil
		})
	})
	if err != nil {
		return err
	}
	sort.Slice(all, func(i, j int) bool { return bytes.Compare(all[i].k, all[j].k) < 0 })
	for _, e := range all {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cluster: scan: %w", err)
		}
		if err := fn(e.k, e.v); err != nil {
			if errors.Is(err, persistence.ErrStopScan) {
				return nil
			}
			return fmt.Errorf("cluster: scan: at key %q: %w", e.k, err)
		}
	}
	return nil
}

// ScanKeys calls fn for every key that starts with prefix, in increasing
// key order, without reading a value (persistence.KeyScanner): it lists
// the matching subjects, which the stream's leader answers from its index.
// A key deleted less than a minute ago is still listed (its deletion
// marker lives that long). Cost: one stream-info request per page of
// subjects the server sends (about 100,000 a page), no message read.
func (s *Store) ScanKeys(ctx context.Context, prefix []byte, fn func(key []byte) error) error {
	if s.closed.Load() {
		return fmt.Errorf("cluster: scan keys: %w", persistence.ErrClosed)
	}
	var keys [][]byte
	err := s.retry(ctx, "scan keys", func(ctx context.Context) error {
		keys = keys[:0]
		info, err := s.c.st.Info(ctx, jetstream.WithSubjectFilter(prefixFilter(prefix)))
		if err != nil {
			return fmt.Errorf("list the subjects under %q: %w", prefix, err)
		}
		for subj := range info.State.Subjects {
			if k, ok := subjectKey(subj); ok && bytes.HasPrefix(k, prefix) {
				keys = append(keys, k)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(keys, bytes.Compare)
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cluster: scan keys: %w", err)
		}
		if err := fn(k); err != nil {
			if errors.Is(err, persistence.ErrStopScan) {
				return nil
			}
			return fmt.Errorf("cluster: scan keys: at key %q: %w", k, err)
		}
	}
	return nil
}

// Close makes later calls fail with ErrClosed and ends the retries of calls
// in progress. It does not close the Cluster. It is idempotent.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		close(s.stop)
	}
	return nil
}

// maxMulti is how many subjects one multi-last direct get answers
// (nats-server's limit is 1024).
const maxMulti = 1000

// errCut is multiLast's error when an answer ended before its last
// message: the server ends an answer early once it has sent its
// max_pending bytes (64 MiB unless configured lower), its end-of-batch
// marker then counting the messages left out (Nats-Num-Pending), and
// answers 404 when a message fails to load, after some messages or
// before any; an answer may also break off.
var errCut = errors.New("the answer ended before its last message")

// lastPerSubject calls fn with the last message of every subject matching
// filter: one direct get when the answer holds them all, else (more than
// 1024 subjects match, or the answer was cut) the subjects are listed and
// those not read yet are read a batch at a time, each batch until all of
// its subjects are read.
func (c *Cluster) lastPerSubject(ctx context.Context, filter string, fn func(*jetstream.RawStreamMsg) error) error {
	msgs, err := c.multiLast(ctx, []string{filter})
	if err == nil {
		return deliver(msgs, fn)
	}
	if !errors.Is(err, errTooMany) && !errors.Is(err, errCut) {
		return err
	}
	info, err := c.st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return fmt.Errorf("list the subjects %s: %w", filter, err)
	}
	read := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		read[m.Subject] = true
	}
	subjects := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		if !read[subj] {
			subjects = append(subjects, subj)
		}
	}
	sort.Strings(subjects)
	if err := deliver(msgs, fn); err != nil {
		return err
	}
	for len(subjects) > 0 {
		batch := subjects[:min(len(subjects), maxMulti)]
		msgs, err := c.multiLast(ctx, batch)
		if errors.Is(err, errCut) && len(msgs) > 0 {
			// Cut by the answer's size: what came is whole; ask again
			// for the rest.
			if err := deliver(msgs, fn); err != nil {
				return err
			}
			got := make(map[string]bool, len(msgs))
			for _, m := range msgs {
				got[m.Subject] = true
			}
			subjects = slices.DeleteFunc(subjects, func(s string) bool { return got[s] })
			continue
		}
		if err != nil {
			return err
		}
		if err := deliver(msgs, fn); err != nil {
			return err
		}
		subjects = subjects[len(batch):]
	}
	return nil
}

func deliver(msgs []*jetstream.RawStreamMsg, fn func(*jetstream.RawStreamMsg) error) error {
	for _, m := range msgs {
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

// multiLast reads the last message of each subject matching subjects in
// one multi-last direct get (ADR-31). It returns them all, or an error
// wrapping errCut with the messages that came before the answer ended, or
// errTooMany. It reads the answer itself, with natsext.RequestMany, rather
// than through jetstreamext.GetLastMsgsFor, which ends its iteration
// without an error at any end-of-batch marker and takes every 404 for "no
// messages": an answer cut at the server's byte limit, or a message that
// failed to load, would pass for the whole.
func (c *Cluster) multiLast(ctx context.Context, subjects []string) ([]*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
	}{subjects})
	if err != nil {
		return nil, err
	}
	var end nats.Header // the status that ended the answer
	answer, err := natsext.RequestMany(ctx, c.nc, c.directGet, req, natsext.RequestManySentinel(func(m *nats.Msg) bool {
		if len(m.Data) == 0 && m.Header.Get(statusHeader) != "" {
			end = m.Header
			return true
		}
		return false
	}))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", subjects[0], err)
	}
	var msgs []*jetstream.RawStreamMsg
	for m, err := range answer {
		if err != nil {
			return msgs, fmt.Errorf("read %s: %w", subjects[0], err)
		}
		rm, err := directMsg(m)
		if err != nil {
			return msgs, fmt.Errorf("read %s: %w", subjects[0], err)
		}
		msgs = append(msgs, rm)
	}
	status, desc := end.Get(statusHeader), end.Get(descHeader)
	switch {
	case status == "204" && end.Get(numPendingHeader) == "0":
		return msgs, nil
	case status == "204":
		return msgs, fmt.Errorf("read %s: %d messages, then the end of the answer with %s more announced: %w",
			subjects[0], len(msgs), end.Get(numPendingHeader), errCut)
	case status == "404" && desc == "No Results" && len(msgs) == 0:
		return nil, nil // nothing matches
	case status == "413":
		return nil, fmt.Errorf("read %s: %w", subjects[0], errTooMany)
	case status != "":
		// A 404 other than "No Results" is a message that failed to load.
		return msgs, fmt.Errorf("read %s: %d messages, then %s %s: %w", subjects[0], len(msgs), status, desc, errCut)
	}
	// The answer ends without an error when ctx ends before the server's
	// end-of-batch marker (a leader election, NATS unreachable).
	if err := ctx.Err(); err != nil {
		return msgs, fmt.Errorf("read %s: the answer did not end before %w", subjects[0], err)
	}
	return msgs, fmt.Errorf("read %s: the answer broke off after %d messages: %w", subjects[0], len(msgs), errCut)
}

// errTooMany is multiLast's error when more subjects match than one answer
// may hold (nats-server: "413 Too Many Results", beyond 1024).
var errTooMany = errors.New("more subjects match than one answer holds")

// Headers of a direct get's answer (ADR-31).
const (
	statusHeader     = "Status"
	descHeader       = "Description"
	numPendingHeader = "Nats-Num-Pending" // how many messages of the answer follow
)

// directMsg is the stored message a direct get's answer carries in m.
func directMsg(m *nats.Msg) (*jetstream.RawStreamMsg, error) {
	subj := m.Header.Get(jetstream.SubjectHeader)
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if subj == "" || err != nil {
		return nil, fmt.Errorf("a direct get's answer with no subject or sequence (headers %v)", m.Header)
	}
	tm, err := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return nil, fmt.Errorf("a direct get's answer for %s: its time: %w", subj, err)
	}
	return &jetstream.RawStreamMsg{Subject: subj, Sequence: seq, Header: m.Header, Data: m.Data, Time: tm}, nil
}

// directGetSubject is the subject of stream's direct gets, under the API
// prefix of opts (a domain's, or a custom one).
func directGetSubject(opts jetstream.JetStreamOptions, stream string) string {
	prefix := "$JS.API."
	switch {
	case opts.APIPrefix != "":
		prefix = strings.TrimSuffix(opts.APIPrefix, ".") + "."
	case opts.Domain != "":
		prefix = "$JS." + opts.Domain + ".API."
	}
	return prefix + "DIRECT.GET." + stream
}
