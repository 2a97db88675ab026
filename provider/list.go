package provider

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rtfshost/rtfshost/provider/internal/stream"
	"github.com/rtfshost/rtfshost/transport/breaker"

	"github.com/rtfshost/rtfshost/rtfs"
)

// Listing the streams a page at a time, in stream-id order: on a provider
// alone with its store, the streams it has; in a cluster, every stream
// the shared store holds, whichever host runs it. Pages follow the ids,
// not an offset, so a stream that starts or goes between two pages moves
// no other stream from one page to the next.

// The page sizes of List.
const (
	// DefaultListLimit is ListOptions.Limit when zero.
	DefaultListLimit = 100
	// MaxListLimit is the largest ListOptions.Limit.
	MaxListLimit = 1000
)

// listFetches bounds the snapshots of other hosts' streams that List asks
// for at once.
const listFetches = 8

// ListOptions choose a page of List.
type ListOptions struct {
	// Cursor is the ListPage.Next of the page before; "" asks for the
	// first page.
	Cursor string
	// Limit bounds the streams of the page: 0 means DefaultListLimit;
	// more than MaxListLimit, or less than 0, is an error.
	Limit int
	// Inspect says what each stream's snapshot holds.
	Inspect InspectOptions
}

// A ListPage is one page of List.
type ListPage struct {
	// Streams are the page's snapshots, in stream-id order.
	Streams []StreamInfo
	// Total counts the streams of every page, as of this one. In a
	// cluster it may count a stream removed less than a minute ago, which
	// no page shows (the store lists its key that long).
	Total int
	// Next is the cursor of the next page; "" on the last.
	Next string
}

// ErrBadCursor is wrapped by List's error for a cursor it did not make.
var ErrBadCursor = errors.New("not a cursor of this list")

// List returns a page of the streams, in stream-id order. On a provider
// alone with its store they are the streams it has (those Infos shows).
// On a provider sharing its store with other hosts (Options.Cluster) they
// are every stream the store holds, wherever it runs: each snapshot is
// what Info gives for it, its host's own for a stream another host runs,
// and for one no live host runs, a stream loaded here from its records (an
// ended one to be inspected; an unfinished one whose host died is claimed
// and runs here, as Info does). Cost: alone, sorting the ids of the
// streams; in a cluster, a listing of the store's stream keys (no value is
// read; persistence.ScanKeys), and for each stream of the page that this
// host does not have, what Info costs: two round trips to NATS and its
// host, up to eight at a time. A store or host that does not answer fails
// the page, never shortens it.
func (p *Provider) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	switch {
	case opts.Limit == 0:
		opts.Limit = DefaultListLimit
	case opts.Limit < 0 || opts.Limit > MaxListLimit:
		return ListPage{}, fmt.Errorf("provider: list: limit %d: give 1 to %d", opts.Limit, MaxListLimit)
	}
	after, err := decodeCursor(opts.Cursor)
	if err != nil {
		return ListPage{}, fmt.Errorf("provider: list: cursor %q: %w", opts.Cursor, err)
	}
	ids := p.ids() // and in a cluster those the shared store holds
	if p.opts.Cluster != nil && p.ps != nil {
		stored, err := p.ps.StreamIDs(ctx)
		if err != nil {
			return ListPage{}, fmt.Errorf("provider: list: %w", err)
		}
		ids = append(ids, stored...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	start := 0
	if opts.Cursor != "" {
		start = sort.SearchStrings(ids, after)
		if start < len(ids) && ids[start] == after {
			start++
		}
	}
	end := min(start+opts.Limit, len(ids))
	page := ListPage{Total: len(ids)}
	if end < len(ids) {
		page.Next = encodeCursor(ids[end-1])
	}
	page.Streams, err = p.fwd.infos(ctx, ids[start:end], opts.Inspect)
	if err != nil {
		return ListPage{}, fmt.Errorf("provider: list: %w", err)
	}
	return page, nil
}

// ids returns the ids of the streams r holds that have not left it, in
// start order.
func (r *registry) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.order))
	for _, s := range r.order {
		if !s.Moved.Load() && !s.HandingOver.Load() {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// infos returns the snapshots of the streams ids, in their order: a
// stream this provider has from here, another through Info, a few at a
// time. A stream that is gone meanwhile (removed) is left out.
func (f forwarder) infos(ctx context.Context, ids []string, opts InspectOptions) ([]StreamInfo, error) {
	p := f.p
	now := time.Now()
	infos := make([]StreamInfo, len(ids))
	found := make([]bool, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	sem := make(chan struct{}, listFetches)
	for i, id := range ids {
		if s, err := p.lookup(id); err == nil {
			infos[i], found[i] = s.Info(opts, now), true
			continue
		}
		if p.opts.Cluster == nil {
			continue // removed since the ids were read
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return nil, ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			in, err := p.Info(id, opts)
			switch {
			case err == nil:
				infos[i], found[i] = in, true
			case !errors.Is(err, ErrNoStream):
				errs[i] = fmt.Errorf("stream %q: %w", id, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := infos[:0]
	for i := range infos {
		if found[i] {
			out = append(out, infos[i])
		}
	}
	return out, nil
}

// SummaryPage is the summary inspect map of a page of List: as Summary's,
// with the page's streams in :streams, :total counting those of every
// page, and :next-cursor, the cursor of the next page, on every page but
// the last.
func (p *Provider) SummaryPage(ctx context.Context, opts ListOptions) (rtfs.Value, error) {
	page, err := p.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	items := make([]rtfs.Value, len(page.Streams))
	for i := range page.Streams {
		items[i] = page.Streams[i].Value()
	}
	m := p.summaryOf(items, page.Total, time.Now(), p.ps != nil, p.Breakers())
	if page.Next != "" {
		m = m.Assoc(rtfs.Keyword("next-cursor"), rtfs.String(page.Next))
	}
	return m, nil
}

// summaryOf is the summary inspect map of the streams' inspect maps
// items, of total streams in all, for a provider with a store (persisted)
// or not and with the circuit breakers breakers.
func (c *settings) summaryOf(items []rtfs.Value, total int, now time.Time, persisted bool, breakers []breaker.State) *rtfs.Map {
	return rtfs.MapOf(
		rtfs.Keyword("total"), rtfs.Int(total),
		rtfs.Keyword("streams"), rtfs.NewVector(items...),
		rtfs.Keyword("auto-connect"), rtfs.Bool(c.cfg.autoConnect),
		rtfs.Keyword("server-url"), rtfs.String(stream.RedactURL(c.cfg.serverURL)),
		rtfs.Keyword("persistence-enabled"), rtfs.Bool(persisted),
		rtfs.Keyword("breakers"), stream.ShapeValue(reflect.ValueOf(breakers)),
		rtfs.Keyword("observed-at-epoch-ms"), rtfs.Int(now.UnixMilli()),
	)
}

// A cursor is the last stream id of its page, in unpadded URL-safe
// base64 after a version letter, so that it is opaque and fits a URI.
const cursorVersion = "a"

func encodeCursor(id string) string {
	return cursorVersion + base64.RawURLEncoding.EncodeToString([]byte(id))
}

func decodeCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	rest, ok := strings.CutPrefix(c, cursorVersion)
	if !ok {
		return "", ErrBadCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return "", ErrBadCursor
	}
	return string(b), nil
}
