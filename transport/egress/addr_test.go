package egress

import (
	"errors"
	"net"
	"net/netip"
	"testing"
)

// TestCheckAddress: link-local, unspecified and multicast addresses are
// refused always (IPv4-mapped IPv6 too), loopback and private ones unless
// allowed, public ones never; DialControl refuses before any connection
// is made.
func TestCheckAddress(t *testing.T) {
	for _, c := range []struct {
		addr            string
		private, public bool // refused with private allowed; refused without
	}{
		{"169.254.169.254", true, true},
		{"::ffff:169.254.169.254", true, true},
		{"fe80::1", true, true},
		{"0.0.0.0", true, true},
		{"224.0.0.1", true, true},
		{"127.0.0.1", false, true},
		{"::1", false, true},
		{"10.1.2.3", false, true},
		{"192.168.0.1", false, true},
		{"fd00::1", false, true},
		{"93.184.216.34", false, false},
		{"2606:4700::1111", false, false},
	} {
		ip := netip.MustParseAddr(c.addr)
		if err := CheckAddress(ip, true); (err != nil) != c.private || err != nil && !errors.Is(err, ErrDenied) {
			t.Errorf("%s with private addresses allowed: %v", c.addr, err)
		}
		if err := CheckAddress(ip, false); (err != nil) != c.public {
			t.Errorf("%s: %v", c.addr, err)
		}
	}
	d := net.Dialer{Control: DialControl(true)}
	if _, err := d.Dial("tcp", "169.254.169.254:80"); !errors.Is(err, ErrDenied) {
		t.Errorf("dialing a link-local address: %v, want a refusal", err)
	}
}
