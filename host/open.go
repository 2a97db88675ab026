package host

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/exec"
	"github.com/rtfshost/rtfshost/transport/mcp"
	"github.com/rtfshost/rtfshost/transport/replay"
	"github.com/rtfshost/rtfshost/transport/sse"
)

// DefaultTransports returns the catalog of the transports rtfshost runs for
// real sources: raw SSE, MCP Streamable HTTP, legacy MCP HTTP+SSE, an MCP
// server launched as a child process (stdio) and any program's output
// (exec). The mock is not among them: an embedder adds it, or its own, with
// OpenOptions.AddTransports.
// Each call returns new transport values; the catalog is safe for
// concurrent use.
func DefaultTransports() *transport.Catalog {
	return transport.NewCatalog(
		sse.Kind(),
		mcp.StreamableKind(),
		mcp.LegacyKind(),
		mcp.StdioKind(),
		exec.Kind(),
		replay.Kind(),
	)
}

// OpenOptions configure Open: the Host's Options, and where its streams
// are stored.
type OpenOptions struct {
	Options
	// DataDir, when set, makes the host durable: Open opens (creating it if
	// needed) a Badger store there, and Close closes it. Options.Store must
	// then be nil.
	DataDir string
	// SyncWrites syncs every commit of the store in DataDir to disk.
	SyncWrites bool
	// AddTransports are transports added to DefaultTransports, such as
	// the mock (mock.Kind) or an embedder's own; a kind of a name the
	// defaults have replaces it. Give either AddTransports or
	// Streams.Transports (a whole catalog of your own), not both.
	AddTransports []transport.Kind
	// Cluster, when set, makes the host one of a cluster sharing NATS
	// JetStream (docs/cluster.md): Open joins it, its records live there
	// (DataDir and Store must be empty), and the host runs the streams it
	// owns, takes over those of hosts that die and hands its own over at
	// Close. Its KeyOwner is set by Open.
	Cluster *cluster.Options
}

// Open assembles a Host as the command line does: the transports default to
// DefaultTransports, and DataDir opens the store. It is the one place that
// wires transports, store and provider; embedders that want the defaults
// call it instead of New. The caller closes the Host, which closes the
// store Open opened.
func Open(opts OpenOptions) (*Host, error) {
	switch {
	case opts.Streams.Transports != nil && len(opts.AddTransports) > 0:
		return nil, errors.New("host: open: both Streams.Transports and AddTransports given; give one (AddTransports adds to the defaults)")
	case opts.Streams.Transports == nil:
		opts.Streams.Transports = transport.NewCatalog(withKinds(DefaultTransports().Kinds(), opts.AddTransports)...)
	}
	if opts.Cluster != nil {
		return openCluster(opts)
	}
	var own *persistence.BadgerStore
	if opts.DataDir != "" {
		if opts.Store != nil {
			return nil, fmt.Errorf("host: open: both DataDir %s and a Store given; give one", opts.DataDir)
		}
		st, err := persistence.OpenBadger(opts.DataDir, persistence.Options{SyncWrites: opts.SyncWrites, Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("host: opening the data directory %s: %w", opts.DataDir, err)
		}
		own, opts.Store = st, st
	}
	h, err := New(opts.Options)
	if err != nil {
		if own != nil {
			own.Close()
		}
		return nil, err
	}
	if own != nil {
		h.closeStore = own.Close
	}
	return h, nil
}

// withKinds returns kinds with more added, a kind of a name already
// there replacing it.
func withKinds(kinds, more []transport.Kind) []transport.Kind {
	out := append([]transport.Kind(nil), kinds...)
	for _, k := range more {
		i := slices.IndexFunc(out, func(o transport.Kind) bool { return o.Name == k.Name })
		if i >= 0 {
			out[i] = k
		} else {
			out = append(out, k)
		}
	}
	return out
}

// openCluster joins the cluster of opts and opens a host on its store.
func openCluster(opts OpenOptions) (*Host, error) {
	if opts.DataDir != "" || opts.Store != nil {
		return nil, errors.New("host: open: a host in a cluster keeps its records in JetStream; give no data directory or store")
	}
	copts := *opts.Cluster
	copts.KeyOwner = keyOwner
	if copts.Logger == nil {
		copts.Logger = opts.Logger
	}
	cl, err := cluster.Connect(context.Background(), copts)
	if err != nil {
		return nil, fmt.Errorf("host: open: %w", err)
	}
	st := cl.Store()
	opts.Store = st
	pe := &peers{cl: cl}
	opts.Streams.Cluster = pe
	h, err := New(opts.Options)
	if err != nil {
		cl.Close()
		return nil, err
	}
	pe.local, pe.grace = h.prov.Live, &h.grace
	h.cl, h.closeStore = cl, st.Close
	if err := h.startCluster(cl); err != nil {
		h.Close()
		return nil, fmt.Errorf("host: open: %w", err)
	}
	return h, nil
}

// Store returns the host's store, nil without persistence. It is owned by
// the host when Open opened it.
func (h *Host) Store() persistence.Store { return h.store }
