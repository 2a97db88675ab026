// Package egress is the one place that decides where a stream may reach and
// what it may carry there. A Policy lists the server URLs (by prefix) and the
// commands a stream may use; a Credential is the operator's auth header and
// the one origin it belongs to; Client assembles the *http.Client every
// network transport of a stream uses, which checks every redirect against
// the Policy, strips the Credential on any redirect that leaves its origin,
// and ends a response that stays silent longer than the stream's idle
// timeout.
//
// The provider checks a stream's URL (and, for child-process transports,
// its command) with the Policy when the stream starts or is recovered, and
// puts the Credential on a transport.Spec only when the stream's target has
// the Credential's origin. `rtfshost serve` builds a restrictive Policy from
// --allow-server and --allow-command; `rtfshost run` allows every URL and
// command but keeps the credential rule. docs/security.md has the threat
// model.
package egress

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
)

// A Policy says which URLs and commands a stream may reach. It is immutable
// once built and safe for concurrent use. A nil *Policy allows everything.
type Policy struct {
	anyURL     bool
	servers    []prefix
	anyCommand bool
	commands   []string
	urlFlag    string // how an operator allows a URL, for error messages
	cmdFlag    string // how an operator allows a command
}

// prefix is an allowed URL prefix: an origin and a path prefix that matches
// on segment boundaries.
type prefix struct {
	origin string // scheme://host:port, lower-case, default port explicit
	path   string // "" or "/a/b" without a trailing slash
	raw    string
}

// Options build a Policy.
type Options struct {
	// Servers are the URL prefixes a stream may connect to ("http://host:port"
	// allows the whole origin, "https://host/api" that path and below). A
	// prefix with user info, a query or a fragment is refused.
	Servers []string
	// AnyServer allows every URL (Servers is then ignored).
	AnyServer bool
	// Commands are the executables a child-process stream may start, by base
	// name ("npx") or absolute path ("/usr/local/bin/server").
	Commands []string
	// AnyCommand allows every command.
	AnyCommand bool
	// ServerFlag and CommandFlag name how the operator widens the policy
	// (e.g. "--allow-server"); a refusal quotes them. Empty: generic words.
	ServerFlag, CommandFlag string
}

// New builds a Policy. A bad prefix is an error naming it.
func New(o Options) (*Policy, error) {
	p := &Policy{anyURL: o.AnyServer, anyCommand: o.AnyCommand, urlFlag: o.ServerFlag, cmdFlag: o.CommandFlag}
	if p.urlFlag == "" {
		p.urlFlag = "the egress policy's server list"
	}
	if p.cmdFlag == "" {
		p.cmdFlag = "the egress policy's command list"
	}
	for _, raw := range o.Servers {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		pr, err := parsePrefix(raw)
		if err != nil {
			return nil, fmt.Errorf("allowed server %q: %w", raw, err)
		}
		p.servers = append(p.servers, pr)
	}
	for _, c := range o.Commands {
		if c = strings.TrimSpace(c); c != "" {
			p.commands = append(p.commands, c)
		}
	}
	return p, nil
}

// WithOrigin returns a copy of p that also allows every URL on the origin
// of raw (an invalid raw changes nothing). A nil p stays nil: it allows
// everything already.
func (p *Policy) WithOrigin(raw string) *Policy {
	if p == nil {
		return nil
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return p
	}
	origin, err := originOf(u)
	if err != nil {
		return p
	}
	q := *p
	q.servers = append(append([]prefix(nil), p.servers...), prefix{origin: origin, raw: origin})
	return &q
}

// AllowAll returns the Policy of a trusted local program: every URL and
// every command.
func AllowAll() *Policy { return &Policy{anyURL: true, anyCommand: true} }

// A DeniedError is a refusal of the Policy: the URL or command it refused
// and how the operator could allow it.
type DeniedError struct {
	What   string // "server URL" or "command"
	Target string // the URL (without user info or query) or the command
	Flag   string // how to allow it
	Reason string // why it does not match, if more than "not allowed"
}

// Error says what was refused and how the operator allows it.
func (e *DeniedError) Error() string {
	msg := fmt.Sprintf("%s %s is not allowed by this host's egress policy", e.What, e.Target)
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	return msg + "; the operator allows it with " + e.Flag
}

// ErrDenied is wrapped by every *DeniedError, for errors.Is.
var ErrDenied = errors.New("egress denied")

// Is reports ErrDenied.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// CheckURL returns nil when a stream may connect to raw, else a *DeniedError
// naming the URL (without its user info and query) and the flag that would
// allow it. Only http and https URLs are ever allowed by prefix.
func (p *Policy) CheckURL(raw string) error {
	if p == nil || p.anyURL {
		return nil
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return &DeniedError{What: "server URL", Target: Redact(raw), Flag: p.urlFlag, Reason: "not an absolute URL"}
	}
	origin, err := originOf(u)
	if err != nil {
		return &DeniedError{What: "server URL", Target: Redact(raw), Flag: p.urlFlag, Reason: err.Error()}
	}
	if u.User != nil {
		return &DeniedError{What: "server URL", Target: Redact(raw), Flag: p.urlFlag, Reason: "URLs with user info are refused"}
	}
	path := cleanPath(u.EscapedPath())
	for _, pr := range p.servers {
		if pr.origin != origin {
			continue
		}
		if pr.path == "" || path == pr.path || strings.HasPrefix(path, pr.path+"/") {
			return nil
		}
	}
	return &DeniedError{What: "server URL", Target: Redact(raw), Flag: p.urlFlag}
}

// CheckCommand returns nil when a stream may start the executable cmd (a
// base name or a path) with the environment variables env set by the start
// call, else a *DeniedError. A command given as a bare name matches an
// allowed base name (it is looked up in the host's PATH); one given as a
// path must be absolute and either match an allowed absolute path exactly,
// or be where the host's PATH finds an allowed base name (so /tmp/x/npx is
// not npx). Under a policy that does not allow every command, env may not
// set the variables that decide which programs and libraries a child
// loads (PATH, LD_*, DYLD_*, NODE_OPTIONS, PYTHONPATH, ...): they would turn
// an allowed command into any command.
func (p *Policy) CheckCommand(cmd string, env []string) error {
	if p == nil || p.anyCommand {
		return nil
	}
	cmd = strings.TrimSpace(cmd)
	if cmd == "" {
		return &DeniedError{What: "command", Target: `""`, Flag: p.cmdFlag, Reason: "empty"}
	}
	for _, name := range env {
		if loaderVariable(name) {
			return &DeniedError{What: "command", Target: cmd, Flag: p.cmdFlag + " (and by setting " + name + " itself)",
				Reason: ":env may not set " + name + ", which decides what the program runs"}
		}
	}
	for _, a := range p.commands {
		if filepath.IsAbs(a) {
			if filepath.IsAbs(cmd) && filepath.Clean(cmd) == filepath.Clean(a) {
				return nil
			}
			continue
		}
		if cmd == a {
			return nil
		}
		if filepath.IsAbs(cmd) && filepath.Base(cmd) == a {
			if found, err := exec.LookPath(a); err == nil && filepath.Clean(found) == filepath.Clean(cmd) {
				return nil
			}
		}
	}
	return &DeniedError{What: "command", Target: cmd, Flag: p.cmdFlag}
}

// loaderVariable reports whether an environment variable decides which
// programs, libraries or startup code a process runs.
func loaderVariable(name string) bool {
	u := strings.ToUpper(name)
	switch u {
	case "PATH", "NODE_OPTIONS", "NODE_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "BASH_ENV", "ENV",
		"PERL5OPT", "PERL5LIB", "RUBYOPT", "RUBYLIB", "GCONV_PATH", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS":
		return true
	}
	return strings.HasPrefix(u, "LD_") || strings.HasPrefix(u, "DYLD_")
}

// Allowed describes the policy for docs and errors: the allowed prefixes,
// "any" when every URL is allowed.
func (p *Policy) Allowed() []string {
	if p == nil || p.anyURL {
		return []string{"any"}
	}
	out := make([]string, len(p.servers))
	for i, pr := range p.servers {
		out[i] = pr.raw
	}
	return out
}

func parsePrefix(raw string) (prefix, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return prefix{}, err
	}
	if u.Host == "" {
		return prefix{}, errors.New("not an absolute http(s) URL")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return prefix{}, errors.New("a prefix has no user info, query or fragment")
	}
	origin, err := originOf(u)
	if err != nil {
		return prefix{}, err
	}
	return prefix{origin: origin, path: cleanPath(u.EscapedPath()), raw: raw}, nil
}

// cleanPath removes a trailing slash and resolves dot segments, so that
// "/a/../b" cannot pass for "/a".
func cleanPath(p string) string {
	if p == "" || p == "/" {
		return ""
	}
	c := strings.TrimSuffix(pathClean(p), "/")
	if c == "/" || c == "." {
		return ""
	}
	return c
}

func pathClean(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return filepath.ToSlash(filepath.Clean(p))
}

// Origin returns the origin of raw: "scheme://host:port" in lower case with
// the default port written out; an error for anything but an absolute http
// or https URL.
func Origin(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", err
	}
	return originOf(u)
}

func originOf(u *url.URL) (string, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", errors.New("no host")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// Redact returns raw without user info and with any query replaced, for
// errors and logs.
func Redact(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "<invalid url>"
	}
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "redacted"
	}
	return u.String()
}

// A Credential is the operator's auth header and the origin it belongs to.
// It is sent only to that origin: never to a URL a program or client names
// on another origin, and never across a redirect that leaves it. The zero
// Credential carries nothing.
type Credential struct {
	origin string
	header http.Header
}

// NewCredential binds header to the origin of serverURL. An empty header,
// or a serverURL that is not an http(s) URL, gives the zero Credential.
func NewCredential(serverURL string, header http.Header) Credential {
	if len(header) == 0 {
		return Credential{}
	}
	origin, err := Origin(serverURL)
	if err != nil {
		return Credential{}
	}
	return Credential{origin: origin, header: header.Clone()}
}

// HeaderFor returns a copy of the credential's header when target has its
// origin, else an empty header. The result is the caller's.
func (c Credential) HeaderFor(target string) http.Header {
	if c.header == nil {
		return http.Header{}
	}
	if o, err := Origin(target); err != nil || o != c.origin {
		return http.Header{}
	}
	return c.header.Clone()
}

// names returns the credential's header names.
func (c Credential) names() []string {
	out := make([]string, 0, len(c.header))
	for k := range c.header {
		out = append(out, k)
	}
	return out
}
