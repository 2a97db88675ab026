package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/rtfshost/rtfshost/capabilities"
)

// args are the checked arguments of one call, by name, as raw JSON.
type args map[string]json.RawMessage

// parseArgs checks raw against the tool's input and returns the arguments.
// Its error is an *argsError: a JSON-RPC invalid-params error (-32602)
// naming the tool and the argument, which says whether the arguments are
// a JSON object that the tool's input refuses (an input validation error,
// a tool execution error from 2025-11-25 on: toolInputError) or not an
// object at all (a malformed request, -32602 in every revision).
func parseArgs(tool string, input *capabilities.Schema, raw json.RawMessage) (args, error) {
	raw = bytes.TrimSpace(raw)
	a := args{}
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return nil, &argsError{rpc: invalidParams(tool, "", "arguments must be a JSON object, got %s", capabilities.JSONKind(raw))}
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, &argsError{rpc: invalidParams(tool, "", "arguments are not valid JSON: %v", err)}
	}
	if err := input.CheckJSON(a); err != nil {
		var ae *capabilities.JSONArgError
		if errors.As(err, &ae) {
			return nil, &argsError{rpc: invalidParams(tool, ae.Key, "%s", ae.Msg), input: true}
		}
		return nil, &argsError{rpc: invalidParams(tool, "", "%v", err), input: true}
	}
	return a, nil
}

// An argsError is a tool call's arguments that parseArgs refused.
type argsError struct {
	rpc   *jsonrpc.Error
	input bool // an object the tool's input schema refuses
}

func (e *argsError) Error() string { return e.rpc.Message }
func (e *argsError) Unwrap() error { return e.rpc }

// toolInputError reports whether a refusal of a tools/call's arguments
// (err from parseArgs) is answered as a tool execution error (a result
// with isError, whose text the model can act on) rather than the JSON-RPC
// error -32602: from revision 2025-11-25 on, for arguments that are an
// object the tool's input refuses. revision is the request's ("" for one
// that names none).
func toolInputError(err error, revision string) bool {
	var ae *argsError
	return errors.As(err, &ae) && ae.input && revision >= "2025-11-25"
}

// str returns argument name as a string ("" if absent).
func (a args) str(name string) string {
	var s string
	_ = json.Unmarshal(a[name], &s)
	return s
}

// int returns argument name as an integer (0 if absent).
func (a args) int(name string) int64 {
	var n int64
	_ = json.Unmarshal(a[name], &n)
	return n
}

// bool returns argument name as a boolean (def if absent).
func (a args) bool(name string, def bool) bool {
	v, ok := a[name]
	if !ok {
		return def
	}
	var b bool
	_ = json.Unmarshal(v, &b)
	return b
}

// invalidParams returns a JSON-RPC -32602 error about argument arg (or the
// whole arguments object when arg is "") of tool.
func invalidParams(tool, arg, format string, a ...any) *jsonrpc.Error {
	where := fmt.Sprintf("tool %q", tool)
	if arg != "" {
		where += fmt.Sprintf(": argument %q", arg)
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: where + ": " + fmt.Sprintf(format, a...)}
}
