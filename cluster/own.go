package cluster

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Ownership: rtfshost.own.<hex id> holds "node\nincarnation" while a host
// owns the stream; "\n\nincarnation" once its owner offered it to that
// host (placement: only that host claims it while it lives); an empty body
// once its owner handed it over (any host may claim it at once); and
// nothing for a stream no one needs to run (it ended, or was never
// claimed).

func ownSubject(id string) string { return "rtfshost.own." + hex.EncodeToString([]byte(id)) }

// An Owner is who owns a stream, as its ownership record says.
type Owner struct {
	Node        string // "" when no host owns it
	Incarnation string
	Alive       bool      // the owner's heartbeat lives
	Heartbeat   time.Time // when it was last renewed, while it lives
	OfferedTo   string    // the incarnation a stream without owner is offered to
}

// An OwnedError is Claim's error while another host holds the stream: it
// owns it (or it was offered to it) and its heartbeat lives, or its
// heartbeat expired while NATS could not take writes and it may still
// renew it (Heartbeat is then zero). errors.Is(err, ErrOwned) holds.
type OwnedError struct {
	Stream      string
	Node        string // the holder's node name; "" for a stream offered to it
	Incarnation string
	Heartbeat   time.Time // when the holder's heartbeat was last renewed; zero when it expired
}

func (e *OwnedError) Error() string {
	who := e.Incarnation
	if e.Node != "" {
		who = e.Node + " (" + e.Incarnation + ")"
	}
	if e.Heartbeat.IsZero() {
		return fmt.Sprintf("cluster: claim stream %q: %v: %s, whose heartbeat expired while NATS did not take writes; it has a lease TTL to renew it", e.Stream, ErrOwned, who)
	}
	return fmt.Sprintf("cluster: claim stream %q: %v: %s, its heartbeat renewed %v ago", e.Stream, ErrOwned, who, time.Since(e.Heartbeat).Round(time.Millisecond))
}

// Is reports ErrOwned.
func (e *OwnedError) Is(target error) bool { return target == ErrOwned }

func parseOwner(body []byte) Owner {
	node, rest, _ := strings.Cut(string(body), "\n")
	inc, offer, _ := strings.Cut(rest, "\n")
	return Owner{Node: node, Incarnation: inc, OfferedTo: offer}
}

// Claim makes this host the owner of stream id, before it writes the
// stream's records: at once when no host owns it, when its owner handed it
// over, or when the owner's heartbeat has expired; the ownership record is
// replaced with a compare-and-set, so of several hosts claiming one stream
// one wins. A stream this incarnation owns already is kept. It fails with
// an error wrapping ErrOwned while another live host owns the stream (an
// *OwnedError names it), and while a heartbeat that expired may be one
// that NATS could not take (this host's own failed within the last lease
// TTL: a leader election, an outage). Cost: two or three round trips.
func (c *Cluster) Claim(ctx context.Context, id string) error {
	subj := ownSubject(id)
	var last uint64
	m, err := c.st.GetLastMsgForSubject(ctx, subj)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return fmt.Errorf("cluster: claim stream %q: read its owner: %w", id, err)
	default:
		last = m.Sequence
		o := parseOwner(m.Data)
		if o.Incarnation == c.inc {
			c.setToken(id, last)
			return nil
		}
		if holder := o.Incarnation + o.OfferedTo; holder != "" && holder != c.inc {
			beat, live, err := c.heartbeatOf(ctx, holder)
			if err != nil {
				return fmt.Errorf("cluster: claim stream %q: %w", id, err)
			}
			if live || !c.settled() {
				return &OwnedError{Stream: id, Node: o.Node, Incarnation: holder, Heartbeat: beat}
			}
		}
	}
	ack, err := c.js.Publish(ctx, subj, []byte(c.opts.Node+"\n"+c.inc), jetstream.WithExpectLastSequencePerSubject(last))
	if err != nil {
		if isWrongLastSequence(err) {
			return fmt.Errorf("cluster: claim stream %q: %w (another host claimed it first)", id, ErrOwned)
		}
		return fmt.Errorf("cluster: claim stream %q: %w", id, err)
	}
	c.setToken(id, ack.Sequence)
	c.claims.Add(1)
	c.log.Debug("cluster: stream claimed", "stream", id)
	return nil
}

// heartbeatOf reads the heartbeat of incarnation inc: when it was renewed,
// and whether it lives.
func (c *Cluster) heartbeatOf(ctx context.Context, inc string) (time.Time, bool, error) {
	m, err := c.st.GetLastMsgForSubject(ctx, nodeSubject(inc))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, fmt.Errorf("read the heartbeat of %s: %w", inc, err)
	}
	return m.Time, true, nil
}

// settled reports whether a missing heartbeat means that its host is gone
// (beatLog.settled).
func (c *Cluster) settled() bool { return c.beats.settled(time.Now(), c.opts.LeaseTTL) }

func (c *Cluster) setToken(id string, tok uint64) {
	c.mu.Lock()
	c.owned[id] = tok
	c.mu.Unlock()
}

// token returns the fencing token of a stream this host owns.
func (c *Cluster) token(id string) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tok, ok := c.owned[id]
	return tok, ok
}

// Release gives stream id up. With ended set (the stream finished) its
// ownership record is removed: no host needs to run it. Otherwise it is
// handed over: the record is emptied, and the first host to look claims
// it without waiting for a TTL. Either way only while this host still owns
// it (compare-and-set). Cost: one round trip.
func (c *Cluster) Release(ctx context.Context, id string, ended bool) error {
	c.mu.Lock()
	tok, ok := c.owned[id]
	delete(c.owned, id)
	c.mu.Unlock()
	if !ok {
		return nil
	}
	if ended {
		err := c.st.DeleteMsg(ctx, tok)
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("cluster: release stream %q: %w", id, err)
		}
		return nil
	}
	_, err := c.js.Publish(ctx, ownSubject(id), nil, jetstream.WithExpectLastSequencePerSubject(tok))
	if err != nil && !isWrongLastSequence(err) {
		return fmt.Errorf("cluster: hand stream %q over: %w", id, err)
	}
	return nil
}

// Offer hands stream id over to the host of incarnation to (placement):
// only that host claims it while it lives; if it dies first, any host
// may. Only while this host still owns it (compare-and-set). Cost: one
// round trip.
func (c *Cluster) Offer(ctx context.Context, id, to string) error {
	c.mu.Lock()
	tok, ok := c.owned[id]
	delete(c.owned, id)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("cluster: offer stream %q: this host does not own it", id)
	}
	_, err := c.js.Publish(ctx, ownSubject(id), []byte("\n\n"+to), jetstream.WithExpectLastSequencePerSubject(tok))
	if err != nil && !isWrongLastSequence(err) {
		return fmt.Errorf("cluster: offer stream %q to %s: %w", id, to, err)
	}
	return nil
}

// Forget drops stream id from the streams this host owns, without writing:
// its commit was fenced, another host owns it now.
func (c *Cluster) Forget(id string) {
	c.mu.Lock()
	delete(c.owned, id)
	c.mu.Unlock()
}

// Owned returns the ids of the streams this host owns, sorted.
func (c *Cluster) Owned() []string {
	c.mu.Lock()
	ids := make([]string, 0, len(c.owned))
	for id := range c.owned {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	sort.Strings(ids)
	return ids
}

// ReleaseAll hands every stream this host owns over (a host leaving
// cleanly), after the host has stopped them and committed their progress.
func (c *Cluster) ReleaseAll(ctx context.Context) error {
	var errs []error
	for _, id := range c.Owned() {
		errs = append(errs, c.Release(ctx, id, false))
	}
	return errors.Join(errs...)
}

// OwnerOf returns who owns stream id.
func (c *Cluster) OwnerOf(ctx context.Context, id string) (Owner, error) {
	m, err := c.st.GetLastMsgForSubject(ctx, ownSubject(id))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return Owner{}, nil
	case err != nil:
		return Owner{}, fmt.Errorf("cluster: the owner of stream %q: %w", id, err)
	}
	o := parseOwner(m.Data)
	if o.Incarnation != "" {
		if o.Heartbeat, o.Alive, err = c.heartbeatOf(ctx, o.Incarnation); err != nil {
			return Owner{}, fmt.Errorf("cluster: the owner of stream %q: %w", id, err)
		}
	}
	return o, nil
}

// Orphans returns the streams that need a host: handed over, offered to
// this host, or owned by (or offered to) a host whose heartbeat expired
// (not while that may be NATS's doing: see Claim). Cost: two scans of the
// cluster's ownership and heartbeat subjects.
func (c *Cluster) Orphans(ctx context.Context) ([]string, error) {
	settled := c.settled()
	live, err := c.alive(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: list live hosts: %w", err)
	}
	var ids []string
	err = c.lastPerSubject(ctx, "rtfshost.own.>", func(m *jetstream.RawStreamMsg) error {
		o := parseOwner(m.Data)
		if o.Incarnation != "" && (o.Incarnation == c.inc || live[o.Incarnation] || !settled) {
			return nil
		}
		if o.OfferedTo != "" && o.OfferedTo != c.inc && (live[o.OfferedTo] || !settled) {
			return nil // offered to another host that lives, or may
		}
		raw, err := hex.DecodeString(strings.TrimPrefix(m.Subject, "rtfshost.own."))
		if err != nil {
			return nil // not ours
		}
		ids = append(ids, string(raw))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: list stream owners: %w", err)
	}
	sort.Strings(ids)
	return ids, nil
}

// Load counts the streams each live host owns (offers included), by
// incarnation; every live host is in the map. For placement. Cost: two
// scans of the cluster's ownership and heartbeat subjects.
func (c *Cluster) Load(ctx context.Context) (map[string]int, error) {
	live, err := c.alive(ctx)
	if err != nil {
		return nil, err
	}
	load := map[string]int{}
	for inc := range live {
		load[inc] = 0
	}
	err = c.lastPerSubject(ctx, "rtfshost.own.>", func(m *jetstream.RawStreamMsg) error {
		if o := parseOwner(m.Data); live[o.Incarnation+o.OfferedTo] {
			load[o.Incarnation+o.OfferedTo]++
		}
		return nil
	})
	return load, err
}

// isWrongLastSequence reports a failed expected-last-sequence check.
func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
