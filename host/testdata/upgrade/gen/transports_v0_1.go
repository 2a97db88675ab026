//go:build rtfshost_v0_1

package main

import (
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// transports is the provider's transports in 0.1.0: a map by name.
func transports(mk *mock.Transport) map[string]transport.StreamTransport {
	return map[string]transport.StreamTransport{"mock": mk}
}
