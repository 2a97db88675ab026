package provider

import (
	"strconv"
	"strings"
	"time"

	"github.com/rtfshost/rtfshost/rtfs"
	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
)

// spec builds the transport.Spec of s. It carries the auth header only when
// the stream's target has the header's origin (the configured server URL's),
// and an HTTP client that checks redirects against the egress policy, strips
// the header on a redirect that leaves that origin, and applies the idle
// timeout (which Spec.IdleTimeout carries for the other transports).
func (s *stream) spec() transport.Spec {
	sp := transport.Spec{
		StreamID:      s.id,
		Endpoint:      s.def.endpoint,
		Config:        s.def.tconf,
		RetryAttempts: s.env.retryAttempts,
		MaxEventBytes: transport.DefaultMaxEventBytes,
		IdleTimeout:   s.idleTimeout(),
		Logger:        s.env.transportLog,
		Resumed:       s.recovered,
		Stale:         s.stale,
	}
	if s.def.config != nil {
		if b, err := rtfs.ToJSON(s.def.config); err == nil {
			sp.Arguments = b
		}
	}
	if s.def.kind.Target == transport.TargetURL {
		sp.HTTP = transport.HTTP{
			ServerURL: s.def.serverURL,
			URL:       s.def.dial,
			Header:    s.env.cred.HeaderFor(s.def.dial),
			Client: egress.Client(egress.ClientOptions{
				Base:        s.env.base,
				Policy:      s.env.egress,
				Credential:  s.env.cred,
				IdleTimeout: s.idleTimeout(),
			}),
		}
		if s.def.config != nil {
			sp.HTTP.Query = queryOf(s.def.config)
		}
	}
	return sp
}

// idleTimeout is the stream's idle timeout, 0 for none.
func (s *stream) idleTimeout() time.Duration {
	d := s.def.idle
	if d == 0 {
		d = s.env.idleTimeout
	}
	return max(d, 0)
}

// queryOf renders :config as query parameters: strings as they are, keywords
// and symbols by name, numbers and booleans printed, nil left out, and
// collections as JSON.
func queryOf(m *rtfs.Map) map[string]string {
	q := make(map[string]string, m.Len())
	m.Range(func(k, v rtfs.Value) bool {
		key := rtfs.TextOf(k)
		switch v := v.(type) {
		case rtfs.NilType:
			return true
		case rtfs.String, rtfs.Keyword, rtfs.Symbol:
			q[key] = rtfs.TextOf(v)
		case rtfs.Int:
			q[key] = strconv.FormatInt(int64(v), 10)
		case rtfs.Float, rtfs.Bool:
			q[key] = v.String()
		default:
			if b, err := rtfs.ToJSON(v); err == nil {
				q[key] = string(b)
			} else {
				q[key] = rtfs.Excerpt(v, 4096)
			}
		}
		return true
	})
	return q
}

// sourceComesBack reports whether the stream's source comes back when the
// process that runs it ends and the stream is resumed later
// (Provider.SourceComesBack).
func (s *stream) sourceComesBack() bool {
	s.mu.Lock()
	t, keys := s.def.kind.Transport, s.def.keys
	s.mu.Unlock()
	if t == nil || replayable(t) {
		return true
	}
	restart, err := transport.ParseRestart(keys)
	return err == nil && restart
}

// replayable reports whether transport t can replay from a cursor.
func replayable(t transport.StreamTransport) bool {
	r, ok := t.(transport.Replayable)
	return t != nil && (!ok || r.Replayable())
}

// target is the URL that chooses a stream's transport when the start call
// names none: its endpoint when that is a URL of its own, else its server
// URL.
func (d *definition) target() string {
	if isAbsolute(d.endpoint) {
		return d.endpoint
	}
	return d.serverURL
}

// dialURL is the URL a stream of a TargetURL transport dials, classified
// by egress: the endpoint, absolute or under the server URL, for a
// transport whose endpoint is its URL (raw SSE); else the server URL. The
// error names the start key that gave the URL.
func (d *definition) dialURL() (*egress.URL, error) {
	if d.kind.URLEndpoint {
		u, err := egress.Endpoint(d.serverURL, d.endpoint)
		if err != nil && egress.IsURL(d.endpoint) {
			return nil, &keyError{"endpoint", err}
		}
		if err != nil {
			return nil, &keyError{"server-url", err}
		}
		return u, nil
	}
	u, err := egress.Parse(d.serverURL)
	if err != nil {
		return nil, &keyError{"server-url", err}
	}
	return u, nil
}

// isAbsolute reports whether an endpoint is a URL of its own rather than a
// path under the server URL (or a tool name): an http(s) URL as
// egress.IsURL reads it, or a mock: URL, the scheme in any case.
func isAbsolute(s string) bool {
	return egress.IsURL(s) || len(s) >= 5 && strings.EqualFold(s[:5], "mock:")
}
