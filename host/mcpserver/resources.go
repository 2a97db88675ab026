package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rtfshost/rtfshost/provider"
)

// Streams as MCP resources: rtfs://streams, the list of the streams (the
// summary mcp.stream.inspect gives without a stream-id: in a cluster every
// host's, a page at a time, the pages after the first at
// rtfs://streams?cursor=...), and
// rtfs://streams/{id}, one stream's snapshot (what mcp.stream.inspect
// gives for it), both as JSON. go-sdk serves resources/list,
// resources/templates/list and resources/read from what addResources
// registers, and resources/subscribe (or, under 2026-07-28, the
// resourceSubscriptions of subscriptions/listen) through the handlers
// below: a subscription to a stream's URI watches the stream through the
// provider's subscription (a Pending one, so a stream that has not started
// yet can be watched, with SubscribeOptions.Changes), and each change of
// its snapshot marks the URI changed; one goroutine sends
// notifications/resources/updated for it, at most one per URI per
// Options.ResourceInterval.

// The resources' URIs.
const (
	streamsURI      = "rtfs://streams"
	streamURIPrefix = streamsURI + "/"
	streamTemplate  = streamURIPrefix + "{id}"
	// streamsPageTemplate is a page of the list after the first:
	// rtfs://streams?cursor=C, C the next-cursor of the page before.
	streamsPageTemplate = streamsURI + "{?cursor}"
)

// DefaultResourceInterval is Options.ResourceInterval when zero.
const DefaultResourceInterval = time.Second

// Bounds on what subscribers hold: the length of a subscribed URI, the
// subscriptions of one session, and the streams watched for all of them.
// The subscriptions of all sessions together are bounded by
// Options.MaxSubscriptions.
const (
	maxResourceURI          = 1024
	maxSessionSubscriptions = 256
	maxWatchedStreams       = 4096
)

// DefaultMaxSubscriptions is Options.MaxSubscriptions when zero.
const DefaultMaxSubscriptions = 4096

// codeResourceNotFound is the not-found error of a resource before
// 2026-07-28, which uses -32602 (invalid params) instead.
const codeResourceNotFound = -32002

// addResources registers the resources and the template with go-sdk.
func (s *Server) addResources() {
	s.mcp.AddResource(&mcp.Resource{
		URI:         streamsURI,
		Name:        "streams",
		Title:       "The streams",
		Description: "The streams (in a cluster, of every host), a page at a time in stream-id order, as mcp.stream.inspect without a stream-id returns them: {total, streams: [...], next-cursor, ...}; the next page is rtfs://streams?cursor=<next-cursor>.",
		MIMEType:    "application/json",
	}, s.readStreams)
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: streamsPageTemplate,
		Name:        "streams-page",
		Title:       "A page of the streams",
		Description: "A page of the list of rtfs://streams after the first: cursor is the next-cursor of the page before.",
		MIMEType:    "application/json",
	}, s.readStreams)
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: streamTemplate,
		Name:        "stream",
		Title:       "A stream",
		Description: "One stream's snapshot, as mcp.stream.inspect returns it: status, stats, queue, current and initial state, last output, result, cursor. Subscribe to it for notifications/resources/updated when it changes.",
		MIMEType:    "application/json",
	}, s.readStream)
}

// readStreams serves resources/read of rtfs://streams, the first page of
// the streams (in a cluster, those of every host), and of
// rtfs://streams?cursor=C, the page after the one whose next-cursor is C.
// A page that is not the last has next-cursor.
func (s *Server) readStreams(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	u, err := url.Parse(uri)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	sum, err := s.prov.SummaryPage(ctx, provider.ListOptions{Cursor: u.Query().Get("cursor")})
	if errors.Is(err, provider.ErrBadCursor) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", uri, err)
	}
	return jsonResource(uri, shownJSON(sum, s.opts.Limits.OutputLimit(), "the streams' summary")), nil
}

// readStream serves resources/read of rtfs://streams/{id}: an unknown
// stream is go-sdk's not-found error, made the revision's by
// resourceNotFound.
func (s *Server) readStream(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := streamOfURI(uri)
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	in, err := s.prov.Info(id, provider.InspectOptions{})
	if errors.Is(err, provider.ErrNoStream) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", uri, err)
	}
	return jsonResource(uri, in.JSON()), nil
}

// jsonResource is the result of a read of uri whose contents are the JSON
// b: never cached (ttlMs 0, a stream changes at any time), and private to
// the authorization that read it.
func jsonResource(uri string, b json.RawMessage) *mcp.ReadResourceResult {
	return &mcp.ReadResourceResult{
		Cacheable: mcp.Cacheable{TTLMs: 0, CacheScope: "private"},
		Contents:  []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}},
	}
}

// resourceNotFound is a receiving middleware that gives a resources/read
// of an unknown resource the not-found error of its revision: go-sdk
// answers -32602 (2026-07-28's) for a URI no resource or template matches,
// and readStream does for an unknown stream; revisions before 2026-07-28
// say -32002. The URI stays in the error's data. A URI longer than
// checkResourceURI allows is refused first, with -32602 in every revision
// and without the URI.
func resourceNotFound(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		read, ok := req.(*mcp.ReadResourceRequest)
		if ok && read.Params != nil {
			if err := checkResourceURI("resources/read", read.Params.URI); err != nil {
				return nil, err
			}
		}
		res, err := next(ctx, method, req)
		var rpcErr *jsonrpc.Error
		if ok && errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeInvalidParams && revisionOf(read) < sessionlessVersion {
			return res, &jsonrpc.Error{Code: codeResourceNotFound, Message: rpcErr.Message, Data: rpcErr.Data}
		}
		return res, err
	}
}

// revisionOf returns the protocol revision of a request: its
// MCP-Protocol-Version header, else the one its session negotiated, else
// 2025-03-26 (the revision a request without one is taken to be).
func revisionOf(req *mcp.ReadResourceRequest) string {
	if req.Extra != nil {
		if v := req.Extra.Header.Get(headerProtocolVersion); v != "" {
			return v
		}
	}
	if req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil && p.ProtocolVersion != "" {
			return p.ProtocolVersion
		}
	}
	return "2025-03-26"
}

// checkResourceURI refuses, with -32602 (invalid params), a URI longer
// than maxResourceURI or naming a stream id longer than
// provider.MaxStreamIDLength: the server never holds or echoes one.
func checkResourceURI(method, uri string) error {
	if len(uri) > maxResourceURI {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: the URI is %d bytes, longer than the maximum of %d", method, len(uri), maxResourceURI)}
	}
	if id, ok := streamOfURI(uri); ok && len(id) > provider.MaxStreamIDLength {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: the stream id is %d bytes, longer than the maximum of %d", method, len(id), provider.MaxStreamIDLength)}
	}
	return nil
}

// streamOfURI returns the stream id of rtfs://streams/{id}.
func streamOfURI(uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, streamURIPrefix)
	if !ok || rest == "" || strings.ContainsAny(rest, "/?#") {
		return "", false
	}
	id, err := url.PathUnescape(rest)
	return id, err == nil && id != ""
}

// streamURI is the URI of stream id.
func streamURI(id string) string { return streamURIPrefix + url.PathEscape(id) }

// resourceWatch is the Server's resource subscriptions: which session
// subscribed to what, the streams watched for them, and the URIs changed
// and not yet notified. Its methods are safe for concurrent use.
type resourceWatch struct {
	s        *Server
	interval time.Duration
	wake     chan struct{} // buffered 1: a URI changed

	// mu guards the subscriptions. It is held while the provider's
	// subscriptions are made and closed, which may wait for a Receive in
	// flight: changed takes only dmu.
	mu       sync.Mutex
	sessions map[*mcp.ServerSession]map[string]bool // the URIs each session subscribed to
	total    int                                    // the subscriptions of all sessions
	released map[*mcp.ServerSession]bool            // the sessions whose release runs
	max      int                                    // the most total may be (Options.MaxSubscriptions)
	streams  map[string]*watchedStream              // by stream id
	started  bool                                   // the notifier runs

	// sdk is go-sdk's own method handler (keepHandler), through which a
	// session that ended has its subscriptions removed from go-sdk's
	// table too: go-sdk forgets the session but keeps each URI it
	// subscribed to as a key.
	sdk mcp.MethodHandler

	dmu   sync.Mutex           // after mu
	dirty map[string]bool      // stream ids changed since their last notification
	last  map[string]time.Time // when each stream's URI was last notified
}

// A watchedStream is a stream some session subscribed to: the provider's
// subscription to it and how many session subscriptions hold it.
type watchedStream struct {
	sub  *provider.Subscription
	refs int
}

func newResourceWatch(s *Server, interval time.Duration, max int) *resourceWatch {
	return &resourceWatch{s: s, interval: interval, max: max, wake: make(chan struct{}, 1),
		sessions: map[*mcp.ServerSession]map[string]bool{}, released: map[*mcp.ServerSession]bool{},
		streams: map[string]*watchedStream{},
		dirty:   map[string]bool{}, last: map[string]time.Time{}}
}

// keepHandler is the innermost receiving middleware: it keeps go-sdk's
// own handler for release.
func (rw *resourceWatch) keepHandler(next mcp.MethodHandler) mcp.MethodHandler {
	rw.sdk = next
	return next
}

// subscribe is go-sdk's SubscribeHandler, for resources/subscribe and the
// resourceSubscriptions of subscriptions/listen. Any absolute URI up to
// maxResourceURI bytes may be subscribed to (the spec defines no error,
// and a stream's URI may be subscribed to before the stream starts); only
// a stream's URI is ever notified. A session's first subscription starts
// its release, which drops them all when the session ends.
func (rw *resourceWatch) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	if err := checkResourceURI("resources/subscribe", uri); err != nil {
		return err
	}
	if u, err := url.Parse(uri); err != nil || u.Scheme == "" {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("resources/subscribe: %q is not an absolute URI (this server's resources are %s and %s)", uri, streamsURI, streamTemplate)}
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.pruneLocked()
	subs := rw.sessions[req.Session]
	if subs[uri] {
		return nil
	}
	if len(subs) >= maxSessionSubscriptions {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("resources/subscribe: this session has %d subscriptions, the most this server allows; unsubscribe from one first", len(subs))}
	}
	if rw.total >= rw.max {
		rw.s.opts.Observer.CountLimit("subscriptions")
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("resources/subscribe: the server holds %d subscriptions, the most it allows (rtfshost serve --max-subscriptions); try again later", rw.total)}
	}
	if !rw.released[req.Session] {
		// The session's release, held in calls (Close ends the sessions
		// and waits for calls).
		if !rw.s.hold() {
			return errors.New("resources/subscribe: the MCP server is shutting down")
		}
		rw.released[req.Session] = true
		go rw.release(req.Session)
	}
	if id, ok := streamOfURI(uri); ok {
		if err := rw.watchLocked(id); err != nil {
			return err
		}
	}
	if subs == nil {
		subs = map[string]bool{}
		rw.sessions[req.Session] = subs
	}
	subs[uri] = true
	rw.total++
	return nil
}

// release waits for the end of session and drops every subscription it
// still holds, here and in go-sdk's table. It is started by the session's
// first subscription and counted in the Server's calls.
func (rw *resourceWatch) release(session *mcp.ServerSession) {
	defer rw.s.calls.Done()
	_ = session.Wait()
	rw.mu.Lock()
	var uris []string
	for uri := range rw.sessions[session] {
		uris = append(uris, uri)
		rw.dropLocked(session, uri)
	}
	delete(rw.released, session)
	sdk := rw.sdk
	rw.mu.Unlock()
	if sdk == nil {
		return
	}
	for _, uri := range uris {
		_, _ = sdk(context.Background(), "resources/unsubscribe", &mcp.UnsubscribeRequest{Session: session, Params: &mcp.UnsubscribeParams{URI: uri}})
	}
}

// unsubscribe is go-sdk's UnsubscribeHandler.
func (rw *resourceWatch) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.dropLocked(req.Session, req.Params.URI)
	return nil
}

// dropLocked removes the subscription of session to uri.
func (rw *resourceWatch) dropLocked(session *mcp.ServerSession, uri string) {
	subs := rw.sessions[session]
	if !subs[uri] {
		return
	}
	delete(subs, uri)
	rw.total--
	if len(subs) == 0 {
		delete(rw.sessions, session)
	}
	if id, ok := streamOfURI(uri); ok {
		rw.unwatchLocked(id)
	}
}

// pruneLocked drops the subscriptions of sessions that have ended without
// unsubscribing (go-sdk forgets them without telling the handler).
func (rw *resourceWatch) pruneLocked() {
	if len(rw.sessions) == 0 {
		return
	}
	live := map[*mcp.ServerSession]bool{}
	for ss := range rw.s.mcp.Sessions() {
		live[ss] = true
	}
	for ss, subs := range rw.sessions {
		if live[ss] {
			continue
		}
		for uri := range subs {
			rw.dropLocked(ss, uri)
		}
	}
}

// watchLocked adds a reference to the watch of stream id, subscribing to
// the stream (Pending: it may start later) when it is the first.
func (rw *resourceWatch) watchLocked(id string) error {
	if w := rw.streams[id]; w != nil {
		w.refs++
		return nil
	}
	rw.s.mu.Lock()
	closed := rw.s.closed
	rw.s.mu.Unlock()
	if closed {
		return errors.New("resources/subscribe: the MCP server is shutting down")
	}
	if len(rw.streams) >= maxWatchedStreams {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("resources/subscribe: %d streams are watched already, the most this server allows", len(rw.streams))}
	}
	sub, err := rw.s.prov.Subscribe(id, provider.SubscribeOptions{Pending: true, Changes: true,
		Receive: func(provider.Event) { rw.changed(id) }})
	if err != nil {
		return fmt.Errorf("watching stream %s: %w", id, err)
	}
	if !rw.started {
		// Counted in calls only while the Server is open, so that Close,
		// which waits for them, never races this Add.
		rw.s.mu.Lock()
		closed := rw.s.closed
		if !closed {
			rw.s.calls.Add(1)
		}
		rw.s.mu.Unlock()
		if closed {
			sub.Close()
			return errors.New("resources/subscribe: the MCP server is shutting down")
		}
		rw.started = true
		go rw.notify()
	}
	rw.streams[id] = &watchedStream{sub: sub, refs: 1}
	return nil
}

// unwatchLocked drops a reference to the watch of stream id.
func (rw *resourceWatch) unwatchLocked(id string) {
	w := rw.streams[id]
	if w == nil {
		return
	}
	if w.refs--; w.refs > 0 {
		return
	}
	delete(rw.streams, id)
	w.sub.Close()
	rw.dmu.Lock()
	delete(rw.dirty, id)
	delete(rw.last, id)
	rw.dmu.Unlock()
}

// changed marks stream id changed. It runs on the stream's goroutine (the
// provider's Receive), so it only records and wakes the notifier.
func (rw *resourceWatch) changed(id string) {
	rw.dmu.Lock()
	rw.dirty[id] = true
	rw.dmu.Unlock()
	select {
	case rw.wake <- struct{}{}:
	default:
	}
}

// notify is the notifier: it sends notifications/resources/updated for
// each changed stream's URI, at once when the URI was not notified within
// the interval, else when the interval has passed (the changes in between
// become one notification). It runs until the Server closes.
func (rw *resourceWatch) notify() {
	defer rw.s.calls.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-rw.s.ctx.Done():
			return
		case <-rw.wake:
		case <-timer.C:
		}
		due, next := rw.due(time.Now())
		for _, id := range due {
			if err := rw.s.mcp.ResourceUpdated(rw.s.ctx, &mcp.ResourceUpdatedNotificationParams{URI: streamURI(id)}); err != nil {
				rw.s.log.Debug("resource update not sent", "stream", id, "err", err)
			}
		}
		timer.Stop()
		if next > 0 {
			timer.Reset(next)
		}
	}
}

// due takes the changed streams whose interval has passed at now, and
// returns them with the time until the next one's (0: none waits).
func (rw *resourceWatch) due(now time.Time) ([]string, time.Duration) {
	rw.dmu.Lock()
	defer rw.dmu.Unlock()
	var ids []string
	var next time.Duration
	for id := range rw.dirty {
		if wait := rw.last[id].Add(rw.interval).Sub(now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		delete(rw.dirty, id)
		rw.last[id] = now
		ids = append(ids, id)
	}
	return ids, next
}

// close ends the provider's subscriptions of every watched stream.
func (rw *resourceWatch) close() {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	for id, w := range rw.streams {
		w.sub.Close()
		delete(rw.streams, id)
	}
}
