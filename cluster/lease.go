// Package cluster lets several rtfshost hosts share streams on NATS
// JetStream: one host owns a stream at a time, by a lease, and every record
// the owner writes is fenced by that lease, so a host that lost its lease
// (paused, partitioned, slow) cannot write again.
//
// The main types are Cluster, a connection to the JetStream domain the hosts
// share, and Lease, one host's ownership of one stream. Everything lives in
// one JetStream stream (Options.Stream) that keeps the last message of each
// subject:
//
//   - rtfshost.lease.<id>: the lease of stream id, a message whose body is the
//     owner's node name and whose per-message TTL is Options.LeaseTTL. Its
//     sequence number is the fencing token. Claim publishes it only when the
//     subject holds no message (no owner, or the owner's lease expired and the
//     server removed it); Renew republishes it only when the subject's last
//     sequence is still the token, which gives a new token.
//   - rtfshost.rec.<id>: the stream's record. Commit publishes it only when
//     the lease subject's last sequence is the committer's token (JetStream's
//     expected-last-subject-sequence check, on another subject), so the check
//     and the write are one atomic step on the server.
//
// Subject tokens are the stream ids in hex, since an id may hold characters
// that subjects may not.
//
// Failover, placement and the provider's use of this package are not built
// yet (issue 17).
package cluster

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options configure a Cluster. Only URLs and Node are required.
type Options struct {
	// URLs are the NATS servers, e.g. "nats://127.0.0.1:4222".
	URLs []string
	// Node names this host; it is the owner written in its leases.
	Node string
	// Stream is the JetStream stream that holds leases and records
	// (default "RTFSHOST"). It is created when missing.
	Stream string
	// Replicas is the stream's replication factor when it is created
	// (default 1; a production cluster wants 3).
	Replicas int
	// LeaseTTL is how long a lease lives without renewal (default 5 s, at
	// least 1 s, JetStream's smallest message TTL). Owners renew at a third
	// of it; failover takes about as long as it.
	LeaseTTL time.Duration
	// ConnectTimeout bounds the first connection (default 5 s).
	ConnectTimeout time.Duration
}

// Errors of this package; test with errors.Is.
var (
	// ErrOwned: the stream has a live lease of another host.
	ErrOwned = errors.New("the stream is owned by another host")
	// ErrFenced: the lease is no longer the stream's (it expired, or
	// another host claimed the stream); the holder must stop the stream.
	ErrFenced = errors.New("the lease was lost: another host may own the stream")
	// ErrNoRecord: the stream has no record.
	ErrNoRecord = errors.New("no record for the stream")
)

// A Cluster is a connection to the JetStream domain the hosts share. It is
// safe for concurrent use; Close it when done.
type Cluster struct {
	opts Options
	nc   *nats.Conn
	js   jetstream.JetStream
	st   jetstream.Stream
}

// Connect connects to opts.URLs and makes sure the stream exists. Its error
// names the URLs when no server answers.
func Connect(ctx context.Context, opts Options) (*Cluster, error) {
	if len(opts.URLs) == 0 || opts.Node == "" {
		return nil, errors.New("cluster: give the NATS URLs and this host's node name")
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
	urls := strings.Join(opts.URLs, ",")
	nc, err := nats.Connect(urls, nats.Name("rtfshost "+opts.Node), nats.Timeout(opts.ConnectTimeout),
		nats.RetryOnFailedConnect(false), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("cluster: connecting to NATS at %s: %w", urls, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("cluster: JetStream at %s: %w", urls, err)
	}
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              opts.Stream,
		Subjects:          []string{"rtfshost.>"},
		Storage:           jetstream.FileStorage,
		Replicas:          opts.Replicas,
		MaxMsgsPerSubject: 1,
		AllowMsgTTL:       true,
		AllowDirect:       true,
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("cluster: the JetStream stream %s at %s: %w", opts.Stream, urls, err)
	}
	return &Cluster{opts: opts, nc: nc, js: js, st: st}, nil
}

// Close closes the connection. Leases are not released: they expire.
func (c *Cluster) Close() error {
	c.nc.Close()
	return nil
}

// Node returns this host's node name.
func (c *Cluster) Node() string { return c.opts.Node }

func leaseSubject(id string) string  { return "rtfshost.lease." + hex.EncodeToString([]byte(id)) }
func recordSubject(id string) string { return "rtfshost.rec." + hex.EncodeToString([]byte(id)) }

// A Lease is one host's ownership of one stream. Its Token changes at every
// renewal. A Lease is a value; the host keeps the newest one.
type Lease struct {
	StreamID string
	Node     string
	Token    uint64 // the sequence of the lease message: the fencing token
}

// Claim takes stream id for this host when no live lease exists. It fails
// with ErrOwned while another host's lease lives.
func (c *Cluster) Claim(ctx context.Context, id string) (Lease, error) {
	ack, err := c.js.Publish(ctx, leaseSubject(id), []byte(c.opts.Node),
		jetstream.WithExpectLastSequencePerSubject(0), jetstream.WithMsgTTL(c.opts.LeaseTTL))
	if err != nil {
		if isWrongLastSequence(err) {
			owner, _ := c.Owner(ctx, id)
			return Lease{}, fmt.Errorf("cluster: claim stream %q: %w (%s)", id, ErrOwned, owner)
		}
		return Lease{}, fmt.Errorf("cluster: claim stream %q: %w", id, err)
	}
	return Lease{StreamID: id, Node: c.opts.Node, Token: ack.Sequence}, nil
}

// Renew extends l by LeaseTTL and returns the lease with its new token. It
// fails with ErrFenced when l is no longer the stream's lease.
func (c *Cluster) Renew(ctx context.Context, l Lease) (Lease, error) {
	ack, err := c.js.Publish(ctx, leaseSubject(l.StreamID), []byte(l.Node),
		jetstream.WithExpectLastSequencePerSubject(l.Token), jetstream.WithMsgTTL(c.opts.LeaseTTL))
	if err != nil {
		if isWrongLastSequence(err) {
			return Lease{}, fmt.Errorf("cluster: renew the lease of stream %q: %w", l.StreamID, ErrFenced)
		}
		return Lease{}, fmt.Errorf("cluster: renew the lease of stream %q: %w", l.StreamID, err)
	}
	l.Token = ack.Sequence
	return l, nil
}

// Release gives l up at once (a host leaving cleanly), so that another host
// can claim the stream without waiting for the TTL. A lease that is no
// longer the stream's is left alone.
func (c *Cluster) Release(ctx context.Context, l Lease) error {
	m, err := c.st.GetLastMsgForSubject(ctx, leaseSubject(l.StreamID))
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		return fmt.Errorf("cluster: release the lease of stream %q: %w", l.StreamID, err)
	}
	if m.Sequence != l.Token {
		return nil
	}
	if err := c.st.DeleteMsg(ctx, l.Token); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("cluster: release the lease of stream %q: %w", l.StreamID, err)
	}
	return nil
}

// Owner returns the node that holds stream id's live lease ("" for none).
func (c *Cluster) Owner(ctx context.Context, id string) (string, error) {
	m, err := c.st.GetLastMsgForSubject(ctx, leaseSubject(id))
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return "", nil
		}
		return "", fmt.Errorf("cluster: the lease of stream %q: %w", id, err)
	}
	return string(m.Data), nil
}

// Commit writes the record of l's stream, fenced by l: the write happens
// only while l's token is the lease subject's last sequence, checked by the
// server in the same step as the write. It fails with ErrFenced otherwise.
// The record is durable as the stream's storage makes it when Commit
// returns.
func (c *Cluster) Commit(ctx context.Context, l Lease, record []byte) error {
	_, err := c.js.Publish(ctx, recordSubject(l.StreamID), record,
		jetstream.WithExpectLastSequenceForSubject(l.Token, leaseSubject(l.StreamID)))
	if err != nil {
		if isWrongLastSequence(err) {
			return fmt.Errorf("cluster: commit stream %q: %w", l.StreamID, ErrFenced)
		}
		return fmt.Errorf("cluster: commit stream %q: %w", l.StreamID, err)
	}
	return nil
}

// Load returns the record of stream id, or an error wrapping ErrNoRecord.
func (c *Cluster) Load(ctx context.Context, id string) ([]byte, error) {
	m, err := c.st.GetLastMsgForSubject(ctx, recordSubject(id))
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, fmt.Errorf("cluster: stream %q: %w", id, ErrNoRecord)
		}
		return nil, fmt.Errorf("cluster: load stream %q: %w", id, err)
	}
	return m.Data, nil
}

// isWrongLastSequence reports a failed expected-last-sequence check.
func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
