package mock

import (
	"net/url"

	"github.com/rtfshost/rtfshost/transport"
)

// Kind describes t to a transport.Catalog: :transport :mock, chosen for a
// mock: URL, reaching nothing outside the process, and Local: the command
// line does not serve it.
func Kind(t *Transport) transport.Kind {
	return transport.Kind{
		Name:      "mock",
		Doc:       "chunks sent from Go through a mock.Source (tests and embedders)",
		Endpoint:  "the stream's name (any text)",
		Target:    transport.TargetNone,
		Detect:    func(u *url.URL) bool { return u.Scheme == "mock" },
		Detects:   "a mock: URL",
		Local:     true,
		Transport: t,
	}
}
