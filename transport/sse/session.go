package sse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rtfshost/rtfshost/transport"
	"github.com/rtfshost/rtfshost/transport/egress"
	"github.com/rtfshost/rtfshost/transport/internal/retry"
	"github.com/rtfshost/rtfshost/transport/internal/sseread"
)

// session is the state of one Run call. It is used by one goroutine only.
type session struct {
	spec       transport.Spec
	url        string // the request URL
	shown      string // the URL without password and query values, for errors and logs
	client     *http.Client
	release    func() // closes the connections of a client the session made
	sink       transport.Sink
	retry      *retry.Retrier
	clk        retry.Clock
	rd         *sseread.Reader
	pos        position      // the stream's position: last event id and id-less count
	lastName   string        // the last event name seen, reused to avoid allocating
	reads      uint64        // rd.Reads() when at was read
	ids        idStrings     // the strings of event ids
	at         time.Time     // when the read that brought the last event returned
	retryAfter time.Duration // a Retry-After from the last response, 0 if none
}

func newSession(spec transport.Spec, cursor string, sink transport.Sink, policy retry.Policy) (*session, error) {
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
		spec:    spec,
		url:     u.String(),
		shown:   shownURL(u),
		client:  spec.HTTP.Client,
		release: func() {},
		sink:    sink,
		pos:     parseCursor(cursor),
		rd:      sseread.New(spec.MaxEventBytes, 0),
	}
	s.retry = policy.Start("sse", &spec, sink)
	s.clk = s.retry.Clock()
	if s.client == nil {
		s.client, s.release = ownClient()
	}
	return s, nil
}

func (s *session) close() { s.release() }

// run is the reconnect loop.
func (s *session) run(ctx context.Context) error {
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
			s.retry.Reset()
		}
		if err := s.retry.Wait(ctx, te, s.override()); err != nil {
			return err
		}
	}
}

// override is the wait the server asked for: a Retry-After from the last
// response, else the stream's retry field; 0 leaves the policy's delay.
func (s *session) override() time.Duration {
	if s.retryAfter > 0 {
		d := s.retryAfter
		s.retryAfter = 0
		return d
	}
	d, _ := s.rd.Retry()
	return d
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
		// A URL the egress policy refuses (a redirect) stays refused.
		return false, s.fail("connect", 0, egress.Refused(err), err)
	}
	defer resp.Body.Close()
	if err := s.check(resp); err != nil {
		return false, err
	}
	s.rd.Reset(resp.Body)
	return s.stream(ctx)
}

func (s *session) header(req *http.Request) {
	h := s.spec.HTTP.Header.Clone() // the Spec is the caller's and read-only
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
			s.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), s.clk.Now())
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
	for _, vs := range s.spec.HTTP.Header {
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
		ev, err := s.rd.Next()
		if err != nil {
			return progressed, s.readError(ctx, err)
		}
		if ev.HasID && (cur.k != 0 || string(ev.ID) != cur.base) {
			cur = position{base: s.ids.of(ev.ID)}
		}
		if len(ev.Data) == 0 {
			// Comments, retry-only blocks, priming events: not chunks, but an
			// id still moves the resume point.
			if ev.HasID && !filter.seen(cur) {
				s.pos = cur
			}
			continue
		}
		if !ev.HasID {
			cur.k++
		}
		if s.terminal(ev) {
			return progressed, nil
		}
		if filter.seen(cur) {
			continue
		}
		s.pos = cur
		c := transport.Chunk{Data: ev.Data, Event: s.eventName(ev.Name), ID: cur.cursor(), ReceivedAt: s.receivedAt()}
		if err := s.sink.Deliver(ctx, c); err != nil {
			return progressed, sinkError{err}
		}
		progressed = true
	}
}

// receivedAt is when the event Next just returned was read from the
// connection: the clock is read once per read of the body, not per event,
// since every event a read completes arrived with it.
func (s *session) receivedAt() time.Time {
	if n := s.rd.Reads(); n != s.reads {
		s.reads, s.at = n, s.clk.Now()
	}
	return s.at
}

// idStrings makes the strings of event ids, cut from a block that a
// strings.Builder fills, so that a block of ids costs one allocation rather
// than one each. A string a Builder returns is never written again, and a
// full block is left to the ids cut from it: an id kept (a stream's cursor)
// keeps its block, at most idBlock bytes, alive.
type idStrings struct{ b strings.Builder }

// idBlock is the size of a block of ids; a longer id gets a string of its own.
const idBlock = 256

func (p *idStrings) of(id []byte) string {
	if len(id) == 0 || len(id) > idBlock/8 {
		return string(id)
	}
	if p.b.Cap()-p.b.Len() < len(id) {
		p.b = strings.Builder{}
		p.b.Grow(idBlock)
	}
	n := p.b.Len()
	p.b.Write(id)
	return p.b.String()[n:]
}

func (s *session) eventName(b []byte) string {
	if string(b) != s.lastName {
		s.lastName = string(b)
	}
	return s.lastName
}

// terminal reports whether ev is the end of the stream: an event named
// "status" whose data is a JSON object with "status":"complete".
func (s *session) terminal(ev *sseread.Event) bool {
	if string(ev.Name) != "status" {
		return false
	}
	var st struct {
		Status string `json:"status"`
	}
	return json.Unmarshal(ev.Data, &st) == nil && st.Status == "complete"
}

func (s *session) readError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	where := fmt.Sprintf("GET %s: after cursor %q", s.shown, s.pos.cursor())
	if errors.Is(err, transport.ErrEventTooLarge) {
		return s.fail("read", 0, true, fmt.Errorf("%s: %w", where, err))
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
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
