package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// A URL is an http or https URL the host may dial, in the one form every
// decision about it uses. Parse (or FromURL) makes it; the Policy checks
// it, a Credential compares its origin, and the transports and the HTTP
// client of Client send exactly it, so no second reading of the text can
// disagree with the one that was checked. A URL is immutable and safe for
// concurrent use.
//
// The form (docs/security.md, "What a URL means"):
//   - the scheme is http or https, in any case;
//   - the host is lower case without a trailing dot; an IPv4-mapped IPv6
//     literal is its IPv4 address; a host written as a number in any form
//     other than four decimal parts (2130706433, 0x7f.1, 0177.0.0.1, 127.1),
//     a host that is not ASCII, and an IPv6 zone are refused;
//   - the port is decimal, and left out when it is the scheme's default;
//   - the path has the percent-escapes of unreserved characters decoded,
//     other escapes in upper case and its dot segments removed, so
//     "/a/%2e%2e/b" is "/b"; an empty path is "/";
//   - the fragment, which is never sent, is dropped. User info and the
//     query are kept (the operator's own server URL may carry them); the
//     Policy refuses user info.
type URL struct {
	u       url.URL // the canonical form
	origin  string  // scheme://host:port, the default port written out
	decoded string  // the path fully decoded, '\' read as '/', dot segments removed
}

// A URLError says why a text is not a URL the host dials.
type URLError struct {
	URL    string // the text, without user info and query
	Reason string
}

// Error names the URL and the reason.
func (e *URLError) Error() string {
	return fmt.Sprintf("URL %s is not one this host dials: %s", e.URL, e.Reason)
}

// Parse parses and classifies raw (surrounding white space ignored) as a
// URL to dial. It returns a *URLError when raw is not an absolute http or
// https URL with a host, or when its host is one of the refused forms. It
// is the only parser of dialled URLs in rtfshost; its cost is one url.Parse
// and a pass over the path.
func Parse(raw string) (*URL, error) {
	raw = strings.TrimSpace(raw)
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &URLError{URL: Redact(raw), Reason: err.Error()}
	}
	return classify(u, raw)
}

// FromURL classifies u as Parse classifies its text: for a URL another
// package parsed (a redirect's Location, resolved by net/http).
func FromURL(u *url.URL) (*URL, error) {
	c := *u
	return classify(&c, u.String())
}

// IsURL reports whether s is written as an http or https URL: it begins
// (after white space) with "http:" or "https:" in any case. Such a text is
// a URL of its own, never a path under a server URL, even when Parse then
// refuses it.
func IsURL(s string) bool {
	scheme, _, ok := strings.Cut(strings.TrimSpace(s), ":")
	return ok && (strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https"))
}

// Endpoint returns the URL of a stream whose endpoint is either a URL of
// its own (IsURL) or a path under serverURL: the path is taken as written
// (a '%' or '?' in it is a character of the path, escaped on the wire),
// joined to the server URL's path with one '/', and its dot segments are
// resolved like any other. The server URL's query is kept.
func Endpoint(serverURL, endpoint string) (*URL, error) {
	if IsURL(endpoint) {
		return Parse(endpoint)
	}
	base, err := Parse(serverURL)
	if err != nil {
		return nil, err
	}
	return base.JoinPath(endpoint)
}

// JoinPath returns the URL of the path p under u (p as written, not
// escaped), classified again.
func (u *URL) JoinPath(p string) (*URL, error) {
	rel := (&url.URL{Path: strings.TrimLeft(p, "/")}).EscapedPath()
	c := u.u
	c.RawPath = strings.TrimRight(u.u.EscapedPath(), "/") + "/" + rel
	c.Path, _ = url.PathUnescape(c.RawPath) // rel and the canonical path are valid escapes
	return FromURL(&c)
}

// String returns the canonical form, with user info and query: what is
// sent. Show Redacted in errors and logs.
func (u *URL) String() string { return u.u.String() }

// URL returns a copy of the canonical form, for a request.
func (u *URL) URL() *url.URL {
	c := u.u
	if u.u.User != nil {
		user := *u.u.User
		c.User = &user
	}
	return &c
}

// Origin returns "scheme://host:port" with the default port written out.
func (u *URL) Origin() string { return u.origin }

// Redacted returns the canonical form without user info and with any query
// replaced by "redacted", for errors and logs.
func (u *URL) Redacted() string {
	c := u.u
	c.User = nil
	if c.RawQuery != "" {
		c.RawQuery = "redacted"
	}
	return c.String()
}

// HasUserInfo reports whether the URL carries user info.
func (u *URL) HasUserInfo() bool { return u.u.User != nil }

// within reports whether u's path is path or below it on '/' boundaries,
// both as sent and as a server that decodes every escape reads it.
func (u *URL) within(p prefix) bool {
	return underPath(strings.TrimRight(u.u.EscapedPath(), "/"), p.path) && underPath(u.decoded, p.decoded)
}

func underPath(path, prefix string) bool {
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

// classify is the classifier behind Parse and FromURL. raw is u's text, for
// errors.
func classify(u *url.URL, raw string) (*URL, error) {
	bad := func(format string, args ...any) (*URL, error) {
		return nil, &URLError{URL: Redact(raw), Reason: fmt.Sprintf(format, args...)}
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme == "":
		return bad("not an absolute URL (it has no scheme)")
	case scheme != "http" && scheme != "https":
		return bad("scheme %q is not http or https", u.Scheme)
	case u.Opaque != "":
		return bad(`an http(s) URL is written scheme://host/path`)
	case u.Host == "":
		return bad("no host")
	}
	host, bare, err := canonicalHost(u)
	if err != nil {
		return bad("%v", err)
	}
	defPort := map[string]string{"http": "80", "https": "443"}[scheme]
	port := defPort
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad("port %q is not between 1 and 65535", p)
		}
		port = strconv.Itoa(n)
	}
	hostport := host
	if port != defPort {
		hostport = net.JoinHostPort(bare, port)
	}
	path := canonicalPath(u.EscapedPath())
	plain, _ := url.PathUnescape(path) // canonicalPath keeps only valid escapes
	c := url.URL{Scheme: scheme, User: u.User, Host: hostport, Path: plain, RawPath: path,
		RawQuery: u.RawQuery, ForceQuery: u.ForceQuery}
	return &URL{
		u:       c,
		origin:  scheme + "://" + net.JoinHostPort(bare, port),
		decoded: strings.TrimRight(removeDotSegments(strings.ReplaceAll(plain, `\`, "/")), "/"),
	}, nil
}

// canonicalHost returns the host as written in a canonical URL (IPv6 in
// brackets) and bare (without them), or why the host is refused.
func canonicalHost(u *url.URL) (host, bare string, err error) {
	h := u.Hostname()
	if strings.HasPrefix(u.Host, "[") {
		a, err := netip.ParseAddr(h)
		if err != nil {
			return "", "", fmt.Errorf("IPv6 literal %q: %w", h, err)
		}
		if a.Zone() != "" {
			return "", "", fmt.Errorf("IPv6 literal %q has a zone, which names an interface of this machine", h)
		}
		if a = a.Unmap(); a.Is4() { // ::ffff:127.0.0.1 is 127.0.0.1
			return a.String(), a.String(), nil
		}
		return "[" + a.String() + "]", a.String(), nil
	}
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			return "", "", fmt.Errorf("host %q is not ASCII: write an international name in its xn-- form", h)
		}
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" {
		return "", "", errors.New("no host")
	}
	if a, err := netip.ParseAddr(h); err == nil && a.Is4() {
		return a.String(), a.String(), nil
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" {
			return "", "", fmt.Errorf("host %q has an empty label", h)
		}
		if strings.IndexFunc(l, func(r rune) bool {
			return !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_')
		}) >= 0 {
			return "", "", fmt.Errorf("host %q: a host name has only letters, digits, '-', '_' and '.'", h)
		}
	}
	if numeric(labels[len(labels)-1]) {
		// A resolver may read these as an IPv4 address (glibc reads
		// 2130706433 and 0x7f.1 as 127.0.0.1) while a check of the text
		// reads a name: refuse them, whatever they mean.
		return "", "", fmt.Errorf("host %q is a number but not an IPv4 address in four decimal parts (e.g. 127.0.0.1)", h)
	}
	return h, h, nil
}

// numeric reports whether a host label is a number, decimal or 0x hex, as
// the WHATWG URL standard reads the last label of a host as IPv4.
func numeric(l string) bool {
	digits := func(s string, hex bool) bool {
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !('0' <= c && c <= '9' || hex && 'a' <= c && c <= 'f') {
				return false
			}
		}
		return true
	}
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		return digits(rest, true)
	}
	return digits(l, false)
}

// canonicalPath decodes the escapes of unreserved characters in the
// escaped path p, writes the others in upper case, and removes dot
// segments (RFC 3986 §6.2.2, §5.2.4). An empty path is "/".
func canonicalPath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' && i+2 < len(p) && ishex(p[i+1]) && ishex(p[i+2]) {
			d := unhex(p[i+1])<<4 | unhex(p[i+2])
			if unreserved(d) {
				b.WriteByte(d)
			} else {
				b.WriteString(strings.ToUpper(p[i : i+3]))
			}
			i += 2
			continue
		}
		b.WriteByte(c)
	}
	return removeDotSegments(b.String())
}

// removeDotSegments resolves "." and ".." segments of an absolute path; ".."
// stops at the root.
func removeDotSegments(p string) string {
	if p == "" {
		return "/"
	}
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
			continue
		}
		if last {
			out = append(out, "") // "/a/b/.." is "/a/"
		}
	}
	return "/" + strings.Join(out, "/")
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}
