// Package egress is the one place that decides where a stream may reach and
// what it may carry there. Parse is the one classifier of the URLs the host
// dials: it gives a URL in canonical form that every check and every
// request uses. A Policy lists the server URLs (by prefix), the commands a
// stream may use and the environment variables a start call may set for
// them; a Credential is the operator's auth header and the one origin it
// belongs to; Client assembles the *http.Client every network transport of
// a stream uses, which classifies every request it sends (redirects
// included) with Parse, sends the canonical form, checks it against the
// Policy, strips the Credential from any request off its origin, and ends
// a response that stays silent longer than the stream's idle timeout.
//
// The provider checks a stream's URL (and, for child-process transports,
// its command and :env) with the Policy when the stream starts or is
// recovered, and puts the Credential on a transport.Spec only when the URL
// the stream dials has the Credential's origin. `rtfshost serve` builds a
// restrictive Policy from --allow-server, --allow-command and --allow-env;
// `rtfshost run` allows every URL, command and variable but keeps the
// credential rule. docs/security.md has the threat model.
package egress

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
)

// A Policy says which URLs and commands a stream may reach, and which
// environment variables a start call may set for a command. It is
// immutable once built and safe for concurrent use. A nil *Policy allows
// everything.
type Policy struct {
	anyURL     bool
	servers    []prefix
	anyCommand bool
	commands   []string
	anyEnv     bool
	env        map[string]bool
	urlFlag    string // how an operator allows a URL, for error messages
	cmdFlag    string // how an operator allows a command
	envFlag    string // how an operator allows an environment variable
	anyFile    bool
	fileDirs   []string // cleaned absolute directories
}

// prefix is an allowed URL prefix: an origin and a path prefix that matches
// on segment boundaries, both in the form Parse gives.
type prefix struct {
	origin  string // scheme://host:port, the default port written out
	path    string // "" or "/a/b" as sent, without a trailing slash
	decoded string // the same fully decoded (URL.decoded)
	raw     string
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
	// Env are the names of the environment variables a start call's :env
	// may set for a child process (exact, case-sensitive names).
	Env []string
	// AnyEnv lets a start call set any environment variable.
	AnyEnv bool
	// FileDirs are the directories whose files a stream may read or
	// write (a :replay recording, a :record file), absolute.
	FileDirs []string
	// AnyFile lets a stream read and write any file.
	AnyFile bool
	// ServerFlag, CommandFlag and EnvFlag name how the operator widens the
	// policy (e.g. "--allow-server"); a refusal quotes them. Empty: generic
	// words.
	ServerFlag, CommandFlag, EnvFlag string
}

// New builds a Policy. A bad prefix is an error naming it.
func New(o Options) (*Policy, error) {
	p := &Policy{anyURL: o.AnyServer, anyCommand: o.AnyCommand, anyEnv: o.AnyEnv, anyFile: o.AnyFile,
		urlFlag: o.ServerFlag, cmdFlag: o.CommandFlag, envFlag: o.EnvFlag}
	for _, d := range o.FileDirs {
		if d = strings.TrimSpace(d); d == "" {
			continue
		}
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("allowed file directory %q: not an absolute path", d)
		}
		p.fileDirs = append(p.fileDirs, filepath.Clean(d))
	}
	if p.urlFlag == "" {
		p.urlFlag = "the egress policy's server list"
	}
	if p.cmdFlag == "" {
		p.cmdFlag = "the egress policy's command list"
	}
	if p.envFlag == "" {
		p.envFlag = "the egress policy's environment list"
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
	for _, name := range o.Env {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if strings.ContainsAny(name, "=\x00") {
			return nil, fmt.Errorf("allowed environment variable %q: a name has no '=' or NUL", name)
		}
		if p.env == nil {
			p.env = make(map[string]bool)
		}
		p.env[name] = true
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
	u, err := Parse(raw)
	if err != nil {
		return p
	}
	q := *p
	q.servers = append(append([]prefix(nil), p.servers...), prefix{origin: u.origin, raw: u.origin})
	return &q
}

// AllowAll returns the Policy of a trusted local program: every URL, every
// command and every environment variable.
func AllowAll() *Policy { return &Policy{anyURL: true, anyCommand: true, anyEnv: true} }

// A DeniedError is a refusal of the Policy: the URL, command or
// environment variable it refused and how the operator could allow it.
type DeniedError struct {
	What   string // "server URL", "command" or "environment variable"
	Target string // the URL (without user info or query), the command or the variable's name
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

// CheckURL is Check of Parse(raw); a raw that Parse refuses is refused
// with Parse's reason.
func (p *Policy) CheckURL(raw string) error {
	if p == nil || p.anyURL {
		return nil
	}
	u, err := Parse(raw)
	if err != nil {
		reason := err.Error()
		var ue *URLError
		if errors.As(err, &ue) {
			reason = ue.Reason
		}
		return &DeniedError{What: "server URL", Target: Redact(raw), Flag: p.urlFlag, Reason: reason}
	}
	return p.Check(u)
}

// Check returns nil when a stream may connect to u, else a *DeniedError
// naming u (without its user info and query) and the flag that would allow
// it. u must be on the origin of an allowed prefix and, when the prefix has
// a path, under that path on '/' boundaries both as sent and as a server
// that decodes every escape reads it (so "/ok/a%2F..%2F..%2Fx" is not under
// "/ok"). A URL with user info is refused.
func (p *Policy) Check(u *URL) error {
	if p == nil || p.anyURL {
		return nil
	}
	if u == nil {
		return &DeniedError{What: "server URL", Target: "(none)", Flag: p.urlFlag}
	}
	if u.HasUserInfo() {
		return &DeniedError{What: "server URL", Target: u.Redacted(), Flag: p.urlFlag, Reason: "URLs with user info are refused"}
	}
	var paths []string
	for _, pr := range p.servers {
		if pr.origin != u.origin {
			continue
		}
		if u.within(pr) {
			return nil
		}
		paths = append(paths, pr.path)
	}
	e := &DeniedError{What: "server URL", Target: u.Redacted(), Flag: p.urlFlag}
	if len(paths) > 0 {
		e.Reason = "its path is not under " + strings.Join(paths, " or ") + ", the allowed path on its origin"
	}
	return e
}

// CheckCommand returns nil when a stream may start the executable cmd (a
// base name or a path) with the environment variables env set by the start
// call, else a *DeniedError. A command given as a bare name matches an
// allowed base name (it is looked up in the host's PATH); one given as a
// path must be absolute and either match an allowed absolute path exactly,
// or be where the host's PATH finds an allowed base name (so /tmp/x/npx is
// not npx). Unless the policy allows any variable, env may set only the
// names the operator listed: a variable can turn an allowed program into
// any program (PATH, LD_PRELOAD, NODE_OPTIONS, PYTHONWARNINGS, BROWSER,
// GIT_CONFIG_*, ...), and no list of such variables is complete.
func (p *Policy) CheckCommand(cmd string, env []string) error {
	if p == nil {
		return nil
	}
	if err := p.checkExecutable(strings.TrimSpace(cmd)); err != nil {
		return err
	}
	if p.anyEnv {
		return nil
	}
	for _, name := range env {
		if !p.env[name] {
			return &DeniedError{What: "environment variable", Target: name, Flag: p.envFlag,
				Reason: "a start call's :env sets only the variables the operator allows"}
		}
	}
	return nil
}

// CheckFile reports whether a stream may read or write the file at path
// (a :replay recording, a :record file): a nil policy and one that allows
// any file do; otherwise path must be absolute and lie in one of the
// allowed directories once cleaned (symbolic links are not followed here:
// allow only directories whose contents the operator trusts).
func (p *Policy) CheckFile(path string) error {
	if p == nil || p.anyFile {
		return nil
	}
	deny := &DeniedError{What: "file", Target: path, Flag: "no flag of this command: files are for local runs (rtfshost run)",
		Reason: "a program run by this host may not read or write files"}
	if len(p.fileDirs) > 0 {
		deny.Flag, deny.Reason = "the egress policy's file directories", ""
	}
	if !filepath.IsAbs(path) {
		return deny
	}
	clean := filepath.Clean(path)
	for _, d := range p.fileDirs {
		if rel, err := filepath.Rel(d, clean); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && rel != "." {
			return nil
		}
	}
	return deny
}

func (p *Policy) checkExecutable(cmd string) error {
	if p.anyCommand {
		return nil
	}
	if cmd == "" {
		return &DeniedError{What: "command", Target: `""`, Flag: p.cmdFlag, Reason: "empty"}
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
	if strings.Contains(raw, "#") {
		return prefix{}, errors.New("a prefix has no fragment")
	}
	u, err := Parse(raw)
	if err != nil {
		return prefix{}, err
	}
	if u.HasUserInfo() || u.u.RawQuery != "" || u.u.ForceQuery {
		return prefix{}, errors.New("a prefix has no user info, query or fragment")
	}
	return prefix{origin: u.origin, path: strings.TrimRight(u.u.EscapedPath(), "/"), decoded: u.decoded, raw: raw}, nil
}

// Origin returns the origin of raw as Parse reads it: "scheme://host:port"
// with the default port written out; an error for anything Parse refuses.
func Origin(raw string) (string, error) {
	u, err := Parse(raw)
	if err != nil {
		return "", err
	}
	return u.origin, nil
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

// NewCredential binds header to the origin of serverURL as Parse reads it.
// An empty header, or a serverURL that Parse refuses, gives the zero
// Credential.
func NewCredential(serverURL string, header http.Header) Credential {
	if len(header) == 0 {
		return Credential{}
	}
	u, err := Parse(serverURL)
	if err != nil {
		return Credential{}
	}
	return Credential{origin: u.origin, header: header.Clone()}
}

// HeaderFor returns a copy of the credential's header when target (the URL
// a stream dials) has its origin, else an empty header. The result is the
// caller's.
func (c Credential) HeaderFor(target *URL) http.Header {
	if c.header == nil || target == nil || target.origin != c.origin {
		return http.Header{}
	}
	return c.header.Clone()
}
