// Package cluster lets several rtfshost hosts share their streams through
// NATS JetStream, so that a stream outlives the machine that runs it.
//
// One JetStream stream (Options.Stream, "RTFSHOST" by default, keeping the
// last message of each subject) holds everything the hosts share:
//
//   - rtfshost.kv.<key>: the records. Store is a persistence.Store over
//     these subjects: the provider's stream records (definition, state,
//     cursor, journal), programs, parked continuations, MCP tasks and
//     events all live here, so any host can load any stream. A Commit is one
//     JetStream atomic batch.
//   - rtfshost.own.<stream id>: who owns a stream: the owner's node name and
//     incarnation. Its sequence number is the fencing token. Every write
//     to a stream's records carries the token it expects (JetStream's
//     expected-last-subject-sequence check on the ownership subject), so the
//     server refuses, in the same step as the write, a commit of a host
//     that lost the stream: the commit fails with persistence.ErrFenced.
//   - rtfshost.node.<incarnation>: a host's heartbeat, a message with a
//     per-message TTL (Options.LeaseTTL) that the host republishes every
//     third of it. A host is alive while its heartbeat lives. Ownership is
//     a lease held through the owner's heartbeat: when the heartbeat
//     expires, every stream the host owned may be claimed by another host.
//   - rtfshost.ctl.<incarnation>: a host's control inbox (request-reply),
//     through which other hosts reach the streams it runs.
//
// The main types are Cluster, a host's membership (its connection, node
// name, incarnation and heartbeat), and Store. docs/cluster.md has the
// design, what each guarantee rests on and the failure matrix.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options configure Connect. Only URLs and Node are required.
type Options struct {
	// URLs are the NATS servers, e.g. "nats://127.0.0.1:4222".
	URLs []string
	// Node names this host in ownership records, logs and inspect. Two
	// live hosts should not share a name (they would still be kept apart:
	// ownership is by incarnation).
	Node string
	// Stream is the JetStream stream that holds the cluster's subjects
	// (default "RTFSHOST"). Connect creates it when missing.
	Stream string
	// Replicas is the stream's replication factor when Connect creates it
	// (default 1; a production NATS cluster wants 3).
	Replicas int
	// LeaseTTL is how long a host's heartbeat lives without renewal, and so
	// how long its streams wait before another host may take them (default
	// 5 s; at least 1 s, JetStream's smallest message TTL). The heartbeat is
	// renewed every third of it.
	LeaseTTL time.Duration
	// ConnectTimeout bounds the first connection (default 5 s).
	ConnectTimeout time.Duration
	// Credentials is a NATS credentials file (a user JWT and its NKey
	// seed), for a NATS that requires one; "" for none. A user and
	// password, or a token, may also be given in the URLs; they are never
	// written in errors or logs.
	Credentials string
	// RootCA is a PEM file of the certificate authorities that sign the
	// NATS servers' TLS certificates ("" trusts the system's).
	RootCA string
	// Domain is the JetStream domain the hosts share ("" for the
	// account's default).
	Domain string
	// KeyOwner maps a record's key to the stream that owns it; writes of
	// such keys are fenced by that stream's ownership. Keys it reports no
	// stream for (programs, tasks, events) are written unfenced. Nil fences
	// nothing. The host passes provider.KeyOwner.
	KeyOwner func(key []byte) (streamID string, ok bool)
	// Balanced spreads new streams by load: a stream started on a host
	// that owns more streams than the least loaded live host (by more
	// than one) is offered to that host (package host does it).
	// Otherwise a stream stays on the host that started it.
	Balanced bool
	// Logger receives the cluster's logs; nil discards them.
	Logger *slog.Logger
}

// Errors of this package; test with errors.Is.
var (
	// ErrOwned: the stream is owned by another live host.
	ErrOwned = errors.New("the stream is owned by another live host")
	// ErrUnreachable: no NATS server answered.
	ErrUnreachable = errors.New("NATS is unreachable")
)

// A Cluster is one host's membership in a cluster: its connection to NATS,
// its node name and incarnation (a random id new at every Connect), its
// heartbeat and the streams it owns. It is safe for concurrent use. Connect
// starts the heartbeat goroutine; Close stops it.
type Cluster struct {
	opts Options
	inc  string // incarnation
	nc   *nats.Conn
	js   jetstream.JetStream
	st   jetstream.Stream
	log  *slog.Logger

	directGet string // the subject of the stream's direct gets

	mu     sync.Mutex
	owned  map[string]uint64 // stream id → fencing token
	ctlSub *nats.Subscription

	claims, fenced atomic.Uint64 // for Stats

	beats beatLog // the heartbeat's successes and failures

	stop       chan struct{}
	stopBeat   sync.Once
	beatCtx    context.Context // ends at stopHeartbeat: bounds a renewal
	beatCancel context.CancelFunc
	closeOnce  sync.Once
	done       chan struct{} // closed when the heartbeat goroutine exits
}

// Connect joins the cluster at opts.URLs: it connects, creates the
// JetStream stream if missing, publishes the host's first heartbeat and
// starts renewing it. Its error names the URLs and wraps ErrUnreachable
// when no server answers. Cost: a few round trips.
func Connect(ctx context.Context, opts Options) (*Cluster, error) {
	if len(opts.URLs) == 0 {
		return nil, errors.New("cluster: no NATS URL given (--cluster nats://HOST:4222)")
	}
	if opts.Node == "" {
		return nil, errors.New("cluster: no node name given (--node NAME)")
	}
	if strings.ContainsAny(opts.Node, "\n") {
		return nil, fmt.Errorf("cluster: node name %q contains a newline", opts.Node)
	}
	if opts.Stream == "" {
		opts.Stream = "RTFSHOST"
	}
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 5 * time.Second
	}
	if opts.LeaseTTL < time.Second {
		return nil, fmt.Errorf("cluster: lease TTL %v is below JetStream's smallest message TTL, 1s", opts.LeaseTTL)
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 5 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	urls := redactURLs(opts.URLs)
	nopts := []nats.Option{nats.Name("rtfshost " + opts.Node), nats.Timeout(opts.ConnectTimeout),
		nats.RetryOnFailedConnect(false), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	if opts.Credentials != "" {
		nopts = append(nopts, nats.UserCredentials(opts.Credentials))
	}
	if opts.RootCA != "" {
		nopts = append(nopts, nats.RootCAs(opts.RootCA))
	}
	nc, err := nats.Connect(strings.Join(opts.URLs, ","), nopts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: connecting to NATS at %s: %w: %w", urls, ErrUnreachable, redactErr(err, opts.URLs))
	}
	var js jetstream.JetStream
	if opts.Domain != "" {
		js, err = jetstream.NewWithDomain(nc, opts.Domain)
	} else {
		js, err = jetstream.New(nc)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("cluster: JetStream at %s: %w", urls, err)
	}
	st, err := ensureStream(ctx, js, opts)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("cluster: the JetStream stream %s at %s (JetStream enabled? nats-server 2.12 or later?): %w", opts.Stream, urls, err)
	}
	c := &Cluster{
		opts: opts, inc: subjectSafe(opts.Node) + "-" + randomHex(6), nc: nc, js: js, st: st, log: log,
		directGet: directGetSubject(js.Options(), opts.Stream),
		owned:     map[string]uint64{}, stop: make(chan struct{}), done: make(chan struct{}),
	}
	c.beatCtx, c.beatCancel = context.WithCancel(context.Background())
	if err := c.beat(ctx); err != nil {
		c.beatCancel()
		nc.Close()
		return nil, fmt.Errorf("cluster: first heartbeat at %s: %w", urls, err)
	}
	c.beats.renewed(time.Now())
	go c.heartbeat()
	log.Info("cluster: joined", "node", opts.Node, "incarnation", c.inc, "nats", urls, "stream", opts.Stream, "lease-ttl", opts.LeaseTTL)
	return c, nil
}

// ensureStream returns the cluster's JetStream stream, creating it with
// opts.Replicas when missing. An existing stream keeps its replicas; the
// settings the cluster needs are put back if someone changed them.
func ensureStream(ctx context.Context, js jetstream.JetStream, opts Options) (jetstream.Stream, error) {
	cfg := jetstream.StreamConfig{
		Name:               opts.Stream,
		Subjects:           []string{"rtfshost.kv.>", "rtfshost.own.>", "rtfshost.node.>"},
		Storage:            jetstream.FileStorage,
		Replicas:           opts.Replicas,
		MaxMsgsPerSubject:  1,
		AllowMsgTTL:        true,
		AllowDirect:        true,
		AllowAtomicPublish: true,
	}
	st, err := js.CreateStream(ctx, cfg)
	if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return st, err
	}
	if st, err = js.Stream(ctx, opts.Stream); err != nil {
		return nil, err
	}
	have := st.CachedInfo().Config
	if slices.Equal(have.Subjects, cfg.Subjects) && have.Storage == cfg.Storage && have.MaxMsgsPerSubject == 1 &&
		have.AllowMsgTTL && have.AllowDirect && have.AllowAtomicPublish {
		return st, nil
	}
	cfg.Replicas = have.Replicas
	return js.UpdateStream(ctx, cfg)
}

// redactURLs joins urls for errors and logs, without their user
// information (a user and password, or a token).
func redactURLs(urls []string) string {
	out := make([]string, len(urls))
	for i, raw := range urls {
		out[i] = raw
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			u.User = nil
			out[i] = u.String()
		}
	}
	return strings.Join(out, ",")
}

// redactErr removes the user information of urls from err's text, for a
// client library that may quote a URL it was given.
func redactErr(err error, urls []string) error {
	msg := err.Error()
	for _, raw := range urls {
		if u, perr := url.Parse(raw); perr == nil && u.User != nil {
			if s := u.User.String(); s != "" {
				msg = strings.ReplaceAll(msg, s, "REDACTED")
			}
		}
	}
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// subjectSafe maps a node name to a subject token: letters, digits, '-'
// and '_' are kept, anything else becomes '_'.
func subjectSafe(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, name)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Node returns this host's node name.
func (c *Cluster) Node() string { return c.opts.Node }

// Incarnation returns this host's incarnation: its node name and a random
// suffix chosen at Connect.
func (c *Cluster) Incarnation() string { return c.inc }

// Stats counts what this host did in the cluster since Connect.
type Stats struct {
	Owned  int    // streams and parked programs it owns now
	Claims uint64 // ownerships it took (starts, takeovers, handovers received)
	Fenced uint64 // commits refused because another host had taken the stream
}

// Stats returns the host's counters. It is safe for concurrent use and
// costs a lock.
func (c *Cluster) Stats() Stats {
	c.mu.Lock()
	n := len(c.owned)
	c.mu.Unlock()
	return Stats{Owned: n, Claims: c.claims.Load(), Fenced: c.fenced.Load()}
}

// Balanced reports Options.Balanced.
func (c *Cluster) Balanced() bool { return c.opts.Balanced }

// LeaseTTL returns how long a silent host keeps its streams.
func (c *Cluster) LeaseTTL() time.Duration { return c.opts.LeaseTTL }

func nodeSubject(inc string) string { return "rtfshost.node." + inc }

// beat publishes the heartbeat, waiting up to half the TTL for the
// acknowledgement (a slow one still renews the lease).
func (c *Cluster) beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL/2)
	defer cancel()
	_, err := c.js.Publish(ctx, nodeSubject(c.inc), []byte(c.opts.Node), jetstream.WithMsgTTL(c.opts.LeaseTTL))
	return err
}

// beatRetry is how soon a heartbeat that failed is tried again: NATS
// electing a new leader for the stream, or the client moving to another
// server, takes seconds, and the lease is renewed as soon as it is over.
const beatRetry = 100 * time.Millisecond

// heartbeat renews the heartbeat every third of the TTL until Close. A
// renewal that fails is tried again every beatRetry, for as long as it
// fails: a host whose lease expired keeps trying, and renews it (if
// another host took its streams meanwhile, its commits to them are
// fenced).
func (c *Cluster) heartbeat() {
	defer close(c.done)
	every := c.opts.LeaseTTL / 3
	t := time.NewTimer(every)
	defer t.Stop()
	var failingSince time.Time // zero while renewals succeed
	last := time.Now()         // when the last renewal that succeeded began
	expired := false           // a Warn said that the lease expired
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		began := time.Now()
		err := c.beat(c.beatCtx)
		now := time.Now()
		switch {
		case err == nil:
			c.beats.renewed(now)
			if !failingSince.IsZero() {
				c.log.Info("cluster: heartbeat renewed again", "after", now.Sub(failingSince).Round(time.Millisecond), "lease-expired", expired)
			}
			failingSince, last, expired = time.Time{}, began, false
			t.Reset(max(every-now.Sub(began), 0))
			continue
		case c.beatCtx.Err() != nil:
			return
		case failingSince.IsZero():
			failingSince = now
			c.log.Warn("cluster: heartbeat not renewed; retrying", "err", err)
		case !expired && now.Sub(last) >= c.opts.LeaseTTL:
			expired = true
			c.log.Warn("cluster: heartbeat not renewed for the lease TTL; other hosts may take this host's streams", "err", err, "lease-ttl", c.opts.LeaseTTL)
		}
		c.beats.failed(now)
		t.Reset(beatRetry)
	}
}

// A beatLog records when the heartbeat failed and when it was renewed
// again, to tell a cluster that works from one that just came back. It is
// safe for concurrent use.
type beatLog struct {
	mu          sync.Mutex
	failedAt    time.Time // the last failed renewal; zero: none since Connect
	recoveredAt time.Time // the first renewal after failedAt's failures
	renewedAt   time.Time // the last renewal that succeeded
}

func (b *beatLog) failed(now time.Time) {
	b.mu.Lock()
	b.failedAt = now
	b.mu.Unlock()
}

func (b *beatLog) renewed(now time.Time) {
	b.mu.Lock()
	if !b.failedAt.IsZero() && !b.recoveredAt.After(b.failedAt) {
		b.recoveredAt = now
	}
	b.renewedAt = now
	b.mu.Unlock()
}

// lastRenewed returns when the heartbeat was last renewed.
func (b *beatLog) lastRenewed() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.renewedAt
}

// Ready reports whether this host takes part in the cluster: nil when its
// connection to NATS is up and its lease was renewed within the lease TTL
// (so no other host may take its streams), else an error saying which is
// not. It is safe for concurrent use and costs a lock.
func (c *Cluster) Ready() error {
	if !c.nc.IsConnected() {
		return fmt.Errorf("cluster: not connected to NATS (%s)", c.nc.Status())
	}
	last := c.beats.lastRenewed()
	if age := time.Since(last); age > c.opts.LeaseTTL {
		return fmt.Errorf("cluster: this host's lease was last renewed %v ago, more than its TTL of %v", age.Round(time.Millisecond), c.opts.LeaseTTL)
	}
	return nil
}

// settled reports whether a heartbeat that is missing means that its host
// is gone: this host's own heartbeat has not failed since Connect, or it
// has been renewed without failing for a lease TTL since. A host's
// heartbeat also fails while NATS elects a new leader for the stream or
// cannot be reached, and then every host's may expire though none failed
// (JetStream's election timeout, 4-9 s after a server crash, can exceed the
// TTL). Once the stream takes writes again the live hosts renew theirs
// within beatRetry (plus a reconnection); a host that has not within a
// TTL is gone.
func (b *beatLog) settled(now time.Time, ttl time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failedAt.IsZero() || b.recoveredAt.After(b.failedAt) && now.Sub(b.recoveredAt) >= ttl
}

// Close leaves the cluster: it stops the heartbeat and the control inbox,
// removes the heartbeat (so other hosts take the streams it still owns at
// once; call ReleaseAll first to hand them over cleanly) and closes the
// connection. It is idempotent.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.stopHeartbeat()
		c.mu.Lock()
		if c.ctlSub != nil {
			_ = c.ctlSub.Unsubscribe()
		}
		c.mu.Unlock()
		if c.nc.IsConnected() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = c.st.Purge(ctx, jetstream.WithPurgeSubject(nodeSubject(c.inc)))
			cancel()
		}
		c.nc.Close()
	})
	return nil
}

// stopHeartbeat stops renewing the heartbeat and waits for the goroutine.
func (c *Cluster) stopHeartbeat() {
	c.stopBeat.Do(func() {
		close(c.stop)
		c.beatCancel()
	})
	<-c.done
}

// alive returns the incarnations whose heartbeat lives.
func (c *Cluster) alive(ctx context.Context) (map[string]bool, error) {
	live := map[string]bool{}
	err := c.lastPerSubject(ctx, "rtfshost.node.>", func(m *jetstream.RawStreamMsg) error {
		live[strings.TrimPrefix(m.Subject, "rtfshost.node.")] = true
		return nil
	})
	return live, err
}
