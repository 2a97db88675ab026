package sse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v4"

	"github.com/rtfshost/rtfshost/transport"
)

// The retry policy: 250 ms, doubling, capped at 5 s, no jitter.
const (
	initialDelay = 250 * time.Millisecond
	maxDelay     = 5 * time.Second
)

// session is the state of one Run call. It is used by one goroutine only.
type session struct {
	spec       transport.Spec
	url        string // the request URL
	shown      string // the URL without password and query values, for errors and logs
	client     *http.Client
	release    func() // closes the connections of a client the session made
	sink       transport.Sink
	clk        clock
	rd         *eventReader
	pos        position      // the stream's position: last event id and id-less count
	lastName   string        // the last event name seen, reused to avoid allocating
	retryAfter time.Duration // a Retry-After from the last response, 0 if none
	attempts   int
}

func newSession(spec transport.Spec, cursor string, sink transport.Sink, clk clock) (*session, error) {
	if sink == nil {
		return nil, configError(spec, "the sink is nil")
	}
	if spec.RetryAttempts < 0 {
		return nil, configError(spec, "RetryAttempts is %d; want 0 (default %d) or more", spec.RetryAttempts, transport.DefaultRetryAttempts)
	}
	if spec.MaxEventBytes < 0 {
		return nil, configError(spec, "MaxEventBytes is %d; want 0 (default %d) or more", spec.MaxEventBytes, transport.DefaultMaxEventBytes)
	}
	u, err := streamURL(spec)
	if err != nil {
		return nil, err
	}
	s := &session{
		spec:     spec,
		url:      u.String(),
		shown:    shownURL(u),
		client:   spec.Client,
		release:  func() {},
		sink:     sink,
		clk:      clk,
		pos:      parseCursor(cursor),
		attempts: spec.RetryAttempts,
	}
	if s.attempts == 0 {
		s.attempts = transport.DefaultRetryAttempts
	}
	limit := spec.MaxEventBytes
	if limit == 0 {
		limit = transport.DefaultMaxEventBytes
	}
	s.rd = newEventReader(limit, readBufSize)
	if s.client == nil {
		s.client, s.release = ownClient()
	}
	return s, nil
}

func (s *session) close() { s.release() }

// newPolicy returns the backoff for one Run: the delays of a failure streak are
// 250ms, 500ms, 1s, 2s, 4s, 5s, 5s, ... and NextBackOff returns backoff.Stop
// after n of them. Reset starts a new streak.
func newPolicy(n int) backoff.BackOff {
	exp := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(initialDelay),
		backoff.WithMultiplier(2),
		backoff.WithMaxInterval(maxDelay),
		backoff.WithRandomizationFactor(0),
		backoff.WithMaxElapsedTime(0),
	)
	return backoff.WithMaxRetries(exp, uint64(n))
}

// run is the reconnect loop.
func (s *session) run(ctx context.Context) error {
	policy := newPolicy(s.attempts)
	failures := 0
	for {
		progressed, err := s.connect(ctx)
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		var te *transport.Error
		if !errors.As(err, &te) || te.Permanent {
			return unwrapSink(err)
		}
		if progressed {
			policy.Reset()
			failures = 0
		}
		delay := policy.NextBackOff()
		if delay == backoff.Stop {
			return s.giveUp(te, failures)
		}
		failures++
		delay = s.delay(delay)
		s.notify(failures, delay, err)
		if err := s.sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// delay picks the wait before the next attempt: a Retry-After from the last
// response, else the server's retry field, else the policy's delay.
func (s *session) delay(policy time.Duration) time.Duration {
	if s.retryAfter > 0 {
		d := s.retryAfter
		s.retryAfter = 0
		return d
	}
	if s.rd.retry >= 0 {
		return time.Duration(s.rd.retry) * time.Millisecond
	}
	return policy
}

func (s *session) notify(attempt int, delay time.Duration, cause error) {
	if obs, ok := s.sink.(transport.ReconnectObserver); ok {
		obs.Reconnecting(attempt, delay, cause)
	}
	// A reconnect is the policy working, not a fault: Info. A failure for good
	// comes back from Run as the one error to report.
	if s.spec.Logger != nil {
		s.spec.Logger.LogAttrs(context.Background(), slog.LevelInfo, "sse: reconnecting",
			slog.String("stream", s.spec.StreamID), slog.Int("attempt", attempt),
			slog.Duration("delay", delay), slog.String("cause", cause.Error()))
	}
}

func (s *session) sleep(ctx context.Context, d time.Duration) error {
	c, stop := s.clk.after(d)
	defer stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c:
		return nil
	}
}

func (s *session) giveUp(last *transport.Error, retries int) error {
	e := *last
	e.Err = fmt.Errorf("%w (gave up after %d retries)", last.Err, retries)
	return &e
}

// fail builds the *transport.Error of one failed attempt.
func (s *session) fail(op string, status int, permanent bool, err error) error {
	return &transport.Error{StreamID: s.spec.StreamID, Op: op, Status: status, Permanent: permanent, Err: err}
}

// connect makes one attempt: it connects from s.pos and streams until the
// terminal event (nil), a failure, or a sink error. progressed reports whether
// a chunk was delivered.
func (s *session) connect(ctx context.Context) (progressed bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return false, s.fail("connect", 0, true, fmt.Errorf("GET %s: %w", s.shown, err))
	}
	s.header(req)
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error // it holds the whole URL: report ours instead
		if errors.As(err, &ue) {
			err = fmt.Errorf("GET %s: %w", s.shown, ue.Err)
		}
		return false, s.fail("connect", 0, false, err)
	}
	defer resp.Body.Close()
	if err := s.check(resp); err != nil {
		return false, err
	}
	s.rd.reset(resp.Body)
	return s.stream(ctx)
}

func (s *session) header(req *http.Request) {
	h := s.spec.Header.Clone() // the Spec is the caller's and read-only
	if h == nil {
		h = make(http.Header, 3)
	}
	req.Header = h
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if s.pos.base != "" {
		req.Header.Set("Last-Event-ID", s.pos.base)
	}
}

// check classifies a response: 200 with text/event-stream is good; 5xx, 408
// and 429 are retried; anything else is permanent.
func (s *session) check(resp *http.Response) error {
	code := resp.StatusCode
	if code != http.StatusOK {
		retry := code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			s.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), s.clk.now())
		}
		return s.fail("connect", code, !retry, fmt.Errorf("GET %s: %s%s", s.shown, resp.Status, bodySnippet(resp.Body, s.secrets())))
	}
	ct := resp.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "text/event-stream" {
		return s.fail("connect", code, true, fmt.Errorf("GET %s: content type %q is not text/event-stream", s.shown, ct))
	}
	return nil
}

// secrets are the values an error must never show: the request's header
// values (the auth header) and its query values.
func (s *session) secrets() []string {
	var out []string
	for _, vs := range s.spec.Header {
		out = append(out, vs...)
	}
	if u, err := url.Parse(s.url); err == nil {
		for _, vs := range u.Query() {
			out = append(out, vs...)
		}
	}
	return out
}

// bodySnippet returns ": " and the first line of an error response's body
// (up to 300 bytes, printable text only): servers say there what went wrong,
// e.g. which endpoints they know. "" when the body says nothing readable. A
// body that repeats one of secrets (a server echoing the auth header) is
// withheld whole.
func bodySnippet(body io.Reader, secrets []string) string {
	b, _ := io.ReadAll(io.LimitReader(body, 300))
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return -1
		}
		return r
	}, line))
	if line == "" {
		return ""
	}
	for _, sec := range secrets {
		for _, part := range append([]string{sec}, strings.Fields(sec)...) {
			if len(part) >= 4 && strings.Contains(line, part) {
				return ": (the response body is not shown: it repeats a credential)"
			}
		}
	}
	return ": " + line
}

// parseRetryAfter parses a Retry-After header (delay seconds or an HTTP
// date); 0 means none or unusable (in the past, or over a day away).
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 || secs > int64(24*time.Hour/time.Second) {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) && t.Sub(now) <= 24*time.Hour {
		return t.Sub(now)
	}
	return 0
}

// stream reads events and delivers chunks until the terminal event or an
// error. The server resends what follows s.pos.base, so id-less chunks are
// counted afresh in cur and those delivered before are dropped; s.pos moves
// only past them, so a connection that fails inside the replayed part leaves
// the resume point where it was.
func (s *session) stream(ctx context.Context) (progressed bool, err error) {
	filter := newReplayFilter(s.pos)
	cur := position{base: s.pos.base}
	for {
		ev, err := s.rd.next()
		if err != nil {
			return progressed, s.readError(ctx, err)
		}
		if ev.hasID && (cur.k != 0 || string(ev.id) != cur.base) {
			cur = position{base: string(ev.id)}
		}
		if len(ev.data) == 0 {
			// Comments, retry-only blocks, priming events: not chunks, but an
			// id still moves the resume point.
			if ev.hasID && !filter.seen(cur) {
				s.pos = cur
			}
			continue
		}
		if !ev.hasID {
			cur.k++
		}
		if s.terminal(ev) {
			return progressed, nil
		}
		if filter.seen(cur) {
			continue
		}
		s.pos = cur
		c := transport.Chunk{Data: ev.data, Event: s.eventName(ev.name), ID: cur.cursor(), ReceivedAt: s.clk.now()}
		if err := s.sink.Deliver(ctx, c); err != nil {
			return progressed, sinkError{err}
		}
		progressed = true
	}
}

func (s *session) eventName(b []byte) string {
	if string(b) != s.lastName {
		s.lastName = string(b)
	}
	return s.lastName
}

// terminal reports whether ev is the end of the stream: an event named
// "status" whose data is a JSON object with "status":"complete".
func (s *session) terminal(ev *event) bool {
	if string(ev.name) != "status" {
		return false
	}
	var st struct {
		Status string `json:"status"`
	}
	return json.Unmarshal(ev.data, &st) == nil && st.Status == "complete"
}

func (s *session) readError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	where := fmt.Sprintf("GET %s: after cursor %q", s.shown, s.pos.cursor())
	if errTooLarge(err) {
		return s.fail("read", 0, true, fmt.Errorf("%s: %w", where, err))
	}
	if err == io.EOF {
		err = errors.New("stream ended before the terminal status event")
	}
	return s.fail("read", 0, false, fmt.Errorf("%s: %w", where, err))
}

// shownURL is u as errors and logs show it: without the password, and with
// the query's values replaced by "***", since a server URL's query may hold a
// key or a token.
func shownURL(u *url.URL) string {
	c := *u
	if c.RawQuery != "" {
		q := c.Query()
		for k := range q {
			q[k] = []string{"***"}
		}
		c.RawQuery = q.Encode()
	}
	return c.Redacted()
}
