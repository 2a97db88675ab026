package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// Control: each host answers requests on the streams it runs on its inbox,
// rtfshost.ctl.<incarnation> (core NATS request-reply, not stored). The
// payloads are the host's business (package host encodes them).

// ErrNoOwner is wrapped by Ask's error when no live host owns the stream,
// or its owner did not answer (it died meanwhile).
var ErrNoOwner = errors.New("no live host owns the stream")

func ctlSubject(inc string) string { return "rtfshost.ctl." + inc }

// Serve answers the requests other hosts send this host with handler, on
// a goroutine of the NATS connection, until Close. handler must be safe
// for concurrent use; it gets the request's payload and returns the reply.
// Serve replaces an earlier handler.
func (c *Cluster) Serve(handler func(ctx context.Context, req []byte) []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctlSub != nil {
		_ = c.ctlSub.Unsubscribe()
	}
	sub, err := c.nc.Subscribe(ctlSubject(c.inc), func(m *nats.Msg) {
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.LeaseTTL*2)
		defer cancel()
		_ = m.Respond(handler(ctx, m.Data))
	})
	if err != nil {
		return fmt.Errorf("cluster: serve control requests: %w", err)
	}
	c.ctlSub = sub
	return nil
}

// Ask sends req to the host that owns stream id and returns its reply. It
// fails with an error wrapping ErrNoOwner when no live host owns the
// stream, this host owns it, or the owner does not answer. Cost: two round
// trips.
func (c *Cluster) Ask(ctx context.Context, id string, req []byte) ([]byte, error) {
	o, err := c.OwnerOf(ctx, id)
	if err != nil {
		return nil, err
	}
	if !o.Alive || o.Incarnation == c.inc {
		return nil, fmt.Errorf("cluster: stream %q: %w", id, ErrNoOwner)
	}
	m, err := c.nc.RequestWithContext(ctx, ctlSubject(o.Incarnation), req)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("cluster: stream %q: its owner %s does not answer: %w", id, o.Node, ErrNoOwner)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: stream %q: ask its owner %s: %w", id, o.Node, err)
	}
	return m.Data, nil
}
