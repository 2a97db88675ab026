package sse

import (
	"net/url"

	"github.com/rtfshost/rtfshost/transport"
)

// Kind describes the raw SSE transport to a transport.Catalog: :transport
// :sse, chosen for any http(s) URL that no other transport claims (a
// fallback), reaching the stream's URL, with a new Transport as its
// implementation.
func Kind() transport.Kind {
	return transport.Kind{
		Name:        "sse",
		Doc:         "a raw Server-Sent Events stream (HTTP GET, resumed with Last-Event-ID); :config becomes the query string",
		Endpoint:    "a path under :server-url, or an absolute http(s) URL",
		URLEndpoint: true,
		Target:      transport.TargetURL,
		Detect: func(u *url.URL) bool {
			return u.Scheme == "http" || u.Scheme == "https"
		},
		Detects:   "any other http(s) URL",
		Fallback:  true,
		Transport: new(Transport),
	}
}
