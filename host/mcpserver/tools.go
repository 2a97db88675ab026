package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rtfshost/rtfshost/capabilities"
	"github.com/rtfshost/rtfshost/host/observe"
	"github.com/rtfshost/rtfshost/provider"
)

// The names of the tools.
// The stream tools have the ids of the capabilities they serve.
const (
	ToolStart   = provider.CapStart
	ToolInspect = provider.CapInspect
	ToolStatus  = provider.CapStatus
	ToolPause   = provider.CapPause
	ToolResume  = provider.CapResume
	ToolCancel  = provider.CapCancel
	ToolEval    = "rtfs.eval"
	ToolRemove  = "mcp.stream.remove"
	ToolUpgrade = "mcp.stream.upgrade"
	// ToolDeadLetters lists the chunks a stream set aside.
	ToolDeadLetters = "mcp.stream.dead-letters"
)

// A toolSpec is one tool: its MCP description, its input (in the schema
// notation of the capabilities, so a tool that serves a capability takes
// the capability's keys) and the function that runs a call with checked
// arguments.
type toolSpec struct {
	name, title, desc string
	input             *capabilities.Schema
	readOnly          bool
	// output is the JSON schema of the tool's structuredContent (its
	// outputSchema); hints are its annotations besides readOnly.
	output *jsonschema.Schema
	hints  mcp.ToolAnnotations
	run    func(c *call, a args) (*mcp.CallToolResult, error)
	// task says whether the tool runs as an MCP task when a client asks,
	// and what the task is (taskstore.go).
	task taskMode
	// scope is the OAuth scope a call of the tool needs (oauth.go). Its
	// zero value is the writing scope, so a tool that does not say
	// otherwise is refused to a token that may only read.
	scope toolScope
}

// A toolScope is the OAuth scope a tool needs: ScopeWrite (the zero
// value) or ScopeRead.
type toolScope uint8

const (
	scopeWrite toolScope = iota // starts, changes or ends work on the host
	scopeRead                   // only reads the host's streams
)

// name is the scope as a token carries it.
func (sc toolScope) name() string {
	if sc == scopeRead {
		return ScopeRead
	}
	return ScopeWrite
}

// A taskMode says whether a tool runs as an MCP task, and how.
type taskMode uint8

const (
	noTask taskMode = iota // the tool answers only as a call
	// taskOfStream: the task is the stream the call starts. Its id is the
	// stream id and it lives as long as the stream, across restarts.
	taskOfStream
	// taskOfCall: the task runs the call. Its id is new, its result the
	// call's; a restart ends it as failed.
	taskOfCall
)

// input returns the input of a tool: the keys of the capability id as the
// host registered it (none for ""), each changed by adjust when given, then
// extra.
func (s *Server) input(id string, adjust func(*capabilities.Key), extra ...capabilities.Key) *capabilities.Schema {
	var keys []capabilities.Key
	if c, ok := s.caps.Lookup(id); ok && c.Input != nil {
		keys = append(keys, c.Input.Keys...)
	}
	if adjust != nil {
		for i := range keys {
			adjust(&keys[i])
		}
	}
	return &capabilities.Schema{Type: "map", Keys: append(keys, extra...)}
}

func streamIDKey() capabilities.Key {
	return capabilities.Key{Name: "stream-id", Type: "string", Required: true, Doc: "The stream's id, as mcp.stream.start or mcp.stream.inspect report it."}
}

// listKeys are the keys of mcp.stream.inspect without a stream-id: which
// page of the streams (provider.List).
func listKeys() []capabilities.Key {
	return []capabilities.Key{
		{Name: "cursor", Type: "string", Doc: "Without stream-id: the next-cursor of the page before; absent, the first page."},
		{Name: "limit", Type: "int", Min: capabilities.AtLeast(1),
			Doc: fmt.Sprintf("Without stream-id: the most streams of the page (default %d, at most %d).", provider.DefaultListLimit, provider.MaxListLimit)},
	}
}

func timeoutKey() capabilities.Key {
	return capabilities.Key{Name: "timeout-ms", Type: "int", Min: capabilities.AtLeast(0),
		Doc: "Give up after this many milliseconds: the streams of the call are cancelled and the result has isError set. 0 or absent: no limit."}
}

func (s *Server) toolSpecs() []toolSpec {
	yes, no := true, false
	mutating := mcp.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}
	return []toolSpec{
		{name: ToolStart, title: "Start an RTFS stream processor", desc: startDesc, input: s.startInput(), run: (*call).start,
			output: startOutput, task: taskOfStream, hints: mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &yes}},
		{name: ToolInspect, title: "Inspect streams", readOnly: true, scope: scopeRead, input: s.input(provider.CapInspect, nil, listKeys()...), run: (*call).inspect, output: inspectOutput,
			desc: "Returns the inspect map of one stream (with stream-id) or the summary of the streams, a page at a time in stream-id order (in a cluster those of every host): status, stats, queue, current and initial state, last output, result, cursor; a summary that is not the last page has next-cursor, which cursor takes to get the next. Keywords appear as strings without the colon."},
		{name: ToolStatus, title: "Stream status", readOnly: true, scope: scopeRead, input: s.input(ToolStatus, nil), run: control(ToolStatus), output: statusOutput,
			desc: "Returns a stream's status: {stream-id, state (active, paused, failed, completed, cancelled or error), message, end-reason, result, failure}."},
		{name: ToolPause, title: "Pause a stream", input: s.input(ToolPause, nil), run: control(ToolPause), output: statusOutput, hints: mutating,
			desc: "Pauses a stream: its processor stops taking chunks; once its queue is full the source is held back. Returns the status."},
		{name: ToolResume, title: "Resume a stream", input: s.input(ToolResume, nil), run: control(ToolResume), output: statusOutput, hints: mutating,
			desc: "Resumes a paused stream; its queued chunks are processed in order at once. A failed stream retries the chunk it is held on (with the processor it has now: upgrade it first to fix a bug), or with skip: true sets that chunk aside as a dead letter and goes on; a stream whose source gave up connects again from its cursor. Returns the status."},
		{name: ToolCancel, title: "Cancel a stream", input: s.input(ToolCancel, nil), run: control(ToolCancel), output: statusOutput,
			hints: mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no},
			desc:  "Cancels a stream: its source is closed and its queued chunks are dropped (and counted). Returns the status."},
		{name: ToolEval, title: "Evaluate an RTFS program", desc: evalDesc, input: s.input("", nil, evalKeys()...), run: (*call).eval, output: evalOutput, task: taskOfCall,
			hints: mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &yes}},
		{name: ToolRemove, title: "Remove an ended stream", input: s.input("", nil, streamIDKey(),
			capabilities.Key{Name: "force", Type: "bool", Doc: "Also remove a stream that has not ended (it is cancelled first; its progress is lost)."}),
			run: (*call).remove, output: removeOutput, hints: mcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &no},
			desc: "Forgets an ended stream: its records leave the server's data directory and its id can be used again. Returns {stream-id, removed, was}."},
		{name: ToolUpgrade, title: "Swap a stream's processor", desc: upgradeDesc, input: s.input("", nil, upgradeKeys()...), run: (*call).upgrade,
			output: upgradeOutput, hints: mcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &no}},
		{name: ToolDeadLetters, title: "A stream's dead letters", readOnly: true, scope: scopeRead, input: s.input("", nil, streamIDKey()),
			run: (*call).deadLetters, output: deadLettersOutput,
			desc: "Lists the chunks a stream set aside (mcp.stream.resume with skip, or :on-error {:then :skip}), oldest first: {stream-id, count, dead-letters: [{seq, chunk, metadata, kind, error, attempts, at-epoch-ms}]}."},
	}
}

const startDesc = `Starts a stream whose chunks are processed by an RTFS function and waits for it to end. ` +
	`program is RTFS source that defines the processor, e.g. (defn step [state chunk meta] {:state (inc state) :output chunk}); ` +
	`processor names that function; it is called as (processor state chunk metadata) for every chunk and returns ` +
	`{:state new-state :action :continue|:pause|:resume|:cancel|:complete :output value}. ` +
	`With a progress token, every :output is sent as a progress notification whose message is the output as JSON. ` +
	`The result is JSON: {stream-id, state, end-reason, message, result, outputs, output-count}; isError is set unless the stream completed. ` +
	`With detach, the call returns the stream's handle at once instead.`

const evalDesc = `Evaluates an RTFS program and returns its value as JSON (keywords become strings without the colon, nil null). ` +
	`Host calls are served: (call :mcp.stream.start {...}) starts a stream, (call :mcp.stream.await {:stream-id id}) waits for its result, ` +
	`and with a progress token the outputs of the streams the program starts arrive as progress notifications. ` +
	`A program error is a result with isError set, giving file:line:col.`

// startInput is the start tool's input: the program, then the keys of
// :mcp.stream.start (those of every stream, then those of the host's
// transports, so the schema offers only what this server runs), with the
// processor named by a string, then the keys of a tool call.
func (s *Server) startInput() *capabilities.Schema {
	in := s.input(provider.CapStart, func(k *capabilities.Key) {
		switch k.Name {
		case "processor":
			k.Type, k.Doc = "string", "The name of the processor function defined by program."
		case "transport":
			k.Enum = s.prov.Transports().Names()
		case "initial-state":
			k.Doc = "The processor's first state, any JSON value (default {}). Object keys become keywords."
		case "queue-capacity":
			k.Min = capabilities.AtLeast(1)
		case "idle-timeout-ms":
			k.Min = capabilities.AtLeast(0)
		}
	},
		capabilities.Key{Name: "detach", Type: "bool", Doc: "Return the stream's handle at once instead of waiting for the stream to end."},
		timeoutKey(),
		capabilities.Key{Name: "filename", Type: "string", Doc: "The program's file name in error messages (default mcp-stream.rtfs)."},
	)
	program := capabilities.Key{Name: "program", Type: "string", Required: true, Doc: "RTFS source defining the processor function (and anything it uses)."}
	in.Keys = append([]capabilities.Key{program}, in.Keys...)
	return in
}

func evalKeys() []capabilities.Key {
	return []capabilities.Key{
		{Name: "program", Type: "string", Required: true, Doc: "The RTFS program to evaluate; its value is the last top-level form's."},
		timeoutKey(),
		{Name: "filename", Type: "string", Doc: "The program's file name in error messages (default eval.rtfs)."},
	}
}

// toolSpec returns the spec of the tool named name.
func (s *Server) toolSpec(name string) (toolSpec, bool) {
	for _, t := range s.tools {
		if t.name == name {
			return t, true
		}
	}
	return toolSpec{}, false
}

// runsAsTask reports whether the tool named name runs as an MCP task.
func (s *Server) runsAsTask(name string) bool {
	t, ok := s.toolSpec(name)
	return ok && t.task != noTask
}

// taskTools returns the names of the tools that run as MCP tasks.
func (s *Server) taskTools() []string {
	var names []string
	for _, t := range s.tools {
		if t.task != noTask {
			names = append(names, t.name)
		}
	}
	return names
}

// addTools registers every tool with the MCP server.
func (s *Server) addTools() {
	s.tools = s.toolSpecs()
	for _, t := range s.tools {
		tool := &mcp.Tool{
			Name:        t.name,
			Title:       t.title,
			Description: t.desc,
			InputSchema: t.input.JSONSchema(),
		}
		hints := t.hints
		if t.readOnly {
			hints = mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
		}
		tool.Annotations = &hints
		if t.output != nil {
			tool.OutputSchema = t.output
		}
		s.mcp.AddTool(tool, s.toolHandler(t))
	}
}

// toolHandler adapts a toolSpec to go-sdk: bad arguments are -32602 errors
// (under 2025-11-25 and later, arguments the tool's input refuses are an
// isError result instead: toolInputError); a panic in the tool becomes an
// isError result.
func (s *Server) toolHandler(t toolSpec) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		ctx, ob := s.startCall(ctx, t.name, req)
		rejected, invalid := false, false
		defer func() {
			outcome, msg := outcomeOf(ctx, res, err)
			switch {
			case rejected:
				outcome = observe.OutcomeRejected
			case invalid:
				outcome = observe.OutcomeInvalid
			}
			ob.End(outcome, msg)
		}()
		var raw []byte
		if req.Params != nil {
			raw = req.Params.Arguments
		}
		a, err := parseArgs(t.name, t.input, raw)
		if err != nil {
			invalid = true
			if toolInputError(err, req.ProtocolVersion()) {
				return textResult(err.Error(), true), nil
			}
			return nil, errors.Unwrap(err)
		}
		var session any
		if req.Session != nil && req.Session.ID() != "" { // stateless requests share the nil key
			session = req.Session
		}
		ctx, done, err := s.enter(ctx, session)
		if err != nil {
			rejected = true
			return textResult(err.Error(), true), nil
		}
		defer done()
		c := s.newCall(ctx, req)
		defer c.release()
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("tool panicked", "tool", t.name, "panic", p)
				res, err = textResult(fmt.Sprintf("%s: internal error: %v", t.name, p), true), nil
			}
		}()
		return t.run(c, a)
	}
}

// inspect serves mcp.stream.inspect.
func (c *call) inspect(a args) (*mcp.CallToolResult, error) {
	opts := provider.InspectOptions{
		OmitState:        !a.bool("include-state", true),
		OmitInitialState: !a.bool("include-initial-state", true),
		OmitQueue:        !a.bool("include-queue", true),
	}
	id := a.str("stream-id")
	if id == "" {
		sum, err := c.s.prov.SummaryPage(c.ctx, provider.ListOptions{Cursor: a.str("cursor"), Limit: int(a.int("limit")), Inspect: opts})
		if err != nil {
			return textResult(fmt.Sprintf("%s: %v", ToolInspect, err), true), nil
		}
		return c.valueResult(ToolInspect, sum), nil
	}
	if _, ok := a["cursor"]; ok {
		return textResult(fmt.Sprintf("%s: cursor pages the list of the streams; give it without stream-id", ToolInspect), true), nil
	}
	in, err := c.s.prov.Info(id, opts)
	if err != nil {
		return textResult(fmt.Sprintf("%s: %v", ToolInspect, err), true), nil
	}
	return structured(in.JSON(), false), nil // the typed snapshot, as the CLI decodes it
}

// deadLetters runs mcp.stream.dead-letters.
func (c *call) deadLetters(a args) (*mcp.CallToolResult, error) {
	id := a.str("stream-id")
	dls, err := c.s.prov.DeadLetters(c.ctx, id)
	if err != nil {
		return textResult(fmt.Sprintf("%s: %v", ToolDeadLetters, err), true), nil
	}
	if dls == nil {
		dls = []provider.DeadLetter{}
	}
	return jsonResult(deadLettersResult{StreamID: id, Count: len(dls), DeadLetters: dls}, false), nil
}

// remove runs mcp.stream.remove.
func (c *call) remove(a args) (*mcp.CallToolResult, error) {
	id := a.str("stream-id")
	was, err := c.s.prov.Remove(c.ctx, id, a.bool("force", false))
	if err != nil {
		return textResult(fmt.Sprintf("%s: %v", ToolRemove, err), true), nil
	}
	return jsonResult(removeResult{StreamID: id, Removed: true, Was: was}, false), nil
}

// control returns the run function of status, pause, resume or cancel.
func control(tool string) func(c *call, a args) (*mcp.CallToolResult, error) {
	return func(c *call, a args) (*mcp.CallToolResult, error) {
		var op func(context.Context, string) (provider.Status, error)
		switch tool {
		case ToolStatus:
			op = c.s.prov.Status
		case ToolPause:
			op = c.s.prov.Pause
		case ToolResume:
			op = c.s.prov.Resume
			if a.bool("skip", false) {
				op = c.s.prov.Skip
			}
		default:
			op = c.s.prov.Cancel
		}
		st, err := op(c.ctx, a.str("stream-id"))
		if err != nil {
			return textResult(fmt.Sprintf("%s: %v", tool, err), true), nil
		}
		return c.valueResult(tool, provider.StatusValue(st)), nil
	}
}
