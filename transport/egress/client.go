package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// maxRedirects bounds a chain of redirects, as net/http's default does.
const maxRedirects = 10

// ClientOptions configure the HTTP client of one stream.
type ClientOptions struct {
	// Base carries the requests; nil means http.DefaultTransport. The
	// caller owns it (and closes its idle connections).
	Base http.RoundTripper
	// Policy checks every request, redirects included; nil allows every
	// URL.
	Policy *Policy
	// Credential is stripped from any request off its origin.
	Credential Credential
	// IdleTimeout ends a request whose response sends no byte for this long
	// (waiting for the headers included) with an error wrapping ErrIdle;
	// zero or negative means no idle timeout.
	IdleTimeout time.Duration
}

// Client returns the *http.Client a stream's network transport uses. It has
// no total timeout (streams are long-lived). Every request it sends, the
// first and each redirect, is classified with FromURL and sent in that
// canonical form (the URL that was checked is the URL that is dialled); a
// URL that FromURL or the Policy refuses is not sent (the error wraps
// ErrDenied); a request off the Credential's origin loses the Credential's
// headers, whatever net/http would have forwarded; a chain of more than ten
// redirects is refused. The client is cheap (it shares Base's connections)
// and safe for concurrent use.
func Client(o ClientOptions) *http.Client {
	base := o.Base
	if base == nil {
		base = http.DefaultTransport
	}
	var rt http.RoundTripper = &guard{base: base, policy: o.Policy, cred: o.Credential}
	if o.IdleTimeout > 0 {
		rt = &idleTransport{base: rt, d: o.IdleTimeout}
	}
	return &http.Client{
		Transport: rt,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return nil
		},
	}
}

// guard is the round tripper of Client: it classifies, checks and
// rewrites each request before base sends it.
type guard struct {
	base   http.RoundTripper
	policy *Policy
	cred   Credential
}

// RoundTrip implements http.RoundTripper. It never changes req; it sends a
// copy when the canonical URL or the headers differ.
func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	refuse := func(err error) (*http.Response, error) {
		if req.Body != nil {
			req.Body.Close()
		}
		if req.Response != nil {
			return nil, fmt.Errorf("redirect refused: %w", err)
		}
		return nil, err
	}
	u, err := FromURL(req.URL)
	if err != nil {
		return refuse(err)
	}
	if err := g.policy.Check(u); err != nil {
		return refuse(err)
	}
	out := req
	if dial := u.URL(); dial.String() != req.URL.String() {
		out = req.Clone(req.Context())
		if req.Host == "" || req.Host == req.URL.Host {
			out.Host = dial.Host
		}
		out.URL = dial
	}
	if len(g.cred.header) > 0 && u.origin != g.cred.origin {
		for name := range g.cred.header {
			if _, ok := out.Header[http.CanonicalHeaderKey(name)]; !ok {
				continue
			}
			if out == req {
				out = req.Clone(req.Context())
			}
			out.Header.Del(name)
		}
	}
	return g.base.RoundTrip(out)
}

// Refused reports whether err is, or wraps, a refusal of this package: a
// URL that Parse refuses (*URLError) or that a Policy refuses (ErrDenied).
// Trying again cannot help.
func Refused(err error) bool {
	var ue *URLError
	return errors.Is(err, ErrDenied) || errors.As(err, &ue)
}

// NewTransport returns the base transport for streams: no total timeout,
// bounded dial, TLS handshake and response-header waits, a small idle pool.
// The caller owns it and calls CloseIdleConnections when done.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
	}
}

// ErrIdle is wrapped by the error of a response that stayed silent longer
// than the idle timeout.
var ErrIdle = errors.New("idle timeout")

// An IdleError reports a source that sent nothing for the idle timeout.
type IdleError struct{ Timeout time.Duration }

// Error names the idle timeout.
func (e *IdleError) Error() string {
	return fmt.Sprintf("idle timeout: the source sent nothing for %s (:idle-timeout-ms)", e.Timeout)
}

// Is reports ErrIdle.
func (e *IdleError) Is(target error) bool { return target == ErrIdle }

// idleTransport ends a request, and its response body, after d without a
// byte: it cancels the request's context and reports an *IdleError instead
// of the cancellation.
type idleTransport struct {
	base http.RoundTripper
	d    time.Duration
}

// RoundTrip implements http.RoundTripper.
func (t *idleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	w := &watchdog{cancel: cancel, d: t.d}
	w.timer = time.AfterFunc(t.d, w.fire)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		w.stop()
		if w.fired.Load() && req.Context().Err() == nil {
			return nil, &IdleError{Timeout: t.d}
		}
		return nil, err
	}
	// From here the watchdog runs only while the body is read: the time
	// the reader spends elsewhere (its queue full, its processor busy) is
	// not the source's silence.
	w.timer.Stop()
	resp.Body = &idleBody{rc: resp.Body, w: w, parent: req.Context()}
	return resp, nil
}

// watchdog cancels a request that made no progress for d.
type watchdog struct {
	timer  *time.Timer
	cancel context.CancelFunc
	d      time.Duration
	fired  atomic.Bool
}

func (w *watchdog) fire() {
	w.fired.Store(true)
	w.cancel()
}

func (w *watchdog) stop() {
	w.timer.Stop()
	w.cancel()
}

// idleBody is a response body whose watchdog runs while a Read waits for
// the source: it is armed when a Read starts and stopped when the Read
// returns, so a reader held back by backpressure between reads is never
// taken for a silent source.
type idleBody struct {
	rc     io.ReadCloser
	w      *watchdog
	parent context.Context
}

func (b *idleBody) Read(p []byte) (int, error) {
	if !b.w.fired.Load() {
		b.w.timer.Reset(b.w.d)
	}
	n, err := b.rc.Read(p)
	if !b.w.fired.Load() {
		b.w.timer.Stop()
	}
	if err != nil && err != io.EOF && b.w.fired.Load() && b.parent.Err() == nil {
		err = &IdleError{Timeout: b.w.d}
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.w.stop()
	return b.rc.Close()
}
