package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioPeer is a Server serving ServeStdio over pipes, and the client's
// ends of them.
type stdioPeer struct {
	t    *testing.T
	in   *io.PipeWriter // the client's requests
	out  *bufio.Reader  // the server's messages
	done chan struct{}  // closed when ServeStdio returned
	err  error          // what it returned
}

// newStdioPeer serves a new Server of f's host over pipes.
func newStdioPeer(t *testing.T, f *fixture) *stdioPeer {
	t.Helper()
	srv, err := New(Options{Host: f.host, Delivery: &everyOutput}) // one notification per output
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &stdioPeer{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan struct{})}
	go func() {
		p.err = srv.ServeStdio(context.Background(), inR, outW)
		outW.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR) // let a last write finish
		select {
		case <-p.done:
		case <-time.After(hangGuard):
			t.Error("ServeStdio did not return after stdin closed")
		}
		outR.Close()
	})
	return p
}

// send writes one message, a line.
func (p *stdioPeer) send(msg string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, msg+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

// response reads lines until the response to id, each of which must be a
// JSON-RPC message, and returns its result (failing on an error).
func (p *stdioPeer) response(id int) jsonObject {
	p.t.Helper()
	lines := make(chan string)
	go func() {
		for {
			line, err := p.out.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- line
			var m struct {
				ID *int `json:"id"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.ID != nil && *m.ID == id {
				close(lines)
				return
			}
		}
	}()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				p.t.Fatalf("stdout ended before the response to %d", id)
			}
			var m struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      *int            `json:"id"`
				Result  json.RawMessage `json:"result"`
				Error   json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal([]byte(line), &m); err != nil || m.JSONRPC != "2.0" {
				p.t.Fatalf("stdout carries a line that is not JSON-RPC: %q", line)
			}
			if m.ID == nil || *m.ID != id {
				continue
			}
			if m.Error != nil {
				p.t.Fatalf("response %d: error %s", id, m.Error)
			}
			var res jsonObject
			if err := json.Unmarshal(m.Result, &res); err != nil {
				p.t.Fatalf("response %d: %s", id, m.Result)
			}
			return res
		case <-time.After(hangGuard):
			p.t.Fatalf("no response to %d", id)
		}
	}
}

// TestStdioTasks: over stdio a 2025-11-25 client is told of tasks as over
// HTTP (the tasks capability, taskSupport on rtfs.eval and
// mcp.stream.start), runs rtfs.eval as a task, and gets its result from
// tasks/result and its status from tasks/get, and a 2026-07-28 request
// that declares the tasks extension gets that extension's task; every
// line on stdout is a JSON-RPC message; closing stdin ends ServeStdio with
// nil.
func TestStdioTasks(t *testing.T) {
	f := newFixture(t, Options{})
	p := newStdioPeer(t, f)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	init := p.response(1)
	if caps := init.object("capabilities"); caps == nil || caps["tasks"] == nil {
		t.Errorf("initialize over stdio declares no tasks capability: %v", init)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	support := map[string]string{}
	for _, tool := range p.response(2).objects("tools") {
		var ex struct {
			TaskSupport string `json:"taskSupport"`
		}
		_ = json.Unmarshal(tool["execution"], &ex)
		support[tool.str("name")] = ex.TaskSupport
	}
	if support[ToolEval] != "optional" || support[ToolStart] != "optional" || support[ToolStatus] != "" {
		t.Errorf("tools/list over stdio: taskSupport %v", support)
	}

	p.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"rtfs.eval","task":{"ttl":60000},"arguments":{"program":"(* 6 7)"}}}`)
	var task struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(p.response(3)["task"], &task); err != nil || task.TaskID == "" {
		t.Fatalf("a task-augmented call over stdio returned no task")
	}
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":%q}}`, task.TaskID))
	res := p.response(4)
	if b, _ := json.Marshal(res); !strings.Contains(string(b), `"value":42`) || !strings.Contains(string(b), task.TaskID) {
		t.Errorf("tasks/result over stdio: %s", b)
	}
	p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":%q}}`, task.TaskID))
	if got := p.response(5).str("status"); got != taskCompleted {
		t.Errorf("tasks/get over stdio: status %q", got)
	}
	// A request of revision 2026-07-28 (its _meta says so) that declares
	// the tasks extension gets the extension's task, and tasks/get its
	// result inline once done.
	modernMeta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	p.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"rtfs.eval","arguments":{"program":"(+ 1 2)"},` + modernMeta + `}}`)
	created := p.response(7)
	if created.str("resultType") != "task" || created.str("taskId") == "" {
		t.Fatalf("a 2026-07-28 task over stdio: %v", created)
	}
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(10 * time.Millisecond) {
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"taskId":%q,%s}}`, created.str("taskId"), modernMeta))
		got := p.response(8)
		if got.str("status") == taskCompleted {
			if b, _ := json.Marshal(got["result"]); !strings.Contains(string(b), `"value":3`) {
				t.Errorf("tasks/get of a 2026-07-28 task over stdio: %s", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the 2026-07-28 task did not complete: %v", got)
		}
	}
	// A plain call still reaches go-sdk.
	p.send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"rtfs.eval","arguments":{"program":"(+ 40 2)"}}}`)
	if b, _ := json.Marshal(p.response(6)); !strings.Contains(string(b), `"value":42`) {
		t.Errorf("rtfs.eval over stdio: %s", b)
	}
	p.in.Close()
	go io.Copy(io.Discard, p.out)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("ServeStdio after stdin closed: %v", p.err)
		}
	case <-time.After(hangGuard):
		t.Fatal("ServeStdio did not return after stdin closed")
	}
}

// TestStdioClient: go-sdk's client, on the default revision, calls
// rtfs.eval over stdio with a progress token and gets the value.
func TestStdioClient(t *testing.T) {
	f := newFixture(t, Options{})
	srv, err := New(Options{Host: f.host})
	if err != nil {
		t.Fatal(err)
	}
	cIn, sOut := io.Pipe()
	sIn, cOut := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(context.Background(), sIn, sOut) }()
	ctx := context.Background()
	cs := connectTo(ctx, t, &mcp.IOTransport{Reader: cIn, Writer: cOut}, nil)
	params := &mcp.CallToolParams{Name: ToolEval, Arguments: map[string]any{"program": "(* 6 7)"}}
	params.SetProgressToken("p")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("eval over stdio: %v %+v", err, res)
	}
	if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), `"value":42`) {
		t.Errorf("eval over stdio: %s", b)
	}
	cs.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("ServeStdio did not return when the client closed")
	}
}

// line reads the next line of stdout.
func (p *stdioPeer) line() string {
	p.t.Helper()
	got := make(chan string, 1)
	go func() {
		l, _ := p.out.ReadString('\n')
		got <- l
	}()
	select {
	case l := <-got:
		if l == "" {
			p.t.Fatal("stdout ended")
		}
		return l
	case <-time.After(hangGuard):
		p.t.Fatal("nothing more on stdout")
	}
	return ""
}

// TestStdioTaskNotifications: a 2025-11-25 task of mcp.stream.start
// created over stdio sends its progress notifications (with the call's
// progress token and the related-task _meta) to the stdio session, as a
// task created over HTTP does to its session.
func TestStdioTaskNotifications(t *testing.T) {
	f := newFixture(t, Options{})
	p := newStdioPeer(t, f)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	p.response(1)
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	args, err := json.Marshal(startArgs("st-1"))
	if err != nil {
		t.Fatal(err)
	}
	p.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcp.stream.start","task":{},"arguments":` + string(args) + `,"_meta":{"progressToken":"tok"}}}`)
	p.response(2)
	f.feed(context.Background(), "st-1", append(values(2), end)...)
	var progress []string
	for len(progress) < 3 {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Token   string                     `json:"progressToken"`
				Message string                     `json:"message"`
				Meta    map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(p.line()), &m); err != nil || m.Method != "notifications/progress" {
			continue
		}
		if m.Params.Token != "tok" || !strings.Contains(string(m.Params.Meta[metaRelatedTask]), "st-1") {
			t.Errorf("a task's progress over stdio: %+v", m.Params)
		}
		progress = append(progress, m.Params.Message)
	}
	if !strings.Contains(progress[2], `"total":3`) {
		t.Errorf("progress over stdio: %v", progress)
	}
	// Then the task's status (notifications/tasks/status).
	for {
		line := p.line()
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || m["method"] == "notifications/progress" {
			t.Fatalf("after the last progress notification, not the task's status: %s", line)
		}
		if m["method"] != notificationTaskStatus {
			continue
		}
		if params, _ := m["params"].(map[string]any); params["taskId"] != "st-1" || params["status"] != "completed" {
			t.Errorf("the task's status over stdio: %s", line)
		}
		if err := schemas.validate("2025-11-25", "TaskStatusNotification", m); err != nil {
			t.Errorf("the task's status over stdio: %v\n%s", err, line)
		}
		break
	}
}

// TestStdioBadLines: every line that is not a JSON-RPC message go-sdk can
// read is answered with the JSON-RPC error the spec names (-32700 for a
// line that is not one JSON value, -32600 for one that is not a request),
// with the line's id when it can be read and null otherwise, and the
// session goes on: the ping after each is answered, and ServeStdio returns
// nil only when stdin ends.
func TestStdioBadLines(t *testing.T) {
	f := newFixture(t, Options{})
	p := newStdioPeer(t, f)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	p.response(1)
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	deep := `{"jsonrpc":"2.0","id":77,"method":"ping","params":{"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}}`
	long := `{"jsonrpc":"2.0","id":78,"method":"ping","params":{"x":"` + strings.Repeat("a", maxStdioLine) + `"}}`
	cases := []struct {
		name, line string
		code       int
		id         string // the JSON of the answer's id
	}{
		{"not json", `not json`, codeParseError, "null"},
		{"NUL bytes", "\x00\x00{\x00}", codeParseError, "null"},
		{"empty array", `[]`, codeInvalidRequest, "null"},
		{"array", `[1,2,3]`, codeInvalidRequest, "null"},
		{"batch", `[{"jsonrpc":"2.0","id":70,"method":"ping"}]`, codeInvalidRequest, "null"},
		{"scalar", `42`, codeInvalidRequest, "null"},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":4,"method":"ping"}`, codeInvalidRequest, "4"},
		{"no jsonrpc", `{"id":3}`, codeInvalidRequest, "3"},
		{"no method, no result", `{"jsonrpc":"2.0","id":"s"}`, codeInvalidRequest, `"s"`},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, codeInvalidRequest, "null"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, codeInvalidRequest, "null"},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, codeInvalidRequest, "null"},
		{"method not a string", `{"jsonrpc":"2.0","id":5,"method":7}`, codeInvalidRequest, "5"},
		{"member case", `{"jsonrpc":"2.0","id":6,"Method":"ping"}`, codeInvalidRequest, "6"},
		{"data after a message", `{"jsonrpc":"2.0","id":9,"method":"ping"} {"x":1}`, codeParseError, "null"},
		{"nested deeper than the limit", deep, codeParseError, "null"},
		{"truncated", `{"jsonrpc":"2.0","id":50,"method":"pi`, codeParseError, "null"},
		{"over-long line", long, codeInvalidRequest, "null"},
	}
	for i, c := range cases {
		ping := 100 + i
		// stdout is an unbuffered pipe: the lines go in while the
		// answers are read.
		sent := make(chan error, 1)
		go func() {
			_, err := io.WriteString(p.in, c.line+"\n"+fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, ping)+"\n")
			sent <- err
		}()
		var answer struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		line := p.line()
		if err := json.Unmarshal([]byte(line), &answer); err != nil || answer.JSONRPC != "2.0" || answer.Error == nil {
			t.Errorf("%s: the answer is not a JSON-RPC error: %q", c.name, line)
		} else if answer.Error.Code != c.code || string(answer.ID) != c.id || answer.Error.Message == "" {
			t.Errorf("%s: answered %s with id %s, want code %d id %s", c.name, line, answer.ID, c.code, c.id)
		}
		p.response(ping) // fails the test when the ping is not answered
		if err := <-sent; err != nil {
			t.Fatalf("%s: writing stdin: %v", c.name, err)
		}
	}
	select {
	case <-p.done:
		t.Fatalf("the session ended before stdin did: %v", p.err)
	default:
	}
	p.in.Close()
	go io.Copy(io.Discard, p.out)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("ServeStdio after stdin closed: %v", p.err)
		}
	case <-time.After(hangGuard):
		t.Fatal("ServeStdio did not return after stdin closed")
	}
}
