package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// Every message the server sends in the tests is checked against the
// official JSON schemas of its protocol revision (and of the tasks
// extension under 2026-07-28), kept in testdata/schema (see the README
// there). newFixture puts a wireCheck in front of the server's handler: it
// records each request's messages, reads each response as it is written
// (JSON or SSE), and validates every message in it, a response against the
// result of the method it answers. What does not validate fails the test
// at its end.

// specRevisions are the revisions whose schemas are in testdata/schema,
// oldest first; extTasks names the tasks extension's schema.
var specRevisions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}

const extTasks = "ext-tasks"

// specSchemas are the schemas of testdata/schema, each definition resolved
// once, when first asked for.
type specSchemas struct {
	mu       sync.Mutex
	docs     map[string]map[string]json.RawMessage // revision -> the schema document's members
	resolved map[string]*jsonschema.Resolved       // revision "#" definition
}

var schemas = &specSchemas{docs: map[string]map[string]json.RawMessage{}, resolved: map[string]*jsonschema.Resolved{}}

// validate validates v (a decoded JSON value) against definition def of
// revision rev.
func (s *specSchemas) validate(rev, def string, v any) error {
	rs, err := s.schema(rev, def)
	if err != nil {
		return err
	}
	if err := rs.Validate(v); err != nil {
		return fmt.Errorf("%s %s: %w", rev, def, err)
	}
	return nil
}

// schema returns definition def of revision rev, resolved.
func (s *specSchemas) schema(rev, def string) (*jsonschema.Resolved, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := rev + "#" + def
	if rs := s.resolved[key]; rs != nil {
		return rs, nil
	}
	doc := s.docs[rev]
	if doc == nil {
		data, err := os.ReadFile(filepath.Join("testdata", "schema", rev+".json"))
		if err != nil {
			return nil, fmt.Errorf("the schema of %s: %w", rev, err)
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("the schema of %s: %w", rev, err)
		}
		s.docs[rev] = doc
	}
	defsKey := "$defs"
	if doc[defsKey] == nil {
		defsKey = "definitions" // draft-07
	}
	var defs map[string]json.RawMessage
	if err := json.Unmarshal(doc[defsKey], &defs); err != nil || defs[def] == nil {
		return nil, fmt.Errorf("the schema of %s has no definition %s", rev, def)
	}
	// A schema of the document's definitions whose root is the one asked
	// for (through allOf: draft-07 ignores the siblings of a $ref).
	wrapper, _ := json.Marshal(map[string]any{
		"$schema": doc["$schema"],
		defsKey:   doc[defsKey],
		"allOf":   []any{map[string]string{"$ref": "#/" + defsKey + "/" + def}},
	})
	var root jsonschema.Schema
	if err := json.Unmarshal(wrapper, &root); err != nil {
		return nil, fmt.Errorf("%s %s: %w", rev, def, err)
	}
	rs, err := root.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", rev, def, err)
	}
	s.resolved[key] = rs
	return rs, nil
}

// A sentRequest is what a wireCheck keeps of a request a client sent, to
// check the response that answers it.
type sentRequest struct {
	method   string
	rev      string // the revision it named (header or _meta), "" if none
	task     bool   // a tools/call with params.task (2025-11-25)
	declares bool   // its _meta declares the tasks extension (2026-07-28)
}

// A wireCheck validates what a server sends. One serves every fixture of
// a test (checkerFor), so that a response resumed on another server of the
// same test still finds its request. Its methods are safe for concurrent
// use.
type wireCheck struct {
	mu        sync.Mutex
	revisions map[string]string                 // session (Mcp-Session-Id, or "sse:"+id) -> revision
	requests  map[string]map[string]sentRequest // session ("" for none) -> JSON-RPC id -> request
	problems  []string
	checked   map[string]int // definition -> messages validated against it
}

var (
	checkersMu sync.Mutex
	checkers   = map[*testing.T]*wireCheck{}
)

// checkerFor returns the wireCheck of t, made (with the check at t's end)
// when first asked for.
func checkerFor(t *testing.T) *wireCheck {
	checkersMu.Lock()
	defer checkersMu.Unlock()
	if c := checkers[t]; c != nil {
		return c
	}
	c := &wireCheck{revisions: map[string]string{}, requests: map[string]map[string]sentRequest{}, checked: map[string]int{}}
	checkers[t] = c
	t.Cleanup(func() {
		checkersMu.Lock()
		delete(checkers, t)
		checkersMu.Unlock()
		for _, p := range c.report() {
			t.Error(p)
		}
		c.mu.Lock()
		for k, n := range c.checked {
			schemaTally[k] += n
		}
		c.mu.Unlock()
	})
	return c
}

// schemaTally counts the messages every test's check validated, by
// revision and definition; TestMain prints it with -v. Guarded by
// checkersMu.
var schemaTally = map[string]int{}

// printSchemaTally writes schemaTally, one "revision definition: n" a line.
func printSchemaTally(w io.Writer) {
	checkersMu.Lock()
	defer checkersMu.Unlock()
	keys := make([]string, 0, len(schemaTally))
	for k := range schemaTally {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "messages validated against the schemas, by revision and definition:\n")
	for _, k := range keys {
		fmt.Fprintf(w, "  %s: %d\n", k, schemaTally[k])
	}
}

// report returns the problems found.
func (c *wireCheck) report() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.problems...)
}

func (c *wireCheck) problem(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.problems) < 20 {
		c.problems = append(c.problems, "schema check: "+fmt.Sprintf(format, args...))
	}
}

// wrap puts the check in front of h.
func (c *wireCheck) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		session := r.Header.Get("Mcp-Session-Id")
		if r.URL.Path == PathSSE {
			if id := r.URL.Query().Get("sessionid"); id != "" {
				session = "sse:" + id
			}
		}
		rev := r.Header.Get(headerProtocolVersion)
		var own map[string]sentRequest
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
			if err == nil {
				r.Body = io.NopCloser(bytes.NewReader(body))
				rev, own = c.noteRequests(session, rev, body)
			}
		}
		tee := &teeWriter{ResponseWriter: w}
		h.ServeHTTP(tee, r)
		if sid := tee.Header().Get("Mcp-Session-Id"); sid != "" && session == "" {
			session = sid
		}
		c.checkResponse(r, session, rev, own, tee)
	})
}

// noteRequests records the requests of a POST body, for a response on
// another exchange of the session (a resumed or legacy SSE stream); it
// returns the revision the body names when the header did not, and the
// requests by id, for the response of the same exchange.
func (c *wireCheck) noteRequests(session, rev string, body []byte) (string, map[string]sentRequest) {
	var env envelope
	env.decode(body)
	if rev == "" {
		rev = env.revision
	}
	own := map[string]sentRequest{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range env.msgs {
		if m.invalid || m.ID == nil || m.Method == "" {
			continue
		}
		req := sentRequest{method: m.Method, rev: rev, task: m.Params.Task != nil, declares: m.declares(extensionTasks)}
		own[compactJSON(m.ID)] = req
		if session == "" {
			continue
		}
		if c.requests[session] == nil {
			c.requests[session] = map[string]sentRequest{}
		}
		c.requests[session][compactJSON(m.ID)] = req
	}
	return rev, own
}

// teeWriter passes a response on and keeps a copy of its body.
type teeWriter struct {
	http.ResponseWriter
	mu     sync.Mutex
	status int
	body   bytes.Buffer
}

func (t *teeWriter) WriteHeader(code int) {
	t.mu.Lock()
	if t.status == 0 {
		t.status = code
	}
	t.mu.Unlock()
	t.ResponseWriter.WriteHeader(code)
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	if t.status == 0 {
		t.status = http.StatusOK
	}
	t.body.Write(p)
	t.mu.Unlock()
	return t.ResponseWriter.Write(p)
}

func (t *teeWriter) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (t *teeWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// checkResponse validates the messages of a response.
func (c *wireCheck) checkResponse(r *http.Request, session, rev string, own map[string]sentRequest, tee *teeWriter) {
	tee.mu.Lock()
	body := bytes.Clone(tee.body.Bytes())
	tee.mu.Unlock()
	var msgs [][]byte
	switch ct := tee.Header().Get("Content-Type"); {
	case strings.HasPrefix(ct, "text/event-stream"):
		for _, data := range sseData(body) {
			if r.URL.Path == PathSSE && bytes.HasPrefix(data, []byte("/")) { // the endpoint event
				if u, err := url.Parse(string(data)); err == nil {
					session = "sse:" + u.Query().Get("sessionid")
				}
				continue
			}
			if len(bytes.TrimSpace(data)) > 0 {
				msgs = append(msgs, data)
			}
		}
	case strings.HasPrefix(ct, "application/json"):
		trimmed := bytes.TrimSpace(body)
		if len(trimmed) > 0 && trimmed[0] == '[' {
			var list []json.RawMessage
			if json.Unmarshal(trimmed, &list) != nil {
				c.problem("%s %s: a JSON array that does not decode: %s", r.Method, r.URL.Path, trimmed)
				return
			}
			for _, m := range list {
				msgs = append(msgs, m)
			}
		} else if len(trimmed) > 0 {
			msgs = append(msgs, trimmed)
		}
	default:
		return // not JSON-RPC: a plain HTTP error
	}
	for _, data := range msgs {
		c.checkMessage(r, session, rev, own, data)
	}
}

// revisionOf returns the schema revision to check a message of session
// with: the request's, else the session's, else 2025-03-26 (the revision a
// server assumes of a request without one).
func (c *wireCheck) revisionOf(session, rev string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev == "" {
		rev = c.revisions[session]
	}
	switch {
	case rev == "":
		return "2025-03-26"
	case rev > specRevisions[len(specRevisions)-1]:
		return specRevisions[len(specRevisions)-1]
	case rev < specRevisions[0]:
		return specRevisions[0]
	}
	for i := len(specRevisions) - 1; i >= 0; i-- {
		if rev >= specRevisions[i] {
			return specRevisions[i]
		}
	}
	return rev
}

// checkMessage validates one message the server sent.
func (c *wireCheck) checkMessage(r *http.Request, session, rev string, own map[string]sentRequest, data []byte) {
	where := fmt.Sprintf("%s %s", r.Method, r.URL.Path)
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		c.problem("%s: a message that is not JSON: %s", where, data)
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(data, &m)
	// An initialize result names the session's revision.
	if m.Result != nil {
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(m.Result, &res) == nil && res.ProtocolVersion != "" && session != "" {
			c.mu.Lock()
			c.revisions[session] = res.ProtocolVersion
			c.mu.Unlock()
			if rev == "" {
				rev = res.ProtocolVersion
			}
		}
	}
	var req sentRequest
	var known bool
	if m.Method == "" && m.ID != nil {
		req, known = own[compactJSON(m.ID)]
		if !known {
			c.mu.Lock()
			req, known = c.requests[session][compactJSON(m.ID)]
			c.mu.Unlock()
		}
		if known && rev == "" {
			rev = req.rev
		}
	}
	rev = c.revisionOf(session, rev)
	if m.Error != nil && string(bytes.TrimSpace(m.ID)) == "null" {
		// JSON-RPC answers a request whose id it cannot read with a null
		// id, which the schemas of MCP cannot express; 2025-11-25 let an
		// error response leave it out: checked so, without it.
		delete(v.(map[string]any), "id")
		rev = max(rev, "2025-11-25")
	}
	check := func(rev, def string, v any) {
		c.mu.Lock()
		c.checked[rev+" "+def]++
		c.mu.Unlock()
		if err := schemas.validate(rev, def, v); err != nil {
			c.problem("%s: %v\n%s", where, err, data)
		}
	}
	check(rev, "JSONRPCMessage", v)
	switch {
	case m.Method != "" && m.ID != nil:
		def, ok := serverRequestDefs[m.Method]
		if !ok {
			c.problem("%s: a request of the server with no schema here: %s", where, data)
			return
		}
		check(rev, def, v)
	case m.Method != "":
		def, ok := notificationDefs[m.Method]
		if !ok {
			c.problem("%s: a notification with no schema here: %s", where, data)
			return
		}
		if def == "" { // the tasks extension's
			check(extTasks, "TaskStatusNotification", v)
			return
		}
		check(rev, def, v)
	case m.Error != nil:
		def := "JSONRPCErrorResponse"
		if rev < "2025-11-25" {
			def = "JSONRPCError"
		}
		check(rev, def, v)
	default:
		if !known {
			c.problem("%s: a response to no request this check saw: %s", where, data)
			return
		}
		var result any
		_ = json.Unmarshal(m.Result, &result)
		c.checkResult(rev, req, result, data, check, where)
	}
}

// checkResult validates the result of a response to req.
func (c *wireCheck) checkResult(rev string, req sentRequest, result any, data []byte, check func(rev, def string, v any), where string) {
	obj, _ := result.(map[string]any)
	modern := rev >= sessionlessVersion
	switch req.method {
	case "tools/call":
		switch {
		case modern && obj["resultType"] == "task":
			if !req.declares {
				c.problem("%s: a task for a request that did not declare the tasks extension: %s", where, data)
			}
			check(extTasks, "CreateTaskResult", result)
		case !modern && req.task && rev >= "2025-11-25":
			check(rev, "CreateTaskResult", result)
		default:
			check(rev, "CallToolResult", result)
		}
	case methodTasksGet:
		if !modern {
			check(rev, "GetTaskResult", result)
			return
		}
		check(extTasks, "GetTaskResult", result)
		if inline, ok := obj["result"].(map[string]any); ok {
			check(rev, "CallToolResult", inline)
			if meta, _ := inline["_meta"].(map[string]any); meta[metaRelatedTask] != nil {
				c.problem("%s: the related-task _meta on the result inlined by tasks/get, which the tasks extension forbids: %s", where, data)
			}
		}
	case methodTasksResult:
		if modern {
			c.problem("%s: tasks/result answered under %s, whose tasks extension has no such method: %s", where, rev, data)
			return
		}
		check(rev, "GetTaskPayloadResult", result)
		check(rev, "CallToolResult", result)
	case methodTasksList:
		if modern {
			c.problem("%s: tasks/list answered under %s: %s", where, rev, data)
			return
		}
		check(rev, "ListTasksResult", result)
	case methodTasksCancel:
		if modern {
			check(extTasks, "CancelTaskResult", result)
			return
		}
		check(rev, "CancelTaskResult", result)
	case methodTasksUpdate:
		if !modern {
			c.problem("%s: tasks/update answered under %s: %s", where, rev, data)
			return
		}
		check(extTasks, "UpdateTaskResult", result)
	default:
		def, ok := resultDefs[req.method]
		if !ok {
			c.problem("%s: a result of %s, which has no schema here: %s", where, req.method, data)
			return
		}
		if def == "EmptyResult" && modern {
			def = "Result"
		}
		check(rev, def, result)
	}
}

// The definitions of the results of the core methods, and of what the
// server sends on its own; "" in notificationDefs: the tasks extension's.
var (
	resultDefs = map[string]string{
		"initialize":               "InitializeResult",
		"ping":                     "EmptyResult",
		"tools/list":               "ListToolsResult",
		"logging/setLevel":         "EmptyResult",
		"resources/list":           "ListResourcesResult",
		"resources/templates/list": "ListResourceTemplatesResult",
		"resources/read":           "ReadResourceResult",
		"resources/subscribe":      "EmptyResult",
		"resources/unsubscribe":    "EmptyResult",
		"server/discover":          "DiscoverResult",
		"subscriptions/listen":     "SubscriptionsListenResult",
		"prompts/list":             "ListPromptsResult",
		"completion/complete":      "CompleteResult",
	}
	notificationDefs = map[string]string{
		"notifications/progress":                   "ProgressNotification",
		"notifications/message":                    "LoggingMessageNotification",
		"notifications/cancelled":                  "CancelledNotification",
		"notifications/resources/updated":          "ResourceUpdatedNotification",
		"notifications/resources/list_changed":     "ResourceListChangedNotification",
		"notifications/tools/list_changed":         "ToolListChangedNotification",
		"notifications/prompts/list_changed":       "PromptListChangedNotification",
		"notifications/subscriptions/acknowledged": "SubscriptionsAcknowledgedNotification",
		"notifications/tasks/status":               "TaskStatusNotification",
		"notifications/tasks":                      "",
	}
	serverRequestDefs = map[string]string{
		"ping":                   "PingRequest",
		"roots/list":             "ListRootsRequest",
		"sampling/createMessage": "CreateMessageRequest",
		"elicitation/create":     "ElicitRequest",
	}
)

// TestSchemaCheckFails: the check finds what breaks a schema (a tasks/get
// of 2026-07-28 without resultType, a progress notification without its
// token, a response to no request) and passes what keeps to it.
func TestSchemaCheckFails(t *testing.T) {
	c := &wireCheck{revisions: map[string]string{}, requests: map[string]map[string]sentRequest{}, checked: map[string]int{}}
	r, _ := http.NewRequest(http.MethodPost, "/mcp", nil)
	_, own := c.noteRequests("", "2026-07-28", []byte(`[{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a"}},{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{"taskId":"a"}}]`))
	task := `"taskId":"a","status":"working","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttlMs":1000`
	c.checkMessage(r, "", "2026-07-28", own, []byte(`{"jsonrpc":"2.0","id":1,"result":{`+task+`,"resultType":"complete"}}`))
	c.checkMessage(r, "", "2026-07-28", own, []byte(`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete"}}`))
	c.checkMessage(r, "", "2025-11-25", own, []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`))
	if p := c.report(); len(p) != 0 {
		t.Fatalf("valid messages reported: %v", p)
	}
	bad := []string{
		`{"jsonrpc":"2.0","id":1,"result":{` + task + `}}`,
		`{"jsonrpc":"2.0","id":2,"result":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
		`{"jsonrpc":"2.0","id":9,"result":{"resultType":"complete"}}`,
	}
	for _, msg := range bad {
		before := len(c.report())
		c.checkMessage(r, "", "2026-07-28", own, []byte(msg))
		if len(c.report()) == before {
			t.Errorf("%s: no problem found", msg)
		}
	}
}
