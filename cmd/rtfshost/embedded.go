package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/rtfshost/rtfshost/internal/localserver"
	"github.com/rtfshost/rtfshost/transport/egress"
)

// defaultLocalAddr is where the reference server listens by default: the host
// and port of the default server URL, http://127.0.0.1:2025/sse.
const defaultLocalAddr = "127.0.0.1:2025"

// An embedded reference server serves one run (or resume, or serve) whose
// server URL is the default local one while nothing listens there, so that
// "rtfshost run examples/weather.rtfs" works on a fresh machine. It listens
// on a port of its own, and the run's HTTP client dials it whenever a stream
// dials 127.0.0.1:2025: programs, stored streams and resume all keep seeing
// the default URL, and runs started together never fight over the port
// (docs/localserver.md). A nil *embedded is no server.
type embedded struct {
	srv *localserver.Server
	tr  *http.Transport
}

// startEmbedded starts the reference server when serverURL (resolved, see
// provider.ResolveServerURL) is the default local one and nothing answers on
// 127.0.0.1:2025; it returns nil when the URL is elsewhere or a server
// already answers there (that one is used).
func startEmbedded(serverURL string) (*embedded, error) {
	if !isDefaultLocal(serverURL) {
		return nil, nil
	}
	if c, err := net.DialTimeout("tcp", defaultLocalAddr, 300*time.Millisecond); err == nil {
		c.Close()
		return nil, nil
	}
	srv := localserver.New(localserver.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("starting the embedded reference server: %w", err)
	}
	u, err := url.Parse(srv.URL())
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("the embedded reference server's URL %q: %w", srv.URL(), err)
	}
	tr := egress.NewTransport()
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == defaultLocalAddr || addr == "localhost:2025" {
			addr = u.Host
		}
		return dialer.DialContext(ctx, network, addr)
	}
	return &embedded{srv: srv, tr: tr}, nil
}

// client is the HTTP client for the run's provider (provider.Options.
// HTTPClient): nil, the provider's own, when there is no embedded server.
func (e *embedded) client() *http.Client {
	if e == nil {
		return nil
	}
	return &http.Client{Transport: e.tr}
}

// Close stops the server and closes the client's connections.
func (e *embedded) Close() {
	if e == nil {
		return
	}
	e.tr.CloseIdleConnections()
	e.srv.Close()
}

// isDefaultLocal reports whether u is on the default local server's address.
func isDefaultLocal(u string) bool {
	pu, err := url.Parse(u)
	if err != nil {
		return false
	}
	switch pu.Host {
	case "127.0.0.1:2025", "localhost:2025":
		return true
	}
	return false
}
