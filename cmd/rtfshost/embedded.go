package main

import (
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/rtfshost/rtfshost/internal/localserver"
)

// defaultLocalAddr is where the reference server listens by default: the host
// and port of the default server URL, http://127.0.0.1:2025/sse.
const defaultLocalAddr = "127.0.0.1:2025"

// startEmbeddedServer starts the reference server on 127.0.0.1:2025 when
// serverURL points there and nothing listens yet, so that "rtfshost run
// examples/weather.rtfs" works on a fresh machine. It returns nil when the URL
// is elsewhere or a server already answers.
func startEmbeddedServer(serverURL string) (*localserver.Server, error) {
	if !isDefaultLocal(serverURL) {
		return nil, nil
	}
	if c, err := net.DialTimeout("tcp", defaultLocalAddr, 300*time.Millisecond); err == nil {
		c.Close()
		return nil, nil
	}
	srv := localserver.New(localserver.Options{})
	if err := srv.Start(defaultLocalAddr); err != nil {
		return nil, fmt.Errorf("starting the embedded reference server on %s: %w", defaultLocalAddr, err)
	}
	return srv, nil
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
