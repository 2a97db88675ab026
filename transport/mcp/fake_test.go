package mcp

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeServer is a hand-written Streamable HTTP server for wire shapes that
// go-sdk's server does not produce (batches, 202 on a call, odd events) and
// for failures.
type fakeServer struct {
	http    *httptest.Server
	log     wireLog
	version string
	// modern answers server/discover with 2026-07-28: no initialize, no
	// session follows.
	modern bool
	// initFail lists statuses answered to the first initialize POSTs.
	initFail []int
	// initHook, if set, may answer an initialize POST itself (returning
	// true) after initFail is used up.
	initHook func(w http.ResponseWriter, r *http.Request) bool
	// deleteStatus answers DELETE; 0 means 204.
	deleteStatus int
	// call writes the answer to tools/call; token is the progress token.
	call func(w http.ResponseWriter, token string)
	// get answers GET requests made after tools/call; nil means 405.
	get func(w http.ResponseWriter, r *http.Request, token string)
	// standalone answers a GET without Last-Event-ID made before tools/call
	// (the client's standalone stream); nil means 405.
	standalone func(w http.ResponseWriter, r *http.Request)

	mu        sync.Mutex
	token     string
	gets      []string // Last-Event-ID of each GET after tools/call
	early     int      // GETs before tools/call
	authSeen  []string
	initCount int
	deletes   []string // Mcp-Session-Id of each DELETE
}

func newFakeServer(t testing.TB, f *fakeServer) *fakeServer {
	t.Helper()
	if f.version == "" {
		f.version = version20250326
	}
	f.http = httptest.NewServer(f.log.record(http.HandlerFunc(f.serve), nil))
	t.Cleanup(f.http.Close)
	return f
}

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.authSeen = append(f.authSeen, r.Header.Get("Authorization"))
	f.mu.Unlock()
	switch r.Method {
	case http.MethodPost:
		f.post(w, r)
	case http.MethodGet:
		if f.serveEarlyGET(w, r) {
			return
		}
		f.mu.Lock()
		f.gets = append(f.gets, r.Header.Get(headerLastEventID))
		token := f.token
		f.mu.Unlock()
		if f.get == nil {
			http.Error(w, "no GET stream", http.StatusMethodNotAllowed)
			return
		}
		f.get(w, r, token)
	case http.MethodDelete:
		f.mu.Lock()
		f.deletes = append(f.deletes, r.Header.Get(headerSession))
		f.mu.Unlock()
		if f.deleteStatus != 0 {
			http.Error(w, "no DELETE", f.deleteStatus)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// serveEarlyGET answers a GET made before tools/call, reporting whether it
// was one.
func (f *fakeServer) serveEarlyGET(w http.ResponseWriter, r *http.Request) bool {
	f.mu.Lock()
	early := f.token == "" && r.Header.Get(headerLastEventID) == ""
	if early {
		f.early++
	}
	f.mu.Unlock()
	switch {
	case !early:
		return false
	case f.standalone == nil:
		http.Error(w, "no GET stream", http.StatusMethodNotAllowed)
	default:
		f.standalone(w, r)
	}
	return true
}

// posted is what the test servers read of a posted JSON-RPC message.
type posted struct {
	Method string `json:"method"`
	Params struct {
		Meta struct {
			ProgressToken string `json:"progressToken"`
		} `json:"_meta"`
	} `json:"params"`
}

// readPosted decodes the message r posts; ok is false, the request answered
// 400, when its body is not one.
func readPosted(w http.ResponseWriter, r *http.Request) (posted, bool) {
	var m posted
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return m, false
	}
	return m, true
}

func (f *fakeServer) post(w http.ResponseWriter, r *http.Request) {
	m, ok := readPosted(w, r)
	if !ok {
		return
	}
	switch m.Method {
	case methodDiscover:
		if !f.modern {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", contentJSON)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"result":{"supportedVersions":[%q],"capabilities":{}}}`, discoverID, version20260728)
	case methodInitialize:
		f.mu.Lock()
		n := f.initCount
		f.initCount++
		f.mu.Unlock()
		if n < len(f.initFail) {
			http.Error(w, "initialize refused (test)", f.initFail[n])
			return
		}
		if f.initHook != nil && f.initHook(w, r) {
			return
		}
		w.Header().Set("Content-Type", contentJSON)
		w.Header().Set(headerSession, "sess-1")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":%q,"capabilities":{},"serverInfo":{"name":"fake","version":"1"}}}`, f.version)
	case methodToolsCall:
		f.mu.Lock()
		f.token = m.Params.Meta.ProgressToken
		f.mu.Unlock()
		f.call(w, m.Params.Meta.ProgressToken)
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

func (f *fakeServer) deleted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.deletes...)
}

func (f *fakeServer) getIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.gets...)
}

func progressMsg(token string, p float64) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%q,"progress":%v,"message":"p%v"}}`, token, p, p)
}

func resultMsg(text string, isError bool) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":%q}],"isError":%v}}`, text, isError)
}

// sseHeaders starts an SSE response.
func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", contentSSE)
	w.WriteHeader(http.StatusOK)
}

// writeSSE writes one event with an optional id.
func writeSSE(w http.ResponseWriter, id, data string) {
	if id != "" {
		fmt.Fprintf(w, "id: %s\n", id)
	}
	fmt.Fprintf(w, "event: message\ndata: %s\n\n", data)
	w.(http.Flusher).Flush()
}

func (f *fakeServer) spec() specBuilder {
	return specBuilder{url: f.http.URL + "/mcp", client: f.http.Client()}
}

type specBuilder struct {
	url    string
	client *http.Client
}

func (b specBuilder) build(mut ...func(*specT)) specT {
	s := specT{StreamID: "fake", Endpoint: "tool", RetryAttempts: 3, HTTP: httpT{ServerURL: b.url, Client: b.client}}
	for _, m := range mut {
		m(&s)
	}
	return s
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
