package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/rtfshost/rtfshost/transport"
)

// discover asks the server for revision 2026-07-28 with server/discover,
// as go-sdk's client does before it falls back to initialize. ok reports
// that the server speaks 2026-07-28 (the run's protocol is then set); a nil
// error with ok false means it does not (a 4xx, a JSON-RPC error, a 500 or
// 501, an answer without a result, or a result whose supportedVersions lack
// 2026-07-28), and the caller initializes a session. A non-nil error is a
// transient failure (network, 408, 429, 502, 503, 504, a body that broke)
// to retry, or ctx's error.
//
// A server that refuses the version with -32022 (unsupported protocol
// version) is a 2026-07-28 server: the error's data lists what it
// supports. When 2026-07-28 is among them the request is sent again, once
// (the revision says a client retries with a version both support); when
// it is not, the server is asked for a session.
func (r *streamRun) discover(ctx context.Context) (ok bool, err error) {
	r.session, r.proto = "", version20260728 // the request's headers and _meta
	defer func() {
		if !ok {
			r.proto = ""
		}
	}()
	for attempt := 0; ; attempt++ {
		msg, err := r.discoverOnce(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			if supported, refused := unsupportedVersion(err); refused {
				if attempt == 0 && slices.Contains(supported, version20260728) {
					r.debug("server/discover: the server refused the version but lists it; asking again", "supported", supported)
					continue
				}
				r.debug("server/discover: the server supports none of our modern versions; initializing a session", "supported", supported)
				return false, nil
			}
			if s := statusOf(err); resumable(err) && s != http.StatusInternalServerError && s != http.StatusNotImplemented {
				return false, err
			}
			r.debug("server/discover refused; initializing a session", "err", err)
			return false, nil
		}
		if msg == nil {
			return false, nil
		}
		var res struct {
			SupportedVersions []string `json:"supportedVersions"`
		}
		if err := json.Unmarshal(msg.Result, &res); err != nil || !slices.Contains(res.SupportedVersions, version20260728) {
			r.debug("the server does not offer 2026-07-28; initializing a session", "versions", res.SupportedVersions)
			return false, nil
		}
		return true, nil
	}
}

// discoverOnce sends server/discover and reads its answer; a nil message
// with a nil error is an answer that is not a 200.
func (r *streamRun) discoverOnce(ctx context.Context) (*rpcMessage, error) {
	resp, err := r.post(ctx, discoverID, methodDiscover, nil)
	if err != nil {
		return nil, err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		r.debug("server/discover not answered; initializing a session", "status", resp.StatusCode)
		return nil, nil
	}
	return r.readResponse(ctx, resp, discoverID, methodDiscover)
}

// codeUnsupportedVersion is the JSON-RPC error of a 2026-07-28 server for a
// protocol version it does not support.
const codeUnsupportedVersion = -32022

// unsupportedVersion reports whether err is a -32022 refusal, and the
// versions its data says the server supports.
func unsupportedVersion(err error) (supported []string, ok bool) {
	var re *rpcError
	if !errors.As(err, &re) || re.Code != codeUnsupportedVersion {
		return nil, false
	}
	var data struct {
		Supported []string `json:"supported"`
	}
	_ = json.Unmarshal(re.Data, &data)
	return data.Supported, true
}

// toolInfo is what tools/list says of the called tool.
type toolInfo struct {
	Name        string `json:"name"`
	Annotations *struct {
		IdempotentHint *bool `json:"idempotentHint"`
	} `json:"annotations"`
	Execution *struct {
		TaskSupport string `json:"taskSupport"`
	} `json:"execution"`
}

// idempotent reports whether the tool is annotated idempotentHint true.
func (t *toolInfo) idempotent() bool {
	return t != nil && t.Annotations != nil && t.Annotations.IdempotentHint != nil && *t.Annotations.IdempotentHint
}

// taskSupport returns the tool's execution.taskSupport ("" when absent).
func (t *toolInfo) taskSupport() string {
	if t == nil || t.Execution == nil {
		return ""
	}
	return t.Execution.TaskSupport
}

// maxToolPages bounds the tools/list pages read to find one tool.
const maxToolPages = 100

// lookupTool finds the called tool in tools/list (following nextCursor),
// once per run; nil means the server does not list it.
func (r *streamRun) lookupTool(ctx context.Context) (*toolInfo, error) {
	if r.toolLooked {
		return r.toolInfo, nil
	}
	cursor := ""
	for range maxToolPages {
		var p params
		if cursor != "" {
			p = params{"cursor": cursor}
		}
		msg, err := r.rpc(ctx, methodToolsList, p)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []toolInfo `json:"tools"`
			NextCursor string     `json:"nextCursor"`
		}
		if err := json.Unmarshal(msg.Result, &page); err != nil {
			return nil, r.fail(methodToolsList, 0, true, fmt.Errorf("malformed tools/list result: %w", err))
		}
		for i := range page.Tools {
			if page.Tools[i].Name == r.tool {
				r.toolInfo, r.toolLooked = &page.Tools[i], true
				return r.toolInfo, nil
			}
		}
		if page.NextCursor == "" || page.NextCursor == cursor {
			break
		}
		cursor = page.NextCursor
	}
	r.toolLooked = true
	return nil, nil
}

// errNotIdempotent is the text of the error that ends a 2026-07-28 call
// whose response stream was lost when it may not be sent again.
const errNotIdempotent = "the response stream broke and the tool is not idempotent; not calling it again"

// mayCallAgain applies the re-issue rule of 2026-07-28, where a response
// stream cannot be resumed: a lost tools/call (cause: how it was lost) is
// sent again only when :restart is :on-failure or tools/list annotates the
// tool idempotentHint true. It returns nil when it may be; otherwise the
// permanent error that ends the stream, which for a host restart
// (restarted) wraps transport.ErrSourceLost.
func (r *streamRun) mayCallAgain(ctx context.Context, cause error, restarted bool) error {
	if r.restart {
		return nil
	}
	info, err := r.lookupTool(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err == nil && info.idempotent() {
		return nil
	}
	why := "the tool is not annotated idempotentHint: true"
	switch {
	case err != nil:
		why = fmt.Sprintf("tools/list failed, so whether the tool is idempotent is unknown (%v)", err)
	case info == nil:
		why = fmt.Sprintf("tools/list does not list the tool %q", r.tool)
	}
	hint := "MCP 2026-07-28 cannot resume a response stream; start the stream with :restart :on-failure to allow calling it again"
	if restarted {
		return r.fail(methodToolsCall, 0, true, fmt.Errorf(
			"%w: the host restarted during the call, so %s (%s; %s)", transport.ErrSourceLost, errNotIdempotent, why, hint))
	}
	var te *transport.Error
	if errors.As(cause, &te) && te.Err != nil {
		cause = te.Err // the stream id and op are said once
	}
	return r.fail(methodToolsCall, 0, true, fmt.Errorf("%s (%s; %s): %w", errNotIdempotent, why, hint, cause))
}

// resumeLost continues a 2026-07-28 call from a cursor without a task:
// its response stream did not survive the host restart, so the call is
// sent again under the re-issue rule, or the stream ends.
func (r *streamRun) resumeLost(ctx context.Context) error {
	if err := r.mayCallAgain(ctx, errors.New("the host restarted"), true); err != nil {
		return err
	}
	r.debug("calling the tool again: its response stream did not survive the host restart")
	r.tr.st.Req, r.callSent = r.newID(), false
	return r.callLoop(ctx)
}
