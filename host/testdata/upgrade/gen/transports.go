//go:build !rtfshost_v0_1

package main

import (
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/mock"
)

// transports is the provider's transports since 0.2.0: a catalog.
func transports(mk *mock.Transport) *transport.Catalog { return transport.NewCatalog(mock.Kind(mk)) }
