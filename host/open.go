package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/rtfshost/rtfshost/cluster"
	"github.com/rtfshost/rtfshost/persistence"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/exec"
	"github.com/rtfshost/rtfshost/transport/mcp"
	"github.com/rtfshost/rtfshost/transport/sse"
)

// DefaultTransports returns the catalog of the transports rtfshost runs for
// real sources: raw SSE, MCP Streamable HTTP, legacy MCP HTTP+SSE, an MCP
// server launched as a child process (stdio) and any program's output
// (exec). The mock is not among them: tests and embedders add it with
// transport.NewCatalog(append(DefaultTransports().Kinds(), mock.Kind(t))...).
// Each call returns new transport values; the catalog is safe for
// concurrent use.
func DefaultTransports() *transport.Catalog {
	return transport.NewCatalog(
		sse.Kind(),
		mcp.StreamableKind(),
		mcp.LegacyKind(),
		mcp.StdioKind(),
		exec.Kind(),
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
	if opts.Streams.Transports == nil {
		opts.Streams.Transports = DefaultTransports()
	}
	if opts.Cluster != nil {
		return openCluster(opts)
	}
	var own *persistence.BadgerStore
	if opts.DataDir != "" {
		if opts.Store != nil || opts.Streams.Store != nil {
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

// openCluster joins the cluster of opts and opens a host on its store.
func openCluster(opts OpenOptions) (*Host, error) {
	if opts.DataDir != "" || opts.Store != nil || opts.Streams.Store != nil {
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
