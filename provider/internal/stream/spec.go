package stream

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
func (s *Stream) spec() transport.Spec {
	sp := transport.Spec{
		StreamID:      s.ID,
		Endpoint:      s.Def.Endpoint,
		Config:        s.Def.Tconf,
		RetryAttempts: s.Env.RetryAttempts,
		MaxEventBytes: transport.DefaultMaxEventBytes,
		IdleTimeout:   s.idleTimeout(),
		Logger:        s.Env.TransportLog,
		Resumed:       s.Recovered,
		Stale:         s.Stale,
	}
	if s.Def.Config != nil {
		if b, err := rtfs.ToJSON(s.Def.Config); err == nil {
			sp.Arguments = b
		}
	}
	if s.Def.Kind.Target == transport.TargetURL {
		sp.HTTP = transport.HTTP{
			ServerURL: s.Def.ServerURL,
			URL:       s.Def.Dial,
			Header:    s.Env.Cred.HeaderFor(s.Def.Dial),
			Client: egress.Client(egress.ClientOptions{
				Base:        s.Env.Base,
				Policy:      s.Env.Egress,
				Credential:  s.Env.Cred,
				IdleTimeout: s.idleTimeout(),
			}),
		}
		if s.Def.Config != nil {
			sp.HTTP.Query = queryOf(s.Def.Config)
		}
	}
	return sp
}

// IdleTimeout is the stream's idle timeout, 0 for none.
func (s *Stream) idleTimeout() time.Duration {
	d := s.Def.Idle
	if d == 0 {
		d = s.Env.IdleTimeout
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

// SourceComesBack reports whether the stream's source comes back when the
// process that runs it ends and the stream is resumed later
// (Provider.SourceComesBack).
func (s *Stream) SourceComesBack() bool {
	s.Mu.Lock()
	t, keys := s.Def.Kind.Transport, s.Def.Keys
	s.Mu.Unlock()
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

// Target is the URL that chooses a stream's transport when the start call
// names none: its endpoint when that is a URL of its own, else its server
// URL.
func (d *Definition) Target() string {
	if IsAbsolute(d.Endpoint) {
		return d.Endpoint
	}
	return d.ServerURL
}

// DialURL is the URL a stream of a TargetURL transport dials, classified
// by egress: the endpoint, absolute or under the server URL, for a
// transport whose endpoint is its URL (raw SSE); else the server URL. The
// error names the start key that gave the URL.
func (d *Definition) DialURL() (*egress.URL, error) {
	if d.Kind.URLEndpoint {
		u, err := egress.Endpoint(d.ServerURL, d.Endpoint)
		if err != nil && egress.IsURL(d.Endpoint) {
			return nil, &KeyError{"endpoint", err}
		}
		if err != nil {
			return nil, &KeyError{"server-url", err}
		}
		return u, nil
	}
	u, err := egress.Parse(d.ServerURL)
	if err != nil {
		return nil, &KeyError{"server-url", err}
	}
	return u, nil
}

// IsAbsolute reports whether an endpoint is a URL of its own rather than a
// path under the server URL (or a tool name): an http(s) URL as
// egress.IsURL reads it, or a mock: URL, the scheme in any case.
func IsAbsolute(s string) bool {
	return egress.IsURL(s) || len(s) >= 5 && strings.EqualFold(s[:5], "mock:")
}
