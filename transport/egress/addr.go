package egress

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// CheckAddress returns an error wrapping ErrDenied when a fetch the server
// makes on its own behalf (not a stream's: the stream's URL is the
// Policy's) must not reach ip: a link-local address (169.254.0.0/16,
// fe80::/10: where cloud metadata services answer), an unspecified or a
// multicast one; and, unless private is true, a loopback or private one
// (127.0.0.0/8, ::1, RFC 1918, fc00::/7).
func CheckAddress(ip netip.Addr, private bool) error {
	ip = ip.Unmap()
	var kind string
	switch {
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		kind = "link-local"
	case ip.IsUnspecified():
		kind = "unspecified"
	case ip.IsMulticast():
		kind = "multicast"
	case !private && ip.IsLoopback():
		kind = "loopback"
	case !private && ip.IsPrivate():
		kind = "private"
	default:
		return nil
	}
	return &AddressError{Addr: ip, Kind: kind}
}

// An AddressError is CheckAddress's refusal of an address.
type AddressError struct {
	Addr netip.Addr
	Kind string // "link-local", "unspecified", "multicast", "loopback" or "private"
}

// Error names the address and its kind.
func (e *AddressError) Error() string {
	return fmt.Sprintf("%s is a %s address, which this fetch may not reach", e.Addr, e.Kind)
}

// Is reports ErrDenied.
func (e *AddressError) Is(target error) bool { return target == ErrDenied }

// DialControl returns a net.Dialer Control that applies CheckAddress to
// the address each connection is about to be made to. It runs after name
// resolution and before connect, so a name cannot resolve to one address
// for a check and another for the dial, and a refused address is sent no
// packet.
func DialControl(private bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return fmt.Errorf("dialing %s: %w", address, err)
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("dialing %s: %w", address, err)
		}
		return CheckAddress(ip, private)
	}
}
