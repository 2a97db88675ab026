package host

import (
	"fmt"

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

// Store returns the host's store, nil without persistence. It is owned by
// the host when Open opened it.
func (h *Host) Store() persistence.Store { return h.store }
